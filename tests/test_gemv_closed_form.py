"""A matmul at its GEMV floor keeps the time model's closed form (engine/core.py
``TimeModel.floor``): its compute time is the floor's line below B* = inv_c1 / inv_cap and the
smooth line above, so B* is one more breakpoint. A solve on a CPU / SoC part (Raspberry Pi 5,
Apple, Jetson, Xeon, ...) is then a bisection, not a sum over every op; the closed form must
equal the op-by-op sum at every batch, around each B* included."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import TimeModel, time_model
from roofline.engine.efficiency import Gemm, flat_efficiency
from roofline.engine.presets import efficiency_for
from roofline.graphs.graph import GraphBuilder
from roofline.specs import precision
from roofline.specs.hardware import Hardware, MemoryLevel, list_hardware

B = np.concatenate([np.arange(1.0, 300.0), [511.0, 512.0, 1000.0, 1024.0, 4096.0]])
ROWS = [0, 1, 2, 3, 5, 6, 7, 8]  # all but the overhead, a difference of sums


def _floor_models() -> list[tuple[str, str, str, TimeModel]]:
    out = []
    for model, kw in (("resnet50", {}), ("llama-3.2-1b", {"phase": "decode", "context": 2048}),
                      ("llama-3.2-1b", {"phase": "prefill"})):
        m = rl.model(model)
        for p in ("fp16", "fp32", "int8"):
            g = m.graph(precision=precision(p), **kw)  # type: ignore[arg-type]
            for key in list_hardware():
                hw = rl.hardware(key)
                if hw.has(p):
                    tm = TimeModel(g, hw, efficiency_for(hw, "default"))
                    if tm.floor is not None:
                        out.append((model, key, p, tm))
    return out


def test_closed_form_equals_the_op_by_op_sum_on_every_floor_part() -> None:
    cases = _floor_models()
    parts = {k for _, k, _, _ in cases}
    assert {"raspberry-pi-5", "apple-m2", "jetson-agx-orin-64gb", "core-i9-13900k"} <= parts
    for model, key, p, tm in cases:
        assert tm.envelope_ok, (model, key, p, tm.nonlinear)
        with np.errstate(divide="ignore", invalid="ignore"):  # B* = inf: a floor throughout
            b_star = (tm.inv_c1 / tm.inv_cap)[tm.floor]
        b_star = b_star[np.isfinite(b_star)]
        extra = np.concatenate([np.floor(b_star), np.ceil(b_star), b_star])
        bs = np.concatenate([B, extra[(extra >= 1) & (extra < 1e6)]])
        direct = tm.ops(bs).rows()
        many = tm.totals_many(bs)
        np.testing.assert_allclose(many[ROWS], direct[ROWS], rtol=1e-12, atol=0,
                                   err_msg=f"{model} {key} {p}")
        assert np.all(np.abs(many[4] - direct[4]) <= 1e-12 * direct[0]), (model, key, p)
        for b in (1.0, 2.0, 3.0, 7.0, 64.0, 257.0):
            one = tm.totals_at(b)
            assert one.latency == pytest.approx(float(tm.ops(b).time.sum()), rel=1e-12, abs=0)
            assert one.t_compute == pytest.approx(float(tm.ops(b).t_compute.sum()), rel=1e-12)


def test_solve_on_a_floor_part_answers_from_the_closed_form() -> None:
    """The Pi 5's ResNet-50 and Llama decode: the bisection answers (no op-by-op sum), and the
    result equals the op-by-op sum's."""
    for model, kw in (("resnet50", {}), ("llama-3.2-1b", {"phase": "decode"})):
        r = rl.solve(model, "raspberry-pi-5", batch=1, **kw)  # type: ignore[arg-type]
        g = rl.model(model).graph(precision=precision("fp16"), **kw)  # type: ignore[arg-type]
        hw = rl.hardware("raspberry-pi-5")
        tm = time_model(g, hw, efficiency_for(hw, "default"))
        assert tm.floor is not None and tm._segment(1.0) is not None
        direct = tm.ops(1.0).totals()
        assert r.latency == pytest.approx(direct.latency, rel=1e-13, abs=0)
        assert r.t_compute == pytest.approx(direct.t_compute, rel=1e-13, abs=0)


