"""PyTorch imports: the batch dimension found by tracing (or given), PyTorch's fused
transformer fast paths priced with the formulas they fuse, unpriced ops carried as warnings."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

import roofline as rl  # noqa: E402
from roofline.errors import ImportGraphError, SpecError  # noqa: E402
from roofline.graphs.importers.torch_import import from_torch  # noqa: E402

E, N, F, L = 64, 4, 128, 2  # embed, heads, feed-forward width, layers


def _encoder(batch_first: bool) -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(E, N, F, batch_first=batch_first, dropout=0.0)
    return nn.TransformerEncoder(layer, L, enable_nested_tensor=False).eval()


def _hand_flops_per_sample(T: int) -> int:
    """One sample of T tokens through L post-norm layers (ReLU), 2 FLOPs per multiply-add."""
    linears = 2 * T * (E * 3 * E + E * E + E * F + F * E)  # qkv, out_proj, linear1, linear2
    biases = T * (3 * E + E + F + E)  # one add per output
    attention = 4 * T * T * E  # 4·N·T·S·H with N·H = E, non-causal
    norms = 2 * 8 * T * E  # two layer norms, 8 FLOPs per element
    adds_relu = 2 * T * E + T * F  # two residual adds, one ReLU
    return L * (linears + biases + attention + norms + adds_relu)


def test_seq_first_encoder_finds_batch_dim_1() -> None:
    """nn.TransformerEncoder's default (S, B, E) layout: the batch is dim 1, not 0."""
    T, B = 32, 2
    m = from_torch(_encoder(False), torch.randn(T, B, E))
    assert m.batch_dims == (1,) and m.traced_batch == B and not m.batch_dependent
    assert "batch: dim 1 of input 0 (found by tracing" in str(m)
    flops = m.graph(precision="fp32").cost(8).flops
    assert flops == 8 * _hand_flops_per_sample(T)
    # the batch-first layout (PyTorch's fused fast path in eval mode) prices the same work
    fast = from_torch(_encoder(True), torch.randn(B, T, E))
    assert fast.batch_dims == (0,)
    assert fast.graph(precision="fp32").cost(8).flops == flops
    # given explicitly, the same model
    given = from_torch(_encoder(False), torch.randn(T, B, E), batch_dim=1)
    assert given.batch_dims_given and given.graph(precision="fp32").cost(8).flops == flops


def test_fast_path_equals_slow_path_and_flop_counter() -> None:
    """Eval-mode batch-first MHA runs aten._native_multi_head_attention; its records equal
    the slow path's (fast path disabled), whose matmuls FlopCounterMode counts."""
    from torch.utils.flop_counter import FlopCounterMode

    enc = _encoder(True)
    x = torch.randn(2, 16, E)
    fast = from_torch(enc, x)
    kinds = set(fast.graph(precision="fp32").kinds)
    assert fast.unsupported_ops == () and "attention" in kinds
    assert any(n.endswith("self_attn.qkv") for n in fast.graph(precision="fp32").names)
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        slow = from_torch(enc, x)
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            enc(x)
    finally:
        torch.backends.mha.set_fastpath_enabled(True)
    gf, gs = fast.graph(precision="fp32"), slow.graph(precision="fp32")
    assert gf.cost(2).flops == gs.cost(2).flops == 2 * _hand_flops_per_sample(16)
    # FlopCounterMode counts the four GEMMs per layer (no bias adds, no FLOPs for CPU SDPA):
    # L·2·B·T·(4E² + 2EF), the GEMM part of the hand count
    assert fc.get_total_flops() == L * 2 * 2 * 16 * (4 * E * E + 2 * E * F)


