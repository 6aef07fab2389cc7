"""train(optimizer_dtype="bf16"): bf16 gradients and Adam states (Apex DistributedFusedAdam with
dtype=bf16, grad_sync_dtype=bf16, as NeMo 24.07's SFT recipe runs it), against hand
calculations."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.ops import cost
from roofline.scenarios.training.context import optimizer_state_bytes_per_param
from roofline.specs.dtypes import precision

# Llama 2 70B on 16 H100, tp 4, pp 4, dp 1 (the NeMo 24.07 SFT row's split)
KW = dict(nodes=2, global_batch=32, seq_len=4096, micro_batch=1, tp=4, pp=4, interleave=20,
          recompute="none", precision="fp8")


def test_bytes_per_parameter_by_dtype() -> None:
    # fp32 (Megatron): fp32 grads 4; master 4 + m 4 + v 4 = 12; fp16 keeps its 2 / 16 table
    assert optimizer_state_bytes_per_param(precision("bf16"), "fp32") == (4.0, 12.0)
    assert optimizer_state_bytes_per_param(precision("fp8"), "fp32") == (4.0, 12.0)
    assert optimizer_state_bytes_per_param(precision("fp16"), "fp32") == (2.0, 16.0)
    # bf16: grads 2; m 2 + v 2 = 4; fp8 weights add a bf16 master 2 -> 6
    assert optimizer_state_bytes_per_param(precision("bf16"), "bf16") == (2.0, 4.0)
    assert optimizer_state_bytes_per_param(precision("fp8"), "bf16") == (2.0, 6.0)
    for p in ("fp16", "fp32"):
        with pytest.raises(SpecError, match="optimizer_dtype='bf16'"):
            optimizer_state_bytes_per_param(precision(p), "bf16")
    with pytest.raises(SpecError, match="allowed: fp32, bf16"):
        optimizer_state_bytes_per_param(precision("bf16"), "fp16")


def test_optimizer_step_bytes_with_a_bf16_master() -> None:
    # per parameter, Adam with clipping: grad read 2·2, m and v read 2·2 and written 2·2,
    # bf16 master read 2 and written 2, fp8 working copy written 1
    c = cost("optimizer_step", params=1, optimizer="adam", grad_bytes=2.0, state_bytes=2.0,
             master_bytes=2.0, weight_bytes=1.0)
    assert c.weight_bytes_read == 2 * 2 + 2 * 2 + 2
    assert c.weight_bytes_written == 2 * 2 + 2 + 1
    # the default is the fp32 master of before: 2·4 + 2·4 + 4 read, 2·4 + 4 + 2 written
    d = cost("optimizer_step", params=1, optimizer="adam")
    assert (d.weight_bytes_read, d.weight_bytes_written) == (2 * 4 + 2 * 4 + 4, 2 * 4 + 4 + 2)
    with pytest.raises(SpecError, match="master_bytes"):
        cost("optimizer_step", params=1, optimizer="adam", master_bytes=0.0)


def test_memory_and_time_of_the_nemo_sft_split() -> None:
    a = rl.train("llama-2-70b", "dgx-h100", **KW)
    b = rl.train("llama-2-70b", "dgx-h100", optimizer_dtype="bf16", **KW)
    ma, mb = a.memory_per_device, b.memory_per_device
    # dp = 1: nothing sharded; the stage's trained parameters P = gradients / 4 bytes
    P = ma["gradients"] / 4.0
    assert mb["gradients"] == pytest.approx(2.0 * P, rel=1e-12)
    assert ma["optimizer"] == pytest.approx(12.0 * P, rel=1e-12)
    assert mb["optimizer"] == pytest.approx(6.0 * P, rel=1e-12)
    assert mb["weights"] == ma["weights"] and mb["activations"] == ma["activations"]
    # fp32 states do not fit 80 GB without recompute here; bf16 states do
    assert not a.feasible and b.feasible
    # compute is unchanged; only the optimizer pass moves fewer bytes
    for k in ("forward", "backward", "tp_comm", "pp_comm", "bubble"):
        assert b.breakdown[k] == pytest.approx(a.breakdown[k], rel=1e-12)
    assert b.breakdown["optimizer"] < a.breakdown["optimizer"]
    assert b.step_time < a.step_time


def test_refusals_and_search_equal_train() -> None:
    kw = dict(global_batch=8, seq_len=2048)
    with pytest.raises(SpecError, match="optimizer_dtype"):
        rl.train("llama-3.1-8b", "dgx-h100", optimizer_dtype="fp8", **kw)
    with pytest.raises(SpecError, match="fp16"):
        rl.train("llama-3.1-8b", "dgx-h100", optimizer_dtype="bf16", precision="fp16", **kw)
    row = rl.best_parallelism("llama-3.1-8b", "dgx-h100", optimizer_dtype="bf16", top=1,
                              **kw)[0]
    again = rl.train("llama-3.1-8b", "dgx-h100", tp=row["tp"], pp=row["pp"],
                     micro_batch=row["micro_batch"], interleave=row["interleave"],
                     recompute=row["recompute"], zero=row["zero"], optimizer_dtype="bf16", **kw)
    assert row["step_time"] == pytest.approx(again.step_time, rel=1e-9)
    assert row["memory"] == pytest.approx(again.memory_per_device["total"], rel=1e-9)


def test_cli_equals_api(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.cli import main

    assert main(["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "8", "--seq-len",
                 "2048", "--optimizer-dtype", "bf16", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    r = rl.train("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=2048,
                 optimizer_dtype="bf16")
    assert data["step_time"] == pytest.approx(r.step_time, rel=1e-9)


def test_generic_graphs_refuse_bf16_states() -> None:
    # the generic (CNN) model keeps AMP's fp32 gradients and states: a bf16 request is refused
    with pytest.raises(SpecError, match="optimizer_dtype='bf16'"):
        rl.train("resnet50", "dgx-a100", global_batch=256, micro_batch=256, nodes=1, dp=1,
                 precision="fp16", optimizer="momentum", optimizer_dtype="bf16")
