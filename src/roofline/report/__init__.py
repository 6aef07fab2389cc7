"""Presentation of results outside the terminal: notebook cards (``_repr_html_``), the
self-contained HTML report (``roofline report``, ``Result.to_html()``) and inline SVG charts.

The top layer: it imports the engine and scenarios, never the other way round (results call
into it lazily, on first display).
"""

from __future__ import annotations

from typing import Any

__all__ = ["repr_html", "repr_line", "to_html", "report"]


def repr_html(obj: Any) -> str:
    """The notebook card of a result or table (what ``obj._repr_html_()`` returns)."""
    from .notebook import repr_html as _f

    return _f(obj)


def repr_line(obj: Any) -> str:
    """The one-line ``repr`` of a result or table."""
    from .notebook import repr_line as _f

    return _f(obj)


def to_html(obj: Any, path: Any = None, **kw: Any) -> str:
    """A self-contained HTML page for ``obj`` (written to ``path`` when given)."""
    from .page import to_html as _f

    return _f(obj, path=path, **kw)


def report(model: Any, hardware: Any, *, path: Any = None, **scenario: Any) -> str:
    """Solve ``model`` on ``hardware`` and return (and write to ``path``) its HTML report."""
    from .page import report as _f

    return _f(model, hardware, path=path, **scenario)
