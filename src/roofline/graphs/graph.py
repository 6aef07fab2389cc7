"""The operator graph: a struct of numpy arrays, so pricing it is a few vector operations.

Every cost is affine in the batch: ``q(B) = c0 + c1·B`` per op and per quantity (weights
are read once whatever the batch; activations, KV cache and FLOPs scale with it). The builder
gets both coefficients by evaluating each formula at B = 1 and B = 2, so formulas stay plain
closed forms. A graph whose costs are not affine in the batch (MoE expert coverage) is built
for one batch and says so in ``fixed_batch``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SpecError
from ..ops import QUANTITIES, OpCost, formula
from ..specs.dtypes import Precision

__all__ = ["Graph", "GraphBuilder", "Q"]

#: row index of each OpCost quantity in the graph's coefficient arrays
Q = {q: i for i, q in enumerate(QUANTITIES)}


#: shape values a dedup key takes as they are (others, and NaN or a signed zero: no key)
_PLAIN = (int, str, bool, type(None))


def _shape_key(kind: str, shape: dict[str, Any]) -> tuple[Any, ...] | None:
    """A key equal only for shapes a formula cannot tell apart: each value with its type
    (1, 1.0 and True are equal in Python, not to a formula); None (no dedup) for a value of
    another type, a NaN (never equal to itself) or a zero float (-0.0 == 0.0)."""
    items: list[Any] = [kind]
    for k, v in shape.items():
        t = type(v)
        if t is float:
            if not v or v != v:
                return None
        elif t not in _PLAIN:
            return None
        items.append(k)
        items.append(t)
        items.append(v)
    return tuple(items)


def _op_cost(values: Any) -> OpCost:
    """An OpCost from one value per entry of ``QUANTITIES`` (its gemm left None)."""
    kw: dict[str, Any] = {q: float(x) for q, x in zip(QUANTITIES, values, strict=True)}
    return OpCost(**kw)


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class Graph:
    """An ordered list of operators with affine-in-batch costs."""

    name: str  #: model name
    phase: str  #: "forward", "prefill", "decode", "train", ...
    precision: Precision
    names: tuple[str, ...]  #: op names, e.g. "layer1.0.conv1"
    kinds: tuple[str, ...]  #: registry kind, e.g. "conv2d"
    classes: tuple[str, ...]  #: op class, e.g. "conv"
    c0: np.ndarray  #: [Q, n] batch-independent part of each quantity
    c1: np.ndarray  #: [Q, n] per-sample part
    gemm: np.ndarray  #: [3, n] implicit-GEMM dims: M per sample, N, K (0 if not a GEMM)
    params: np.ndarray  #: [n] parameters owned by each op
    weight_footprint_bytes: float  #: bytes of stored weights (params × weight bytes)
    state_bytes_per_sample: float = 0.0  #: persistent per-sample state (KV cache), bytes
    fixed_batch: int | None = None  #: set when costs were built for one batch only
    tokens_per_sample: int = 1  #: tokens a sample produces/consumes (throughput in tokens/s)
    meta: dict[str, Any] = field(default_factory=dict)
    #: [n] bool: ops a compiler can fold into the epilogue of the preceding matmul/conv
    #: (elementwise ops, inference batch norm); None = none
    fusible: np.ndarray | None = None
    #: [n] int: the id of the tensor each op's backward keeps (ops keeping one tensor share
    #: its id; -1: the op keeps nothing), so graphs/backward.py counts a tensor once; None:
    #: not known, each op's saved inputs counted on their own (an upper bound)
    saves: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = len(self.names)
        if self.saves is not None and np.shape(self.saves) != (n,):
            raise ValueError(f"Graph.saves has shape {np.shape(self.saves)}, expected {(n,)}")
        for arr, nm in ((self.c0, "c0"), (self.c1, "c1")):
            if arr.shape != (len(QUANTITIES), n):
                raise ValueError(f"Graph.{nm} has shape {arr.shape}, "
                                 f"expected {(len(QUANTITIES), n)}")
        is_compute = np.array([c in ("matmul", "conv", "attention") for c in self.classes], bool)
        object.__setattr__(self, "meta", {**self.meta, "_is_compute": is_compute})

    def __len__(self) -> int:
        return len(self.names)

    @property
    def is_compute(self) -> np.ndarray:
        """[n] bool: matmul-class ops (priced on the tensor-core peak)."""
        return self.meta["_is_compute"]

    @property
    def params_total(self) -> int:
        return int(self.params.sum())

    def quantities(self, batch: float) -> np.ndarray:
        """[Q, n] costs at ``batch``."""
        if self.fixed_batch is not None and batch != self.fixed_batch:
            raise SpecError(f"graph {self.name!r} was built for batch={self.fixed_batch}; "
                            f"rebuild it for batch={batch}")
        return self.c0 + self.c1 * batch

    def cost(self, batch: float = 1) -> OpCost:
        """Totals over all ops at ``batch``."""
        tot = self.quantities(batch).sum(axis=1)
        return _op_cost(tot)

    def op_cost(self, i: int, batch: float = 1) -> OpCost:
        v = self.c0[:, i] + self.c1[:, i] * batch
        return _op_cost(v)

    def live_activation_bytes(self, batch: float) -> float:
        """Peak live activations ≈ the largest per-op input + output.

        Inference frees each tensor after its last use; tensors held across a block (residual
        inputs) are not added, so this is a lower bound on the allocator's peak.
        """
        q = self.quantities(batch)
        per_op = q[Q["act_bytes_read"]] + q[Q["act_bytes_written"]]
        return float(per_op.max()) if len(per_op) else 0.0


class GraphBuilder:
    """Collects ops for one model, phase and precision; ``build()`` freezes them into a Graph."""

    def __init__(self, name: str, phase: str, precision: Precision) -> None:
        self.name, self.phase, self.precision = name, phase, precision
        self._names: list[str] = []
        self._kinds: list[str] = []
        self._classes: list[str] = []
        self._c0: list[tuple[float, ...]] = []
        self._c1: list[tuple[float, ...]] = []
        self._gemm: list[tuple[float, float, float]] = []
        self._params: list[float] = []
        self._fusible: list[bool] = []
        self._saves: list[int | None] = []  # ``add``'s saves= per op (None: untagged)
        self._tensors = 0  # tensor ids handed out by ``new_tensor``
        self.state_bytes_per_sample = 0.0
        self.meta: dict[str, Any] = {}
        #: (kind, shape) -> what ``add`` derives from the formula: a model's repeated layers
        #: evaluate each formula once per distinct shape, not once per layer
        self._seen: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    _SIG: dict[str, frozenset[str]] = {}
    #: False: every ``add`` evaluates its formula (tests compare the two)
    dedup = True

    def _fill(self, kind: str, shape: dict[str, Any]) -> dict[str, Any]:
        f = formula(kind)
        accepted = self._SIG.get(kind)
        if accepted is None:
            import inspect

            accepted = frozenset(inspect.signature(f.fn).parameters)
            self._SIG[kind] = accepted
        p = self.precision
        if "out_bytes" in accepted and "act_bytes" not in shape and "out_bytes" not in shape:
            shape["out_bytes"] = p.matmul_out_bytes  # an fp8 GEMM writes 16-bit
        for arg, val in (("act_bytes", p.act_bytes), ("weight_bytes", p.weight_bytes),
                         ("kv_bytes", p.kv_bytes)):
            if arg in accepted and arg not in shape:
                shape[arg] = val
        return shape

    def new_tensor(self) -> int:
        """A fresh tensor id for ``add``'s ``saves``."""
        self._tensors += 1
        return self._tensors - 1

    def add(self, kind: str, name: str, *, params: float = 0,
            gemm: tuple[float, float, float] | None = None, saves: int | None = None,
            **shape: Any) -> OpCost:
        """Add one op; ``shape`` goes to the formula (without ``batch``). ``saves``: the id
        (``new_tensor``) of the tensor the op's backward keeps, -1 for none (``Graph.saves``).
        Returns the cost at B = 1."""
        if "batch" in shape:
            raise ValueError("GraphBuilder.add: pass per-sample shapes; batch is added here")
        key = _shape_key(kind, shape) if self.dedup else None
        hit = self._seen.get(key) if key is not None else None
        if hit is None:
            hit = self._derive(kind, shape)
            if key is not None:
                self._seen[key] = hit
        op_class, c0, c1, own_gemm, fusible, cost = hit
        self._names.append(name)
        self._kinds.append(kind)
        self._classes.append(op_class)
        self._c0.append(c0)
        self._c1.append(c1)
        # the formula's own implicit GEMM at B = 1: M per sample
        self._gemm.append(gemm if gemm is not None else own_gemm)
        self._params.append(float(params))
        self._fusible.append(fusible)
        self._saves.append(saves)
        return cost

    def _derive(self, kind: str, shape: dict[str, Any]) -> tuple[Any, ...]:
        """The formula at B = 1 and 2: (op class, c0, c1, its GEMM at B = 1, fusible, the
        cost at B = 1)."""
        shape = self._fill(kind, dict(shape))
        f = formula(kind)
        at1 = f.fn(batch=1, **shape)
        one = at1.as_tuple()
        two = f.fn(batch=2, **shape).as_tuple()
        c1 = tuple(b - a for a, b in zip(one, two))
        c0 = tuple(a - d for a, d in zip(one, c1))
        fusible = kind == "elementwise" or (kind == "norm" and
                                            shape.get("variant") == "batchnorm")
        return (f.op_class, c0, c1, at1.gemm or (0.0, 0.0, 0.0), fusible, _op_cost(one))

    def build(self, *, tokens_per_sample: int = 1, fixed_batch: int | None = None) -> Graph:
        n = len(self._names)
        c0 = np.array(self._c0, dtype=np.float64).T.reshape(len(QUANTITIES), n)
        c1 = np.array(self._c1, dtype=np.float64).T.reshape(len(QUANTITIES), n)
        gemm = np.array(self._gemm, dtype=np.float64).T.reshape(3, n)
        params = np.array(self._params, dtype=np.float64)
        return Graph(
            name=self.name, phase=self.phase, precision=self.precision,
            names=tuple(self._names), kinds=tuple(self._kinds), classes=tuple(self._classes),
            c0=c0, c1=c1, gemm=gemm, params=params,
            weight_footprint_bytes=float(params.sum()) * self.precision.weight_bytes,
            state_bytes_per_sample=self.state_bytes_per_sample, fixed_batch=fixed_batch,
            tokens_per_sample=tokens_per_sample, meta=dict(self.meta),
            fusible=np.array(self._fusible, dtype=bool), saves=self._tags(),
        )

    def _tags(self) -> np.ndarray | None:
        """Graph.saves: None when no op was tagged; an untagged op gets an id of its own."""
        if all(s is None for s in self._saves):
            return None
        fresh = iter(range(self._tensors, self._tensors + len(self._saves)))
        return np.array([next(fresh) if s is None else s for s in self._saves], dtype=np.int64)
