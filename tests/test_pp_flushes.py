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
                 "2048", "--search", "--pp-flushes", "2", "--top", "3", "--format",
                 "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    best = rl.best_parallelism("llama-3.1-8b", "dgx-h100", global_batch=16, seq_len=2048,
                               pp_flushes=2, top=3)
    assert [r["step_time"] for r in rows] == pytest.approx(list(best["step_time"]), rel=1e-12)


def test_search_rows_are_train_with_the_same_flushes() -> None:
    """best_parallelism(pp_flushes=k) keeps only splits whose micro-batches per replica divide
    into k schedules, and each row is rl.train of that split with the same k."""
    kw = dict(global_batch=32, seq_len=2048)
    one = rl.best_parallelism("llama-3.1-8b", "dgx-h100", top=None, **kw)
    four = rl.best_parallelism("llama-3.1-8b", "dgx-h100", pp_flushes=4, top=None, **kw)
    m = [32 // (d * b) for d, b in zip(four["dp"], four["micro_batch"])]
    assert len(four["tp"]) < len(one["tp"]) and all(x % 4 == 0 for x in m)
    pipelined = [i for i, p in enumerate(four["pp"]) if p > 1]
    assert pipelined  # the bubble is paid 4 times only where there is a pipeline
    for i in pipelined[:3] + [i for i, p in enumerate(four["pp"]) if p == 1][:2]:
        t = rl.train("llama-3.1-8b", "dgx-h100", tp=int(four["tp"][i]), pp=int(four["pp"][i]),
                     dp=int(four["dp"][i]), micro_batch=int(four["micro_batch"][i]),
                     interleave=int(four["interleave"][i]), recompute=four["recompute"][i],
                     zero=int(four["zero"][i]), pp_flushes=4, **kw)
        assert t.step_time == pytest.approx(float(four["step_time"][i]), rel=1e-9)
    with pytest.raises(SpecError, match="pp_flushes=64"):
        rl.best_parallelism("llama-3.1-8b", "dgx-h100", pp_flushes=64, **kw)
    with pytest.raises(SpecError, match="pp_flushes"):
        rl.best_parallelism("llama-3.1-8b", "dgx-h100", pp_flushes=0, **kw)
