"""Where the package's data files live, reading them, and the alias index the zoos share.

tomllib is imported on first use (keeps ``import roofline`` fast).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import SpecError

__all__ = ["DATA", "read_toml", "read_text", "load_toml_file", "norm_name", "alias_index",
           "zoo_key", "toml_escape"]

#: src/roofline/data: hardware, models, presets, clusters, validation cases
DATA = Path(__file__).resolve().parent / "data"
#: the largest spec file (TOML, config.json) read: the zoo's largest is a few kB
MAX_SPEC_BYTES = 16 * 2**20


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a packaged TOML file (trusted; errors propagate)."""
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def read_text(p: Path, what: str) -> str:
    """A user's text file as UTF-8; unreadable, oversized or non-UTF-8 files are SpecErrors
    naming the file (never echoing its bytes)."""
    shown = repr(str(p)) if len(str(p)) <= 200 else repr(str(p)[:197] + "...")
    try:
        size = p.stat().st_size
        if size > MAX_SPEC_BYTES:
            raise SpecError(f"{what} file {shown} is {size:,} bytes; spec files are at most "
                            f"{MAX_SPEC_BYTES:,}")
        raw = p.read_bytes()
    except OSError as e:
        raise SpecError(f"cannot read {what} file {shown}: {e.strerror or e}") from None
    except ValueError as e:  # an embedded NUL in the path
        raise SpecError(f"cannot read {what} file {shown}: {e}") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{what} file {shown} is not UTF-8 text (byte {e.start}); spec files "
                        "are UTF-8") from None


def load_toml_file(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """Parse a user's TOML file; unreadable or malformed files are SpecErrors naming it."""
    import tomllib

    p = Path(path)
    text = read_text(p, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{what} file {str(p)!r} is not valid TOML: {e}") from None
    except RecursionError:
        raise SpecError(f"{what} file {str(p)!r} nests too deeply to be a spec") from None


def toml_escape(s: str) -> str:
    """``s`` as the inside of a TOML basic string: backslash, double quote and every control
    character (U+0000-U+001F, U+007F) escaped, so no value can end the string or start a new
    line of the file. ``tomllib.loads(f'k = "{toml_escape(s)}"')["k"] == s`` for every str."""
    out = []
    for ch in s:
        o = ord(ch)
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif o < 0x20 or o == 0x7F:
            out.append(_TOML_SHORT.get(ch) or f"\\u{o:04X}")
        elif 0xD800 <= o <= 0xDFFF:
            raise SpecError(f"text {s[:40]!r} holds a lone surrogate (U+{o:04X}); it is not "
                            "valid Unicode and cannot be written to a TOML file")
        else:
            out.append(ch)
    return "".join(out)


_TOML_SHORT = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def norm_name(name: str) -> str:
    """Case-, space- and underscore-insensitive form of a zoo name or alias."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def alias_index(entries: Iterable[tuple[str, Iterable[str]]], what: str) -> dict[str, str]:
    """normalised name -> key for (key, names) pairs; a name claimed twice is an error."""
    index: dict[str, str] = {}
    for key, names in entries:
        for a in (key, *names):
            n = norm_name(a)
            if index.get(n, key) != key:
                raise SpecError(f"{what} zoo: alias {a!r} names both {index[n]!r} and {key!r}")
            index[n] = key
    return index


def zoo_key(name: str, what: str, index: dict[str, str], choices: Iterable[str]) -> str:
    """The zoo key ``name`` (or an alias of it) stands for; an UnknownNameError listing
    ``choices`` and the closest ones otherwise."""
    key = index.get(norm_name(name))
    if key is None:
        from .errors import unknown

        raise unknown(what, name, choices)
    return key