def test_mha_need_weights_and_cross_attention() -> None:
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(E, N, batch_first=True).eval()

    class Cross(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = mha

        def forward(self, q: torch.Tensor, kv: torch.Tensor) -> torch.Tensor:
            a = self.mha  # PyTorch takes the fast path for self-attention only: call it here
            return torch._native_multi_head_attention(
                q, kv, kv, E, N, a.in_proj_weight, a.in_proj_bias, a.out_proj.weight,
                a.out_proj.bias, None, True, True)[0]

    T, S, B = 8, 24, 3
    m = from_torch(Cross(), (torch.randn(B, T, E), torch.randn(B, S, E)))
    g = m.graph(precision="fp32")
    assert m.unsupported_ops == () and m.batch_dims == (0, 0)
    assert [n.split(".")[-1] for n in g.names] == [
        "q_proj", "k_proj", "v_proj", "scores", "softmax", "context", "average", "out_proj"]
    # projections 2·(T + 2S)·E·E + biases (T + 2S)·E; scores and context 2·2·N·T·S·H;
    # softmax 5·N·T·S; head average N·T·S; out_proj 2·T·E·E + T·E   (per sample)
    per = (2 * (T + 2 * S) * E * E + (T + 2 * S) * E + 4 * T * S * E + 5 * N * T * S
           + N * T * S + 2 * T * E * E + T * E)
    assert g.cost(B).flops == B * per
    assert m.params == 4 * E * E + 4 * E  # in_proj [3E, E] + bias, out_proj + bias, once


class _Fused(nn.Module):
    def __init__(self, layer: nn.Module, gelu: bool, norm_first: bool) -> None:
        super().__init__()
        self.layer, self.gelu, self.norm_first = layer, gelu, norm_first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ly = self.layer
        return torch._transformer_encoder_layer_fwd(
            x, E, N, ly.self_attn.in_proj_weight, ly.self_attn.in_proj_bias,
            ly.self_attn.out_proj.weight, ly.self_attn.out_proj.bias, self.gelu,
            self.norm_first, ly.norm1.eps, ly.norm1.weight, ly.norm1.bias, ly.norm2.weight,
            ly.norm2.bias, ly.linear1.weight, ly.linear1.bias, ly.linear2.weight,
            ly.linear2.bias, None, None)


def test_encoder_layer_fast_path_op() -> None:
    """aten._transformer_encoder_layer_fwd (the whole-layer kernel; our hooks keep
    nn.TransformerEncoderLayer itself off it, so it is called directly here) equals the
    layer's slow path, pre-norm and post-norm, ReLU and GELU."""
    for norm_first, act in ((False, "relu"), (True, "gelu")):
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(E, N, F, batch_first=True, norm_first=norm_first,
                                           activation=act, dropout=0.0).eval()

        x = torch.randn(2, 16, E)
        fused = from_torch(_Fused(layer, act == "gelu", norm_first), x)
        assert fused.unsupported_ops == ()
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            slow = from_torch(layer, x)
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
        gf, gs = fused.graph(precision="fp32"), slow.graph(precision="fp32")
        assert gf.cost(4).flops == gs.cost(4).flops
        n_params = sum(p.numel() for p in layer.parameters())
        assert fused.params == slow.params == n_params
        assert gf.cost(4).weight_bytes_read == 4 * n_params  # every weight read once, fp32
        names = [n.split(".")[-1] for n in gf.names]
        assert names[0] == ("norm1" if norm_first else "qkv") and "activation" in names


class _Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class _MixesEverything(nn.Module):
    """Attention over both leading dims of a (T, T', E) input: no dimension is a batch (E
    meets a weight)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.fc(x)
        a = torch.softmax(x @ x.transpose(-1, -2), -1) @ x  # mixes along dim 1
        b = torch.softmax(x.transpose(0, 1) @ x.transpose(0, 1).transpose(-1, -2), -1)
        return a.sum() + b.sum()


def test_batch_dim_errors() -> None:
    x = torch.randn(4, 16)
    for bad in (2, -1, True, "0", (0, 1)):
        with pytest.raises(SpecError, match="batch_dim"):
            from_torch(_Mlp(), x, batch_dim=bad)
    with pytest.raises(SpecError, match="seq_dim"):
        from_torch(_Mlp(), torch.randn(2, 8, 16), batch_dim=1, seq_dim=1)
    with pytest.raises(ImportGraphError, match="cannot find the batch dimension.*batch_dim="):
        from_torch(_MixesEverything(), torch.randn(6, 5, 8))
    # a batch dim given per input: the second input is not batched
    m = from_torch(nn.Bilinear(16, 16, 4), (torch.randn(3, 16), torch.randn(3, 16)),
                   batch_dim=(0, 0))
    assert m.batch_dims == (0, 0)


def test_unpriced_ops_are_warnings_on_every_result() -> None:
    class Scan(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cumprod(self.fc(x), 1)

    m = from_torch(Scan(), torch.randn(2, 16))
    r = rl.solve(m, "H100", batch=8, precision="fp32")
    (w,) = r.warnings
    # at the traced batch 2, fp32: cumprod touches 2·16 in + 2·16 out elements = 256 B; the
    # linear reads 2·16·4 = 128 B, writes 128 B, reads (16·16 + 16)·4 = 1,088 B of weights:
    # 256 / (1,344 + 256) = 16.0 %
    assert w.startswith("1 ops unpriced (16.0 % of bytes") and "aten.cumprod" in w
    flat = " ".join(str(r).split())  # the printout wraps its prose at 100 characters
    assert f"WARNING {w}" in flat and r.to_dict()["warnings"] == [w]
    assert rl.sweep(m, "H100", batch=[1, 2], precision="fp32").warnings == (w,)
    clean = rl.solve(from_torch(_Mlp(), torch.randn(2, 16)), "H100", batch=8)
    assert clean.warnings == () and "WARNING" not in str(clean)


def test_docs_transformer_encoder_figure() -> None:
    """docs/import.md: the (S, B, E) encoder of the issue, 40.36 GFLOP for 8 sequences."""
    with torch.device("meta"):
        layer = nn.TransformerEncoderLayer(512, 8, 2048)
        enc = nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
    m = rl.model(enc, example_inputs=(torch.empty(128, 2, 512),))
    assert m.batch_dims == (1,)
    flops = m.graph(precision="fp32").cost(8).flops
    # per layer and sequence of T = 128: GEMMs 2·T·(4·512² + 2·512·2048) = 805,306,368,
    # biases T·(4·512 + 2048 + 512) = 589,824, attention 4·T²·512 = 33,554,432,
    # norms 16·T·512 = 1,048,576, adds and ReLU T·(2·512 + 2048) = 393,216
    per_layer = 805_306_368 + 589_824 + 33_554_432 + 1_048_576 + 393_216
    assert flops == 8 * 6 * per_layer and round(flops / 1e9, 2) == 40.36


@pytest.mark.parametrize("train", [True, False])
def test_slow_path_mha_weight_bytes_do_not_grow_with_the_batch(train: bool) -> None:
    """(S, B, E) MultiheadAttention on PyTorch's slow path (need_weights=True, or training):
    every weight is read once per pass, whatever the batch — 4·128·128 + 4·128 = 66,048
    parameters, 132,096 B in fp16 at batch 1 and at batch 4 (issue 16's 871 kB vs 134 kB)."""

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.MultiheadAttention(128, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.a(x, x, x, need_weights=True)[0]

    with torch.device("meta"):
        mod = M()
    m = from_torch(mod.train(train), example_inputs=(torch.empty(16, 2, 128),))
    assert m.batch_dims == (1,)
    g = m.graph(precision="fp16")
    assert [g.cost(b).weight_bytes_read for b in (1, 4)] == [66_048 * 2] * 2
