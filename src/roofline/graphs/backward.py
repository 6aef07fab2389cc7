"""The backward pass of any forward graph: one rule per op kind.

``backward_graph(forward)`` takes a forward ``Graph`` — a CNN, a ViT, BERT, an imported
PyTorch or ONNX module — and returns the training graph of one micro-batch: the forward ops,
then their backward ops in reverse order. Each backward op's cost is a fixed linear
combination of its forward op's quantities (FLOPs F, weight bytes read W, activation bytes read
X and written Y), so the training graph stays affine in the batch like the forward one.

- linear, conv, conv2d, and matmul with a weight operand: dX = dY·Wᵀ (a transposed conv)
  with F FLOPs, reading W and dY (= Y bytes), writing dX (= X); and dW = Xᵀ·dY, F FLOPs,
  reading X and dY and accumulating into the fp32 gradient ("grad").
- matmul of two activations: dA = dC·Bᵀ and dB = Aᵀ·dC, 2F; reads A, B, dC; writes dA, dB.
- attention (fused, Flash): dQ, dK, dV with 2.5F; reads Q, K, V, O and dO; writes dQ, dK, dV.
- elementwise, norm, softmax, pools, variance, cumsum, sort, topk: dX with 2F; reads the
  saved input(s) and dY, writes dX (a norm's γ/β gradients accumulate into "grad").
- training-mode batch norm (``batch_stats``; ``training_batch_norm`` gives its forward the
  statistics pass, the input read ``BN_INPUT_READS`` times, the one place of that rule): dX
  with 2F, reading the input and dY twice (a reduction pass over the batch, then the dX pass)
  and writing dX once; its saved input is counted once.
  PyTorch runs it as one cuDNN call, ``cudnnBatchNormalizationBackwardEx`` (aten's
  ``cudnn/BatchNorm.cpp``), whose reduction spans the whole batch, so the tensors do not stay
  on chip between the passes at these sizes (a 56×56×64 fp16 map at batch 256 is 103 MB).
- copy (cat, transpose, pad, ...): the inverse movement, 0 FLOPs; reads dY, writes dX.
- embedding: a scatter-add of dY into fp32 gradient rows, one add per element of dY.
- view, kv_cache_write: nothing.

"grad" is the fp32 gradient accumulator: a weight-gradient op reads and writes ``grad_bytes``
(4) per weight element (Megatron's fused gradient accumulation; the decoder training graph,
graphs/training.py, counts the same); a norm's γ/β gradient does too. Matmul backward is 2×
the forward FLOPs and fwd+bwd 3× (the 6·N·tokens rule); attention's 2.5× is
FlashAttention-2's backward (5 matmuls to the forward's 2, recomputing QKᵀ) — the same rules
as the decoder training graph.

**Saved tensors** (activation memory per micro-batch): what each op's backward reads from the
forward: its inputs X for matmul/conv (dW needs X), elementwise, norms, pools and the
reductions; Q, K, V and O for attention (+ the row log-sum-exp, not counted); the output Y
for softmax; nothing for copies, views and embeddings (indices are not counted). A tensor is
counted once where the graph says which tensor each op keeps (``Graph.saves``, tagged by the
builder: the ResNets, graphs/cnn.py): there an in-place ReLU keeps its output, the tensor the
next convolution keeps too, and a residual add keeps nothing (its gradient is dY for both
addends, PyTorch's derivatives.yaml ``add.Tensor``), as autograd does; a tensor several ops
keep is counted at the largest of their saved bytes. Elsewhere (``saves`` None) a tensor two
ops read is counted for each: an upper bound on what autograd keeps (ResNet-50 counted that
way keeps about twice PyTorch's bytes, tests/test_rn50_block_counts.py).

Assumptions: the backward ops run with the forward ops' GEMM shapes for the efficiency model;
no recomputation; dropout, loss and the optimizer step are not ops here (the training
scenario adds the optimizer step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import SpecError
from ..ops import QUANTITIES
from .graph import Graph, Q

__all__ = ["BACKWARD_RULES", "BN_INPUT_READS", "TrainingGraph", "backward_graph",
           "batch_norm_mask", "saved_activation_bytes", "training_batch_norm"]

_F, _WR, _AR, _AW, _KR, _KW, _WW = (Q[k] for k in QUANTITIES)

#: kind -> backward rule (see the module docstring)
BACKWARD_RULES: dict[str, str] = {
    "linear": "weight", "conv": "weight", "conv2d": "weight", "matmul": "matmul",
    "attention": "attention", "elementwise": "pointwise", "norm": "pointwise",
    "softmax": "pointwise", "pool": "pointwise", "pool2d": "pointwise",
    "global_pool": "pointwise", "variance": "pointwise", "cumsum": "pointwise",
    "sort": "pointwise", "topk": "pointwise", "copy": "copy", "embedding": "embedding",
    "view": "none", "kv_cache_write": "none",
    "selective_scan": "pointwise",  # the scan's backward: a reverse scan, ~2x the forward
    "embedding_bag": "embedding",  # a scatter-add of dY into the gathered rows
    "optimizer_step": "none",  # the update after the backward: nothing to differentiate
}
#: forward FLOPs multiple of each rule's backward (per backward op)
FLOP_FACTOR = {"weight": 1.0, "matmul": 2.0, "attention": 2.5, "pointwise": 2.0, "copy": 0.0}

#: op groups of the training graph
GROUPS = ("forward", "backward", "backward_dw")

#: reads of its input by a training-mode batch norm's forward (a statistics pass, then the
#: normalise pass: cuDNN's ``cudnnBatchNormalizationForwardTrainingEx``); its FLOPs are
#: ``BN_FLOP_FACTOR`` × the inference norm's (8 per element, a layer norm's)
BN_INPUT_READS = 2.0
BN_FLOP_FACTOR = 4.0


def batch_norm_mask(g: Graph) -> np.ndarray | None:
    """[n] bool, the batch norms of ``g`` (the fusible norms), or None where it has none."""
    if g.fusible is None:
        return None
    bn = np.array([k == "norm" for k in g.kinds]) & g.fusible
    return bn if bn.any() else None


def training_batch_norm(g: Graph) -> Graph:
    """``g`` with its batch norms in training mode: ×``BN_FLOP_FACTOR`` FLOPs and the input
    read ``BN_INPUT_READS`` times; ``backward_graph(..., batch_stats=batch_norm_mask(g))``
    prices their backward and counts the saved input once (module docstring)."""
    from dataclasses import replace

    bn = batch_norm_mask(g)
    if bn is None:
        return g
    c0, c1 = g.c0.copy(), g.c1.copy()
    for c in (c0, c1):
        c[_F, bn] *= BN_FLOP_FACTOR
        c[_AR, bn] *= BN_INPUT_READS
    return replace(g, c0=c0, c1=c1)


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class TrainingGraph:
    """Forward and backward ops of one micro-batch on one device, with a group per op."""

    graph: Graph  #: every op, costs affine in the micro-batch
    group: np.ndarray  #: [n] index into GROUPS
    saved_c0: float  #: saved-activation bytes, batch-independent part
    saved_c1: float  #: saved-activation bytes per sample
    params: float  #: parameters the forward graph holds

    def saved_bytes(self, micro_batch: float) -> float:
        """Activation bytes the forward keeps for the backward at ``micro_batch``."""
        return self.saved_c0 + self.saved_c1 * micro_batch


def _rule(kind: str) -> str:
    r = BACKWARD_RULES.get(kind)
    if r is None:
        raise SpecError(f"no backward rule for op kind {kind!r}; known: "
                        f"{', '.join(sorted(BACKWARD_RULES))}")
    return r


def _saved(rule: str, kind: str, c: np.ndarray) -> np.ndarray:
    """Saved bytes of one op (rows of c0 or c1), see the module docstring."""
    if rule in ("weight", "matmul", "pointwise"):
        return c[_AR] + c[_KR] if kind != "softmax" else c[_AW]
    if rule == "attention":
        return c[_AR] + c[_KR] + c[_AW]
    return np.zeros_like(c[_F])


def _checked_batch_stats(forward: Graph, batch_stats: object) -> np.ndarray | None:
    """``batch_stats`` as [n] bool (one per op of ``forward``, true only on norm ops), or None;
    otherwise a SpecError naming what it got (the one check of both public functions)."""
    if batch_stats is None:
        return None
    a, n = np.asarray(batch_stats), len(forward.names)
    if a.shape != (n,) or a.dtype != np.bool_:
        raise SpecError(f"batch_stats must be one bool per op of {forward.name} ({n}), true "
                        f"only on norm ops; got shape {a.shape}, dtype {a.dtype}")
    wrong = [i for i in np.flatnonzero(a) if forward.kinds[i] != "norm"]
    if wrong:
        i = int(wrong[0])
        raise SpecError(f"batch_stats must be true only on norm ops; got true on op "
                        f"{forward.names[i]!r} of kind {forward.kinds[i]!r} "
                        f"({len(wrong)} such ops)")
    return a


def saved_activation_bytes(forward: Graph,
                           batch_stats: np.ndarray | None = None) -> tuple[float, float]:
    """(c0, c1) of the bytes the forward ops keep for the backward (module docstring); a
    training batch norm (``batch_stats``) keeps its input once, not its ``BN_INPUT_READS``
    reads; ops sharing a ``forward.saves`` id keep one tensor, ``-1`` none."""
    batch_stats = _checked_batch_stats(forward, batch_stats)
    kept: dict[int, tuple[float, float]] = {}  # tensor id -> (c0, c1) bytes
    for i, k in enumerate(forward.kinds):
        r = _rule(k)
        if r == "matmul" and forward.c0[_WR, i] > 0:
            r = "weight"
        once = BN_INPUT_READS if batch_stats is not None and batch_stats[i] else 1.0
        b0 = float(_saved(r, k, forward.c0[:, i])) / once
        b1 = float(_saved(r, k, forward.c1[:, i])) / once
        t = i if forward.saves is None else int(forward.saves[i])
        if t == -1 and forward.saves is not None:  # keeps nothing (an add)
            continue
        a0, a1 = kept.get(t, (0.0, 0.0))
        kept[t] = (max(a0, b0), max(a1, b1))
    return sum(v[0] for v in kept.values()), sum(v[1] for v in kept.values())


def _backward_ops(rule: str, c: np.ndarray, weight_elems: float, grad_bytes: float,
                  act_bytes: float, batch_part: bool,
                  two_pass: bool = False) -> list[tuple[str, str, np.ndarray]]:
    """(suffix, group, quantities) of the backward ops of one forward op. ``c`` holds the
    op's forward quantities (c0 or c1 column); ``weight_elems`` the weight elements it reads
    (batch-independent: only in the c0 pass, ``batch_part`` False); ``two_pass``: a training
    batch norm, whose forward reads its input twice (module docstring)."""
    F, W, X, Y = c[_F], c[_WR], c[_AR] + c[_KR], c[_AW] + c[_KW]
    if two_pass:  # X is the forward's two reads of the input; dX and each pass: one input
        d = np.zeros(len(QUANTITIES))
        x = X / BN_INPUT_READS  # the input once
        d[_F], d[_AR], d[_AW] = FLOP_FACTOR["pointwise"] * F, 2 * (x + Y), x
        if not batch_part and W > 0:  # γ/β gradients
            d[_WR], d[_WW] = W + grad_bytes * weight_elems, grad_bytes * weight_elems
        return [("bwd", "backward", d)]
    z = np.zeros(len(QUANTITIES))
    if rule == "none":
        return []
    if rule == "weight":
        dx, dw = z.copy(), z.copy()
        dx[_F], dx[_WR], dx[_AR], dx[_AW] = F, W, Y, X
        dw[_F], dw[_AR] = F, X + Y
        if not batch_part:
            dw[_WR] = dw[_WW] = grad_bytes * weight_elems
        return [("bwd", "backward", dx), ("bwd_dw", "backward_dw", dw)]
    if rule == "embedding":
        d = z.copy()
        rows = Y / act_bytes  # elements of dY: tokens · D
        d[_F], d[_AR] = rows, Y
        d[_WR] = d[_WW] = grad_bytes * rows
        return [("bwd", "backward", d)]
    d = z.copy()
    d[_F] = FLOP_FACTOR[rule] * F
    if rule == "copy":
        d[_AR], d[_AW] = Y, X
    elif rule == "attention":  # reads Q, K, V, O and dO; writes dQ, dK, dV
        d[_AR], d[_AW] = X + 2 * Y, X
    else:  # matmul of activations, pointwise: saved input(s) and dY in, dX out
        d[_AR], d[_AW] = X + Y, X
        if rule == "pointwise" and not batch_part and W > 0:  # γ/β (norm) gradients
            d[_WR], d[_WW] = W + grad_bytes * weight_elems, grad_bytes * weight_elems
    return [("bwd", "backward", d)]


def backward_graph(forward: Graph, *, grad_bytes: float = 4.0,
                   batch_stats: np.ndarray | None = None) -> TrainingGraph:
    """The training graph (forward + backward ops) of ``forward`` (module docstring).
    ``batch_stats``: [n] bool, the norm ops that are training-mode batch norms whose forward
    quantities already read the input twice (scenarios/training/generic.py); None: none."""
    batch_stats = _checked_batch_stats(forward, batch_stats)
    if forward.fixed_batch is not None:
        raise SpecError(f"{forward.name}: the forward graph was built for batch "
                        f"{forward.fixed_batch} only; build the training graph per batch")
    p = forward.precision
    names, kinds, classes = list(forward.names), list(forward.kinds), list(forward.classes)
    c0 = [forward.c0[:, i] for i in range(len(names))]
    c1 = [forward.c1[:, i] for i in range(len(names))]
    gemm = [forward.gemm[:, i] for i in range(len(names))]
    params = list(forward.params)
    group = [0] * len(names)
    for i in reversed(range(len(forward.names))):
        kind = forward.kinds[i]
        rule = _rule(kind)
        if rule == "matmul" and forward.c0[_WR, i] > 0:  # a weight operand (experts, imports)
            rule = "weight"
        w_el = float(forward.c0[_WR, i]) / p.weight_bytes
        two = batch_stats is not None and bool(batch_stats[i])
        b0 = _backward_ops(rule, forward.c0[:, i], w_el, grad_bytes, p.act_bytes, False, two)
        b1 = _backward_ops(rule, forward.c1[:, i], w_el, grad_bytes, p.act_bytes, True, two)
        for (suffix, grp, q0), (_, _, q1) in zip(b0, b1):
            names.append(f"{forward.names[i]}.{suffix}")
            kinds.append(kind)
            classes.append(forward.classes[i])
            c0.append(q0)
            c1.append(q1)
            gemm.append(forward.gemm[:, i])
            params.append(0.0)
            group.append(GROUPS.index(grp))
    s0, s1 = saved_activation_bytes(forward, batch_stats)
    n = len(names)
    g = Graph(name=forward.name, phase="train", precision=p, names=tuple(names),
              kinds=tuple(kinds), classes=tuple(classes),
              c0=np.array(c0).T.reshape(len(QUANTITIES), n),
              c1=np.array(c1).T.reshape(len(QUANTITIES), n),
              gemm=np.array(gemm).T.reshape(3, n), params=np.array(params),
              weight_footprint_bytes=forward.weight_footprint_bytes,
              tokens_per_sample=forward.tokens_per_sample,
              meta={k: v for k, v in forward.meta.items() if not k.startswith("_")})
    return TrainingGraph(graph=g, group=np.array(group), saved_c0=s0, saved_c1=s1,
                         params=float(forward.params.sum()))
