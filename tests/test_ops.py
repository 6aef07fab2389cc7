"""Formulas against hand calculations (arithmetic in the comments)."""

import pytest

from roofline.errors import SpecError, UnknownNameError
from roofline.ops import OpCost, causal_pairs, conv_out, cost, formula, known_kinds, register


def test_linear_hand_count():
    c = cost("linear", batch=2, tokens=3, d_in=4, d_out=5, bias=True, act_bytes=2, weight_bytes=2)
    assert c.flops == 2 * 2 * 3 * 4 * 5 + 2 * 3 * 5  # 240 MAC-FLOPs + 30 bias adds = 270
    assert c.weight_bytes_read == (4 * 5 + 5) * 2  # W and bias: 25 params × 2 B = 50
    assert c.act_bytes_read == 2 * 3 * 4 * 2  # X: 24 elements × 2 B = 48
    assert c.act_bytes_written == 2 * 3 * 5 * 2  # Y: 30 elements × 2 B = 60
    assert c.bytes == 158 and c.arithmetic_intensity == pytest.approx(270 / 158)


def test_conv_resnet_stem():
    # 7×7/2 conv, pad 3, 3→64 channels at 224²: H' = (224 + 6 − 6 − 1)//2 + 1 = 112
    assert conv_out(224, 7, 2, 3, 1) == 112
    c = cost("conv2d", batch=1, c_in=3, h=224, w=224, c_out=64, kernel=7, stride=2, padding=3,
             act_bytes=2, weight_bytes=2)
    macs = 64 * 112 * 112 * 3 * 7 * 7  # 118,013,952
    assert c.flops == 2 * macs
    assert c.weight_bytes_read == 64 * 3 * 49 * 2  # 9,408 weights
    assert c.act_bytes_read == 3 * 224 * 224 * 2 and c.act_bytes_written == 64 * 112 * 112 * 2


def test_depthwise_conv_counts_per_group():
    # depthwise 3×3 over 32 channels at 8²: each output sees 1 channel × 9 taps
    c = cost("conv2d", batch=1, c_in=32, h=8, w=8, c_out=32, kernel=3, padding=1, groups=32,
             act_bytes=1, weight_bytes=1)
    assert c.flops == 2 * 32 * 8 * 8 * 9  # 36,864
    assert c.weight_bytes_read == 32 * 9


def test_causal_pairs():
    assert causal_pairs(4, 4) == 10  # 1 + 2 + 3 + 4
    assert causal_pairs(1, 10) == 10  # one decode query sees the whole context
    assert causal_pairs(2, 5) == 9  # queries at positions 3, 4 see 4 and 5 keys


def test_attention_flops_and_bytes():
    kw = dict(batch=1, n_heads=2, n_kv_heads=1, head_dim=8, act_bytes=2)
    causal = cost("attention", q_len=4, kv_len=4, causal=True, **kw)
    assert causal.flops == 4 * 1 * 2 * 10 * 8  # 4·B·N·pairs·H = 640
    full = cost("attention", q_len=4, kv_len=4, causal=False, **kw)
    assert full.flops == 4 * 2 * 16 * 8  # 1024
    # bytes: Q [4,2,8] and O [4,2,8] in/out, K and V [4,1,8] each, 2 B per element
    assert full.act_bytes_read == (4 * 2 * 8 + 2 * 4 * 1 * 8) * 2
    assert full.act_bytes_written == 4 * 2 * 8 * 2


def test_decode_is_attention_with_t1():
    kw = dict(batch=3, n_heads=8, n_kv_heads=2, head_dim=64, act_bytes=2, kv_bytes=1)
    d = cost("attention", q_len=1, kv_len=100, kv_from_cache=True, **kw)
    assert d.flops == 4 * 3 * 8 * 100 * 64
    assert d.kv_bytes_read == 3 * 100 * 2 * (64 + 64) * 1  # K and V of 2 KV heads, fp8
    assert d.act_bytes_read == 3 * 1 * 8 * 64 * 2  # only Q is an activation


def test_gqa_reads_shared_kv_once():
    mha = cost("attention", batch=1, n_heads=8, n_kv_heads=8, head_dim=16, q_len=1, kv_len=64,
               kv_from_cache=True, act_bytes=2)
    gqa = cost("attention", batch=1, n_heads=8, n_kv_heads=2, head_dim=16, q_len=1, kv_len=64,
               kv_from_cache=True, act_bytes=2)
    assert mha.flops == gqa.flops
    assert mha.kv_bytes_read == 4 * gqa.kv_bytes_read


