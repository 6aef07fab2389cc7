"""What the PyTorch and ONNX importers share: op records, pricing them at a precision, the
affine-in-batch fit from traces at two batch sizes, and the imported ``Model``.

An importer turns one trace (one batch size, one sequence length) into a list of ``OpRecord``:
a registry kind with the formula's shape arguments (the traced, full-batch shapes), or an
``UnsupportedOp`` when no formula fits. Byte sizes are left symbolic (``Bytes``) so the same
records are priced at any precision: the trace's dtypes only fix shapes.

Batch: the importer traces at batch ``b`` and ``2b`` and fits ``q(B) = c0 + c1·B`` per op and
quantity; a third trace at ``3b`` checks the fit. A model whose op list or costs are not affine
in the batch is re-traced for each batch asked (``Model.batch_dependent``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..._cache import make_room
from ...errors import SpecError
from ...ops import QUANTITIES, OpCost, formula
from ...specs.dtypes import Precision
from ..graph import Graph, Q
from ..model import Model

__all__ = [
    "Bytes",
    "ImportedModel",
    "OpRecord",
    "Trace",
    "UnsupportedOp",
    "dedupe_names",
    "imported_model",
    "price_records",
    "unpriced_warning",
]


@dataclass(frozen=True, slots=True)
class Bytes:
    """A byte count left symbolic until the precision is known: ``count`` elements of the
    tensor class ``what`` ("act", "weight", "kv"), or of a fixed size ``fixed`` bytes each
    (integer indices, boolean masks: their size does not follow the float precision)."""

    what: str = "act"
    count: float = 1.0
    fixed: float | None = None

    def resolve(self, p: Precision) -> float:
        if self.fixed is not None:
            return self.count * self.fixed
        size = {"act": p.act_bytes, "weight": p.weight_bytes, "kv": p.kv_bytes}[self.what]
        return self.count * size


@dataclass(frozen=True, slots=True, kw_only=True)
class OpRecord:
    """One priced op of a trace."""

    name: str  #: module path (+ op suffix), e.g. "layer3.2.conv1"
    kind: str  #: registry kind
    source: str  #: the traced op: "aten.convolution", "onnx:Conv"
    shape: dict[str, Any]  #: formula arguments at the traced (full) batch; Bytes left symbolic
    params: int = 0  #: parameters first read by this op (tied weights count once)
    extra_act_read: float = 0.0  #: elements of smaller broadcast activation operands read
    act_fixed_bytes: float | None = None  #: element size when the output is not a float tensor
    from_input: bool = True  #: reads data derived from the module's inputs (not constants only)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnsupportedOp:
    """An op no formula covers. It is left out of the graph and listed, never counted as 0."""

    name: str  #: module path or node name
    op: str  #: the aten op or ONNX op type
    input_shapes: tuple[tuple[int, ...], ...]
    output_shapes: tuple[tuple[int, ...], ...]
    elements: int  #: input + output elements it touches (traced batch)
    bytes: float  #: the same at the traced dtypes
    reason: str = "no formula for this op"

    def __str__(self) -> str:
        ins = ", ".join("×".join(map(str, s)) or "scalar" for s in self.input_shapes)
        outs = ", ".join("×".join(map(str, s)) or "scalar" for s in self.output_shapes)
        return (f"{self.name}: {self.op} ({ins}) -> ({outs}), {self.elements:,} elements, "
                f"{self.bytes / 1e6:,.3f} MB; {self.reason}")


@dataclass(kw_only=True)
class Trace:
    """The records of one trace at one batch (and sequence length)."""

    batch: int
    records: list[OpRecord]
    unsupported: list[UnsupportedOp]
    n_views: int = 0  #: ops recognised as free (views, metadata, folded constants)
    view_names: list[tuple[str, str]] = field(default_factory=list)  #: (name, op) of those
    module_params: int = 0  #: parameters the module/file holds
    meta: dict[str, Any] = field(default_factory=dict)

    def signature(self) -> list[tuple[str, str, str]]:
        return [(r.name, r.kind, r.source) for r in self.records]


_ACCEPTED: dict[str, frozenset[str]] = {}


def _accepted(kind: str) -> frozenset[str]:
    acc = _ACCEPTED.get(kind)
    if acc is None:
        acc = frozenset(inspect.signature(formula(kind).fn).parameters)
        _ACCEPTED[kind] = acc
    return acc


def price_records(records: Sequence[OpRecord], p: Precision) -> np.ndarray:
    """[Q, n] costs of the records at precision ``p`` (each formula evaluated once, at the
    traced shapes)."""
    out = np.zeros((len(QUANTITIES), len(records)))
    for i, r in enumerate(records):
        f = formula(r.kind)
        acc = _accepted(r.kind)
        args = {k: (v.resolve(p) if isinstance(v, Bytes) else v) for k, v in r.shape.items()}
        args.setdefault("batch", 1)  # the traced shapes already hold the whole batch
        act = r.act_fixed_bytes if r.act_fixed_bytes is not None else p.act_bytes
        if "out_bytes" in acc and r.act_fixed_bytes is None and "act_bytes" not in args:
            args.setdefault("out_bytes", p.matmul_out_bytes)  # an fp8 GEMM writes 16-bit
        for arg, val in (("act_bytes", act), ("weight_bytes", p.weight_bytes),
                         ("kv_bytes", p.kv_bytes)):
            if arg in acc and arg not in args:
                args[arg] = val
        c = f.fn(**args)
        if r.extra_act_read:
            c = c + OpCost(act_bytes_read=r.extra_act_read * p.act_bytes)
        out[:, i] = c.as_tuple()
    return out


def dedupe_names(names: list[str]) -> list[str]:
    """Make names unique in order: a repeated name gets ``#2``, ``#3``, ..."""
    seen: dict[str, int] = {}
    out = []
    for n in names:
        k = seen.get(n, 0) + 1
        seen[n] = k
        out.append(n if k == 1 else f"{n}#{k}")
    return out


