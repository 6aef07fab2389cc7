"""A small column table: numpy columns, printable, convertible to pandas or dicts."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .._display import Display
from .._text import printable_str
from ..errors import require_extra
from ..units import column_unit, fmt_num

__all__ = ["Table", "TEXT_WIDTH", "NAME_WIDTH"]

#: default width of a printed table, characters (``width=None``: no limit)
TEXT_WIDTH = 100
#: the first (name) column is cut to this many characters when a width applies
NAME_WIDTH = 32


class Table(Display):
    """Named columns of equal length. ``t["col"]`` is a column, ``t[i]`` a row dict."""

    def __init__(self, columns: Mapping[str, Sequence[Any] | np.ndarray],
                 units: Mapping[str, str] | None = None, title: str = "",
                 show: Sequence[str] | None = None, notes: Sequence[str] = ()) -> None:
        self._cols = {k: (v if isinstance(v, np.ndarray) else np.asarray(v, dtype=object)
                          if v and isinstance(v[0], str) else np.asarray(v))
                      for k, v in columns.items()}
        lens = {len(v) for v in self._cols.values()}
        if len(lens) > 1:
            raise ValueError(f"columns of unequal length: {lens}")
        self.units = dict(units or {})
        self.title = title
        #: the columns printed by default, in order; the last ones are left out first when a
        #: line would be too wide (None: every column, in order)
        self.show = tuple(c for c in show if c in self._cols) if show else None
        #: what the columns assume that no column says (e.g. the price and grid of the cost and
        #: carbon columns, or why they are NaN); kept by sort, head and where
        self.notes = tuple(notes)

    @property
    def columns(self) -> list[str]:
        return list(self._cols)

    def __len__(self) -> int:
        return len(next(iter(self._cols.values()))) if self._cols else 0

    def __getitem__(self, key: str | int) -> Any:
        if isinstance(key, str):
            if key not in self._cols:
                raise KeyError(f"no column {key!r}; columns: {', '.join(self._cols)}")
            return self._cols[key]
        return {k: _py(v[key]) for k, v in self._cols.items()}

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i in range(len(self)):
            yield self[i]

    def to_dicts(self) -> list[dict[str, Any]]:
        return list(self)

    def to_pandas(self) -> Any:
        pd = require_extra("pandas", "pandas", "Table.to_pandas()")
        return pd.DataFrame({k: v for k, v in self._cols.items()})

    def sort(self, by: str, descending: bool = True) -> Table:
        idx = np.argsort(self._cols[by], kind="stable")
        if descending:
            idx = idx[::-1]
        return Table({k: v[idx] for k, v in self._cols.items()}, self.units, self.title,
                     show=self.show, notes=self.notes)

    def head(self, n: int = 10) -> Table:
        return Table({k: v[:n] for k, v in self._cols.items()}, self.units, self.title,
                     show=self.show, notes=self.notes)

    def where(self, mask: np.ndarray) -> Table:
        return Table({k: v[mask] for k, v in self._cols.items()}, self.units, self.title,
                     show=self.show, notes=self.notes)

    @printable_str
    def to_string(self, columns: Sequence[str] | None = None, max_rows: int | None = 40,
                  width: int | None = TEXT_WIDTH, more: str = "") -> str:
        """The table as text: one unit per column (chosen for the column, in its header),
        numbers without exponents, at most ``width`` characters a line (columns that do not
        fit are left out from the right, and named) and ``max_rows`` rows (the middle ones
        are left out, and counted). ``None`` lifts either limit. ``more``: what shows the
        rest (default: the keyword arguments that do)."""
        cols = list(columns or self.show or self._cols)
        n = len(self)
        scales = {c: self._unit(c) for c in cols}
        head = {c: c + (f" [{scales[c][1]}]" if scales[c][1] else "") for c in cols}
        if max_rows is None or n <= max_rows:
            idx: list[int] = list(range(n))
        else:
            idx = list(range(max_rows // 2)) + [-1] + list(range(n - (max_rows - max_rows // 2),
                                                                n))
        cut = NAME_WIDTH if width is not None else None
        body = {c: ["" if i < 0 else self._cell(c, i, scales[c][0], cut if j == 0 else None)
                    for i in idx] for j, c in enumerate(cols)}
        widths = {c: max([len(head[c]), *(len(v) for v in body[c])]) for c in cols}
        dropped: list[str] = []
        while width is not None and len(cols) > 1 and \
                sum(widths[c] for c in cols) + 2 * (len(cols) - 1) > width:
            dropped.insert(0, cols.pop())
        left = {c: self._cols[c].dtype.kind not in "iufb" for c in cols}

        def line(cells: dict[str, str]) -> str:
            return "  ".join(cells[c].ljust(widths[c]) if left[c] else cells[c].rjust(widths[c])
                             for c in cols).rstrip()

        lines = [self.title] if self.title else []
        lines.append(line(head))
        lines.append(line({c: "-" * widths[c] for c in cols}))
        hidden = n - (len(idx) - 1) if -1 in idx else 0
        for k, i in enumerate(idx):
            if i < 0:
                note = (f"… {hidden:,} of {n:,} rows not shown — "
                        + (more or "to_string(max_rows=None) shows every row") + " …")
                lines += textwrap.wrap(note, width) if width else [note]
                continue
            lines.append(line({c: body[c][k] for c in cols}))
        if dropped:
            note = (f"({len(dropped)} column{'s' if len(dropped) > 1 else ''} left out to "
                    f"fit {width} characters: {', '.join(dropped)} — "
                    + (more or "to_string(width=None) shows them") + ")")
            lines += textwrap.wrap(note, width) if width else [note]
        return "\n".join(lines)

    def formatted(self, columns: Sequence[str] | None = None
                  ) -> tuple[list[str], list[list[str]]]:
        """Headers (with each column's one unit) and every row as display strings."""
        cols = list(columns or self.show or self._cols)
        scales = {c: self._unit(c) for c in cols}
        head = [c + (f" [{scales[c][1]}]" if scales[c][1] else "") for c in cols]
        rows = [[self._cell(c, i, scales[c][0], None) for c in cols] for i in range(len(self))]
        return head, rows

    def _unit(self, c: str) -> tuple[float, str]:
        u = self.units.get(c, "")
        if not u:
            return 1.0, ""
        v = self._cols[c]
        return column_unit(v.tolist() if v.dtype.kind in "iuf" else [], u)

    def _cell(self, c: str, i: int, scale: float, cut: int | None) -> str:
        v = self._cols[c][i]
        if isinstance(v, str):
            return v if cut is None or len(v) <= cut else v[:cut - 1] + "…"
        if isinstance(v, bool | np.bool_) or scale == 1.0:
            return fmt_num(_py(v))
        return fmt_num(float(v) / scale)

    def __str__(self) -> str:
        return self.to_string()

    def to_html(self, path: Any = None, max_rows: int | None = None) -> str:
        """A self-contained HTML page of the table (sortable; every row unless ``max_rows``)."""
        from ..report import to_html

        return to_html(self, path, max_rows=max_rows)


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v
