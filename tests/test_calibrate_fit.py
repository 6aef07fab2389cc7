"""The pure parts of calibration: fits, timing statistics, and the engine's measured terms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roofline.calibrate.fit import fit_gemm, fit_levels, geomean
from roofline.calibrate.timing import runqueue_wait_ns, sample_from_times, time_call
from roofline.engine.core import price
from roofline.engine.core import time_model as engine_plan
from roofline.engine.efficiency import flat_efficiency
from roofline.graphs.graph import GraphBuilder
from roofline.specs.dtypes import precision
from roofline.specs.hardware import Hardware, MemoryLevel


def _eff(gmax: float, a: float, b: float, c: float, m: float, n: float, k: float) -> float:
    return gmax / (1 + a / m + b / n + c / k)


def test_fit_gemm_recovers_exact_parameters() -> None:
    shapes = [(8, 1024, 1024), (32, 1024, 1024), (1024, 32, 1024), (1024, 1024, 32),
              (1024, 1024, 1024), (256, 256, 256), (64, 512, 128)]
    pts = [(m, n, k, _eff(0.9, 12, 8, 16, m, n, k)) for m, n, k in shapes]
    f = fit_gemm(pts)
    assert f.gemm_max == pytest.approx(0.9, rel=1e-9)
    assert (f.a, f.b, f.c) == pytest.approx((12, 8, 16), rel=1e-7)
    assert f.rms_log_error < 1e-9
    # M = 8: 1/eff = (1 + 12/8 + 8/1024 + 16/1024)/0.9 = 2.5234375/0.9 -> eff = 0.356656...
    assert f.efficiency(8, 1024, 1024) == pytest.approx(0.9 / 2.5234375)


def test_fit_gemm_keeps_coefficients_non_negative() -> None:
    # efficiency rises with smaller N (unphysical noise): the fit must not return b < 0
    pts = [(1024, 64, 1024, 0.95), (1024, 1024, 1024, 0.9), (1024, 256, 1024, 0.92),
           (32, 1024, 1024, 0.5)]
    f = fit_gemm(pts)
    assert f.b == 0.0 and f.a > 0 and 0 < f.gemm_max <= 1


def test_fit_levels_staircase() -> None:
    ws = [2**e for e in range(14, 28)]  # 16 KiB .. 128 MiB
    bw = [100e9 if w <= 2**20 else 50e9 if w <= 2**24 else 25e9 for w in ws]
    lv = fit_levels(ws, bw)
    assert [p.bytes_per_s for p in lv] == pytest.approx([100e9, 50e9, 25e9])
    # capacity: geometric midpoint of 1 MiB and 2 MiB = 2^20.5 B
    assert lv[0].capacity_bytes == pytest.approx(2**20.5)
    assert lv[1].capacity_bytes == pytest.approx(2**24.5)
    assert math.isinf(lv[2].capacity_bytes)
    assert [p.n for p in lv] == [7, 4, 3]


def test_fit_levels_merges_close_plateaus() -> None:
    lv = fit_levels([1e4, 1e5, 1e6, 1e7], [50e9, 48e9, 47e9, 49e9])
    assert len(lv) == 1


def test_geomean_and_sample_statistics() -> None:
    assert geomean([1, 4]) == pytest.approx(2.0)
    s = sample_from_times([1.0, 2.0, 3.0, 4.0, 5.0])
    # p10 of 5 sorted values: index 0.4 -> 1 + 0.4*(2-1) = 1.4; p90: index 3.6 -> 4.6
    assert (s.median_s, s.p10_s, s.p90_s) == pytest.approx((3.0, 1.4, 4.6))
    assert s.spread == pytest.approx((4.6 - 1.4) / 3.0)


def test_time_call_counts_and_schedstat() -> None:
    calls = []
    s = time_call(lambda: calls.append(1), warmup=2, min_reps=4, min_time_s=0.0, inner=3)
    assert s.n + s.discarded >= 4 and len(calls) == 3 * (2 + s.n + s.discarded)
    assert runqueue_wait_ns() >= 0


# -- the measured terms in the engine ---------------------------------------------------------

def _hw() -> Hardware:
    return Hardware(key="t", name="t", kind="cpu", peak_flops_per_s={"fp32": 100e9},
                    memory=(MemoryLevel(name="DRAM", capacity_bytes=1e10, bytes_per_s=10e9),))


def _graph():  # type: ignore[no-untyped-def]
    b = GraphBuilder("g", "forward", precision("fp32"))
    b.add("softmax", "sm", elements=1_000_000)
    b.add("elementwise", "relu", elements=1_000_000, op="relu")
    b.add("elementwise", "big", elements=2**24, op="add")
    return b.build()


def test_class_rates_and_page_faults_in_price() -> None:
    g = _graph()
    eff = flat_efficiency(vector_max=0.01, softmax_max=0.05, page_fault=1e-6,
                          fresh_alloc_min=32 * 2**20, synchronous=True, label="m")
    out = price(g, [_hw()], [eff], np.array([1.0]), keep_ops=True)
    t = out["op_time"][0, 0]
    # softmax: 5 FLOP x 1e6 = 5e6 FLOP at 0.05 x 100e9 = 5e9 FLOP/s -> 1 ms;
    #          bytes 8e6 / 10e9 = 0.8 ms -> compute binds: 1.0 ms
    assert t[0] == pytest.approx(1.0e-3)
    # relu: 1e6 FLOP at 0.01 x 100e9 = 1e9 -> 1 ms; bytes 0.8 ms -> 1.0 ms
    assert t[1] == pytest.approx(1.0e-3)
    # add of 2^24 elements: bytes 3 x 4 x 2^24 = 201326592 B / 10e9 = 20.13 ms; FLOPs 2^24 at
    # 1e9 = 16.78 ms; output 64 MiB = 16384 pages x 1 us = 16.384 ms of page faults; while
    # faulting, compute and memory do not overlap: 20.13 + 16.78 + 16.38 ms
    assert t[2] == pytest.approx(201326592 / 10e9 + 2**24 / 1e9 + 16384e-6)
    # neutral defaults: the same efficiency without the new terms changes nothing else
    plain = flat_efficiency(vector_max=0.01, synchronous=True, label="p")
    t0 = price(g, [_hw()], [plain], np.array([1.0]), keep_ops=True)["op_time"][0, 0]
    assert t0[0] == pytest.approx(5e6 / 1e9)  # softmax at the shared vector rate: 5 ms
    assert t0[2] == pytest.approx(max(201326592 / 10e9, 2**24 / 1e9))


def test_off_terms_are_none_for_existing_presets() -> None:
    plain = flat_efficiency(vector_max=0.3, label="x")
    assert not plain.vector.has_classes and plain.page_faults is None
    e = flat_efficiency(vector_max=0.3, norm_max=0.1, label="y")
    assert [e.vector.of(c) for c in ("norm", "matmul", "pool")] == [0.1, 0.3, 0.3]
    # 0 meant "same as vector_max" in the flat format: it reads as off
    assert flat_efficiency(vector_max=0.3, norm_max=0.0, label="z").vector.norm is None


def test_efficiency_rejects_bad_class_fraction() -> None:
    from roofline.errors import SpecError

    with pytest.raises(SpecError, match="norm_max"):
        flat_efficiency(norm_max=1.5, label="bad")


def test_conv_and_attention_scales_in_price() -> None:
    b = GraphBuilder("g", "forward", precision("fp32"))
    # 1x1 conv, 64 -> 64 channels on 32x32: M = 1024, N = 64, K = 64
    b.add("conv2d", "conv", c_in=64, h=32, w=32, c_out=64, kernel=1)
    b.add("linear", "fc", tokens=1024, d_in=64, d_out=64)
    g = b.build()
    hw = Hardware(key="t2", name="t2", kind="cpu", peak_flops_per_s={"fp32": 100e9},
                  memory=(MemoryLevel(name="DRAM", capacity_bytes=1e10, bytes_per_s=1e15),))
    one = flat_efficiency(gemm_max=0.5, synchronous=True, label="one")
    half = flat_efficiency(gemm_max=0.5, conv_scale=0.25, synchronous=True, label="conv")
    t1 = price(g, [hw], [one], np.array([1.0]), keep_ops=True)["op_time"][0, 0]
    t2 = price(g, [hw], [half], np.array([1.0]), keep_ops=True)["op_time"][0, 0]
    # conv: 2 x 1024 x 64 x 64 = 8388608 FLOP at 0.5 x 100e9 -> 167.77 us; x 1/0.25 -> 671.1 us
    assert t1[0] == pytest.approx(8388608 / 50e9)
    assert t2[0] == pytest.approx(8388608 / 12.5e9)
    assert t2[1] == pytest.approx(t1[1])  # the linear is untouched


def test_main_read_fraction_prices_weights_only() -> None:
    b = GraphBuilder("g", "forward", precision("fp32"))
    b.add("linear", "gemv", tokens=1, d_in=1000, d_out=1000)  # 4 MB of weights, 8 kB of acts
    g = b.build()
    hw = Hardware(key="t3", name="t3", kind="cpu", peak_flops_per_s={"fp32": 1e15},
                  memory=(MemoryLevel(name="DRAM", capacity_bytes=1e10, bytes_per_s=10e9),))
    e = flat_efficiency(main_read_max=0.5, synchronous=True, label="mr")
    t = price(g, [hw], [e], np.array([1.0]), keep_ops=True)["op_time"][0, 0]
    # weights 4e6 B at 0.5 x 10 GB/s = 0.8 ms; activations 8000 B at 10 GB/s = 0.8 us
    assert t[0] == pytest.approx(4e6 / 5e9 + 8000 / 10e9)
    assert engine_plan(g, hw, e).totals_at(1.0).latency == pytest.approx(t[0])


def test_convolution_temporaries_fault_with_their_output() -> None:
    # a conv with a 24.5 MiB output (ResNet-50's stem at batch 8): alone under the 32 MiB
    # fresh-mapping threshold, but with conv_fresh_factor 2 (oneDNN's blocked copy of the
    # output) it maps 49 MiB per call: 2 x 25690112 B / 4096 = 12544 pages at 1 us
    b = GraphBuilder("stem", "forward", precision("fp32"))
    b.add("conv2d", "stem", c_in=3, h=224, w=224, c_out=64, kernel=7, stride=2, padding=3)
    b.add("elementwise", "relu", elements=64 * 112 * 112, op="relu")  # same 24.5 MiB output
    g = b.build()
    base = dict(page_fault=1e-6, fresh_alloc_min=32 * 2**20, synchronous=True)
    on = price(g, [_hw()], [flat_efficiency(**base, conv_fresh_factor=2.0, label="f")],
                                            np.array([8.0]), keep_ops=True)
    off = price(g, [_hw()], [flat_efficiency(**base, label="nf")], np.array([8.0]), keep_ops=True)
    tc, tm = on["op_t_compute"][0, 0], on["op_t_memory"][0, 0]
    d = on["op_time"][0, 0] - off["op_time"][0, 0]
    assert d[0] == pytest.approx(12544e-6 + min(tc[0], tm[0]))  # faults, no overlap
    assert d[1] == 0.0  # the elementwise op's own 24.5 MiB output stays under the threshold
    p = engine_plan(g, _hw(), flat_efficiency(**base, conv_fresh_factor=2.0, label="f"))
    assert p.evaluate(8.0).time == pytest.approx(on["op_time"][0, 0])


def test_measure_recovers_the_conv_fresh_factor() -> None:
    from roofline.calibrate.backends import FakeBackend, FakeMachine
    from roofline.calibrate.measure import derive, measure_plan, run_plan

    fit = derive(run_plan(measure_plan("cpu"), [FakeBackend(FakeMachine(conv_fresh=2.25))]))
    assert fit.conv_fresh is not None and fit.conv_fresh[0] == pytest.approx(2.25)
    gpu = FakeMachine(kind="gpu", page_s=0.0)
    assert derive(run_plan(measure_plan("gpu"), [FakeBackend(gpu)])).conv_fresh is None