def test_floor_breakpoint_by_hand() -> None:
    """One linear of 1000 x 1000 at one row per sample (2e6 FLOPs per sample) on a 1 TFLOP/s
    part, gemm max 1, a = 8 rows, gemv floor 0.25: inv_c0 = 1e-12 s/FLOP, the M penalty
    inv_c1 = 8e-12 / B, capped at 1/(1e12 · 0.25) − 1e-12 = 3e-12 up to B* = 8/3. So the
    compute time is 2e6·B·4e-12 = 8 µs·B for B <= 2 (the floor) and 2e6·B·(8e-12/B + 1e-12) =
    16 µs + 2 µs·B above (22 µs at 3, 24 µs at 4); memory (4 MB of weights at 1e15 B/s) is
    negligible, and 1 µs of dispatch is added per op (synchronous)."""
    hw = Hardware(key="floor-t", name="floor-t", kind="cpu", peak_flops_per_s={"fp32": 1e12},
                  memory=(MemoryLevel(name="DRAM", capacity_bytes=1e10, bytes_per_s=1e15),))
    eff = flat_efficiency(label="floor-t", gemm_max=1.0, gemm_a=8.0, dispatch=1e-6,
                          synchronous=True)
    eff = replace(eff, gemm=Gemm(max=1.0, a=8.0, gemv=0.25))
    b = GraphBuilder("g", "forward", precision("fp32"))
    b.add("linear", "A", tokens=1, d_in=1000, d_out=1000)
    tm = TimeModel(b.build(), hw, eff)
    assert tm.floor is not None and tm.envelope_ok and tm.nonlinear == ()
    want = {1: 8e-6, 2: 16e-6, 3: 22e-6, 4: 24e-6, 10: 36e-6}
    for batch, tc in want.items():
        assert tm._segment(float(batch)) is not None  # the closed form answers
        t = tm.totals_at(batch)
        assert t.t_compute == pytest.approx(tc, rel=1e-9)
        mem = 4e6 / 1e15 + 8e3 * batch / 1e15  # weights + activations in and out
        assert t.t_memory == pytest.approx(mem, rel=1e-9)
        assert t.latency == pytest.approx(tc + 1e-6, rel=1e-9)
    many = tm.totals_many(np.array([1.0, 2.0, 3.0, 4.0, 10.0]))
    np.testing.assert_allclose(many[2], list(want.values()), rtol=1e-9)


@pytest.mark.parametrize("synchronous", [True, False])
def test_several_floors_with_different_breakpoints(synchronous: bool) -> None:
    """Five matmuls at their floor with B* of 1.04, 3.69, 40 and infinity (no room left under
    the floor: b, c penalties of tiny N, K), an on-chip level the activations leave along B and
    either launch mode: the closed form equals the op-by-op sum at fractional batches on both
    sides of every B*, below one (priced op by op) and far above the last breakpoint."""
    hw = Hardware(key="floors-t", name="floors-t", kind="cpu", peak_flops_per_s={"fp32": 1e12},
                  memory=(MemoryLevel(name="DRAM", capacity_bytes=1e10, bytes_per_s=5e10),
                          MemoryLevel(name="L2", capacity_bytes=2e6, bytes_per_s=5e11)))
    eff = flat_efficiency(label="floors-t", gemm_max=0.8, dispatch=2.2e-6, kernel_gap=1e-6,
                          synchronous=synchronous, cache_fraction=0.5, memory_max=0.9)
    eff = replace(eff, gemm=Gemm(max=0.8, a=8.0, b=64.0, c=64.0, gemv=0.25))
    b = GraphBuilder("g", "forward", precision("fp32"))
    for i, (t, di, do) in enumerate(((1, 4096, 4096), (1, 64, 64), (4, 1000, 300), (16, 8, 8),
                                     (64, 512, 512), (1, 100000, 16))):
        b.add("linear", f"L{i}", tokens=t, d_in=di, d_out=do)
    tm = TimeModel(b.build(), hw, eff)
    assert tm.floor is not None and tm.envelope_ok
    with np.errstate(divide="ignore", invalid="ignore"):
        b_star = (tm.inv_c1 / tm.inv_cap)[tm.floor]
    finite = np.unique(np.round(b_star[np.isfinite(b_star)], 6))
    assert len(finite) >= 3 and np.isinf(b_star).any()
    near = np.concatenate([finite * (1 - 1e-6), finite * (1 + 1e-6)])
    bs = np.concatenate([[0.25, 0.5, 0.999], near, np.linspace(1.0, 120.0, 477), [1e4, 1e7]])
    direct = tm.ops(bs).rows()
    np.testing.assert_allclose(tm.totals_many(bs)[ROWS], direct[ROWS], rtol=1e-12, atol=0)
    for x in near:
        assert tm._segment(float(x)) is not None  # the closed form answers next to each B*
        assert tm.totals_at(x).latency == pytest.approx(direct[0][bs == x][0], rel=1e-12)
        assert tm.totals_at(x).t_compute == pytest.approx(direct[2][bs == x][0], rel=1e-12)