def _gemm(records: Sequence[OpRecord], batch: int) -> np.ndarray:
    """[3, n] implicit-GEMM dims with M per sample (the trace's M over its batch), as each
    formula returns them (byte sizes do not change them: 1 B stands in)."""
    g = np.zeros((3, len(records)))
    for i, r in enumerate(records):
        acc = _accepted(r.kind)
        args = {k: (1.0 if isinstance(v, Bytes) else v) for k, v in r.shape.items()}
        args.setdefault("batch", 1)  # the traced shapes already hold the whole batch
        for arg in ("act_bytes", "weight_bytes", "kv_bytes"):
            if arg in acc and arg not in args:
                args[arg] = 1.0
        mnk = formula(r.kind).fn(**args).gemm
        if mnk is not None:
            g[:, i] = (mnk[0] / batch, mnk[1], mnk[2])
    return g


def unpriced_warning(unsupported: Sequence[UnsupportedOp], priced_bytes: float,
                     act_bytes: float) -> str:
    """"N ops unpriced (x % of bytes)": the line every result on such a graph carries.
    ``priced_bytes``: the graph's bytes at the traced batch; the unsupported ops' elements
    (at the traced batch too) count ``act_bytes`` each, the graph's activation size."""
    ub = float(sum(u.elements for u in unsupported)) * act_bytes
    share = ub / (priced_bytes + ub) if priced_bytes + ub > 0 else 0.0
    ops = sorted({u.op for u in unsupported})
    return (f"{len(unsupported)} ops unpriced ({share * 100:.1f} % of bytes at the traced "
            f"batch), left out of these totals: " + ", ".join(ops[:5])
            + (f" and {len(ops) - 5} more kinds" if len(ops) > 5 else "")
            + " (the model's summary lists them)")


