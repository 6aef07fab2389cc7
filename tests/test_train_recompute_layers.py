"""Partial full recompute (``recompute_layers=k``, Megatron-LM's block method): k of a stage's
layers re-run their forward, the rest keep their activations — hand calculations in comments."""

from __future__ import annotations

import json

import pytest

import roofline as rl
from roofline._args import ArgumentError
from roofline.cli import main
from roofline.errors import SpecError

GPT3 = rl.model("gpt3-175b")
S, H, A, T = 2048, 12288, 96, 8  # seq, width, heads, tp
N = 12  # 96 layers / pp 8: layers per stage
NONE_LAYER = S * H * (10 + 24 / T + 5 * A * S / (H * T))  # Korthikanti Table 2, bytes, b = 1
KEPT_LAYER = 2 * S * H  # a checkpointed layer keeps its input (2 bytes × s·h)


def _run(recompute: str = "full", **kw: object) -> rl.TrainingResult:
    # pp = 8, m = 64 ≥ p: the first stage holds 8 micro-batches of its 12 layers; dp = 1, ZeRO 0
    return rl.train(GPT3, rl.cluster("dgx-a100", nodes=8), global_batch=64, seq_len=S,
                    micro_batch=1, tp=T, pp=8, dp=1, recompute=recompute, zero=0,
                    precision="fp16", sequence_parallel=False, fused_attention=False,
                    dropout=True, **kw)


def test_all_layers_is_todays_full_exactly() -> None:
    full, k12 = _run(), _run(recompute_layers=N)
    assert k12.step_time == full.step_time
    assert k12.breakdown == full.breakdown
    assert k12.memory_per_device == full.memory_per_device
    assert k12.hardware_flops_per_step == full.hardware_flops_per_step


def test_zero_layers_is_no_recompute() -> None:
    none, k0 = _run("none"), _run(recompute_layers=0)
    assert k0.breakdown["recompute"] == 0.0
    assert k0.step_time == pytest.approx(none.step_time, rel=1e-12)
    assert k0.hardware_flops_per_step == pytest.approx(none.model_flops_per_step, rel=1e-12)
    # 8 in flight × 12 layers' full activations, no layer recomputed (no working copy)
    assert k0.memory_per_device["activations"] == pytest.approx(8 * N * NONE_LAYER, rel=1e-9)


@pytest.mark.parametrize("k", [3, 9])
def test_middle_k_memory(k: int) -> None:
    """8 micro-batches × (k kept inputs + (12 − k) full layers) + one layer while recomputed."""
    r = _run(recompute_layers=k)
    want = 8 * (k * KEPT_LAYER + (N - k) * NONE_LAYER) + NONE_LAYER
    assert r.memory_per_device["activations"] == pytest.approx(want, rel=1e-9)


@pytest.mark.parametrize("k", [3, 9])
def test_middle_k_time_and_flops(k: int) -> None:
    none, full, r = _run("none"), _run(), _run(recompute_layers=k)
    frac = k / N
    # the re-run forwards and their repeated tensor-parallel all-reduces: k of 12 layers
    assert r.breakdown["recompute"] == pytest.approx(frac * full.breakdown["recompute"], rel=1e-12)
    tp_extra = full.breakdown["tp_comm"] - none.breakdown["tp_comm"]
    assert r.breakdown["tp_comm"] == pytest.approx(none.breakdown["tp_comm"] + frac * tp_extra,
                                                   rel=1e-12)
    # dp = 1: step = (m + p − 1) · t_mb, t_mb linear in the recomputed layers
    assert r.step_time == pytest.approx(none.step_time + frac * (full.step_time - none.step_time),
                                        rel=1e-12)
    # hardware FLOPs: the model's + k/12 of the 96 layers' forward matmuls (24·s·h² + 4·s²·h per
    # layer and sequence, Narayanan et al. 2021 Eq. 3 less its logit term, + 9·s·h for the
    # biases of the QKV, output, up and down projections: 3h + h + 4h + h), × 64 sequences
    extra = 64 * 96 * frac * (24 * S * H**2 + 4 * S**2 * H + 9 * S * H)
    assert r.hardware_flops_per_step - r.model_flops_per_step == pytest.approx(extra, rel=1e-9)


def test_refusals() -> None:
    with pytest.raises(ArgumentError, match=r"recompute_layers=13 is out of range; allowed: 0..12"):
        _run(recompute_layers=13)
    for bad in (-1, 2.5, "3", True):
        with pytest.raises(ArgumentError, match="recompute_layers"):
            _run(recompute_layers=bad)
    with pytest.raises(SpecError, match="recompute_layers=4 .*recompute='selective'"):
        _run("selective", recompute_layers=4)
    with pytest.raises(SpecError, match="recompute_layers=4 .*recompute='full'"):
        rl.train(GPT3, rl.cluster("dgx-a100", nodes=8), global_batch=64, seq_len=S, tp=T,
                 pp=8, recompute_layers=4)  # the decoder default is selective
    with pytest.raises(SpecError, match="equal pipeline stages without interleaving"):
        _run(recompute_layers=4, interleave=2)
    with pytest.raises(SpecError, match="equal pipeline stages without interleaving"):
        _run(recompute_layers=4, pp_stages=(11, 13, 12, 12, 12, 12, 12, 12))
    with pytest.raises(SpecError, match="recompute_layers=1 is modelled for decoder LMs"):
        rl.train("resnet50", "dgx-a100", global_batch=256, recompute="full", recompute_layers=1)


def test_cli(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "gpt3-175b", "dgx-a100", "--nodes", "8", "--tp", "8", "--pp", "8",
            "--dp", "1", "--global-batch", "64", "--seq-len", "2048", "--recompute", "full",
            "--json"]
    assert main(argv) == 0
    full = json.loads(capsys.readouterr().out)
    assert main(argv + ["--recompute-layers", "6"]) == 0
    half = json.loads(capsys.readouterr().out)
    assert half["breakdown"]["recompute"] == pytest.approx(full["breakdown"]["recompute"] / 2)


def test_full_recompute_under_sequence_parallelism_keeps_the_input_split() -> None:
    """With sequence parallelism Megatron-Core checkpoints each layer's input as this rank's
    s/t slice (the embeddings are scattered to the sequence-parallel region): 8 micro-batches
    × 12 kept inputs of 2·s·h/t bytes, plus one SP layer's activations while it is recomputed,
    s·h·(34 + 5·a·s/h)/t (Korthikanti Table 2, TP + SP row). Without SP the input stays whole."""
    sp_layer = S * H * (34 + 5 * A * S / H) / T
    r = rl.train(GPT3, rl.cluster("dgx-a100", nodes=8), global_batch=64, seq_len=S,
                 micro_batch=1, tp=T, pp=8, dp=1, recompute="full", zero=0, precision="fp16",
                 sequence_parallel=True, fused_attention=False, dropout=True)
    # 8 × 12 × 2 × 2048 × 12288 / 8 + 2048 × 12288 × (34 + 5 × 96 × 2048 / 12288) / 8
    assert r.memory_per_device["activations"] == pytest.approx(
        8 * N * KEPT_LAYER / T + sp_layer, rel=1e-9)
    assert _run().memory_per_device["activations"] == pytest.approx(
        8 * N * KEPT_LAYER + NONE_LAYER, rel=1e-9)  # sequence_parallel=False: whole inputs
