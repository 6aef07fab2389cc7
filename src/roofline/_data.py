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

__all__ = ["DATA", "read_toml", "load_toml_file", "norm_name", "alias_index", "zoo_key"]

#: src/roofline/data: hardware, models, presets, clusters, validation cases
DATA = Path(__file__).resolve().parent / "data"


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a packaged TOML file (trusted; errors propagate)."""
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def load_toml_file(path: str | os.PathLike[str], what: str) -> dict[str, Any]:
    """Parse a user's TOML file; unreadable or malformed files are SpecErrors naming it."""
    import tomllib

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise SpecError(f"cannot read {what} file {str(p)!r}: {e.strerror}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{what} file {str(p)!r} is not valid TOML: {e}") from None


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