def _graph(name: str, p: Precision, records: Sequence[OpRecord], c0: np.ndarray,
           c1: np.ndarray, batch: int, *, fixed_batch: int | None, tokens: int,
           meta: dict[str, Any], unsupported: Sequence[UnsupportedOp] = ()) -> Graph:
    if unsupported:
        q = c0 + c1 * batch
        priced = float(q[[Q[k] for k in QUANTITIES if k != "flops"]].sum())
        meta = {**meta, "warnings": (unpriced_warning(unsupported, priced, p.act_bytes),),
                "unpriced_ops": len(unsupported)}
    params = np.array([float(r.params) for r in records])
    return Graph(name=name, phase="forward", precision=p, names=tuple(r.name for r in records),
                 kinds=tuple(r.kind for r in records),
                 classes=tuple(formula(r.kind).op_class for r in records), c0=c0, c1=c1,
                 gemm=_gemm(records, batch), params=params,
                 weight_footprint_bytes=float(params.sum()) * p.weight_bytes,
                 fixed_batch=fixed_batch, tokens_per_sample=tokens, meta=meta,
                 fusible=np.array([r.kind == "elementwise" or (r.kind == "norm" and r.shape.get(
                     "variant") == "batchnorm") for r in records], dtype=bool))


def affine_fit(t1: Trace, t2: Trace, t3: Trace | None) -> str | None:
    """None when the three traces have the same ops and costs affine in the batch, else why."""
    if t1.signature() != t2.signature() or (t3 is not None and t3.signature() != t1.signature()):
        a, b = t1.signature(), t2.signature()
        if len(a) != len(b):
            return f"{len(a)} ops at batch {t1.batch} but {len(b)} at batch {t2.batch}"
        i = next(i for i, (x, y) in enumerate(zip(a, b)) if x != y)
        return f"op {i} is {a[i][0]} ({a[i][2]}) at batch {t1.batch} but {b[i][0]} ({b[i][2]})"
    if t3 is None:
        return None
    p = Precision(compute="fp32", weights="fp32", activations="fp16", kv="bf16")
    q1, q2, q3 = (price_records(t.records, p) for t in (t1, t2, t3))
    c1 = (q2 - q1) / (t2.batch - t1.batch)
    pred = q1 + c1 * (t3.batch - t1.batch)
    bad = np.abs(pred - q3) > 1e-6 * np.maximum(np.abs(q3), 1.0)
    if bad.any():
        i = int(np.argwhere(bad.any(axis=0))[0][0])
        return f"the cost of {t1.records[i].name} is not affine in the batch"
    return None


@dataclass(eq=False)
class ImportedModel(Model):
    """A Model traced from a PyTorch module or read from an ONNX file."""

    traced_batch: int = 1  #: the batch of the example inputs
    n_free_ops: int = 0  #: views, metadata and folded-constant ops (free, not in the graph)
    module_params: int = 0  #: parameters the module/file holds (shared ones once)
    how: str = ""  #: "torch" or "onnx"
    notes: tuple[str, ...] = ()
    #: per tensor input, the dimension that is the batch (None: no batch); None: not recorded
    batch_dims: tuple[int | None, ...] | None = None
    batch_dims_given: bool = False  #: batch_dims passed by the user, not found by tracing

    def summary(self) -> str:
        """Op counts by kind, parameters, and every unsupported op with what it touches."""
        g = self.graph(precision="fp32", batch=self.traced_batch)
        q = g.quantities(self.traced_batch)
        total_bytes = float(q[[Q[k] for k in QUANTITIES if k != "flops"]].sum())
        kinds: dict[str, int] = {}
        for k in g.kinds:
            kinds[k] = kinds.get(k, 0) + 1
        lines = [(f"{self.name} [imported from {self.how}]: {len(g)} ops, "
                 f"{g.params_total:,} parameters read by ops ({self.module_params:,} held)"),
                 "  ops by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
                 f"  free (views, metadata, folded constants): {self.n_free_ops}",
                 *self._batch_line(),
                 (f"  at batch {self.traced_batch}, fp32: {float(q[Q['flops']].sum()) / 1e9:,.3f}"
                 f" GFLOP, {total_bytes / 1e6:,.3f} MB")]
        if self.unsupported_ops:
            ub = sum(u.bytes for u in self.unsupported_ops)
            share = ub / (total_bytes + ub) if total_bytes + ub else 0.0
            lines.append(f"  UNSUPPORTED: {len(self.unsupported_ops)} ops not priced, touching "
                         f"{ub / 1e6:,.3f} MB ({share:.1%} of the bytes) at the traced batch:")
            lines += [f"    {u}" for u in self.unsupported_ops[:20]]
            if len(self.unsupported_ops) > 20:
                lines.append(f"    ... and {len(self.unsupported_ops) - 20} more")
        else:
            lines.append("  unsupported: none")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def _batch_line(self) -> list[str]:
        if self.batch_dims is None:
            return []
        dims = [f"dim {d} of input {i}" for i, d in enumerate(self.batch_dims) if d is not None]
        how = "given" if self.batch_dims_given else "found by tracing"
        return [f"  batch: {', '.join(dims)} ({how}; size {self.traced_batch} traced)"]

    def __str__(self) -> str:
        return self.summary()


