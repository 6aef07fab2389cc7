"""Epilogue fusion: the design lever a compiler (TensorRT, torch.compile, XLA) pulls.

``fuse_epilogues(graph)`` folds each run of fusible ops (elementwise activations, residual
adds, inference batch norm) that directly follows a matmul or convolution of the same output
size into that op's epilogue: their FLOPs join the producer, the intermediate tensor is never
written and re-read, and only their *other* inputs (a residual branch) are still read. Batch
norm folds into the convolution's weights. Everything else is unchanged.

Assumptions: the runs are consecutive in graph order (true for the zoo's CNN and transformer
builders); an op fuses only when its output has as many elements as the producer's.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from .graph import Graph, Q

__all__ = ["fuse_epilogues"]

_AR, _AW = Q["act_bytes_read"], Q["act_bytes_written"]


def fuse_epilogues(graph: Graph) -> Graph:
    """A new Graph with fusible epilogue ops folded into their producers."""
    if graph.fusible is None or not graph.fusible.any():
        return graph
    n = len(graph)
    c0, c1 = graph.c0.copy(), graph.c1.copy()
    params = graph.params.copy()
    names = list(graph.names)
    keep = np.ones(n, dtype=bool)
    producer = -1
    for i in range(n):
        if graph.classes[i] in ("matmul", "conv"):
            producer = i
            continue
        if producer >= 0 and graph.fusible[i] and np.allclose(
                c1[_AW, i], graph.c1[_AW, producer]) and np.allclose(c0[_AW, i], c0[_AW, producer]):
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
    return replace(
        graph, names=tuple(names[i] for i in idx), kinds=tuple(graph.kinds[i] for i in idx),
        classes=tuple(graph.classes[i] for i in idx), c0=c0[:, idx], c1=c1[:, idx],
        gemm=graph.gemm[:, idx], params=params[idx], fusible=graph.fusible[idx] & False,
        meta={k: v for k, v in graph.meta.items() if not k.startswith("_")} | {"fused": True},
    )
