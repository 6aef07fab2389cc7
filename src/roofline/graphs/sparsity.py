"""Weight sparsity as a graph transform: what the weights cost to read and to multiply.

``sparsify(graph, pattern=..., speedup=...)`` rewrites every matmul/convolution that reads
weights:

- ``"2:4"`` (structured, two of every four weights kept): the weight read is half the values
  plus a 2-bit position index per kept value, ``N/2 · b + N/2 · 2/8`` bytes for N weights of
  b bytes (fp16: 0.5625 of dense; int8: 0.625); the product runs on sparse tensor cores at up
  to ``speedup`` times the dense rate (the datasheet's sparse/dense ratio, 2 on NVIDIA Ampere
  and later), priced as FLOPs / speedup: the unit skips the pruned half.
- a density ``d`` in (0, 1) (unstructured): compressed weights, ``d · N`` values plus a
  16-bit column index each (CSR-style, row pointers dropped), ``d · N · (b + 2)`` bytes; no
  compute gain on dense units. Below ~b/(b+2) of density it reads fewer bytes than dense.

The weight footprint shrinks by the same ratio. Activations and the KV cache are unchanged.

References: NVIDIA A100 Tensor Core GPU Architecture whitepaper (2020), "Fine-grained
structured sparsity" (2:4 with 2-bit indices, 2x math throughput); Mishra et al.,
Accelerating Sparse Deep Neural Networks (arXiv:2104.08378), Section 3.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from ..errors import SpecError
from .graph import Graph, Q

__all__ = ["sparsify", "check_sparsity", "weight_ratio"]

_W, _F = Q["weight_bytes_read"], Q["flops"]


def check_sparsity(sparsity: Any) -> str | float | None:
    """``None``, ``"2:4"`` or a density in (0, 1)."""
    if sparsity is None or sparsity == "dense":
        return None
    if sparsity == "2:4":
        return "2:4"
    if isinstance(sparsity, bool) or not isinstance(sparsity, int | float) or \
            not math.isfinite(sparsity) or not 0 < sparsity < 1:
        raise SpecError(f"sparsity must be None, '2:4' or a weight density in (0, 1), got "
                        f"{sparsity!r}")
    return float(sparsity)


def weight_ratio(sparsity: str | float, weight_bytes: float) -> float:
    """Bytes read for the weights, as a fraction of dense, at ``weight_bytes`` per weight."""
    b = weight_bytes
    if sparsity == "2:4":
        return 0.5 + 0.5 * (2 / 8) / b  # half the values + a 2-bit index per kept value
    d = float(sparsity)
    return d * (b + 2.0) / b  # kept values + a 16-bit index each


def sparsify(graph: Graph, sparsity: str | float, speedup: float = 1.0) -> Graph:
    """A new Graph whose weight-reading GEMMs are sparse (see the module docstring)."""
    wb = graph.precision.weight_bytes
    ratio = weight_ratio(sparsity, wb)
    flop_scale = 1.0 / speedup if sparsity == "2:4" else 1.0
    c0, c1 = graph.c0.copy(), graph.c1.copy()
    sparse = [i for i, c in enumerate(graph.classes)
              if c in ("matmul", "conv") and (c0[_W, i] > 0 or c1[_W, i] > 0)]
    for c in (c0, c1):
        c[_W, sparse] *= ratio
        c[_F, sparse] *= flop_scale
    dense_w = float(graph.params[sparse].sum()) * wb
    footprint = graph.weight_footprint_bytes - dense_w * (1.0 - ratio)
    return replace(graph, c0=c0, c1=c1, weight_footprint_bytes=footprint,
                   meta={**graph.meta, "sparsity": sparsity, "sparse_ops": len(sparse)})
