"""train(pp_flushes=k): k pipeline schedules per optimizer step (NeMo AutoModel's benchmark
loop runs one per gradient-accumulation step), against hand calculations."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError

# Llama 3.1 8B on one DGX H100: tp 2 · pp 4 · dp 1, 16 micro-batches of 1 sequence
KW = dict(global_batch=16, seq_len=2048, micro_batch=1, tp=2, pp=4, recompute="none")


def test_each_schedule_pays_the_bubble() -> None:
    one = rl.train("llama-3.1-8b", "dgx-h100", **KW)
    four = rl.train("llama-3.1-8b", "dgx-h100", pp_flushes=4, **KW)
    b1 = one.breakdown["bubble"]
    assert b1 > 0
    # bubble = k · (pp − 1) / v · t_mb: four schedules, four fills and drains
    assert four.breakdown["bubble"] == pytest.approx(4 * b1, rel=1e-12)
    assert four.step_time == pytest.approx(one.step_time + 3 * b1, rel=1e-12)
    for k in ("forward", "backward", "recompute", "tp_comm", "pp_comm", "dp_comm", "optimizer"):
        assert four.breakdown[k] == pytest.approx(one.breakdown[k], rel=1e-12)
    # 4 micro-batches per schedule still fill the 4 stages: same activations in flight
    assert four.memory_per_device["activations"] == pytest.approx(
        one.memory_per_device["activations"], rel=1e-12)


def test_short_schedules_hold_fewer_micro_batches() -> None:
    one = rl.train("llama-3.1-8b", "dgx-h100", **KW)
    eight = rl.train("llama-3.1-8b", "dgx-h100", pp_flushes=8, **KW)
    # 2 micro-batches per schedule: the first stage holds min(2, pp=4) = 2 instead of 4
    assert eight.memory_per_device["activations"] == pytest.approx(
        one.memory_per_device["activations"] / 2, rel=1e-12)
    assert eight.breakdown["bubble"] == pytest.approx(8 * one.breakdown["bubble"], rel=1e-12)


def test_without_pipeline_nothing_moves_and_refusals() -> None:
    kw = dict(global_batch=16, seq_len=2048, micro_batch=1, tp=8, pp=1, recompute="none")
    assert rl.train("llama-3.1-8b", "dgx-h100", pp_flushes=4, **kw).step_time == \
        rl.train("llama-3.1-8b", "dgx-h100", **kw).step_time
    with pytest.raises(SpecError, match="pp_flushes=3 must divide the 16 micro-batches"):
        rl.train("llama-3.1-8b", "dgx-h100", pp_flushes=3, **KW)
    with pytest.raises(SpecError, match="micro-batches per schedule"):
        rl.train("llama-3.1-8b", "dgx-h100", pp_flushes=8, **{**KW, "interleave": 2})
    with pytest.raises(SpecError, match="pp_flushes"):
        rl.train("llama-3.1-8b", "dgx-h100", pp_flushes=0, **KW)
    with pytest.raises(SpecError, match="pp_flushes"):
        rl.train("resnet50", "dgx-a100", global_batch=256, micro_batch=256, nodes=1, dp=1,
                 precision="fp16", optimizer="momentum", pp_flushes=2)


def test_cli_equals_api(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.cli import main

    assert main(["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "16", "--seq-len",
                 "2048", "--tp", "2", "--pp", "4", "--recompute", "none", "--pp-flushes", "4",
                 "--format", "json"]) == 0
    got = json.loads(capsys.readouterr().out)["step_time"]
    api = rl.train("llama-3.1-8b", "dgx-h100", pp_flushes=4, **KW).step_time
    assert got == pytest.approx(api, rel=1e-12)
    assert main(["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "16", "--seq-len",
                 "2048", "--search", "--pp-flushes", "2"]) == 2
    assert "--pp-flushes" in capsys.readouterr().err
