"""The op-formula registry: one function per op kind, filled by a decorator.

A duplicate registration raises; asking for an unknown kind raises an error listing the known
ones. There is no default: an op without a formula is never silently counted as zero.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import unknown
from .cost import OP_CLASSES, OpCost

__all__ = ["Formula", "register", "formula", "cost", "known_kinds", "op_class"]


@dataclass(frozen=True, slots=True)
class Formula:
    kind: str  #: registry name, e.g. "linear"
    op_class: str  #: one of OP_CLASSES (how the engine prices it)
    fn: Callable[..., OpCost]


_REGISTRY: dict[str, Formula] = {}


def register(kind: str, op_class: str) -> Callable[[Callable[..., OpCost]], Callable[..., OpCost]]:
    """Register ``fn`` as the formula for ``kind``."""
    if op_class not in OP_CLASSES:
        raise ValueError(f"op_class {op_class!r} not in {OP_CLASSES}")

    def deco(fn: Callable[..., OpCost]) -> Callable[..., OpCost]:
        if kind in _REGISTRY:
            raise ValueError(f"op kind {kind!r} is already registered")
        _REGISTRY[kind] = Formula(kind, op_class, fn)
        return fn

    return deco


def formula(kind: str) -> Formula:
    try:
        return _REGISTRY[kind]
    except KeyError:
        raise unknown("op kind", kind, _REGISTRY) from None


def cost(kind: str, **shape: Any) -> OpCost:
    """Evaluate the registered formula for ``kind`` on keyword shape arguments."""
    return formula(kind).fn(**shape)


def op_class(kind: str) -> str:
    return formula(kind).op_class


def known_kinds() -> list[str]:
    return sorted(_REGISTRY)