def test_sliding_window_caps_pairs():
    c = cost("attention", batch=1, n_heads=1, n_kv_heads=1, head_dim=4, q_len=1, kv_len=1000,
             window=100, kv_from_cache=True, act_bytes=2)
    assert c.flops == 4 * 100 * 4  # only the 100 most recent keys
    assert c.kv_bytes_read == 100 * 2 * 4 * 2


def test_elementwise_and_norm_costs():
    g = cost("elementwise", batch=2, elements=10, op="gelu_tanh", act_bytes=2)
    assert g.flops == 9 * 20 and g.act_bytes_read == 40 and g.act_bytes_written == 40
    a = cost("elementwise", batch=1, elements=10, op="add", act_bytes=4)
    assert a.act_bytes_read == 2 * 10 * 4  # two inputs
    n = cost("norm", batch=1, elements=12, features=4, variant="rmsnorm", act_bytes=2,
             weight_bytes=2)
    assert n.flops == 4 * 12 and n.weight_bytes_read == 4 * 2
    bn = cost("norm", batch=1, elements=12, features=4, variant="batchnorm", act_bytes=2,
              weight_bytes=2)
    assert bn.weight_bytes_read == 4 * 4 * 2  # γ, β, running mean and variance


def test_embedding_reads_only_gathered_rows():
    e = cost("embedding", batch=2, tokens=5, dim=8, weight_bytes=2, act_bytes=2)
    assert e.flops == 0
    assert e.weight_bytes_read == 2 * 5 * 8 * 2 and e.act_bytes_read == 2 * 5 * 8  # int64 ids


def test_pool_and_views():
    p = cost("pool2d", batch=1, channels=64, h=112, w=112, kernel=3, stride=2, padding=1,
             act_bytes=2)
    assert p.flops == 9 * 64 * 56 * 56
    assert cost("view").bytes == 0 and cost("view").flops == 0
    c = cost("copy", batch=2, elements=7, act_bytes=2)
    assert c.flops == 0 and c.bytes == 2 * 7 * 2 * 2


def test_registry_refuses_unknown_and_duplicates():
    with pytest.raises(UnknownNameError, match="linear"):
        formula("linaer")
    with pytest.raises(ValueError, match="already registered"):
        register("linear", "matmul")(lambda **k: OpCost())
    assert {"linear", "conv2d", "attention", "softmax", "embedding"} <= set(known_kinds())


@pytest.mark.parametrize("bad", [dict(batch=0), dict(tokens=-1), dict(d_in=2.5)])
def test_bad_shapes_name_the_field(bad):
    kw = dict(batch=1, tokens=1, d_in=2, d_out=2, act_bytes=2, weight_bytes=2) | bad
    with pytest.raises(SpecError, match=next(iter(bad))):
        cost("linear", **kw)


def test_attention_rejects_bad_gqa():
    with pytest.raises(SpecError, match="n_kv_heads"):
        cost("attention", batch=1, n_heads=8, n_kv_heads=3, head_dim=4, q_len=1, kv_len=2,
             act_bytes=2)


def test_opcost_rejects_negative():
    with pytest.raises(ValueError):
        OpCost(flops=-1)


def test_norm_without_affine_parameters():
    kw = dict(batch=1, elements=12, features=4, act_bytes=2, weight_bytes=2)
    assert cost("norm", variant="layernorm", affine=False, **kw).weight_bytes_read == 0
    # batch norm keeps its running mean and variance: 2 × 4 channels × 2 B
    assert cost("norm", variant="batchnorm", affine=False, **kw).weight_bytes_read == 16


def test_more_elementwise_ops_have_costs():
    for op in ("erf", "log", "rsqrt", "leaky_relu", "compare"):
        assert cost("elementwise", batch=1, elements=3, op=op, act_bytes=4).flops > 0


# -- general conv and pool, variance, cumsum, sort, top-k -------------------------------------

@pytest.mark.parametrize("kw", [
    dict(c_in=3, h=224, w=224, c_out=64, kernel=7, stride=2, padding=3),
    dict(c_in=32, h=9, w=7, c_out=32, kernel=(3, 1), padding=1, groups=32, bias=True),
    dict(c_in=8, h=10, w=12, c_out=4, kernel=(2, 3), stride=3, dilation=2, groups=2),
    dict(c_in=4, h=1, w=17, c_out=6, kernel=(1, 5), stride=2, bias=True),
])
def test_conv_equals_conv2d_where_conv2d_applies(kw):
    k = kw["kernel"]
    kk = (k, k) if isinstance(k, int) else k
    general = {key: v for key, v in kw.items() if key not in ("h", "w", "kernel")}
    a = cost("conv2d", batch=3, act_bytes=2, weight_bytes=1, **kw)
    b = cost("conv", batch=3, act_bytes=2, weight_bytes=1, spatial=(kw["h"], kw["w"]),
             kernel=kk, **general)
    assert a == b


