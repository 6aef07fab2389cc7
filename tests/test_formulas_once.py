"""Every formula once (ops/): GEMM dimensions come from the formulas, conv2d/pool2d are conv/pool,
the optimizer step and Korthikanti's activation memory are formulas, calibrate's vector costs
come from the registry. Each against a hand calculation."""

from __future__ import annotations

import numpy as np
import pytest

from roofline.calibrate.plan import vector_cost
from roofline.errors import SpecError
from roofline.ops import cost, formula
from roofline.ops.training_formulas import (
    activation_bytes_per_token,
    recomputed_layer_input_bytes,
    sp_split,
)


def test_gemm_dims_from_the_formulas() -> None:
    # linear [2, 3, 4] ·_4 [4, 5]: M = B·T = 6, N = F = 5, K = D = 4; 2·6·5·4 = 240 FLOPs
    c = cost("linear", batch=2, tokens=3, d_in=4, d_out=5, act_bytes=2, weight_bytes=2)
    assert c.gemm == (6, 5, 4) and c.flops == 2 * 6 * 5 * 4 == 240
    # batched matmul B=2, G=3, [4, 5] · [5, 6]: M = 2·3·4 = 24
    c = cost("matmul", batch=2, groups=3, m=4, k=5, n=6, act_bytes=2)
    assert c.gemm == (24, 6, 5) and c.flops == 2 * 24 * 6 * 5
    # attention: the score GEMM (B·N·T, S, H) = (1·8·16, 64, 128)
    c = cost("attention", batch=1, n_heads=8, n_kv_heads=2, head_dim=128, q_len=16,
             kv_len=64, act_bytes=2)
    assert c.gemm == (128, 64, 128)
    # conv B=2, C=3 -> C'=4, 8x8, k3 pad 1: 8x8 out; M = 2·64 = 128, N = 4, K = 3·9 = 27;
    # 2·128·4·27 = 27,648 FLOPs
    c = cost("conv", batch=2, c_in=3, spatial=(8, 8), c_out=4, kernel=3, padding=1,
             act_bytes=2, weight_bytes=2)
    assert c.gemm == (128, 4, 27) and c.flops == 27648
    # grouped (g=2, C=4 -> C'=6): M = 1·64·2 = 128, N = 6/2 = 3, K = 2·9 = 18
    c = cost("conv", batch=1, c_in=4, spatial=(8, 8), c_out=6, kernel=3, padding=1, groups=2,
             act_bytes=2, weight_bytes=2)
    assert c.gemm == (128, 3, 18) and c.flops == 2 * 128 * 3 * 18
    # transposed C=4 -> C'=2, 4x4 -> 8x8 (k2 s2): GEMM before col2im (1·16, 2·4, 4)
    c = cost("conv", batch=1, c_in=4, spatial=(4, 4), c_out=2, kernel=2, stride=2,
             transposed=True, act_bytes=2, weight_bytes=2)
    assert c.gemm == (16, 8, 4) and c.flops == 2 * 16 * 8 * 4
    assert cost("softmax", batch=1, elements=10, act_bytes=2).gemm is None


@pytest.mark.parametrize("kw", [dict(kernel=3, padding=1), dict(kernel=(3, 1), stride=2),
                                dict(kernel=5, dilation=2, groups=3, bias=True)])
def test_conv2d_is_conv(kw: dict) -> None:
    shape = dict(batch=2, c_in=6, c_out=9, act_bytes=2, weight_bytes=1)
    a = cost("conv2d", h=17, w=13, **shape, **kw)
    b = cost("conv", spatial=(17, 13), **shape, **kw)
    assert a == b and a.gemm == b.gemm
    assert formula("conv2d").op_class == formula("conv").op_class == "conv"


