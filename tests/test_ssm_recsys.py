"""Selective scan (Mamba) and embedding bag (DLRM): formulas against hand counts, and the zoo
models built on them against their configs and published sizes."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.graph import Q
from roofline.ops import cost


def test_selective_scan_hand_count():
    c = cost("selective_scan", batch=2, seq_len=3, channels=4, state=5, gated=True,
             act_bytes=2, weight_bytes=2)
    # FLOPs: B·L·D·(7·N + 3 + 5) = 2·3·4·(35 + 3 + 5) = 24·43 = 1,032
    assert c.flops == 1_032
    # reads x, Δ, z [2,3,4] and B, C [2,3,5] at 2 bytes: (3·24 + 2·30)·2 = 264; A, D: (20+4)·2
    assert c.act_bytes_read == 264 and c.weight_bytes_read == 48
    assert c.act_bytes_written == 2 * 3 * 4 * 2  # y
    assert c.kv_bytes_read == 0
    d = cost("selective_scan", batch=2, seq_len=1, channels=4, state=5, gated=False,
             state_from_cache=True, act_bytes=2, weight_bytes=2)
    # a decode step: 2·1·4·(35 + 3) = 304 FLOPs; the fp32 state [2,4,5] read and written
    assert d.flops == 304 and d.kv_bytes_read == d.kv_bytes_written == 2 * 4 * 5 * 4


def test_embedding_bag_hand_count():
    c = cost("embedding_bag", batch=4, tables=26, lookups=3, dim=128, weight_bytes=4,
             act_bytes=4)
    # gathers 4·26·3 = 312 rows of 128 fp32: 159,744 B; indices 312·8 = 2,496 B
    assert c.weight_bytes_read == 312 * 128 * 4 and c.act_bytes_read == 312 * 8
    # sums 3 rows into 1: 2 adds per element of each [4, 26, 128] output
    assert c.flops == 4 * 26 * 2 * 128 and c.act_bytes_written == 4 * 26 * 128 * 4
    assert cost("embedding_bag", batch=1, tables=1, lookups=1, dim=8, weight_bytes=2,
                act_bytes=2).flops == 0  # one row: a pure gather
    with pytest.raises(SpecError, match="sum, mean"):
        cost("embedding_bag", batch=1, tables=1, lookups=2, dim=8, weight_bytes=2,
             act_bytes=2, mode="max")


def _mamba_params(D, L, V=50280, N=16, k=4, E=2):
    Di, R = E * D, -(-D // 16)
    per_layer = (D * 2 * Di + (Di * k + Di) + Di * (R + 2 * N) + (R * Di + Di)
                 + (Di * N + Di) + Di * D + D)  # in, conv, x, dt, A and D, out, norm
    return V * D + L * per_layer + D


def test_mamba_params_match_config_and_published_size():
    m = rl.model("mamba-130m")
    # 50,280 x 768 tied embedding + 24 x 3,771,648 + the final norm = 129,135,360
    assert m.params == _mamba_params(768, 24) == 129_135_360
    assert m.params == pytest.approx(m.published["params"].value, rel=0.01)
    big = rl.model("mamba-2.8b")
    assert big.params == _mamba_params(2560, 64) == 2_768_345_600
    assert big.params == pytest.approx(big.published["params"].value, rel=0.02)


def test_mamba_prefill_flops_and_constant_decode_state():
    m = rl.model("mamba-130m")
    g = m.graph(precision="bf16", phase="prefill", seq_len=1024)
    lin = sum(g.c1[Q["flops"], i] for i, k in enumerate(g.kinds) if k == "linear"
              and g.names[i] != "lm_head")
    # every per-layer projection's weights used once per token: 2 FLOPs x 24 x
    # (1,179,648 + 122,880 + 73,728 + 1,179,648) per token + the dt_proj bias adds
    per_tok = 2 * 24 * (768 * 3072 + 1536 * 80 + 48 * 1536 + 1536 * 768) + 24 * 1536
    assert lin == pytest.approx(1024 * per_tok, rel=1e-9)
    d1 = rl.solve(m, "h100-sxm5", batch=1, phase="decode", context=512, precision="bf16")
    d2 = rl.solve(m, "h100-sxm5", batch=1, phase="decode", context=8192, precision="bf16")
    # the recurrent state does not grow with the context (24 x (1536 x 16 x 4 + 1536 x 3 x 2))
    assert d1.memory_breakdown["kv_cache"] == d2.memory_breakdown["kv_cache"] == 2_580_480
    assert d1.latency == pytest.approx(d2.latency)


def test_dlrm_hand_count_and_memory_bound_lookups():
    m = rl.model("dlrm-mlperf")
    rows = [39884406, 39043, 17289, 7420, 20263, 3, 7120, 1543, 63, 38532951, 2953546, 403346,
            10, 2208, 11938, 155, 4, 976, 14, 39979771, 25641295, 39664984, 585935, 12972,
            108, 36]
    bottom = (13 * 512 + 512) + (512 * 256 + 256) + (256 * 128 + 128)  # 171,392
    # top: the 27 vectors' 27·26/2 = 351 dot products + the 128-d bottom output = 479 inputs
    top = (479 * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 512 + 512) \
        + (512 * 256 + 256) + (256 + 1)  # 2,197,505
    assert m.params == sum(rows) * 128 + bottom + top  # 24,036,595,969
    g = m.graph(precision="fp32")
    i = g.names.index("emb_l")
    # per sample the bags read 26 rows of 128 fp32 = 13,312 B and do no arithmetic
    assert g.c1[Q["weight_bytes_read"], i] == 26 * 128 * 4 and g.c1[Q["flops"], i] == 0
    r = rl.solve(m, "h100-sxm5", batch=1, precision="fp16")
    assert r.feasible  # 48 GB of fp16 tables fit 80 GiB
    assert not rl.solve(m, "l4", batch=1, precision="fp16").feasible  # ... not 24 GB


def test_backward_rules_cover_the_new_ops():
    from roofline.graphs.backward import BACKWARD_RULES

    assert BACKWARD_RULES["selective_scan"] == "pointwise"
    assert BACKWARD_RULES["embedding_bag"] == "embedding"