def test_conv3d_per_axis_hand_count():
    # Conv3d 6 -> 4, kernel (1, 3, 3), stride (1, 2, 1), padding (0, 1, 2), dilation (1, 1, 2)
    # on [2, 6, 1, 14, 10]: D' = 1; H' = (14 + 2 − 2 − 1)//2 + 1 = 7;
    # W' = (10 + 4 − 2·2 − 1)//1 + 1 = 10
    c = cost("conv", batch=2, c_in=6, spatial=(1, 14, 10), c_out=4, kernel=(1, 3, 3),
             stride=(1, 2, 1), padding=(0, 1, 2), dilation=(1, 1, 2), bias=True,
             act_bytes=4, weight_bytes=4)
    # 2·B·C'·ΠX'·C·Πk = 2·2·4·70·6·9 = 60,480 (FlopCounterMode's count) + bias B·C'·ΠX' = 560
    assert c.flops == 60_480 + 560
    assert c.weight_bytes_read == (4 * 6 * 9 + 4) * 4  # 220 weights
    assert c.act_bytes_read == 2 * 6 * 140 * 4 and c.act_bytes_written == 2 * 4 * 70 * 4


def test_transposed_conv_hand_count():
    # ConvTranspose2d 4 -> 6, kernel (3, 2), stride (2, 1), padding (1, 0), output_padding
    # (1, 0), groups 2 on [2, 4, 7, 9]: H' = (7−1)·2 − 2 + (3−1) + 1 + 1 = 14; W' = 8 + 1 + 1 = 10
    c = cost("conv", batch=2, c_in=4, spatial=(7, 9), c_out=6, kernel=(3, 2), stride=(2, 1),
             padding=(1, 0), output_padding=(1, 0), groups=2, bias=True, transposed=True,
             act_bytes=4, weight_bytes=4)
    # every input element times its group's C'/g·Πk weights: 2·B·C·ΠX·(C'/g)·Πk
    # = 2·2·4·63·3·6 = 18,144 (FlopCounterMode's count) + bias adds B·C'·H'·W' = 2·6·140 = 1,680
    assert c.flops == 18_144 + 1_680
    assert c.weight_bytes_read == (4 * 3 * 6 + 6) * 4  # weight [C, C'/g, 3, 2] = 72, bias 6
    assert c.act_bytes_written == 2 * 6 * 14 * 10 * 4
    with pytest.raises(SpecError, match="output_padding"):
        cost("conv", batch=1, c_in=1, spatial=(4,), c_out=1, kernel=3, output_padding=2,
             stride=2, transposed=True, act_bytes=1, weight_bytes=1)
    with pytest.raises(SpecError, match="kernel"):
        cost("conv", batch=1, c_in=1, spatial=(4, 4), c_out=1, kernel=(3, 3, 3), act_bytes=1,
             weight_bytes=1)


@pytest.mark.parametrize("kw", [dict(h=112, w=112, kernel=3, stride=2, padding=1),
                                dict(h=7, w=9, kernel=2), dict(h=8, w=8, kernel=3, stride=1)])
def test_pool_equals_pool2d_where_pool2d_applies(kw):
    a = cost("pool2d", batch=2, channels=5, act_bytes=2, **kw)
    rest = {k: v for k, v in kw.items() if k not in ("h", "w")}
    assert a == cost("pool", batch=2, channels=5, spatial=(kw["h"], kw["w"]), act_bytes=2,
                     **rest)


