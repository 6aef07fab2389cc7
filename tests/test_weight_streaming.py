"""Weight streaming (Cerebras CS-3 + MemoryX): weights priced at the weight store's link,
activations and KV at the wafer's SRAM; only the largest op's weights held on chip."""

from __future__ import annotations

import dataclasses

import pytest

import roofline as rl
from roofline.errors import SpecError

WS = "cerebras-cs3:weight-streaming"


def test_decode_bound_is_the_weights_over_the_link():
    r = rl.solve("llama-3.1-8b", WS, batch=1, phase="decode", precision="bf16", preset="bound")
    # weights read per token: 8,030,261,248 parameters minus the 128,256 x 4,096 embedding
    # table (one row gathered) = 7,504,924,672, x 2 bytes = 15,009,849,344 B; over 1.2 Tb/s
    # = 150 GB/s: 0.100066 s. KV and activations move at 21 PB/s (negligible).
    assert r.latency_bound == pytest.approx(15_009_849_344 / 150e9, rel=2e-3)
    resident = rl.solve("llama-3.1-8b", "cerebras-cs3", batch=1, phase="decode",
                        precision="bf16", preset="bound")
    assert resident.bytes == pytest.approx(r.bytes)  # the same bytes, priced differently
    assert resident.latency_bound < r.latency_bound / 1000


def test_streaming_fits_what_residency_cannot():
    resident = rl.solve("llama-3.1-70b", "cerebras-cs3", batch=1, phase="decode",
                        precision="bf16")
    assert not resident.feasible and "weights" in resident.reason  # 141 GB > 44 GB of SRAM
    r = rl.solve("llama-3.1-70b", WS, batch=1, phase="decode", precision="bf16")
    assert r.feasible
    # on chip: the largest op's weights, the lm_head 8,192 x 128,256 x 2 B = 2,101,346,304 B
    assert r.memory_breakdown["weights"] == 8192 * 128_256 * 2
    # batch amortises the stream: 64 sequences cost far less than 64x one
    r64 = rl.solve("llama-3.1-70b", WS, batch=64, phase="decode", precision="bf16")
    assert r64.latency < 2 * r.latency


def test_the_weight_store_capacity_is_checked():
    hw = rl.hardware(WS)
    small = dataclasses.replace(hw, weight_store=dataclasses.replace(
        hw.weight_store, capacity_bytes=10e9))
    r = rl.solve("llama-3.1-8b", small, batch=1, phase="decode", precision="bf16")
    assert not r.feasible and "weight store" in r.reason and "MemoryX" in r.reason


def test_sweep_equals_solve_under_weight_streaming():
    rows = rl.sweep("llama-3.1-70b", WS, batch=[1, 8, 64], phase="decode",
                    precision="bf16").to_dicts()
    for row in rows:
        one = rl.solve("llama-3.1-70b", WS, batch=row["batch"], phase="decode",
                       precision="bf16")
        assert row["latency"] == pytest.approx(one.latency, rel=1e-9)
        assert row["feasible"] == one.feasible
        assert row["memory_footprint"] == pytest.approx(one.memory_footprint, rel=1e-9)


def test_bad_modes_are_refused():
    with pytest.raises(SpecError, match="weight_store"):
        rl.hardware("h100-sxm5").with_execution("weight_streaming")
    with pytest.raises(SpecError, match="resident, weight_streaming"):
        rl.hardware("cerebras-cs3:streaming")
    assert rl.hardware("cerebras-cs3").execution == "resident"
    assert rl.hardware("cerebras-cs3:resident") == rl.hardware("cerebras-cs3")


def test_serving_fits_the_same_way():
    from roofline.scenarios.serving.sweep import serve_sweep

    assert not rl.serve("llama-3.1-70b", "cerebras-cs3", batch=8, precision="bf16").feasible
    s = rl.serve("llama-3.1-70b", WS, batch=8, precision="bf16")
    assert s.feasible
    grid = serve_sweep("llama-3.1-70b", ["cerebras-cs3", WS], batch=[8], context=[1024],
                       precision="bf16")
    assert grid["fits"][:, 0, 0, 0].tolist() == [False, True]
    one = rl.serve("llama-3.1-70b", WS, batch=8, prompt_len=1024, output_len=1, precision="bf16")
    assert one.feasible
