"""dynamic_shapes= in torch.export's format: the batch named by a Dim, checked by
torch.export.export, with the fall back to re-tracing when export refuses it."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.export import Dim  # noqa: E402

from roofline.errors import SpecError  # noqa: E402
from roofline.graphs.importers.torch_import import from_torch  # noqa: E402


class _SeqFirst(nn.Module):
    """(S, B, 16) tokens through a 16 -> 8 linear, then summed over the sequence."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).sum(0)


class _FixedBatch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).reshape(2, -1)  # specialises the batch to 2


def test_batch_from_a_dim_accepted_by_export() -> None:
    x = torch.empty(10, 3, 16)
    m = from_torch(_SeqFirst(), (x,), dynamic_shapes=({1: Dim("batch")},))
    assert m.batch_dims == (1,) and m.batch_dims_given
    assert any("accepted by torch.export" in n for n in m.notes)
    # batch 4: 4 sequences of 10 tokens through 16x8: 2·40·16·8 matmul FLOPs
    g = m.graph(precision="fp32")
    i = g.kinds.index("linear")
    assert g.op_cost(i, 4).flops == 2 * 4 * 10 * 16 * 8
    # the per-dimension form and a dict keyed by forward's argument names say the same
    m2 = from_torch(_SeqFirst(), (x,), dynamic_shapes={"x": (None, Dim("b"), None)})
    assert m2.batch_dims == (1,)


def test_export_refusal_falls_back_to_retracing() -> None:
    m = from_torch(_FixedBatch(), (torch.empty(2, 8),), dynamic_shapes=({0: Dim("batch")},))
    assert any("torch.export refused" in n and "re-tracing" in n for n in m.notes)
    assert m.batch_dims == (0,) and not m.batch_dims_given


def test_bad_dynamic_shapes() -> None:
    x = torch.empty(10, 3, 16)
    with pytest.raises(SpecError, match="which is the batch"):
        from_torch(_SeqFirst(), (x,), dynamic_shapes=({0: Dim("s"), 1: Dim("n")},))
    with pytest.raises(SpecError, match="not both"):
        from_torch(_SeqFirst(), (x,), batch_dim=1, dynamic_shapes=({1: Dim("batch")},))
    with pytest.raises(SpecError, match="2 entries for 1 inputs"):
        from_torch(_SeqFirst(), (x,), dynamic_shapes=({1: Dim("batch")}, None))
    with pytest.raises(SpecError, match="marks no dimension"):
        from_torch(_SeqFirst(), (x,), dynamic_shapes=(None,))
    with pytest.raises(SpecError, match="not inputs of"):
        from_torch(_SeqFirst(), (x,), dynamic_shapes={"y": {0: Dim("batch")}})
