"""The one time model: every consumer agrees with every other on every device class, caches
key on content, and the invariants hold (an estimate never undercuts its bound; a result with a
non-finite number is never feasible)."""

from __future__ import annotations

import gc
import math
from dataclasses import astuple, replace
from pathlib import Path

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import TimeModel, time_model
from roofline.engine.presets import efficiency_for
from roofline.scenarios.serving import serve_sweep
from roofline.specs.hardware import Hardware, MemoryLevel, list_hardware

ROOT = Path(__file__).resolve().parents[1]
MEASURED = str(ROOT / "docs/validation/cpu-run/measured.toml")

#: one device of every class in the zoo, and a measured CPU spec (its CPU-only terms)
CLASSES = {
    "gpu": "H100", "gpu-with-mall": "mi300x", "cpu": "xeon-platinum-8480plus", "tpu": "tpu-v5e",
    "soc": "jetson-agx-orin-64gb", "accelerator-with-sram": "gaudi3", "measured-cpu": MEASURED,
}


def _dtype(hw: Hardware) -> str:
    return "bf16" if hw.has("bf16") else "fp16"


# -- every consumer evaluates one object ---------------------------------------------------------

@pytest.mark.parametrize("cls", list(CLASSES))
def test_serve_sweep_equals_serve(cls: str) -> None:
    hw = rl.hardware(CLASSES[cls])
    p = _dtype(hw)
    for engine in ("trtllm", "eager"):
        for B, P in ((4, 129), (16, 700)):
            # output_len 2: one decode step, at context P + 1
            r = rl.serve("llama-3.2-1b", hw, batch=B, prompt_len=P, output_len=2, precision=p,
                         engine=engine)
            sw = serve_sweep("llama-3.2-1b", hw, batch=[B], context=[P + 1], precision=p,
                             engine=engine)
            assert sw["tpot"][0, 0, 0, 0] == pytest.approx(r.tpot, rel=1e-9), (engine, B, P)


def test_serve_sweep_drift_fixed_on_cpu() -> None:
    # issue 10: serve_sweep priced launch as max(kernel + gap, dispatch) on a synchronous CPU
    # (10.79 ms) where serve adds the dispatch (10.50 ms)
    r = rl.serve("llama-3.2-1b", "xeon-platinum-8480plus", batch=4, prompt_len=129,
                 output_len=2)
    sw = serve_sweep("llama-3.2-1b", "xeon-platinum-8480plus", batch=[4], context=[130])
    assert r.tpot == pytest.approx(10.50e-3, abs=0.01e-3)
    assert sw["tpot"][0, 0, 0, 0] == pytest.approx(r.tpot, rel=1e-12)


def test_serve_sweep_equals_serve_with_tp_and_windows() -> None:
    for model, S in (("mistral-7b", 5000), ("gemma-2-9b", 300), ("gemma-2-9b", 6000)):
        r = rl.serve(model, "H100", batch=8, prompt_len=S - 1, output_len=2, tp=2)
        sw = serve_sweep(model, "H100", batch=[8], context=[S], tp=2)
        assert sw["tpot"][0, 0, 0, 0] == pytest.approx(r.tpot, rel=1e-9), model


@pytest.mark.parametrize("cls", list(CLASSES))
def test_sweep_equals_solve(cls: str) -> None:
    hw = rl.hardware(CLASSES[cls])
    p = _dtype(hw)
    for model in ("resnet50", "gpt2"):
        batches = [1, 3, 7, 64, 200]
        sw = rl.sweep(model, hw, batch=batches, precision=p)
        for i, b in enumerate(batches):
            r = rl.solve(model, hw, batch=b, precision=p)
            assert sw["latency"][i] == pytest.approx(r.latency, rel=1e-9), (model, b)
            assert sw["latency_bound"][i] == pytest.approx(r.latency_bound, rel=1e-9)
            assert sw["bottleneck"][i] == r.bottleneck


