"""Epilogue fusion: the design lever a compiler (TensorRT, torch.compile, XLA) pulls.

``fuse_epilogues(graph, kinds)`` folds each run of fusible ops that directly follows a matmul
or convolution of the same output size into that op's epilogue: their FLOPs join the
producer, the intermediate tensor is never written and re-read, and only their *other* inputs
(a residual branch) are still read. Batch norm folds into the convolution's weights.
Everything else is unchanged. ``kinds`` picks what folds (``FUSION_KINDS``):

- ``"bn"``: inference batch norm folded into the convolution (scale and shift in its weights);
- ``"activation"``: single-input elementwise ops (ReLU, GELU, SiLU, scale) as an epilogue;
- ``"residual"``: multi-input elementwise ops (residual add, gating multiply) as an epilogue;
- ``"norm"``: a residual add and the layer/RMS norm right after it as one kernel (vLLM's
  ``fused_add_rms_norm``, TensorRT-LLM's add+norm plugin): the kernel reads both addends,
  writes the sum (the residual stream) and the normalised output; the norm's re-read of the
  sum and one launch are gone. An add already folded into a GEMM (``"residual"``) is not
  taken again.

``"attention"`` (FlashAttention-style fused attention against materialised scores) and
``"qkv"`` (one QKV projection instead of three) are graph-building choices, not folds; the
model builders take them (``fused_attention=``, ``TransformerConfig.fused_qkv``) and
``check_fuse`` passes them through.

Assumptions: the runs are consecutive in graph order (true for the zoo's CNN and transformer
builders); an op fuses only when its output has as many elements as the producer's (bytes
written over each one's width: a matmul of an fp8 graph writes 16-bit); an
elementwise op's kind is read from its traffic (it reads more than it writes: multi-input).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from ..errors import SpecError
from .graph import Graph, Q

__all__ = ["fuse_epilogues", "check_fuse", "FUSION_KINDS", "EPILOGUE_KINDS", "FOLD_KINDS"]

_AR, _AW = Q["act_bytes_read"], Q["act_bytes_written"]

#: what ``fuse=True`` folds (the compiler epilogues; unchanged since fuse took a bool)
EPILOGUE_KINDS = ("bn", "activation", "residual")
#: every fold fuse_epilogues applies
FOLD_KINDS = (*EPILOGUE_KINDS, "norm")
#: every fusion the ``fuse=`` option names (attention and qkv are applied by the builders)
FUSION_KINDS = (*FOLD_KINDS, "attention", "qkv")


def check_fuse(fuse: Any) -> frozenset[str]:
    """``fuse=`` as a set of kinds: True = the epilogue folds (``EPILOGUE_KINDS``: bn,
    activation, residual), False/None = none, or an iterable of names from ``FUSION_KINDS``."""
    if fuse is True:
        return frozenset(EPILOGUE_KINDS)
    if fuse is False or fuse is None:
        return frozenset()
    if isinstance(fuse, str):
        fuse = (fuse,)
    if not isinstance(fuse, Iterable) or isinstance(fuse, bytes | dict):
        raise SpecError(f"fuse must be a bool or a set of kinds from {', '.join(FUSION_KINDS)}; "
                        f"got {fuse!r}")
    kinds = []
    for k in fuse:
        if not isinstance(k, str) or k not in FUSION_KINDS:
            raise SpecError(f"fuse: unknown fusion kind {k!r}; allowed: "
                            f"{', '.join(FUSION_KINDS)}")
        kinds.append(k)
    return frozenset(kinds)


def _kind(graph: Graph, i: int) -> str | None:
    if graph.fusible is None or not graph.fusible[i]:
        return None
    if graph.kinds[i] == "norm":
        return "bn"
    multi = graph.c1[_AR, i] > graph.c1[_AW, i] * 1.5 or graph.c0[_AR, i] > graph.c0[_AW, i] * 1.5
    return "residual" if multi else "activation"


def fuse_epilogues(graph: Graph, kinds: Iterable[str] = EPILOGUE_KINDS) -> Graph:
    """A new Graph with the fusible epilogue ops of ``kinds`` folded into their producers."""
    kinds = frozenset(kinds)
    g = _fold_epilogues(graph, kinds - {"norm"})
    return _fuse_add_norm(g) if "norm" in kinds else g


def _close(a: Any, b: Any) -> bool:
    """``np.allclose`` of two scalars (rtol 1e-5, atol 1e-8; NaN never close, infinities
    close only to themselves) without numpy's per-call cost (graphs are folded op by op)."""
    x, y = float(a), float(b)
    if x == y:
        return True
    if not (math.isfinite(x) and math.isfinite(y)):
        return False
    return abs(x - y) <= 1e-8 + 1e-5 * abs(y)


