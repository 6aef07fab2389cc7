"""One output style for every command: ``--format text|json|markdown|csv|html`` (``--json`` is
an alias for ``--format json``) and ``--wide``.

A command adds the options with :func:`add_output_args` and prints with one call to
:func:`emit`, handing it what it has: the text it prints, the data (what JSON prints), the
tables, the result object (its notebook card is the HTML page) and summary pairs::

    add_output_args(p)
    ...
    return emit(args, text=str(r), data=r.to_dict(), obj=r, tables=[t])

Conventions (stated in docs/cli.md): text tables fit 100 characters unless ``--wide`` and say
what they leave out; one unit per column, in its header; MFU and shares in %; bytes with decimal
prefixes (1 GB = 1e9 B). JSON, CSV and markdown are data: every row, SI units (CSV, JSON) or the
column's unit in its header (markdown); NaN is ``null`` in JSON and empty in CSV.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._text import csv_cell

__all__ = ["FORMATS", "WIDE_HINT", "add_output_args", "emit", "limits", "flatten",
           "markdown_table", "csv_table"]

FORMATS = ("text", "json", "markdown", "csv", "html")
#: what a shortened text table names as the way to see the rest
WIDE_HINT = "--wide shows all"


def add_output_args(p: argparse.ArgumentParser, *, formats: Sequence[str] = FORMATS,
                    wide: bool = True) -> None:
    """``--format``, its ``--json`` alias and (for commands that print tables) ``--wide``."""
    g = p.add_argument_group("output")
    g.add_argument("--format", "-f", choices=tuple(formats), default=formats[0],
                   help="text (default), json, markdown, csv or html (a self-contained page)")
    g.add_argument("--json", dest="format", action="store_const", const="json",
                   help="the same as --format json")
    if wide:
        g.add_argument("--wide", action="store_true",
                       help="text tables: every column and every row (default: fit 100 "
                            "characters, and say what is left out)")


def limits(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments of ``Table.to_string`` for this command line."""
    if getattr(args, "wide", False):
        return {"width": None, "max_rows": None}
    return {"width": 100, "more": WIDE_HINT}


def emit(args: argparse.Namespace, *, text: str | Callable[[], str], data: Any,
         tables: Sequence[Any] = (), obj: Any = None, title: str = "",
         pairs: Sequence[tuple[str, str]] | None = None, path: Any = None) -> int:
    """Print in the chosen ``--format``; returns 0.

    text: what ``text`` prints (or a function making it); data: what ``json`` prints (and
    ``csv``/``markdown`` flatten when there are no tables); tables: ``Table`` objects for
    markdown/csv/html (every row); obj: a result with ``_repr_html_`` for the html page;
    pairs: human ``(quantity, value)`` lines for markdown/html (default: from ``obj``);
    path: write there (UTF-8) instead of stdout."""
    if path is not None:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            _emit(args, text, data, tables, obj, title, pairs)
        from ..report.page import write_page

        write_page(path, buf.getvalue())
        return 0
    return _emit(args, text, data, tables, obj, title, pairs)


def _emit(args: argparse.Namespace, text: str | Callable[[], str], data: Any,
          tables: Sequence[Any], obj: Any, title: str,
          pairs: Sequence[tuple[str, str]] | None) -> int:
    fmt = getattr(args, "format", "text") or "text"
    if fmt == "text":
        from .._text import wrap_prose

        body = text() if callable(text) else text
        # prose lines wrap at 100 characters (tables already fit it); --wide: as they are
        print(body if getattr(args, "wide", False) else wrap_prose(body))
        return 0
    if fmt == "json":
        from .solve import dump_json

        print(dump_json(data))
        return 0
    if pairs is None and obj is not None:
        from ..report.notebook import summary_pairs

        pairs = summary_pairs(obj)
    if fmt == "csv":
        if tables:
            print("\n".join(csv_table(t) for t in tables), end="")
        else:
            print(csv_rows(data), end="")
        return 0
    if fmt == "markdown":
        out = []
        if title:
            out.append(f"# {_md(title)}")
        if pairs:
            out.append(_md_pairs(pairs))
        for t in tables:
            out.append(markdown_table(t))
        if not pairs and not tables:
            out.append(_md_pairs([(k, _plain(v)) for k, v in flatten(data).items()]))
        print("\n\n".join(out))
        return 0
    if fmt == "html":
        print(_html(obj, data, tables, title, pairs), end="")
        return 0
    raise AssertionError(fmt)  # argparse choices keep other values out


