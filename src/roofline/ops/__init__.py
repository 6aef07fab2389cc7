"""Operator costs: ``OpCost`` and the formula registry (one formula per op kind)."""

from . import formulas as _formulas  # noqa: F401  (fills the registry)
from . import recsys as _recsys  # noqa: F401  (embedding_bag)
from . import ssm as _ssm  # noqa: F401  (selective_scan)
from . import training_formulas as _training_formulas  # noqa: F401  (optimizer_step)
from .cost import COMPUTE_CLASSES, OP_CLASSES, QUANTITIES, OpCost
from .formulas import ELEMENTWISE_FLOPS, NORM_FLOPS, causal_pairs, conv_out
from .registry import Formula, cost, formula, known_kinds, op_class, register

__all__ = ["OpCost", "OP_CLASSES", "COMPUTE_CLASSES", "QUANTITIES", "Formula", "register",
           "formula", "cost", "known_kinds", "op_class", "ELEMENTWISE_FLOPS", "NORM_FLOPS",
           "causal_pairs", "conv_out"]
