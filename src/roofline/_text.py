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

__all__ = ["printable", "printable_str", "csv_cell", "csv_row", "mathtext_safe", "wrap_prose",
           "summary_str", "TEXT_WIDTH", "a_family"]

#: the widest line a printout has (tables fit it by leaving columns out, prose wraps)
TEXT_WIDTH = 100
#: "  label<2+ spaces>value": a continuation line starts under the value
_UNIT = re.compile(r"(\d) (?=[a-zA-Zµ%$×]{1,8}\b|%)")
_LABEL = re.compile(r"^(\s*\S[^ ]*(?: [^ ]+)*?\s{2,})\S")

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


def wrap_prose(text: str, width: int | None = TEXT_WIDTH) -> str:
    """``text`` with every line longer than ``width`` wrapped at spaces; a continuation starts
    under the value of a ``  label   value`` line, or two spaces in from the line's own indent.
    Shorter lines (tables fitted to the width, headings) are left as they are; ``None``: no
    wrapping."""
    if width is None or all(len(ln) <= width for ln in text.splitlines()):
        return text
    import textwrap

    out = []
    for ln in text.split("\n"):
        if len(ln) <= width:
            out.append(ln)
            continue
        m = _LABEL.match(ln)
        lead = len(ln) - len(ln.lstrip(" "))
        indent = " " * (len(m.group(1)) if m and len(m.group(1)) <= width // 3 else lead + 2)
        # a number keeps its unit on its line ("7.499 ms", "12 %"): glue them while wrapping
        glued = _UNIT.sub("\\1\ue000", ln)
        out.append(textwrap.fill(glued, width=width, subsequent_indent=indent,
                                 break_long_words=False, break_on_hyphens=False,
                                 drop_whitespace=True, replace_whitespace=False)
                   .replace("\ue000", " "))
    return "\n".join(out)


def summary_str(fn: Callable[..., str]) -> Callable[..., str]:
    """Decorate a result's ``__str__``: printable, and its prose wrapped to ``TEXT_WIDTH``."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> str:
        return wrap_prose(printable(fn(*args, **kwargs)))

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


#: how a model family reads in a sentence (acronyms upper-cased)
_FAMILY_WORDS = {"cnn": "CNN", "ssm": "SSM", "recsys": "recommender (recsys)",
                 "seq2seq": "encoder-decoder (seq2seq)", "vision": "vision-encoder"}


def a_family(family: str) -> str:
    """``family`` with its indefinite article, as in "... is an SSM model": 'a CNN', 'an SSM',
    'an encoder', 'a decoder' (the article follows the sound: S reads "ess")."""
    word = _FAMILY_WORDS.get(family, family)
    vowel = word[:1].lower() in "aeio" or (word[:1] in "FHLMNRSX" and word[1:2].isupper())
    return f"{'an' if vowel else 'a'} {word}"
