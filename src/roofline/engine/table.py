"""A small column table: numpy columns, printable, convertible to pandas or dicts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..errors import require_extra

__all__ = ["Table"]


def _fmt(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, int | np.integer):
        return f"{int(v):,}"
    f = float(v)
    if f != f:
        return "-"
    if f == 0:
        return "0"
    if abs(f) >= 1e5 or abs(f) < 1e-3:
        return f"{f:.3e}"
    return f"{f:.4g}"


class Table:
    """Named columns of equal length. ``t["col"]`` is a column, ``t[i]`` a row dict."""

    def __init__(self, columns: Mapping[str, Sequence[Any] | np.ndarray],
                 units: Mapping[str, str] | None = None, title: str = "") -> None:
        self._cols = {k: (v if isinstance(v, np.ndarray) else np.asarray(v, dtype=object)
                          if v and isinstance(v[0], str) else np.asarray(v))
                      for k, v in columns.items()}
        lens = {len(v) for v in self._cols.values()}
        if len(lens) > 1:
            raise ValueError(f"columns of unequal length: {lens}")
        self.units = dict(units or {})
        self.title = title

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
        return Table({k: v[idx] for k, v in self._cols.items()}, self.units, self.title)

    def head(self, n: int = 10) -> Table:
        return Table({k: v[:n] for k, v in self._cols.items()}, self.units, self.title)

    def where(self, mask: np.ndarray) -> Table:
        return Table({k: v[mask] for k, v in self._cols.items()}, self.units, self.title)

    def to_string(self, columns: Sequence[str] | None = None, max_rows: int = 40) -> str:
        cols = list(columns or self._cols)
        head = [c + (f" [{self.units[c]}]" if self.units.get(c) else "") for c in cols]
        n = len(self)
        rows_idx = list(range(n)) if n <= max_rows else \
            list(range(max_rows // 2)) + [-1] + list(range(n - max_rows // 2, n))
        body = [["..." for _ in cols] if i < 0 else [_fmt(self._cols[c][i]) for c in cols]
                for i in rows_idx]
        widths = [max(len(h), *(len(r[j]) for r in body)) if body else len(h)
                  for j, h in enumerate(head)]
        lines = [self.title] if self.title else []
        lines.append("  ".join(h.ljust(w) if j == 0 else h.rjust(w)
                               for j, (h, w) in enumerate(zip(head, widths))))
        lines.append("  ".join("-" * w for w in widths))
        for r in body:
            lines.append("  ".join(v.ljust(w) if j == 0 else v.rjust(w)
                                   for j, (v, w) in enumerate(zip(r, widths))))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_string()

    def __repr__(self) -> str:
        from ..report import repr_line

        return repr_line(self)

    def _repr_html_(self) -> str:
        from ..report import repr_html

        return repr_html(self)

    def to_html(self, path: Any = None, max_rows: int | None = None) -> str:
        """A self-contained HTML page of the table (sortable; every row unless ``max_rows``)."""
        from ..report import to_html

        return to_html(self, path, max_rows=max_rows)


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v
