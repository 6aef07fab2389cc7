"""fp8 training's activation memory as Transformer Engine keeps it (ops/training_formulas
.layer_activation_terms(fp8=True); TE v1.8 3ec998e9 pytorch/module/): a GEMM's saved input in
fp8 (1 byte), every other saved tensor 16-bit. Checked by hand on Llama 3.1 8B."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.ops.training_formulas import layer_activation_terms, moe_mlp_activation_bytes

D, KH, F, L, S, V = 4096, 1024, 14336, 32, 4096, 128256  # Llama 3.1 8B, seq 4096


def _terms(fp8: bool, tp: int = 1, sp: bool = False) -> tuple[float, float]:
    return layer_activation_terms(d_model=D, n_heads=32, n_kv_heads=8, head_dim=128, d_ff=F,
                                  gated_mlp=True, seq_len=S, tp=tp, sequence_parallel=sp,
                                  fused_attention=True, dropout=False, fp8=fp8)


def test_fp8_bytes_per_token_by_hand() -> None:
    # norm inputs 2 x 2D (bf16) + QKV and MLP inputs D + D (fp8 ln_out) + Q 2D + K, V 4 K H
    # (bf16, kept by the 16-bit attention) + attention output 2D (bf16) + D (the projection's
    # fp8 copy) + gate and up 4F (bf16 fc1_out) + their product F (fp8 gelu_out)
    want = 4 * D + D + D + 2 * D + 4 * KH + 2 * D + D + 4 * F + F
    assert want == 120_832
    none, sel = _terms(True)
    assert none == sel == want  # fused attention: selective keeps the same tensors
    # 16-bit: Korthikanti generalised (8D + 2D + 4KH + 2D + 6F); fp8 keeps 87 % of it, not 50 %
    bf16, _ = _terms(False)
    assert bf16 == 8 * D + 2 * D + 4 * KH + 2 * D + 6 * F == 139_264
    assert none / bf16 == pytest.approx(0.8676, abs=1e-4)
    # tensor parallel with sequence parallelism: everything split by t (the ln_out saved is the
    # local, pre-gather shard; TE re-gathers it in the backward)
    assert _terms(True, tp=4, sp=True)[0] == pytest.approx(want / 4)
    # without sequence parallelism the norm inputs and ln_outs (4D + 2D) stay whole
    assert _terms(True, tp=4, sp=False)[0] == pytest.approx(6 * D + (want - 6 * D) / 4)


def test_fp8_moe_expert_path_by_hand() -> None:
    # per expert row: the permuted copy in fp8 (D) + gate and up bf16 (4 F_e) + SwiGLU output
    # fp8 (F_e); k = 8 rows; no shared expert; router probabilities fp32 4E
    Fe, k, E = 768, 8, 128
    got = moe_mlp_activation_bytes(d_model=2048, expert_d_ff=Fe, top_k=k, n_shared=0,
                                   n_experts=E, gated_mlp=True, fp8=True)
    assert got == k * 2048 + k * 5 * Fe + 4 * E
    bf16 = moe_mlp_activation_bytes(d_model=2048, expert_d_ff=Fe, top_k=k, n_shared=0,
                                    n_experts=E, gated_mlp=True)
    assert bf16 == k * 2 * 2048 + k * 6 * Fe + 4 * E


def _train(precision: str, recompute: str) -> rl.TrainingResult:
    return rl.train("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=S, micro_batch=1,
                    tp=1, pp=1, dp=8, recompute=recompute, precision=precision)


def test_train_fp8_activation_memory_by_hand() -> None:
    logits = S * V * 4.0  # fp32 logits of the last stage
    r = _train("fp8", "none")
    assert r.memory_per_device["activations"] == pytest.approx(120_832 * S * L + logits,
                                                               rel=1e-12)
    # full recompute keeps each layer's input, the 16-bit residual stream (2D, not D), plus one
    # layer's activations while it is recomputed
    f = _train("fp8", "full")
    assert f.memory_per_device["activations"] == pytest.approx(
        2 * D * S * L + 120_832 * S + logits, rel=1e-12)
    # bf16 is unchanged: Korthikanti's count
    b = _train("bf16", "none")
    assert b.memory_per_device["activations"] == pytest.approx(139_264 * S * L + logits,
                                                               rel=1e-12)