def imported_model(*, key: str, name: str, how: str,
                   trace: Callable[[int, int | None], Trace], batch0: int,
                   seq_len0: int | None) -> ImportedModel:
    """Build the Model: trace at ``batch0`` (and 2×, 3× to fit the batch), cache per seq_len.

    ``trace(batch, seq_len)`` returns one Trace (``seq_len`` None when the model has none).
    """
    fits: dict[int | None, tuple[Trace, Trace | None, str | None]] = {}

    def fit(seq: int | None) -> tuple[Trace, Trace | None, str | None]:
        got = fits.get(seq)
        if got is None:
            t1 = trace(batch0, seq)
            t2 = trace(2 * batch0, seq)
            t3 = trace(3 * batch0, seq)
            why = affine_fit(t1, t2, t3)
            got = (t1, t2 if why is None else None, why)
            fits[seq] = got
            make_room(fits, 17)
        return got

    t1, _, why = fit(seq_len0)

    def build(*, precision: Precision, phase: str, seq_len: int | None, context: int,
              batch: int | None, fused_attention: bool, logits: str | None) -> Graph:
        if phase != "forward":
            raise SpecError(f"{name} is an imported graph: phase must be 'forward', got "
                            f"{phase!r}")
        if context:
            raise SpecError(f"{name} is an imported graph: context does not apply")
        a, b, reason = fit(seq_len)
        tokens = seq_len or 1
        meta: dict[str, Any] = {"imported": how, "traced_batch": batch0}
        if seq_len is not None:
            meta.update(seq_len=seq_len, kv_len=seq_len)
        if b is None:  # not affine in the batch: re-trace at the batch asked
            if batch is None:
                raise SpecError(f"{name}: the graph depends on the batch ({reason}); pass batch=")
            t = a if batch == a.batch else trace(batch, seq_len)
            q = price_records(t.records, precision)
            meta["not_affine"] = reason
            return _graph(name, precision, t.records, q, np.zeros_like(q), batch,
                          fixed_batch=batch, tokens=tokens, meta=meta,
                          unsupported=t.unsupported)
        q1, q2 = price_records(a.records, precision), price_records(b.records, precision)
        c1 = (q2 - q1) / (b.batch - a.batch)
        c0 = q1 - c1 * a.batch
        c0[np.abs(c0) < 1e-9 * np.maximum(np.abs(q1), 1.0)] = 0.0  # rounding, not cost
        return _graph(name, precision, a.records, c0, c1, a.batch, fixed_batch=None,
                      tokens=tokens, meta=meta, unsupported=a.unsupported)

    m = ImportedModel(
        key=key, name=name, family="imported", builder=build, phases=("forward",),
        default_phase="forward", default_seq_len=seq_len0, source=f"imported from {how}",
        batch_dependent=why is not None, unsupported_ops=tuple(t1.unsupported),
        traced_batch=batch0, n_free_ops=t1.n_views, module_params=t1.module_params, how=how,
        notes=tuple(t1.meta.get("notes", ())) + (((f"costs are not affine in the batch "
                                                   f"({why}): re-traced per batch"),)
                                                  if why else ()),
    )
    m.n_layers = sum(1 for r in t1.records if r.kind in ("conv2d", "conv", "linear"))
    return m
