"""``SCALAR``: the few numpy array functions the vectorised cost models use, for plain Python
numbers.

The training step model and the cluster collectives are written once, against an array
namespace ``xp``: ``xp=numpy`` prices thousands of configurations in one call
(``best_parallelism``), ``xp=SCALAR`` prices one with Python floats — the same formulas, about
10× faster than length-1 arrays (``rl.train`` is a few tens of µs).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["SCALAR"]


class _Scalar:
    """numpy's ``where``, ``maximum``, ``minimum``, ``ceil``, ``log2``, ``asarray``, ``mod``,
    ``ones_like`` and ``zeros_like`` for Python scalars (``where`` takes a Python truth value)."""

    @staticmethod
    def where(c: Any, a: Any, b: Any) -> Any:
        return a if c else b

    maximum = staticmethod(max)
    minimum = staticmethod(min)
    ceil = staticmethod(math.ceil)
    log2 = staticmethod(math.log2)

    @staticmethod
    def asarray(x: Any, dtype: Any = None) -> Any:
        return bool(x) if dtype is bool else float(x)

    @staticmethod
    def mod(a: Any, b: Any) -> Any:
        return a % b

    @staticmethod
    def ones_like(x: Any, dtype: Any = None) -> float:
        return 1.0

    @staticmethod
    def zeros_like(x: Any, dtype: Any = None) -> float:
        return 0.0


#: pass as ``xp`` to price one configuration with Python floats
SCALAR: Any = _Scalar()