def _fuse_add_norm(graph: Graph) -> Graph:
    """Each multi-input elementwise add directly followed by a (non-batch) norm of the same
    size becomes one kernel (see the module docstring)."""
    n = len(graph)
    c0, c1 = graph.c0.copy(), graph.c1.copy()
    names = list(graph.names)
    keep = np.ones(n, dtype=bool)
    hits = 0
    for i in range(n - 1):
        j = i + 1
        if graph.kinds[i] != "elementwise" or graph.kinds[j] != "norm" or not keep[i]:
            continue
        if _kind(graph, i) != "residual" or (graph.fusible is not None and graph.fusible[j]):
            continue  # batch norm is fusible (it folds into a conv instead)
        if not (_close(c1[_AW, i], graph.c1[_AR, j]) and _close(c0[_AW, i], graph.c0[_AR, j])):
            continue  # the norm reads more (or less) than the sum: not this pattern
        for c in (c0, c1):
            # the fused kernel reads the addends (not the sum) and writes sum + normed output
            c[_AR, j] += c[_AR, i] - c[_AW, i]
            c[_AW, j] += c[_AW, i]
            c[Q["flops"], j] += c[Q["flops"], i]
            c[Q["weight_bytes_read"], j] += c[Q["weight_bytes_read"], i]
        names[j] = f"{graph.names[i].rsplit('.', 1)[-1]}+{names[j]}"
        keep[i] = False
        hits += 1
    if not hits:
        return graph
    idx = np.flatnonzero(keep)
    params = graph.params.copy()
    return replace(
        graph, names=tuple(names[i] for i in idx), kinds=tuple(graph.kinds[i] for i in idx),
        classes=tuple(graph.classes[i] for i in idx), c0=c0[:, idx], c1=c1[:, idx],
        gemm=graph.gemm[:, idx], params=params[idx],
        fusible=graph.fusible[idx] if graph.fusible is not None else None,
        saves=None,  # a fused graph: the saved tensors are not tracked through the folds
        meta={**graph.meta, "fused": sorted({*graph.meta.get("fused", ()), "norm"})})


def _fold_epilogues(graph: Graph, kinds: frozenset[str]) -> Graph:
    want = kinds & frozenset(FOLD_KINDS) - {"norm"}
    if graph.fusible is None or not graph.fusible.any() or not want:
        return graph
    n = len(graph)
    c0, c1 = graph.c0.copy(), graph.c1.copy()
    params = graph.params.copy()
    names = list(graph.names)
    keep = np.ones(n, dtype=bool)
    producer = -1
    # an op's output elements: its bytes written over its width (a matmul of an fp8 graph
    # writes 16-bit: Precision.matmul_out_bytes; every other op the activation dtype)
    ab, ob = graph.precision.act_bytes, graph.precision.matmul_out_bytes
    r = 1.0
    for i in range(n):
        if graph.classes[i] in ("matmul", "conv"):
            producer = i
            r = ab / ob if graph.kinds[i] in ("linear", "matmul") else 1.0
            continue
        if producer >= 0 and _kind(graph, i) in want and _close(
                c1[_AW, i], graph.c1[_AW, producer] * r) and _close(
                c0[_AW, i], c0[_AW, producer] * r):
            for c in (c0, c1):
                extra_read = c[_AR, i] - c[_AW, i]  # inputs other than the producer's output
                c[_AR, producer] += max(extra_read, 0.0)
                c[Q["flops"], producer] += c[Q["flops"], i]
                c[Q["weight_bytes_read"], producer] += c[Q["weight_bytes_read"], i]
            params[producer] += params[i]
            names[producer] = f"{names[producer]}+{graph.names[i].rsplit('.', 1)[-1]}"
            keep[i] = False
            continue
        producer = -1
    idx = np.flatnonzero(keep)
    # ops of kinds not folded stay fusible (a later fold may still take them)
    fusible = np.array([_kind(graph, int(i)) not in want and bool(graph.fusible[i])
                        for i in idx], dtype=bool)
    return replace(
        graph, names=tuple(names[i] for i in idx), kinds=tuple(graph.kinds[i] for i in idx),
        classes=tuple(graph.classes[i] for i in idx), c0=c0[:, idx], c1=c1[:, idx],
        gemm=graph.gemm[:, idx], params=params[idx], fusible=fusible, saves=None,
        meta={k: v for k, v in graph.meta.items() if not k.startswith("_")}
        | {"fused": sorted(want)},
    )
