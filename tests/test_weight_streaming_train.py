"""Training under weight streaming (Cerebras CS-3, ``cerebras-cs3:weight-streaming``): weights,
gradients and optimizer states live in the MemoryX weight store, the wafer holds activations,
the workspace and the largest layer's weights and gradient; weight traffic is priced over the
150 GB/s link and the update (run in MemoryX) is not priced and says so. Hand-checked."""

from __future__ import annotations

from dataclasses import replace

import pytest

import roofline as rl
from roofline.spaces.evaluate import evaluate_chunk
from roofline.spaces.space import Chunk

WS = "cerebras-cs3:weight-streaming"
LINK = 150e9  # B/s: the 1.2 Tb/s system I/O (data/hardware/cerebras)


def test_decoder_training_state_moves_to_memoryx_by_hand() -> None:
    resident = rl.train("llama-3.1-8b", rl.hardware("cerebras-cs3"), global_batch=2,
                        seq_len=2048, preset="bound")
    assert not resident.feasible  # 16 GB weights + 32 GB fp32 grads + 96 GB Adam > 44 GB
    r = rl.train("llama-3.1-8b", WS, global_batch=2, seq_len=2048, preset="bound")
    assert r.feasible, r.reason
    P = rl.model("llama-3.1-8b").params  # 8,030,261,248
    mem = r.memory_per_device
    # MemoryX: bf16 weights 2 B + fp32 gradients 4 B + Adam's fp32 master, m, v 12 B per param
    assert mem["weight_store"] == pytest.approx(P * (2 + 4 + 12))
    rm = resident.memory_per_device
    assert mem["weight_store"] == pytest.approx(rm["weights"] + rm["gradients"]
                                                + rm["optimizer"])
    # the wafer: the largest layer is the untied 128,256 x 4,096 head with the final RMSNorm
    # (4,096): its bf16 weights and fp32 gradient (a block holds 218 M parameters)
    big = 128_256 * 4096 + 4096
    assert mem["weights"] == big * 2 and mem["gradients"] == big * 4
    assert mem["optimizer"] == 0.0
    assert mem["total"] == pytest.approx(mem["weights"] + mem["gradients"]
                                         + mem["activations"] + mem["workspace"])
    assert mem["activations"] == rm["activations"]
    # time: each of the 2 micro-batches streams every weight but the embedding table (whose
    # forward gathers 2,048 rows) in for the forward pass, 2 B per parameter at 150 GB/s:
    # 7.50 B params, 100 ms; the bf16 FLOPs (2·P·2048 = 33 TFLOP, 0.26 ms at 125 PFLOP/s) and
    # the SRAM traffic are small beside it
    fwd = 2 * ((P - 128_256 * 4096) * 2) / LINK
    assert fwd <= r.breakdown["forward"] <= fwd * 1.01
    assert r.breakdown["optimizer"] == 0.0
    assert any("optimizer update runs there and is not priced" in w for w in r.warnings)
    assert "weight store: 144.5 GB" in str(r)


def test_generic_training_streams_too() -> None:
    r = rl.train("resnet50", WS, global_batch=8)
    res = rl.train("resnet50", rl.hardware("cerebras-cs3"), global_batch=8)
    P = rl.model("resnet50").params
    mem, rm = r.memory_per_device, res.memory_per_device
    assert mem["weight_store"] == pytest.approx(rm["weights"] + rm["gradients"]
                                                + rm["optimizer"])
    assert mem["weight_store"] == pytest.approx(P * (2 + 4 + 12))  # bf16 Adam
    # the largest op: a 3x3 conv of 512 -> 512 channels (layer4), bf16, and its fp32 gradient
    assert mem["weights"] == 512 * 512 * 9 * 2 and mem["gradients"] == 512 * 512 * 9 * 4
    assert r.breakdown["optimizer"] == 0.0 and res.breakdown["optimizer"] > 0
    assert r.breakdown["forward"] > res.breakdown["forward"]  # weights over the 150 GB/s link


def test_a_full_weight_store_is_infeasible_with_the_reason() -> None:
    hw = rl.hardware(WS)
    small = replace(hw, weight_store=replace(hw.weight_store, capacity_bytes=100e9))
    r = rl.train("llama-3.1-8b", small, global_batch=1, seq_len=2048)
    assert not r.feasible
    assert "do not fit Cerebras CS-3 (WSE-3)'s weight store" in r.reason and "144.5 GB" in r.reason
    g = rl.train("resnet50", replace(hw, weight_store=replace(hw.weight_store,
                                                               capacity_bytes=1e8)),
                 global_batch=8)
    assert not g.feasible and "weight store" in g.reason


def test_explore_trains_on_a_streaming_part() -> None:
    c = Chunk(index=0, kind="train", model="llama-3.1-8b", hardware=(WS,),
              fixed={"global_batch": 2, "seq_len": 2048}, vector={})
    out = evaluate_chunk(c)
    assert bool(out["fits"][0])  # resident, the same point does not fit (test above)
    c2 = Chunk(index=0, kind="train", model="llama-3.1-8b",
               hardware=(rl.hardware("cerebras-cs3"),),
               fixed={"global_batch": 2, "seq_len": 2048}, vector={})
    assert not bool(evaluate_chunk(c2)["fits"][0])
