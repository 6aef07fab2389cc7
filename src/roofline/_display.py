"""``Display``: the one place a result gets its notebook card, one-line ``repr`` and HTML page.

Every public result type (``Result``, ``Sweep``, ``ServeResult``, ``TrainingResult``,
``ServingPlan``, ``ServingSim``, ``Sensitivity``, ...) inherits it instead of repeating the
three methods. The methods import the presentation layer (``roofline.report``) on first use,
so the layers below never import it at module load. ``__slots__ = ()`` keeps slotted
dataclasses slotted; a dataclass that inherits it must say ``repr=False`` (otherwise its
generated field dump replaces the one-line ``repr``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["Display"]


class Display:
    """Notebook card (``_repr_html_``), one-line ``__repr__`` and ``to_html`` for a result."""

    __slots__ = ()

    def __repr__(self) -> str:
        from .report import repr_line

        return repr_line(self)

    def _repr_html_(self) -> str:
        from .report import repr_html

        return repr_html(self)

    def to_html(self, path: Any = None) -> str:
        """A self-contained HTML page (written to ``path`` when given); see docs/report.md."""
        from .report import to_html

        return to_html(self, path)
