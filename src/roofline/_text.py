"""Making text safe where it leaves the library: terminals, CSV files, matplotlib labels.

Names come from files a user was given (a config.json's folder, a hardware TOML's ``name``, an
ONNX node name) and reach outputs verbatim. Three sinks need care:

- terminals: ANSI escape sequences and other control characters in a printed result could
  move the cursor, recolour or rewrite what the user reads — ``printable`` strips them;
- spreadsheets: a CSV cell starting with ``=``, ``+``, ``-``, ``@`` (or a tab / carriage
  return) is run as a formula by Excel and LibreOffice — ``csv_cell`` prefixes a ``'``
  (OWASP's "CSV injection" advice);
- matplotlib: ``$`` starts mathtext, so an odd number of them breaks the figure —
  ``mathtext_safe`` escapes them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

__all__ = ["printable", "printable_str", "csv_cell", "csv_row", "mathtext_safe"]

#: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST) and two-byte ESC sequences
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?")
#: C0 controls except tab and newline, DEL, C1 controls
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(s: str) -> str:
    """``s`` without terminal escape sequences or control characters (tab, newline kept)."""
    if s.isprintable():
        return s
    return _CTRL.sub("", _ANSI.sub("", s))


def printable_str(fn: Callable[..., str]) -> Callable[..., str]:
    """Decorate a ``__str__``/``to_string`` so what it returns is ``printable``."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        return printable(fn(*args, **kwargs))

    return call


def csv_cell(v: Any) -> Any:
    """A value as a CSV cell that no spreadsheet runs as a formula."""
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + v
    return v


def csv_row(row: dict[str, Any]) -> dict[str, Any]:
    return {k: csv_cell(v) for k, v in row.items()}


def mathtext_safe(s: str) -> str:
    """``s`` with ``$`` escaped, so matplotlib draws it as text, never as mathtext."""
    return s.replace("$", r"\$")
