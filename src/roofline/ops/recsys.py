"""Embedding bags: the sparse-feature lookups of recommendation models (DLRM)."""

from __future__ import annotations

from .cost import OpCost
from .formulas import _ints
from .registry import register

__all__ = ["embedding_bag"]


@register("embedding_bag", "embedding")
def embedding_bag(*, batch: int, tables: int, lookups: int, dim: int, weight_bytes: float,
                  act_bytes: float, index_bytes: float = 8.0, mode: str = "sum") -> OpCost:
    """``tables`` embedding bags, each gathering ``lookups`` rows (the pooling factor) of its
    ``[rows, dim]`` table per sample and reducing them to one ``[dim]`` vector
    (``torch.nn.EmbeddingBag``, mode sum or mean).

    FLOPs: B·T·(P − 1)·D adds (+ B·T·D divides for mean). Bytes: the gathered rows only,
    B·T·P·D weights (random rows: no reuse assumed across samples), the B·T·P int64 indices
    (offsets not counted), the ``[B, T, D]`` output once. The gather reads whole rows: a row
    of D·weight_bytes is one contiguous burst, so the byte count is the traffic at full
    bandwidth — real random gathers of short rows reach less (not modelled here).

    References: Naumov et al. 2019, "Deep Learning Recommendation Model for Personalization
    and Recommendation Systems" (arXiv:1906.00091), sec. 2.1 and 4 (embedding lookups are
    memory-bandwidth bound); PyTorch ``torch.nn.EmbeddingBag`` documentation.
    """
    _ints(batch=batch, tables=tables, lookups=lookups, dim=dim)
    if mode not in ("sum", "mean"):
        from ..errors import SpecError

        raise SpecError(f"embedding_bag mode={mode!r}; allowed: sum, mean")
    B, T, P, D = batch, tables, lookups, dim
    rows = B * T * P
    return OpCost(
        flops=B * T * (P - 1) * D + (B * T * D if mode == "mean" else 0),
        weight_bytes_read=rows * D * weight_bytes,
        act_bytes_read=rows * index_bytes,
        act_bytes_written=B * T * D * act_bytes,
    )
