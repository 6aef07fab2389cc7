"""Where the package's data files live, reading them, and the alias index the zoos share.

tomllib is imported on first use (keeps ``import roofline`` fast).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from .errors import SpecError

__all__ = ["DATA", "read_toml", "toml_tables", "read_toml_tables", "toml_key_lines", "read_text",
           "load_toml_file", "norm_name", "alias_index", "zoo_key", "toml_escape"]

#: src/roofline/data: hardware, models, presets, clusters, validation cases
DATA = Path(__file__).resolve().parent / "data"
#: the largest spec file (TOML, config.json) read: the zoo's largest is a few kB
MAX_SPEC_BYTES = 16 * 2**20


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a packaged TOML file (trusted; errors propagate)."""
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


#: a top-level table header the cutter accepts: bare keys only ("[parts.h100-sxm5]")
_HEADER = re.compile(r"\[([A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*)\][ \t]*(?:#[^\n]*)?")


@cache
def toml_tables(path: Path) -> dict[str, str]:
    """A packaged TOML file's text cut before each line that starts with ``[``: table name ->
    that table's text (header included), ``""`` -> the text before the first header. Read once
    per process. Parsing some tables' texts together gives what parsing the whole file gives
    under those names (tests/test_toml_tables.py checks it on every file read this way). A
    line starting with ``[`` that is not a plain ``[a.b]`` header, a name given twice or a
    multi-line string raises ValueError (only a ``[1]`` line inside a multi-line array would
    pass unseen: the test's whole-file comparison is what vouches for a file)."""
    text = path.read_text(encoding="utf-8")
    if '"""' in text or "'''" in text:  # a multi-line string could hold a "[x]" line
        raise ValueError(f"{path} has a multi-line string: not a plain table header cut; "
                         "read this file with read_toml")
    out: dict[str, str] = {}
    name, start = "", 0
    for m in re.finditer(r"^\[[^\n]*", text, re.M):
        h = _HEADER.fullmatch(m.group().rstrip("\r"))
        if h is None or h.group(1) in out or h.group(1) == name:
            raise ValueError(f"{path}: line {m.group()!r} is not a new plain table header; "
                             "read this file with read_toml")
        out[name] = text[start:m.start()]
        name, start = h.group(1), m.start()
    out[name] = text[start:]
    return out


def read_toml_tables(path: Path, *names: str) -> dict[str, Any]:
    """Parse only the tables ``names`` of a packaged TOML file, with their sub-tables
    (``"parts.h100-sxm5"``: that header and any ``[parts.h100-sxm5.x]``)."""
    import tomllib

    return tomllib.loads("".join(t for k, t in toml_tables(path).items() if k and any(
        k == n or k.startswith(n + ".") for n in names)))


@cache
def toml_key_lines(path: Path, table: str) -> dict[str, str]:
    """Table ``table`` of a packaged TOML file cut into its ``key = value`` lines (bare keys,
    one line each): key -> that line. Parsing some of the lines gives what the whole table
    gives for those keys (tests/test_toml_tables.py); any other line but blanks and comments
    (a value continued on the next line) raises ValueError."""
    out: dict[str, str] = {}
    for line in toml_tables(path)[table].splitlines(keepends=True)[1:]:
        bare = line.strip()
        if not bare or bare.startswith("#"):
            continue
        m = _KEY_LINE.match(line)
        if m is None or m.group(1) in out:
            raise ValueError(f"{path} [{table}]: {bare[:60]!r} is not a new one-line key = "
                             "value; read this table with read_toml_tables")
        out[m.group(1)] = line if line.endswith("\n") else line + "\n"
    return out


_KEY_LINE = re.compile(r"([A-Za-z0-9_-]+)[ \t]*=[ \t]*\S")


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
