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