# -- pieces ----------------------------------------------------------------------------------

def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one level with dotted keys (lists stay as they are)."""
    out: dict[str, Any] = {}
    if isinstance(data, Mapping):
        for k, v in data.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, Mapping):
                out.update(flatten(v, key))
            else:
                out[key] = v
    else:
        out[prefix or "value"] = data
    return out


def csv_rows(data: Any) -> str:
    """CSV of a list of row dicts, or of one (flattened) dict as a single row."""
    rows = [flatten(r) for r in data] if isinstance(data, list) else [flatten(data)]
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: _csv_cell(r.get(k)) for k in keys})
    return buf.getvalue()


def csv_table(t: Any) -> str:
    """Every row of a Table as CSV, SI values as stored (the header names no unit)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(t.columns)
    for row in t.to_dicts():
        w.writerow([_csv_cell(row[c]) for c in t.columns])
    return buf.getvalue()


def _csv_cell(v: Any) -> Any:
    """A value as a CSV cell; text starting with = + - @ is quoted so that no spreadsheet runs
    it as a formula (roofline._text.csv_cell)."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return ""
    if isinstance(v, str):
        return csv_cell(v)
    if isinstance(v, list | tuple):
        return ";".join(str(x) for x in v)
    return v


def markdown_table(t: Any) -> str:
    """A Table as a pipe table: every row, one unit per column (in the header)."""
    head, rows = t.formatted()
    cols = list(t.show or t.columns)
    right = [t[c].dtype.kind in "iufb" for c in cols]
    out = ([f"**{_md(t.title)}**", ""] if t.title else [])
    out.append("| " + " | ".join(_md(c) for c in head) + " |")
    out.append("|" + "|".join("---:" if r else ":---" for r in right) + "|")
    out += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _md(s: Any) -> str:
    return str(s).replace("|", "\\|").replace("\n", " ")


def _md_pairs(pairs: Sequence[tuple[str, str]]) -> str:
    return "\n".join(["| quantity | value |", "|:---|:---|",
                      *(f"| {_md(k)} | {_md(v)} |" for k, v in pairs)])


def _plain(v: Any) -> str:
    from ..units import fmt_num

    if isinstance(v, list | tuple):
        return ", ".join(map(str, v))
    return fmt_num(v) if isinstance(v, int | float) and not isinstance(v, bool) else str(v)


def _html(obj: Any, data: Any, tables: Sequence[Any], title: str,
          pairs: Sequence[tuple[str, str]] | None) -> str:
    from ..report.html import esc, kv_table, table_html
    from ..report.page import page

    if obj is not None and hasattr(obj, "to_html"):
        return str(obj.to_html())
    if obj is not None and hasattr(obj, "_repr_html_"):
        return page(title or type(obj).__name__, obj._repr_html_())
    parts = [f"<h1>{esc(title)}</h1>" if title else ""]
    if pairs:
        parts.append(kv_table(pairs))
    for t in tables:
        parts.append((f"<h2>{esc(t.title)}</h2>" if t.title else "")
                     + table_html(t, max_rows=None))
    if not pairs and not tables:
        parts.append(kv_table([(k, _plain(v)) for k, v in flatten(data).items()]))
    from ..report.html import JS

    return page(title or "roofline", f'<div class="rl">{"".join(parts)}<script>{JS}</script>'
                                     "</div>")
