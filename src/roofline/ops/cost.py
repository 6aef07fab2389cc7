"""OpCost: what one operator costs, split into the byte categories that matter."""

from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter

__all__ = ["OpCost", "OP_CLASSES", "COMPUTE_CLASSES", "QUANTITIES"]

#: operator classes; the engine prices matmul-class ops on the tensor-core peak
OP_CLASSES = ("matmul", "conv", "attention", "elementwise", "norm", "softmax", "pool",
              "embedding", "movement", "collective", "optimizer")
COMPUTE_CLASSES = ("matmul", "conv", "attention")

#: the OpCost fields, in the order the graph stores them
QUANTITIES = ("flops", "weight_bytes_read", "act_bytes_read", "act_bytes_written",
              "kv_bytes_read", "kv_bytes_written", "weight_bytes_written")


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCost:
    """FLOPs (2 per multiply-add) and bytes moved to/from main memory by one operator.

    Bytes are split like LLM-Viewer's result schema: weights read, activations read and
    written, KV cache read and written, and weights written (training updates).
    """

    flops: float = 0.0  #: floating-point operations, 2 per multiply-add
    weight_bytes_read: float = 0.0  #: parameters read (once per call, independent of batch)
    act_bytes_read: float = 0.0  #: activations read
    act_bytes_written: float = 0.0  #: activations written
    kv_bytes_read: float = 0.0  #: KV cache read
    kv_bytes_written: float = 0.0  #: KV cache written
    weight_bytes_written: float = 0.0  #: parameters/gradients/optimizer state written
    #: (M, N, K) of the implicit GEMM the op runs, M including the batch (M·N·K = its
    #: multiply-adds, per GEMM-shaped pass); None: not a GEMM. The efficiency model reads it.
    gemm: tuple[float, float, float] | None = None

    def __post_init__(self) -> None:
        for q in QUANTITIES:  # every field but gemm, in field order
            v = getattr(self, q)
            if not v >= 0:
                raise ValueError(f"OpCost.{q} must be >= 0, got {v!r}")

    @property
    def bytes_read(self) -> float:
        return self.weight_bytes_read + self.act_bytes_read + self.kv_bytes_read

    @property
    def bytes_written(self) -> float:
        return self.act_bytes_written + self.kv_bytes_written + self.weight_bytes_written

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    @property
    def arithmetic_intensity(self) -> float:
        """FLOPs per byte moved (inf for a byte-free op)."""
        b = self.bytes
        return self.flops / b if b else float("inf")

    def as_tuple(self) -> tuple[float, ...]:
        return _QUANTITIES_OF(self)  # type: ignore[no-any-return]

    def __add__(self, other: OpCost) -> OpCost:
        return OpCost(**{q: getattr(self, q) + getattr(other, q) for q in QUANTITIES})

    def scaled(self, k: float) -> OpCost:
        return OpCost(**{q: getattr(self, q) * k for q in QUANTITIES})


_QUANTITIES_OF = attrgetter(*QUANTITIES)
