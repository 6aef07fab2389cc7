"""A checkpoint's stored weight format (its ``quantization_config``) applied to a graph.

A quantized checkpoint stores its linear layers' weights in fewer bits plus scales (and zero
points), and everything else — embeddings, the LM head, norms, biases, MoE routers — at its
unquantized dtype, as every method below leaves them (AWQ/GPTQ/bitsandbytes quantize
``nn.Linear`` layers only and keep ``lm_head``; DeepSeek-V3's fp8 checkpoint keeps the
embedding, the head, norms and the router gate in bf16).

``WeightFormat.apply(graph)`` rescales the weight bytes of the quantized ops (kind ``linear``,
and ``matmul`` with a weight operand: MoE experts, MLA's absorbed projections) from the graph
precision's bytes per weight to the format's, and recomputes the stored-weight footprint. The
compute dtype stays the one asked for (``precision=``): an fp8 checkpoint priced at
``precision="fp8"`` runs fp8 GEMMs, at ``"bf16"`` dequantizes into bf16 GEMMs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..specs.dtypes import Precision
from .graph import Graph, Q

__all__ = ["WeightFormat", "UNQUANTIZED_SUFFIXES", "precision_sets_weights"]

#: op names (suffixes) that stay at the unquantized dtype even though they are linear
UNQUANTIZED_SUFFIXES = ("lm_head", ".router", "score", "classifier", "pooler")


def precision_sets_weights(p: Precision) -> bool:
    """The precision sets the weights itself (weights= or group_size= given): a checkpoint's
    own weight format then yields to it."""
    from ..specs.dtypes import precision as make_precision

    return p.weights != make_precision(p.compute).weights or p.weight_overhead_bytes > 0


@dataclass(frozen=True, slots=True, kw_only=True)
class WeightFormat:
    """Bytes per stored weight of a checkpoint's quantized layers."""

    method: str  #: "fp8", "awq", "gptq", "bitsandbytes"
    bits: int  #: bits per quantized weight
    group_size: int  #: weights sharing one scale (fp8 blocks: block elements)
    bytes_per_weight: float  #: stored bytes per quantized weight, scales and zeros included
    derivation: str  #: how bytes_per_weight was counted

    def __str__(self) -> str:
        return (f"{self.method} {self.bits}-bit, {self.bytes_per_weight:.4f} B per weight "
                f"({self.derivation})")

    def quantized(self, graph: Graph) -> np.ndarray:
        """[n] bool: the ops whose weights this format stores."""
        out = np.zeros(len(graph), dtype=bool)
        for i, (n, k) in enumerate(zip(graph.names, graph.kinds)):
            if k in ("linear", "matmul") and not n.endswith(UNQUANTIZED_SUFFIXES):
                out[i] = graph.c0[Q["weight_bytes_read"], i] > 0 or \
                    graph.c1[Q["weight_bytes_read"], i] > 0
        return out

    def apply(self, graph: Graph) -> Graph:
        """``graph`` with the quantized ops' weight bytes at this format; unchanged when its
        precision chooses the weights itself (``weights=``, ``group_size=`` given)."""
        if precision_sets_weights(graph.precision):
            return graph
        mask = self.quantized(graph)
        wb = graph.precision.weight_bytes
        scale = self.bytes_per_weight / wb
        c0, c1 = graph.c0.copy(), graph.c1.copy()
        r = Q["weight_bytes_read"]
        c0[r, mask] *= scale
        c1[r, mask] *= scale
        params_q = float(graph.params[mask].sum())
        footprint = graph.weight_footprint_bytes + params_q * (self.bytes_per_weight - wb)
        meta = {**{k: v for k, v in graph.meta.items() if not k.startswith("_")},
                "weight_format": str(self), "quantized_params": params_q}
        return replace(graph, c0=c0, c1=c1, weight_footprint_bytes=footprint, meta=meta)