def test_pool_ceil_mode_and_per_axis_hand_count():
    # MaxPool kernel (3, 2), stride (2, 1), ceil_mode on 14×10:
    # H' = ceil((14 − 3)/2) + 1 = 7 (its last window starts at 12 < 14: kept); W' = 9
    c = cost("pool", batch=2, channels=6, spatial=(14, 10), kernel=(3, 2), stride=(2, 1),
             ceil_mode=True, act_bytes=4)
    assert c.flops == 2 * 6 * 7 * 9 * 6  # Πk = 6 comparisons per output: 4,536
    assert c.act_bytes_written == 2 * 6 * 63 * 4
    # floor mode: H' = (14 − 3)//2 + 1 = 6
    assert cost("pool", batch=1, channels=1, spatial=(14, 10), kernel=(3, 2), stride=(2, 1),
                act_bytes=4).flops == 6 * 9 * 6
    # ceil mode drops a window that would start in the right padding: X = 5, k = 2, s = 2,
    # p = 1: ceil((5 + 2 − 2)/2) + 1 = 4, but window 4 starts at 6 >= 5 + 1: 3 outputs
    assert cost("pool", batch=1, channels=1, spatial=(5,), kernel=2, stride=2, padding=1,
                ceil_mode=True, act_bytes=4).act_bytes_written == 3 * 4
    # ... which ONNX shape inference (onnx 1.23) keeps: 4 outputs, 2 adds each
    kept = cost("pool", batch=1, channels=1, spatial=(5,), kernel=2, stride=2, padding=1,
                ceil_mode=True, drop_last_window=False, act_bytes=4)
    assert kept.act_bytes_written == 4 * 4 and kept.flops == 4 * 2


def test_variance_hand_count():
    # var over rows of 10: 168 rows; 4 FLOPs/element (mean add; sub, square, accumulate)
    # + 2 divides per row: 4·1,680 + 2·168 = 7,056
    v = cost("variance", batch=2, rows=84, row_len=10, act_bytes=4)
    assert v.flops == 4 * 1_680 + 2 * 168
    assert v.act_bytes_read == 1_680 * 4 and v.act_bytes_written == 168 * 4
    # std adds a square root per row; std_mean also writes the mean
    s = cost("variance", batch=2, rows=84, row_len=10, std=True, with_mean=True, act_bytes=4)
    assert s.flops == 4 * 1_680 + 3 * 168 and s.act_bytes_written == 2 * 168 * 4


def test_cumsum_sort_topk_hand_counts():
    # cumsum along rows of 6, 14·10·2 = 280 rows: 5 adds per row = 1,400
    c = cost("cumsum", batch=2, rows=140, row_len=6, act_bytes=2)
    assert c.flops == 280 * 5 and c.act_bytes_read == c.act_bytes_written == 1_680 * 2
    # sort rows of 8: 8·log2 8 = 24 comparisons per row; values (2 B) and int64 indices written
    s = cost("sort", batch=3, rows=5, row_len=8, act_bytes=2)
    assert s.flops == 15 * 24
    assert s.act_bytes_read == 15 * 8 * 2 and s.act_bytes_written == 15 * 8 * (2 + 8)
    # top-4 of rows of 16: 16 comparisons to select + 4·log2 4 = 8 to sort the 4 = 24 per row
    t = cost("topk", batch=3, rows=5, row_len=16, k=4, act_bytes=2)
    assert t.flops == 15 * 24 and t.act_bytes_written == 15 * 4 * (2 + 8)
    assert cost("topk", batch=3, rows=5, row_len=16, k=4, sorted=False,
                act_bytes=2).flops == 15 * 16
    # k = 1 is a max (n comparisons); k = n is a full sort
    assert cost("topk", batch=1, rows=1, row_len=16, k=1, act_bytes=2).flops == 16
    assert cost("topk", batch=3, rows=5, row_len=8, k=8, act_bytes=2) == s
    with pytest.raises(SpecError, match="k=9"):
        cost("topk", batch=1, rows=1, row_len=8, k=9, act_bytes=2)


def test_fusion_closeness_is_numpys_allclose_on_scalars() -> None:
    """graphs.fusion._close: np.allclose of two scalars (rtol 1e-5, atol 1e-8), by hand."""
    import numpy as np

    from roofline.graphs.fusion import _close

    inf, nan = float("inf"), float("nan")
    cases = [(1.0, 1.0 + 9e-6, True), (1.0, 1.0 + 2e-5, False), (0.0, 9e-9, True),
             (0.0, 2e-8, False), (1e10, 1e10 * (1 + 9e-6), True), (inf, inf, True),
             (inf, -inf, False), (inf, 1e308, False), (nan, nan, False), (2.0, nan, False)]
    for a, b, want in cases:
        assert _close(a, b) is want, (a, b)
        assert bool(np.allclose(a, b)) is want, (a, b)


def test_opcost_checks_every_quantity_and_lists_them_in_order() -> None:
    from roofline.ops.cost import QUANTITIES, OpCost

    c = OpCost(**{q: float(i + 1) for i, q in enumerate(QUANTITIES)}, gemm=(1.0, 2.0, 3.0))
    assert c.as_tuple() == tuple(float(i + 1) for i in range(len(QUANTITIES)))
    for q in QUANTITIES:
        with pytest.raises(ValueError, match=f"OpCost.{q} must be >= 0"):
            OpCost(**{q: -1.0})
