"""Which dimension of each example input is the batch, found from traces or given.

The batch is never assumed to be dimension 0: ``nn.TransformerEncoder`` takes ``(S, B, E)``
by default, and pricing its sequence as the batch gives a wrong number without a word.

Given ``batch_dim=d`` (an int: a dimension of the first tensor input) or one entry per tensor
input (``(1, 0, None)``: None for inputs without a batch), that is the batch. Otherwise each
dimension d of the first tensor input is tried in order, with the other inputs' batch
dimension the one of the same size (the same index when several have it): the module is
traced with that size doubled, and d is the batch when

* the trace runs and has the same ops (no Python control flow on that size),
* the FLOPs of every op that reads data derived from the inputs double (per-sample work is
  linear in the batch; ops on weights and constants only, such as a causal mask, may stay as
  they were): attention over d, a sort or any op mixing along d grows faster and rejects d.
  An op on the inputs' data whose FLOPs stay constant means d was reduced away (a classifier
  head after pooling away an image height, or a loss summed over the batch): such a d is
  taken only when no dimension passes without one, and when most FLOPs still double. Sorts
  and top-k over all tokens (mixture-of-experts routing) that grow as n·log n are tolerated
  the same lenient way when they are under 1 % of the FLOPs.

The first dimension that passes is the batch; none passing is an ``ImportGraphError`` that
says why each failed and names ``batch_dim=``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ...errors import ImportGraphError, SpecError
from ...specs.dtypes import Precision
from ._import_common import Trace, price_records

__all__ = ["BatchDims", "check_batch_dim", "find_batch_dims", "assign_dims"]

#: per tensor input (pytree-leaf order): its batch dimension, or None
BatchDims = tuple[int | None, ...]

_P = Precision(compute="fp32", weights="fp32", activations="fp32", kv="fp32")


def assign_dims(shapes: Sequence[tuple[int, ...]], d: int) -> BatchDims:
    """Batch dims when dimension ``d`` of the first input is the batch: each other input's
    dimension of the same size (``d`` itself when it has that size, else the only one)."""
    s = shapes[0][d]
    out: list[int | None] = [d]
    for sh in shapes[1:]:
        if len(sh) > d and sh[d] == s:
            out.append(d)
            continue
        same = [i for i, v in enumerate(sh) if v == s]
        out.append(same[0] if len(same) == 1 else None)
    return tuple(out)


def check_batch_dim(batch_dim: Any, shapes: Sequence[tuple[int, ...]],
                    seq_dim: int | None) -> BatchDims | None:
    """Validate a user's ``batch_dim=`` against the example inputs' shapes."""
    if batch_dim is None:
        return None

    def ok(v: Any, rank: int) -> bool:
        return bool(not isinstance(v, bool) and isinstance(v, int | np.integer) and 0 <= v < rank)

    if not isinstance(batch_dim, Sequence) or isinstance(batch_dim, str):
        if not ok(batch_dim, len(shapes[0])):
            raise SpecError(f"batch_dim must be a dimension of the first example input "
                            f"(0..{len(shapes[0]) - 1}) or one entry per tensor input, got "
                            f"{batch_dim!r}")
        if seq_dim is not None and int(batch_dim) == seq_dim:
            raise SpecError(f"batch_dim={batch_dim} is also seq_dim: the batch and the sequence "
                            "must be different dimensions")
        return assign_dims(shapes, int(batch_dim))
    dims = list(batch_dim)
    if len(dims) != len(shapes):
        raise SpecError(f"batch_dim has {len(dims)} entries but the example inputs hold "
                        f"{len(shapes)} tensors: give one per tensor (None for an input "
                        "without a batch)")
    for i, (v, sh) in enumerate(zip(dims, shapes)):
        if v is not None and not ok(v, len(sh)):
            raise SpecError(f"batch_dim[{i}] must be None or a dimension of tensor input {i} "
                            f"(0..{len(sh) - 1}), got {v!r}")
    sizes = {sh[v] for v, sh in zip(dims, shapes) if v is not None}
    if not sizes:
        raise SpecError("batch_dim names no batch dimension (every entry is None)")
    if len(sizes) > 1:
        raise SpecError(f"batch_dim picks dimensions of different sizes {sorted(sizes)}: the "
                        "batch must have one size in every input")
    if dims[0] is None:
        raise SpecError("batch_dim[0] is None: the first tensor input must hold the batch")
    if seq_dim is not None and dims[0] == seq_dim:
        raise SpecError(f"batch_dim[0]={dims[0]} is also seq_dim: the batch and the sequence "
                        "must be different dimensions")
    return tuple(None if v is None else int(v) for v in dims)


def _why_not(t1: Trace, t2: Trace) -> tuple[str | None, bool]:
    """(None, strict) when the doubled trace ``t2`` behaves as a doubled batch of ``t1``, else
    (why, False). ``strict``: no op on the inputs' data stays constant (nothing reduces the
    dimension away)."""
    a, b = t1.signature(), t2.signature()
    if a != b:
        return f"the ops change ({len(a)} ops, {len(b)} when doubled)", False
    f1 = price_records(t1.records, _P)[0]
    f2 = price_records(t2.records, _P)[0]
    tol = 1e-9 * np.maximum(np.abs(f1), 1.0)
    const = np.array([not r.from_input for r in t1.records], dtype=bool)
    doubles, same = np.abs(f2 - 2 * f1) <= tol, np.abs(f2 - f1) <= tol
    linear = doubles | same
    # a sort or top-k over every token (mixture-of-experts routing groups the tokens by
    # expert) grows as n·log n whatever dimension grows: when such ops are under 1 % of the
    # FLOPs they do not decide, but the dimension is taken only leniently
    sorts = np.array([r.kind in ("sort", "topk") for r in t1.records], dtype=bool)
    routing = ~linear & sorts
    if routing.any() and (~linear == routing).all() and f2[routing].sum() < 0.01 * f2.sum():
        if f2.sum() < 1.5 * f1.sum():
            return "most of the FLOPs do not grow with it", False
        return None, False
    if not linear.all():
        i = int(np.argmin(linear))
        r = t1.records[i]
        return (f"{r.name} ({r.source}) does {f2[i] / f1[i]:.2f}× the FLOPs when it doubles"
                if f1[i] else f"{r.name} ({r.source}) has FLOPs only when it doubles"), False
    if f2.sum() < 1.5 * f1.sum():
        return "most of the FLOPs do not grow with it", False
    return None, bool((doubles | const).all())


def find_batch_dims(shapes: Sequence[tuple[int, ...]], seq_dim: int | None,
                    trace: Callable[[BatchDims, int], Trace],
                    base: Trace) -> tuple[BatchDims, Trace, Trace]:
    """The batch dims found by tracing (see the module docstring), the trace to fit from and
    its doubled trace. A size-1 dimension whose ops change at size 2 is retried at 2 and 4:
    at batch 1 some reshapes are views that need a copy at any larger batch (HF Gemma 2's
    expanded keys), so the fit then starts at 2."""
    why: list[str] = []
    lenient: tuple[BatchDims, Trace, Trace] | None = None
    for d, s in enumerate(shapes[0]):
        if d == seq_dim:
            continue
        if s < 1:
            why.append(f"dim {d} (size {s}): empty")
            continue
        dims = assign_dims(shapes, d)
        try:
            t2 = trace(dims, 2 * s)
        except ImportGraphError as e:
            why.append(f"dim {d} (size {s}): the forward fails when it doubles "
                       f"({str(e).split(': ', 2)[-1][:120]})")
            continue
        reason, strict = _why_not(base, t2)
        b1 = base
        if reason is not None and s == 1 and reason.startswith("the ops change"):
            try:
                t4 = trace(dims, 4)
            except ImportGraphError:
                t4 = None
            if t4 is not None:
                r2, st2 = _why_not(t2, t4)
                if r2 is None:
                    b1, t2, reason, strict = t2, t4, None, st2
        if reason is None and strict:
            return dims, b1, t2
        if reason is None:
            lenient = lenient or (dims, b1, t2)
            continue
        why.append(f"dim {d} (size {s}): {reason}")
    if lenient is not None:
        return lenient
    raise ImportGraphError(
        "cannot find the batch dimension of the example inputs: no dimension of the first "
        "input scales every op linearly — " + "; ".join(why) + ". Pass batch_dim= (the "
        "batch's dimension of the first input, e.g. batch_dim=1 for (seq, batch, embed) "
        "inputs, or one entry per tensor input)")