@pytest.mark.parametrize("cls", list(CLASSES))
def test_closed_form_equals_direct_sum(cls: str) -> None:
    hw = rl.hardware(CLASSES[cls])
    g = rl.model("resnet50").graph(precision=_dtype(hw))
    tm = TimeModel(g, hw, efficiency_for(hw, "default"))
    Bs = np.array([1.0, 2.0, 5.0, 33.0, 250.0])
    many = tm.totals_many(Bs)
    for i, b in enumerate(Bs):
        direct = astuple(tm.evaluate(b).totals())
        assert astuple(tm.totals_at(b)) == pytest.approx(direct, rel=1e-9)
        assert many[:, i] == pytest.approx(direct, rel=1e-9)


def _cluster(dev: str) -> rl.Cluster:
    base = rl.cluster("dgx-h100", nodes=2)
    hw = rl.hardware(dev)
    return replace(base, key=f"test-{hw.key}", name=f"16 x {hw.name}", device=hw)


@pytest.mark.parametrize("cls", list(CLASSES))
def test_train_equals_its_search_row(cls: str) -> None:
    c = _cluster(CLASSES[cls])
    p = _dtype(c.device)
    t = rl.best_parallelism("llama-3.2-1b", c, global_batch=32, seq_len=1024, precision=p,
                            top=None, include_infeasible=True)
    assert len(t) > 5
    for i in sorted({0, len(t) // 3, len(t) // 2, len(t) - 1}):
        row = t[i]
        r = rl.train("llama-3.2-1b", c, global_batch=32, seq_len=1024, precision=p,
                     tp=row["tp"], pp=row["pp"], dp=row["dp"], micro_batch=row["micro_batch"],
                     interleave=row["interleave"], recompute=row["recompute"],
                     zero=row["zero"])
        assert r.step_time == pytest.approx(row["step_time"], rel=1e-9)
        assert r.mfu == pytest.approx(row["mfu"], rel=1e-9)


# -- caches key on content -------------------------------------------------------------------------

def _hw_file(tmp_path: Path, name: str, hbm_gb_s: float) -> Path:
    f = tmp_path / f"{name}.toml"
    f.write_text(f"""schema = 1
key = "cache-test"
name = "cache test device"
kind = "gpu"
[sources]
t = "test: a made-up device"
[peak]
bf16 = {{ value = 400, unit = "TFLOP/s", source = "t" }}
fp32 = {{ value = 50, unit = "TFLOP/s", source = "t" }}
[[memory]]
name = "HBM"
capacity = {{ value = 80, unit = "GiB", source = "t" }}
bandwidth = {{ value = {hbm_gb_s}, unit = "GB/s", source = "t" }}
""")
    return f


def test_reloaded_spec_with_another_bandwidth_gets_its_own_timings(tmp_path: Path) -> None:
    # one path rewritten with other HBM bandwidths: new Hardware objects reuse freed addresses
    # (issue 11: 162 of 200 serve results were another device's)
    f = tmp_path / "dev.toml"
    seen: dict[float, tuple[float, float, float]] = {}
    for bw in (1000.0, 2000.0, 3000.0, 1000.0, 4000.0, 2000.0, 5000.0, 3000.0) * 3:
        f.write_text(_hw_file(tmp_path, "tmpl", bw).read_text())
        r = rl.serve("llama-3.2-1b", str(f), batch=4, prompt_len=256, output_len=32)
        s = rl.solve("gpt2", str(f), batch=2, precision="bf16")
        got = (r.tpot, r.ttft, s.latency)
        if bw in seen:
            assert got == seen[bw]  # equal specs: equal results
        seen[bw] = got
        gc.collect()
    tpots = [v[0] for v in seen.values()]
    assert len(set(tpots)) == len(tpots)  # differing specs: differing results
    assert sorted(tpots, reverse=True) == [seen[b][0] for b in sorted(seen)]  # faster HBM


def test_equal_specs_share_timings_and_edited_copies_do_not() -> None:
    a = rl.hardware("H100")
    b = replace(a)  # an equal copy: another object
    assert b is not a
    ra = rl.serve("llama-3.1-8b", a, batch=8, prompt_len=512, output_len=64)
    rb = rl.serve("llama-3.1-8b", b, batch=8, prompt_len=512, output_len=64)
    assert (ra.tpot, ra.ttft) == (rb.tpot, rb.ttft)
    slow = a.with_peak("bf16", a.peak("bf16") / 10, "test: a tenth")
    assert slow.key == a.key  # with_peak keeps the name: caches must not key on it
    rs = rl.serve("llama-3.1-8b", slow, batch=8, prompt_len=512, output_len=64)
    assert rs.ttft > 5 * ra.ttft  # prefill is compute-bound: about 10x slower


def test_train_with_peak_cluster_is_priced_on_its_own_device() -> None:
    c = rl.cluster("dgx-h100", nodes=16)
    kw = dict(global_batch=256, seq_len=2048, tp=8, pp=4, dp=4, micro_batch=1)
    fast = rl.train("gpt3-175b", c, **kw)
    dev = c.device
    slow_c = replace(c, device=dev.with_peak("bf16", dev.peak("bf16") / 10, "test: a tenth"))
    slow = rl.train("gpt3-175b", slow_c, **kw)
    assert slow.step_time > 3 * fast.step_time and slow.mfu <= 1.0
    again = rl.train("gpt3-175b", c, **kw)
    assert again.step_time == fast.step_time


def test_train_reloads_an_edited_hardware_file(tmp_path: Path) -> None:
    f = tmp_path / "dev.toml"
    cl = tmp_path / "cl.toml"
    steps = []
    for bw in (2000.0, 4000.0, 2000.0):
        f.write_text(_hw_file(tmp_path, "tmpl", bw).read_text())
        cl.write_text(f"""schema = 1
key = "cache-cluster"
name = "test cluster"
device = "{f}"
devices_per_node = {{ value = 8, unit = "1", source = "t" }}
scale_up_domain = {{ value = 8, unit = "1", source = "t" }}
[sources]
t = "test"
[scale_up]
bandwidth = {{ value = 450, unit = "GB/s", source = "t" }}
latency = {{ value = 3, unit = "us", source = "t" }}
[scale_out]
bandwidth = {{ value = 50, unit = "GB/s", source = "t" }}
latency = {{ value = 6, unit = "us", source = "t" }}
""")
        r = rl.train("llama-3.2-1b", str(cl), global_batch=16, seq_len=1024, tp=1, dp=8,
                     micro_batch=2)
        steps.append(r.step_time)
    assert steps[0] == steps[2] and steps[1] < steps[0]


# -- invariants ----------------------------------------------------------------------------------

@pytest.mark.parametrize("hw_key", [*list_hardware(), MEASURED,
                                    str(ROOT / "docs/validation/cpu-run-1thread/measured.toml")])
def test_estimate_never_undercuts_the_bound_on_any_device(hw_key: str) -> None:
    # the measured one-thread spec fits its bf16 GEMM model at 1.47x the measured bf16 peak:
    # the bound's compute roof follows the faster rate
    hw = rl.hardware(hw_key)
    for model, kw in (("resnet50", {}), ("gpt2", {}), ("llama-3.2-1b", {"phase": "decode"})):
        for dtype in ("fp16", "bf16", "fp32"):
            if not hw.has(dtype):
                continue
            g = rl.model(model).graph(precision=dtype, **kw)
            tm = time_model(g, hw, efficiency_for(hw, "default"))
            for b in (1.0, 8.0, 128.0):
                ot = tm.evaluate(b)
                assert np.all(ot.t_kernel >= ot.t_bound * (1 - 1e-12)), (model, dtype, b)
                t = tm.totals_at(b)
                assert t.latency >= t.latency_bound > 0


@pytest.mark.parametrize("hw_key", ["gaudi3", "mi300x", "H100", "xeon-platinum-8480plus"])
def test_serve_efficiency_share_is_never_negative(hw_key: str) -> None:
    # issue 11: gaudi3, tp=2, eager: shares["efficiency"] was -1.05e-4 s
    tp = 2 if rl.hardware(hw_key).scale_up_link is not None else 1
    r = rl.serve("qwen2.5-0.5b", hw_key, batch=167, prompt_len=2, output_len=2, tp=tp,
                 engine="eager")
    assert r.phase_seconds["efficiency"] >= 0 and r.phase_seconds["launch"] >= 0
    for B, P in ((1, 128), (64, 2048)):
        r = rl.serve("llama-3.1-8b", hw_key, batch=B, prompt_len=P, output_len=16)
        assert r.phase_seconds["efficiency"] >= 0 and r.phase_seconds["roofline"] > 0


def test_bound_sees_the_levels_the_estimate_uses() -> None:
    # gaudi3: 96 MiB on-die SRAM at 12.8 TB/s vs 3.67 TB/s HBM; the default preset keeps an
    # op's activations there when they fill at most half of it. One elementwise op of 4 MiB of
    # activations (read 2 MiB, write 2 MiB): bound 4 MiB / 12.8 TB/s, estimate at memory_max.
    hw = rl.hardware("gaudi3")
    from roofline.graphs.graph import GraphBuilder

    b = GraphBuilder("one", "forward", rl.precision("bf16"))
    b.add("elementwise", "add", elements=2**20 // 2, op="relu")
    g = b.build()
    e = efficiency_for(hw, "default")
    ot = time_model(g, hw, e).evaluate(1.0)
    nbytes = float(ot.bytes[0])
    assert nbytes == pytest.approx(2**21)  # 2^19 bf16 values read and written: 2 MiB
    assert ot.t_bound[0] == pytest.approx(nbytes / 12.8e12, rel=1e-9)
    assert ot.t_memory[0] == pytest.approx(nbytes / (12.8e12 * e.memory.max), rel=1e-9)
    bound_preset = time_model(g, hw, efficiency_for(hw, "bound")).evaluate(1.0)
    assert bound_preset.t_bound[0] == pytest.approx(nbytes / hw.memory_bytes_per_s, rel=1e-9)


def test_a_non_finite_result_is_never_feasible() -> None:
    tiny = Hardware(key="tiny", name="tiny", kind="gpu", peak_flops_per_s={"fp16": 5e-324},
                    memory=(MemoryLevel(name="HBM", capacity_bytes=80e9, bytes_per_s=1e12),))
    r = rl.solve("resnet50", tiny, batch=1)
    assert not math.isfinite(r.latency)
    assert not r.feasible and "finite" in r.reason
    ok = rl.solve("resnet50", "A100", batch=1)
    assert ok.feasible and ok.reason == ""


def test_latency_alone_equals_the_totals_latency() -> None:
    """latency_at / latency_many (the optimizer step's fast path) are the totals' latency row,
    breakpoints and batches below 1 included."""
    from roofline.engine.core import time_model
    from roofline.engine.presets import efficiency_for

    # the closed-form envelope: a part without tile data (the A100's matmuls count whole waves,
    # engine/tiles.py, so its graphs have no envelope; checked below on the wave path)
    hw = rl.hardware("l4")
    g = rl.model("resnet50").graph(precision="fp16")
    tm = time_model(g, hw, efficiency_for(hw, "default"))
    tm.totals_at(1.0)
    edges = [e for e in tm._env[0] if math.isfinite(e)]  # type: ignore[index]
    bs = [0.5, 1.0, 3.0, 17.0, 256.0, 1e4] + edges[:4]
    for b in bs:
        assert tm.latency_at(b) == pytest.approx(tm.totals_at(b).latency, rel=1e-12)
    many = tm.latency_many(np.array(bs))
    assert many == pytest.approx(tm.totals_many(np.array(bs))[0], rel=1e-12)
    a100 = rl.hardware("A100")
    tw = time_model(g, a100, efficiency_for(a100, "default"))
    assert tw.waves is not None
    for b in (1.0, 3.0, 17.0, 256.0):
        assert tw.latency_at(b) == pytest.approx(tw.totals_at(b).latency, rel=1e-12)