def test_pool2d_is_pool() -> None:
    # 3x3 max pool, stride 2, pad 1 on 64 channels of 10x10: 5x5 out; 9·64·25 = 14,400 FLOPs
    a = cost("pool2d", batch=1, channels=64, h=10, w=10, kernel=3, stride=2, padding=1,
             act_bytes=4)
    b = cost("pool", batch=1, channels=64, spatial=(10, 10), kernel=3, stride=2, padding=1,
             act_bytes=4)
    assert a == b and a.flops == 14400
    assert cost("pool2d", batch=1, channels=1, h=4, w=4, kernel=2, act_bytes=4) == \
        cost("pool", batch=1, channels=1, spatial=(4, 4), kernel=2, act_bytes=4)  # stride = k
    with pytest.raises(SpecError, match="kernel must be a positive integer"):
        cost("pool2d", batch=1, channels=1, h=4, w=4, kernel=(2, 2), act_bytes=4)


def test_optimizer_step_by_hand() -> None:
    # mixed-precision AdamW, clipping + decay, per parameter: 12 + 3 + 1 = 16 FLOPs;
    # read grad 2·4 + m, v 2·4 + master 4 = 20 B; write m, v 2·4 + master 4 + bf16 copy 2 = 14 B
    c = cost("optimizer_step", params=1e9, optimizer="adamw")
    assert c.flops == 16e9 and c.weight_bytes_read == 20e9 and c.weight_bytes_written == 14e9
    assert c.bytes == 34e9
    assert formula("optimizer_step").op_class == "optimizer"
    # Adam with an L2 term: 12 + 3 + 2 = 17 FLOPs; the same bytes
    assert cost("optimizer_step", params=1, optimizer="adam").flops == 17
    # plain fp32 SGD, no clipping or decay: 2 FLOPs; grad 4 + weights read and written 4 + 4
    c = cost("optimizer_step", params=10, optimizer="sgd", grad_clip=False, weight_decay=False,
             master_weights=False, weight_bytes=4)
    assert (c.flops, c.bytes) == (20, 120)
    # momentum SGD, mixed precision, clip + L2: 4 + 3 + 2 = 9 FLOPs;
    # 2·4 grad + 2·4 buffer + 2·4 master + 2 copy = 26 B
    c = cost("optimizer_step", params=1, optimizer="momentum")
    assert (c.flops, c.bytes) == (9, 26)
    # batch-independent: the graph builder's c1 is zero
    assert cost("optimizer_step", batch=7, params=1) == cost("optimizer_step", params=1)
    with pytest.raises(SpecError, match="optimizer='lion'; allowed: sgd, momentum, adam, adamw"):
        cost("optimizer_step", params=1, optimizer="lion")


def test_training_uses_the_optimizer_formula() -> None:
    from roofline.scenarios.training import ADAM_BYTES_PER_PARAM, ADAM_FLOPS_PER_PARAM

    assert (ADAM_BYTES_PER_PARAM, ADAM_FLOPS_PER_PARAM) == (34.0, 16.0)


def test_korthikanti_table_2_by_hand() -> None:
    """GPT-3 175B (h = 12288, a = 96, s = 2048), per layer and token, 2-byte activations,
    unfused attention with dropout (Korthikanti et al. 2022, Table 2):"""
    kw = dict(d_model=12288, n_heads=96, n_kv_heads=96, head_dim=128, d_ff=4 * 12288,
              gated_mlp=False, seq_len=2048, fused_attention=False, dropout=True)
    # no parallelism: 34h + 5as = 417,792 + 983,040 = 1,400,832 B
    assert activation_bytes_per_token(**kw) == 1_400_832
    # t = 8: 10h + 24h/t + 5as/t = 122,880 + 36,864 + 122,880 = 282,624 B
    assert activation_bytes_per_token(**kw, tp=8) == 282_624
    # t = 8 + sequence parallelism: (34h + 5as)/t = 175,104 B
    assert activation_bytes_per_token(**kw, tp=8, sequence_parallel=True) == 175_104
    # + selective recompute: 34h/t = 52,224 B; full recompute keeps the layer input: the
    # table's 2h = 24,576 B for a rank holding the whole sequence (no SP), this rank's s/t slice
    # under SP, 2h/t = 3,072 B (as Megatron-Core checkpoints it; recomputed_layer_input_bytes)
    assert activation_bytes_per_token(**kw, tp=8, sequence_parallel=True, recompute=1) == 52_224
    assert activation_bytes_per_token(**kw, tp=8, recompute=2) == 24_576
    assert activation_bytes_per_token(**kw, tp=8, sequence_parallel=True, recompute=2) == 3_072
    # vectorised over splits: the same numbers
    arr = activation_bytes_per_token(**kw, tp=np.array([1.0, 8.0, 8.0]),
                                     sequence_parallel=np.array([False, False, True]))
    assert arr.tolist() == [1_400_832, 282_624, 175_104]


