"""DLRM (Naumov et al. 2019): dense features through a bottom MLP, sparse features through
embedding bags, their pairwise dot products, and a top MLP, as ``dlrm_s_pytorch.py`` builds it
(``arch-interaction-op=dot``, the self-interactions excluded)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import SpecError
from ..specs.dtypes import Precision
from .graph import Graph, GraphBuilder

__all__ = ["dlrm"]


def dlrm(precision: Precision, *, dense: int = 13, tables: Sequence[int] = (),
         dim: int = 128, bottom: Sequence[int] = (512, 256, 128),
         top: Sequence[int] = (1024, 1024, 512, 256, 1), lookups: int = 1) -> Graph:
    """One DLRM forward pass per sample: bottom MLP ``dense -> bottom`` (ReLU), one embedding
    bag per table (``lookups`` rows each, summed), the dot interaction of the T + 1 vectors
    (a [T+1, D]·[D, T+1] product, its T(T+1)/2 strictly-lower entries kept and concatenated
    with the bottom output), top MLP ending in a sigmoid."""
    if not tables:
        raise SpecError("dlrm: tables (the rows of each embedding table) is required")
    if bottom[-1] != dim:
        raise SpecError(f"dlrm: the bottom MLP must end at the embedding dim {dim}, got "
                        f"{bottom[-1]}")
    b = GraphBuilder("dlrm", "forward", precision)
    d_in = dense
    for i, w in enumerate(bottom):
        b.add("linear", f"bot_l.{2 * i}", params=d_in * w + w, tokens=1, d_in=d_in, d_out=w,
              bias=True)
        b.add("elementwise", f"bot_l.{2 * i + 1}", elements=w, op="relu")
        d_in = w
    T = len(tables)
    b.add("embedding_bag", "emb_l", params=sum(int(r) for r in tables) * dim, tables=T,
          lookups=lookups, dim=dim)
    n = T + 1
    b.add("copy", "interact.cat", elements=n * dim)
    b.add("matmul", "interact.bmm", m=n, k=dim, n=n)
    pairs = n * (n - 1) // 2
    b.add("copy", "interact.tril_cat", elements=pairs + dim)
    d_in = pairs + dim
    for i, w in enumerate(top):
        b.add("linear", f"top_l.{2 * i}", params=d_in * w + w, tokens=1, d_in=d_in, d_out=w,
              bias=True)
        last = i == len(top) - 1
        b.add("elementwise", f"top_l.{2 * i + 1}", elements=w, op="sigmoid" if last else "relu")
        d_in = w
    return b.build()