def test_sp_split_is_the_one_rule() -> None:
    """Sequence parallelism splits the tensors TP keeps whole by t, and only with t > 1; the
    memory model's fully recomputed layer input uses the same rule."""
    from roofline.ops.xp import SCALAR

    assert [sp_split(t, s, SCALAR) for t, s in [(8, True), (8, False), (1, True)]] == [8, 1, 1]
    assert sp_split(np.array([1, 4, 4]), np.array([True, True, False])).tolist() == [1, 4, 1]
    # the 175B layer under SP: the replicated 10h (4h norms, 2h + 2h inputs, 2h masks) over t = 8
    # is 10 * 12288 / 8 = 15,360 B of the 175,104 B above; without SP it stays 122,880 B
    assert 10 * 12288 / sp_split(8, True) == 15_360
    assert 10 * 12288 / sp_split(8, False) == 122_880


def test_full_recompute_input_is_one_answer() -> None:
    """The formula's full-recompute bytes and the training memory model's agree: 2·D per
    token split by sp_split (Megatron-Core keeps the rank's s/t slice under SP), so switching
    sequence parallelism off at t = 8 adds 7/8 of 2·D·(bytes/2)·tokens·layers to a fully
    recomputed run's activations (and the recomputing layer's replicated tensors 7/8 of 8D)."""
    import roofline as rl

    assert recomputed_layer_input_bytes(d_model=12288, tp=8, sequence_parallel=True) == 3_072
    assert recomputed_layer_input_bytes(d_model=12288, tp=8) == 24_576
    kw = dict(global_batch=512, seq_len=4096, tp=8, pp=4, nodes=8, recompute="full",
              micro_batch=1)
    on = rl.train("llama-2-70b", "dgx-h100", **kw).memory_per_device["activations"]
    off = rl.train("llama-2-70b", "dgx-h100", **kw, sequence_parallel=False)
    # first stage: L/p = 20 layer inputs per micro-batch, p = 4 micro-batches in flight, s = 4096
    # tokens, bf16; SP off keeps the whole 2D input per layer instead of 2D/8: 7/8 · 2D more per
    # token, and the one layer being recomputed keeps its replicated tensors (two norm inputs,
    # the QKV and MLP inputs: 8D) whole: 7/8 · 8D more
    # 7/8 · 8192 · 4096 · (2 · 20 · 4 + 8) = 7168 · 4096 · 168 = 4,932,501,504 B
    assert off.memory_per_device["activations"] - on == 4_932_501_504


def test_vector_cost_is_the_registry() -> None:
    # softmax over 4 rows of 1024: 5 FLOPs per element; read + write 4 B each
    assert vector_cost("softmax", 4096) == (5 * 4096, 2 * 4 * 4096, "softmax")
    # inference batch norm, 64 channels: 2 FLOPs per element; x in and out, and the 4·64 fp32
    # parameters (weight, bias, running mean and variance) = 32,768 + 1,024 B
    assert vector_cost("batchnorm", 4096) == (2 * 4096, 33792, "norm")
    # 3x3/2 max pool, pad 1, 64 channels of 10x10 (n = 6400): 5x5 out, 9·1600 FLOPs,
    # 4·(6400 + 1600) B
    assert vector_cost("maxpool", 6400) == (14400, 32000, "pool")
    assert vector_cost("gelu_tanh", 1000) == (9000, 8000, "elementwise")
