"""GPU matmuls across shapes against OpenXLA's measured GEMM kernel table
(docs/validation/gemm.md): whole waves of tiles (engine/tiles.py, data/presets/tiles.toml).

Tolerance, stated: in-sample median |error| ≤ 7 %, each device held out ≤ 10 %, large dots
(m·n·k ≥ 2048³) median ≤ 8 %, the 1024³ dots within 15 %; the page's tables are what the code
computes today.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import time_model
from roofline.engine.presets import efficiency_for
from roofline.engine.tiles import tiles_for, without_tiles
from roofline.errors import SpecError
from roofline.graphs.graph import GraphBuilder
from roofline.specs.dtypes import precision
from roofline.specs.hardware import hardware
from roofline.validation import gemm as v
from roofline.validation import load_cases
from roofline.validation.regenerate import quoted_figures

DOC = Path(__file__).parents[2] / "docs" / "validation" / "gemm.md"


def _dot(m: int, n: int, k: int) -> object:
    b = GraphBuilder("dot", "forward", precision("bf16"))
    b.add("matmul", "dot", m=m, k=k, n=n)
    return b.build()


def test_1024_cubed_on_h100_by_hand() -> None:
    """1024³ bf16 on 132 SMs: 128 x 64 tiles -> 8 x 16 = 128 tiles, one wave; a wave is one
    tile of 2·128·64·1024 FLOPs per SM at the tile's efficiency 1/(1 + 16/128 + 16/64 + 128/1024)
    = 1/1.5 of 989 TFLOP/s / 132 (max 1): 132·16.78 MFLOP·1.5 / 989e12 = 3.359 µs, + 6 µs fill.
    No other candidate is faster (128 x 128: one wave, 6.16 µs; 64 x 64: two waves, 3.64 µs)."""
    hw = hardware("h100-sxm5")
    tm = time_model(_dot(1024, 1024, 1024), hw, efficiency_for(hw, "default"))
    t_wave = 132 * 2 * 128 * 64 * 1024 * 1.5 / 989e12
    assert t_wave == pytest.approx(3.359e-6, rel=1e-3)
    ot = tm.evaluate(1.0)
    assert float(ot.t_compute[0]) == pytest.approx(t_wave + 6e-6, rel=1e-12)
    assert float(ot.t_kernel[0]) == pytest.approx(t_wave + 6e-6, rel=1e-12)  # memory 2.1 µs
    case = load_cases("gemm").case("H100 bf16 1024x1024x1024")
    assert v.predict_gemm(case) == pytest.approx(2 * 1024 ** 3 / (t_wave + 6e-6), rel=1e-12)


def test_a_wave_is_a_step_in_the_batch() -> None:
    """A dot of 256 rows per sample, N = 4096, K = 4096 on 132 SMs: 256 x 128 tiles give
    32 tiles per sample; up to 4 samples (128 tiles) fit one wave, the 5th starts a second."""
    hw = hardware("h100-sxm5")
    eff = efficiency_for(hw, "default")
    assert "whole waves of matmul tiles (a step in B)" in time_model(
        _dot(256, 4096, 4096), hw, eff).nonlinear
    assert eff.tiles is not None
    one = replace(eff, tiles=replace(eff.tiles, shapes=((256, 128),), splits=(1,)))  # one tile
    tm = time_model(_dot(256, 4096, 4096), hw, one)
    pen = 1 + 16 / 256 + 16 / 128 + 128 / 4096
    wave = 132 * 2 * 256 * 128 * 4096 * pen / 989e12
    tc = [float(tm.evaluate(b).t_compute[0]) for b in (1, 2, 3, 4, 5, 8, 9)]
    assert tc == pytest.approx([wave + 6e-6] * 4 + [2 * wave + 6e-6] * 2 + [3 * wave + 6e-6],
                               rel=1e-12)
    # the smooth model is a straight line in B instead
    sm = time_model(_dot(256, 4096, 4096), hw, without_tiles(efficiency_for(hw, "default")))
    ts = [float(sm.evaluate(b).t_compute[0]) for b in (1, 2, 3)]
    assert ts[2] - ts[1] == pytest.approx(ts[1] - ts[0], rel=1e-9)


def test_matrix_vector_products_keep_the_smooth_model() -> None:
    """Fewer rows than the smallest tile (64): batch-1..63 decode GEMVs are priced as before."""
    hw = hardware("h100-sxm5")
    eff = efficiency_for(hw, "default")
    for m in (1, 8, 63):
        g = _dot(m, 4096, 4096)
        a = time_model(g, hw, eff).evaluate(1.0).t_compute
        b = time_model(g, hw, without_tiles(eff)).evaluate(1.0).t_compute
        assert float(a[0]) == float(b[0])
    g = _dot(64, 4096, 4096)
    assert float(time_model(g, hw, eff).evaluate(1.0).t_compute[0]) != float(
        time_model(g, hw, without_tiles(eff)).evaluate(1.0).t_compute[0])
    kw = dict(phase="decode", context=4096, batch=1, precision="bf16")
    r = rl.solve("llama-3.1-8b", "h100-sxm5", **kw)
    assert r.latency == pytest.approx(time_model(
        r._op_table.model.graph, hw, without_tiles(eff)).totals_at(1.0).latency, rel=1e-12)


def test_split_k_pays_its_reduction() -> None:
    """256 x 256 x 4096 on 132 SMs: 128 x 64 tiles (8 of them) split 8 ways = 64 tiles, one
    wave of 2·128·64·512 FLOPs at 1/(1 + 16/128 + 16/64 + 128·8/4096) = 1/1.625, plus the
    reduction 2·8·256·256·4 bytes at 0.88 of 3.35 TB/s; the fastest candidate wins."""
    hw = hardware("h100-sxm5")
    eff = efficiency_for(hw, "default")
    assert eff.tiles is not None
    one = replace(eff, tiles=replace(eff.tiles, shapes=((128, 64),), splits=(8,)))
    t = float(time_model(_dot(256, 256, 4096), hw, one).evaluate(1.0).t_compute[0])
    hand = 132 * 2 * 128 * 64 * 512 * 1.625 / 989e12 + 2 * 8 * 256 * 256 * 4 / (3350e9 * 0.88)
    assert t == pytest.approx(hand + 6e-6, rel=1e-12)
    full = float(time_model(_dot(256, 256, 4096), hw, eff).evaluate(1.0).t_compute[0])
    assert full <= t


def test_solve_and_sweep_count_whole_waves_at_every_batch() -> None:
    batches = list(range(1, 41)) + [63, 64, 65, 127, 128, 129, 257]
    s = rl.sweep("llama-3.1-8b", ["h100-sxm5", "b200"], batch=batches, precision="bf16")
    for row in s.to_dicts():
        r = rl.solve("llama-3.1-8b", row["hardware"], batch=row["batch"], precision="bf16")
        assert row["latency"] == pytest.approx(r.latency, rel=1e-12), row["batch"]
    hw = hardware("h100-sxm5")
    g = rl.model("llama-3.1-8b").graph(precision=precision("bf16"), phase="prefill")
    tm = time_model(g, hw, efficiency_for(hw, "default"))
    for b in (1, 3, 7, 31):
        assert tm.totals_at(b).latency == pytest.approx(float(tm.ops(float(b)).time.sum()),
                                                        rel=1e-12)


def test_the_split_sum_equals_summing_every_op() -> None:
    """totals_at on these parts: the other ops' closed form + each distinct wave op once,
    weighted (tiles.WaveSplit) — equal to the op-by-op sum, field by field."""
    from roofline.engine.core import TimeModel

    for name, kw in (("llama-3.1-8b", dict(phase="prefill", seq_len=512)),
                     ("llama-3.1-8b", dict(phase="decode", context=4096)), ("resnet50", {})):
        m = rl.model(name)
        for key in ("h100-sxm5", "b200"):
            hw = hardware(key)
            g = m.graph(precision=precision("bf16"), phase=kw.get("phase", m.default_phase),
                        seq_len=kw.get("seq_len"), context=kw.get("context"))
            tm = TimeModel(g, hw, efficiency_for(hw, "default"))
            assert tm.split is not None
            for b in (1, 3, 64, 129, 1000):
                a, d = tm.split.totals(float(b)), tm.ops(float(b)).totals()
                for f in a.__slots__:
                    assert getattr(a, f) == pytest.approx(getattr(d, f), rel=1e-12), (name, f)


def test_ampere_tiles_are_cutlass_sm80_list() -> None:
    """The A100's candidate tiles are the eight threadblock shapes CUTLASS's SM80 fp16 / bf16
    generator lists (source sm80tiles), each rows x columns once, and the source says so."""
    from roofline._data import DATA, read_toml

    doc = read_toml(DATA / "presets" / "tiles.toml")
    amp = doc["arch"]["ampere"]
    sm80 = {(256, 128), (128, 256), (256, 64), (64, 256), (128, 128), (128, 64), (64, 128),
            (64, 64)}
    shapes = [tuple(s) for s in amp["shapes"]]
    assert len(shapes) == len(set(shapes)) and set(shapes) == sm80
    assert amp["shapes_source"] == "sm80tiles"
    text = doc["sources"]["sm80tiles"]
    assert "GenerateSM80_TensorOp_16816" in text and "751eb9a8859a" in text
    assert all(f"{r}x{c}" in text for r, c in sm80)
    t = tiles_for(hardware("a100-sxm4-80gb"))
    assert t is not None and set(t.shapes) == sm80


def test_tile_model_only_where_there_is_tile_data() -> None:
    for key in ("h100-sxm5", "h100-pcie", "h200-sxm", "b200"):
        assert tiles_for(hardware(key)) is not None
        assert efficiency_for(hardware(key), "default").tiles is not None
        assert efficiency_for(hardware(key), "bound").tiles is None
    assert tiles_for(hardware("h100-pcie")).slots == 114  # type: ignore[union-attr]
    for key in ("a100-sxm4-40gb", "a100-sxm4-80gb", "a100-pcie-80gb"):
        t = tiles_for(hardware(key))
        assert t is not None and t.slots == 108 and t.arch == "ampere"
        assert t.for_dtype("fp8") is None  # no fp8 tensor cores on Ampere
    for key in ("l4", "gh200", "tpu-v5e", "raspberry-pi-5"):
        try:
            hw = hardware(key)
        except Exception:  # noqa: BLE001 - a zoo key this revision may not have
            continue
        assert tiles_for(hw) is None and efficiency_for(hw, "default").tiles is None
    # a registered (or measured) factor table keeps its own matmul model
    from roofline.engine.presets import default_tables, register_efficiency

    h100 = hardware("h100-sxm5")
    register_efficiency(h100, default_tables()["gpu"])
    try:
        assert efficiency_for(h100, "default").tiles is None
    finally:
        register_efficiency(h100, None)
    assert efficiency_for(h100, "default").tiles is not None
    # serving and training keep the smooth model they were fitted on
    eff = efficiency_for(hardware("h100-sxm5"), "default")
    assert without_tiles(eff).tiles is None and without_tiles(eff).label == "default/gpu/fa3"


def test_other_dtypes_keep_the_smooth_model() -> None:
    hw = hardware("h100-sxm5")
    for dt in ("fp32", "tf32"):
        b = GraphBuilder("dot", "forward", precision(dt))
        b.add("matmul", "dot", m=1024, k=1024, n=1024)
        assert time_model(b.build(), hw, efficiency_for(hw, "default")).waves is None, dt
    # fp8: the architecture's own parameter set; int8 (session 26): the 16-bit set's values
    for dt in ("fp16", "fp8", "int8"):
        b = GraphBuilder("dot", "forward", precision(dt))
        b.add("matmul", "dot", m=1024, k=1024, n=1024)
        assert time_model(b.build(), hw, efficiency_for(hw, "default")).waves is not None
    r = rl.solve("resnet50", "h100-sxm5", batch=8)
    assert math.isfinite(r.latency)


def test_bad_tile_data_is_refused() -> None:
    t = tiles_for(hardware("h100-sxm5"))
    assert t is not None
    for bad in (dict(slots=0), dict(shapes=()), dict(shapes=((128, 0),)), dict(splits=()),
                dict(max=1.5), dict(a=-1.0), dict(fill=2.0)):
        with pytest.raises(SpecError, match="tiles"):
            replace(t, **bad).check("test")
    with pytest.raises(SpecError, match="tiles.max"):
        replace(efficiency_for(hardware("h100-sxm5"), "default"), tiles=replace(t, max=0.0))


def test_vectorised_fit_path_is_the_engine() -> None:
    """The fit's vectorised path equals the engine, on the XLA tables and on Hopper's fp8 rows,
    whose thin 802816 x 192 x 768 rows are memory-bound (Hopper's streaming fraction)."""
    cs = v.kernel_cases() + v.hopper_fp8_cases()
    assert any(c["n"] == 192 for c in cs)
    e_vec = np.array(v._log_errors(None, cs))
    e_eng = np.array([math.log(v.predict_gemm(c) / c.value_si) for c in cs])
    assert np.abs(e_vec - e_eng).max() < 1e-12


def test_cases_within_tolerance() -> None:
    res = [r for r in v.gemm_errors() if r[0]["dtype"] == "bf16"]
    err = np.array([e for _, _, e in res])
    assert len(err) == 250 and np.median(np.abs(err)) <= 0.07
    big = [e for c, _, e in res if c["m"] * c["n"] * c["k"] >= 2048 ** 3]
    assert np.median(np.abs(big)) <= 0.08
    for c, _, e in res:
        if c["m"] == c["n"] == c["k"] == 1024:
            assert abs(e) <= 0.15, (c.id, e)
    assert (err > 0).any() and (err < 0).any()
    # before: the smooth model's kernel time was far too fast on small dots
    before = {c.id: e for c, _, e in v.gemm_errors(smooth=True)}
    assert before["H100 bf16 1024x1024x1024"] > 1.5


def test_large_gemm_not_worse_than_the_h200_measurement() -> None:
    """The H200's 8192³ bf16 matmul measured 769-798 TFLOP/s (default.toml source h200)."""
    hw = hardware("h200-sxm")
    ot = time_model(_dot(8192, 8192, 8192), hw, efficiency_for(hw, "default")).evaluate(1.0)
    rate = float(ot.flops.sum() / ot.t_kernel.sum())
    assert 769e12 * 0.97 <= rate <= 798e12 * 1.03


def _fp8_dot(m: int, n: int, k: int) -> object:
    b = GraphBuilder("dot", "forward", precision("fp8"))
    b.add("matmul", "dot", m=m, k=k, n=n)
    return b.build()


def test_fp8_1024_cubed_on_b200_by_hand() -> None:
    """1024³ fp8 on 148 SMs with Blackwell's fp8 set (max 0.95, a = b 16, c 256, fill 6 µs) at
    the 4500 TFLOP/s fp8 peak, no end-to-end gemm_dtype factor: 128 x 64 tiles -> 128 tiles,
    one wave; a tile's factor 1 + 16/128 + 16/64 + 256/1024 = 1.625, so a wave is
    148·2·128·64·1024·1.625 / (4500e12·0.95) = 0.944 µs. The other candidates are slower
    (64 x 64: 256 tiles, two waves of factor 1.75: 1.02 µs; 128 x 128: one wave, 1.74 µs)."""
    hw = hardware("b200")
    t8 = efficiency_for(hw, "default").tiles.for_dtype("fp8")  # type: ignore[union-attr]
    assert t8 is not None and (t8.max, t8.a, t8.b, t8.c, t8.fill) == (0.95, 16, 16, 256, 6e-6)
    wave = 148 * 2 * 128 * 64 * 1024 * 1.625 / (4500e12 * 0.95)
    assert wave == pytest.approx(0.944e-6, rel=2e-3)
    tm = time_model(_fp8_dot(1024, 1024, 1024), hw, efficiency_for(hw, "default"))
    assert float(tm.evaluate(1.0).t_compute[0]) == pytest.approx(wave + 6e-6, rel=1e-12)
    # Hopper's fp8 set: its own max at its own fp8 peak (1979 TFLOP/s dense)
    h = hardware("h100-sxm5")
    th = efficiency_for(h, "default").tiles.for_dtype("fp8")  # type: ignore[union-attr]
    assert th is not None and th.max == 0.84 and th.slots == 132
    t_h = float(time_model(_fp8_dot(8192, 8192, 8192), h, efficiency_for(h, "default"))
                .evaluate(1.0).t_compute[0])
    # 256 x 128 tiles: 32·64 = 2048 tiles, 16 waves (15.5) of 1 + 16/256 + 16/128 + 256/8192
    hand = 16 * 132 * 2 * 256 * 128 * 8192 * (1 + 16 / 256 + 16 / 128 + 256 / 8192) / (
        1979e12 * 0.84) + 6e-6
    assert t_h <= hand * (1 + 1e-12)  # the best candidate is at least as fast
    assert t_h >= 2 * 8192 ** 3 / (1979e12 * 0.84)  # and never faster than max of the peak


def test_stream_k_by_hand() -> None:
    """MAMF's H200 fp8 shape 1280 x 4096 x 12032 with 128 x 256 tiles only: 10·16 = 160 tiles
    on 132 SMs. In whole waves: 2 waves of 2·128·256·12032 FLOPs per SM at
    1/(1 + 16/128 + 16/256 + 256/12032). Stream-K: 1 full wave, then the 28 tiles left as
    28·12032 K iterations over 132 SMs (each segment 28·12032/132 long, its own K-loop fill
    256·2·128·256 FLOPs per SM) and 132 partial 128 x 256 fp32 tiles written and read back at
    0.88 of 4.8 TB/s; the Hopper fp8 set: max 0.84 of 1979 TFLOP/s, fill 6 µs."""
    h = hardware("h200-sxm")
    eff = efficiency_for(h, "default")
    assert eff.tiles is not None
    t8 = dict(eff.tiles.narrow)["fp8"]
    assert t8.stream_k and not eff.tiles.stream_k  # on for the fp8 set only
    rate = 1979e12 * 0.84
    wave = 132 * 2 * 128 * 256 * 12032 * (1 + 16 / 128 + 16 / 256 + 256 / 12032) / rate
    sk = (wave + 28 * 2 * 128 * 256 * 12032 * (1 + 16 / 128 + 16 / 256) / rate
          + 132 * 2 * 128 * 256 * 256 / rate + 2 * 4 * 132 * 128 * 256 / (4.8e12 * 0.88))
    assert sk < 2 * wave

    def t(stream_k: bool, m: int = 1280, n: int = 4096) -> float:
        # the fp8 set takes its splits from its part and carries its own candidate tiles
        # (engine/tiles.py, since 4158da1): both are set to the one 128 x 256 tile
        assert eff.tiles is not None
        e = replace(eff, tiles=replace(eff.tiles, shapes=((128, 256),), splits=(1,), narrow=(
            ("fp8", replace(t8, stream_k=stream_k, shapes=((128, 256),))),)))
        return float(time_model(_fp8_dot(m, n, 12032), h, e).evaluate(1.0).t_compute[0])

    assert t(True) == pytest.approx(sk + 6e-6, rel=1e-12)
    assert t(False) == pytest.approx(2 * wave + 6e-6, rel=1e-12)
    # 12 x 11 = 132 tiles fill the SMs exactly: no partial wave, stream-K is the same
    assert t(True, 1536, 2816) == pytest.approx(t(False, 1536, 2816), rel=1e-12)
    # the shipped set is at least as fast as either (more candidates)
    full = float(time_model(_fp8_dot(1280, 4096, 12032), h, eff).evaluate(1.0).t_compute[0])
    assert full <= t(True) * (1 + 1e-12)
    with pytest.raises(SpecError, match="stream_k"):
        replace(t8, stream_k=1).check("test")  # type: ignore[arg-type]


def test_clock_max_by_hand() -> None:
    """A case with clock = "max" (MAMF's harness runs each call alone) is priced at the part's
    maximum boost clock: H100 SXM [clock] peak 1830 MHz (989.4 TFLOP/s / (132·4·512·2 FLOP per
    clock) = 1829.9 MHz), max 1980 MHz: every peak × 1980 / 1830 = 1.08197; the fill and the
    memory rate unscaled, so on 1536 x 2816 x 12032 (12 x 11 = 132 tiles of 128 x 256: one
    full wave, no stream-K share, no split) the compute time less the 6 µs fill is the
    unclocked one / 1.08197. The A100 peaks are quoted at its boost clock: ratio 1."""
    assert 989.4e12 / (132 * 4 * 512 * 2) / 1e6 == pytest.approx(1829.9, abs=0.1)
    h = hardware("h100-sxm5")
    r = h.clock_ratio()
    assert r == pytest.approx(1980 / 1830, rel=1e-12) and r == pytest.approx(1.08197, abs=1e-5)
    hc = v.clocked(h, "max")
    assert hc.peak("fp8") == pytest.approx(1979e12 * r, rel=1e-12)
    assert hc.peak("bf16") == pytest.approx(989e12 * r, rel=1e-12)
    assert hc.memory_bytes_per_s == h.memory_bytes_per_s
    assert v.clocked(h, None) is h
    a100 = hardware("a100-sxm4-80gb")
    assert a100.clock_ratio() == 1.0 and v.clocked(a100, "max") is a100
    with pytest.raises(SpecError, match="clock='boost'"):
        v.clocked(h, "boost")
    g = _fp8_dot(1536, 2816, 12032)
    t0 = float(time_model(g, h, efficiency_for(h, "default")).evaluate(1.0).t_compute[0])
    t1 = float(time_model(g, hc, efficiency_for(hc, "default")).evaluate(1.0).t_compute[0])
    assert (t1 - 6e-6) * r == pytest.approx(t0 - 6e-6, rel=1e-9)
    # the case key reaches the pricing: MAMF's H100 fp8 row, with and without it
    c = next(x for x in v.hopper_fp8_cases() if x.id == "mamf H100 SXM fp8")
    plain = replace(c, scenario={k: x for k, x in c.scenario.items() if k != "clock"})
    assert 1.0 < v.predict_gemm(c) / v.predict_gemm(plain) <= r * (1 + 1e-12)


def test_stream_k_on_only_where_it_fits_better() -> None:
    """The stream-K candidates are on for the set whose fit is better with them (Hopper fp8,
    fitted on cuBLASLt runs) and off for the 16-bit set (XLA's tables: no better with them)."""
    rep = {(name.split(" (")[0], sk): (ins, lo) for name, sk, ins, lo in v.stream_k_report()}
    on, off = rep[("Hopper fp8", True)], rep[("Hopper fp8", False)]
    assert on[0].rms_log < off[0].rms_log
    on, off = rep[("16-bit", True)], rep[("16-bit", False)]
    assert on[0].rms_log >= off[0].rms_log and on[1].rms_log >= off[1].rms_log


def test_fp8_sets_are_the_fits_and_judged_per_source() -> None:
    fit, ins, rep = v.fp8_fit_report()
    t8 = efficiency_for(hardware("b200"), "default").tiles.for_dtype(  # type: ignore[union-attr]
        "fp8")
    assert dict(fit.values) == {"max": t8.max, "a": t8.a, "c": t8.c, "fill": t8.fill}
    assert ins.n == 125 and ins.median_abs <= 0.07
    assert {p.source for p in rep.per_source} == {"azure", "mamf"}
    assert dict(rep.refit.values) == dict(rep.shipped)  # Hopper's max is the fit on both
    assert rep.shipped_in_sample.median_abs <= 0.07
    # each source held out (was 30 %: 19.7 % pooled before MAMF's rows were priced at the
    # maximum boost clock their harness runs at; now 10.2 % / 13.0 %)
    for p in rep.per_source:
        assert p.held_out.median_abs <= 0.15, p.source
    cs = v.hopper_fp8_cases()
    big = [c for c in cs if v.sets_max(c)]
    assert len(cs) == 19 and len(big) == 11  # max fitted on the 11 large rows only
    assert {c.id for c in cs if c.get("clock") == "max"} == {"mamf H200 SXM fp8",
                                                              "mamf H100 SXM fp8"}
    held = [abs(math.expm1(rep.held_out_errors[c.id])) for c in big]
    assert np.median(held) <= 0.11  # the large rows held out: 10.2 %
    # before: the smooth model × the end-to-end factor priced every large Hopper fp8 row too
    # slow (the small ones many times too fast: no fill, no waves)
    before = {c.id: v.predict_gemm(c, smooth=True) / c.value_si - 1 for c in cs}
    assert max(before[c.id] for c in big) < -0.2
    after = {c.id: v.predict_gemm(c) / c.value_si - 1 for c in cs}
    assert np.median(np.abs(list(after.values()))) < np.median(np.abs(list(before.values())))
    assert all(abs(after[c.id]) <= 0.15 for c in big)
    # Azure's small sizes, judged (regression pins): on the H100 (CUDA 12.6) within 16 %; on
    # the H200 (CUDA 12.8, whose small-size kernels are 39-59 % faster than the same VM's
    # CUDA 12.6 run) 20-45 % too slow; the thin 802816 x 192 x 768 rows too fast: the H100's
    # memory-bound at +3.3 % at Hopper's tiled-GEMM streaming fraction 0.80 (+13.7 % at the
    # copy's 0.88; +36.4 % while its fp16 D was counted as 1-byte fp8), the H200's compute side
    # deciding at +16.1 %
    small = {c.id: after[c.id] for c in cs if not v.sets_max(c)}
    assert all(abs(e) <= 0.16 for k, e in small.items() if "H100" in k and "802816" not in k)
    assert all(-0.45 <= e <= -0.20 for k, e in small.items() if "H200" in k and "802816" not in k)
    assert 0.0 <= small["azure ND H100 v5 fp8 802816x192x768"] <= 0.05
    assert 0.10 <= small["azure ND H200 v5 fp8 802816x192x768"] <= 0.20
    # the set held out: 10.2 % (13.0 % at the copy's 0.88)
    assert rep.loso.median_abs <= 0.105


def test_mamf_rows_no_fit_saw() -> None:
    """MAMF's B200 bf16 / fp8 and A100 PCIe bf16 best shapes (vendors.toml, judged only), as
    vendors.md prices them (op time): each tile set within 10 % of a source it was not fitted
    on, and Blackwell's fp8 set much closer than the smooth model × the end-to-end factor."""
    from types import MappingProxyType

    rows = {c.id: c for c in load_cases("vendors").cases}
    got = {}
    for cid in ("mamf B200 SXM bf16", "mamf B200 SXM fp8", "mamf A100 PCIe bf16"):
        c = rows[cid]
        sc = c.scenario
        c = replace(c, scenario=MappingProxyType({"hardware": sc["hardware"], "dtype": sc[
            "dtype"], "b": 1, "m": sc["m"], "n": sc["n"], "k": sc["k"], "clock": sc["clock"]}))
        got[cid] = (v.predict_gemm(c, op_time=True) / c.value_si - 1,
                    v.predict_gemm(c, smooth=True, op_time=True) / c.value_si - 1)
        assert abs(got[cid][0]) <= 0.10, (cid, got[cid])
    assert abs(got["mamf B200 SXM fp8"][1]) > 0.3 > abs(got["mamf B200 SXM fp8"][0]) * 3


def test_fp4_and_a_bad_narrow_set_are_refused_or_smooth() -> None:
    t = tiles_for(hardware("h100-sxm5"))
    assert t is not None and t.for_dtype("fp4") is None and t.for_dtype("bf16") is t
    t8 = t.for_dtype("fp8")
    assert t8 is not None
    with pytest.raises(SpecError, match="narrow"):
        replace(t, narrow=(("bf16", t8),)).check("test")
    assert replace(t, slots=7).for_dtype("fp8").slots == 7  # type: ignore[union-attr]
    with pytest.raises(SpecError, match="tiles.max"):
        replace(t, narrow=(("fp8", replace(t8, max=1.5)),)).check("test")


def test_a100_by_hand_and_judged_per_source() -> None:
    """1024³ fp16 on the A100's 108 SMs with the transferred set (max 1, a = b 16, c 128, fill
    6 µs) at 312 TFLOP/s. 64 x 64 tiles: 256 tiles, three waves (108 + 108 + 40) of factor
    1 + 16/64 + 16/64 + 128/1024 = 1.625: 3·108·2·64·64·1024·1.625 / 312e12 = 14.16 µs, the
    fastest (128 x 128: 64 tiles, one wave of factor 1.375, 15.97 µs; 128 x 64: 128 tiles, two
    waves of 1.5, 17.4 µs); + 6 µs fill. The op time adds the launch model's kernel gap."""
    hw = hardware("a100-sxm4-80gb")
    b = GraphBuilder("dot", "forward", precision("fp16"))
    b.add("matmul", "dot", m=1024, k=1024, n=1024)
    ot = time_model(b.build(), hw, efficiency_for(hw, "default")).evaluate(1.0)
    waves = 3 * 108 * 2 * 64 * 64 * 1024 * 1.625 / 312e12
    assert waves == pytest.approx(14.16e-6, rel=1e-3)
    assert float(ot.t_compute[0]) == pytest.approx(waves + 6e-6, rel=1e-12)
    case = load_cases("gemm").case("A100 fp16 1024x1024x1024 (tri3551)")
    assert case["timing"] == "op"
    assert v.predict_gemm(case) == pytest.approx(2 * 1024 ** 3 / float(ot.time[0]), rel=1e-12)
    assert float(ot.time[0]) > float(ot.t_kernel[0])
    # judged per source (nothing fitted on them): tri3551 and tri7085 within 12 %; tri6523's
    # A100 measures 20-40 % below tri3551's at the same sizes, so within 35 %; Azure's cuBLASLt
    # sizes (an A100-SXM4-80GB) within 6 %; the smooth model was worse on every source
    cs = v.a100_cases()
    after = {c.id: e for c, _, e in v.gemm_errors(cases=cs)}
    before = {c.id: e for c, _, e in v.gemm_errors(smooth=True, cases=cs)}
    bound = {"tri3551": 0.12, "tri7085": 0.12, "tri6523": 0.35, "azure_a100": 0.06}
    for src, lim in bound.items():
        a = [abs(after[c.id]) for c in cs if c.source == src]
        b_ = [abs(before[c.id]) for c in cs if c.source == src]
        assert np.median(a) <= lim and np.median(a) < np.median(b_), src
    assert len(cs) == 61 and {c.source for c in cs} == set(bound)
    assert v.a100_table() in DOC.read_text(encoding="utf-8")


def test_holdout_each_device_predicted_without_itself() -> None:
    rep = v.gemm_holdout()
    assert {p.source for p in rep.per_source} == {"xla_h100", "xla_b200"}
    assert rep.shipped_in_sample.median_abs <= 0.07
    for p in rep.per_source:
        assert p.held_out.median_abs <= 0.10, p.source
    assert dict(rep.refit.values) == dict(rep.shipped)  # the shipped values are the fit's


def test_page_shows_what_the_code_computes() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert v.gemm_summary_table() in text
    assert v.gemm_shape_table() in text
    assert v.gemm_holdout_table() in text
    assert v.fp8_tile_table() in text
    assert v.stream_k_table() in text
    assert v.unseen_table() in text


def test_prose_figures_are_the_codes() -> None:
    """The figures gemm.md's prose quotes are inline markers holding what gemm_page_figures
    computes today (from the tables' own reports); two by hand from gemm_errors / predict_gemm."""
    from roofline.validation.gemm_figures import gemm_page_figures

    text = DOC.read_text(encoding="utf-8")
    figs = gemm_page_figures()
    quoted, stale = quoted_figures(text, figs)
    assert len(quoted) >= 40 and not stale, stale
    e = {c.id: x for c, _, x in v.gemm_errors()}["B200 bf16 4096x4096x4096"]
    assert figs["gemm.b200_4096"] == f"{abs(e) * 100:.0f} %"
    c = next(c for c in v.nvidia_control_cases() if c.id == "mamf H100 SXM bf16")
    assert figs["gemm.mamf.H100_SXM_bf16.ours"] == \
        f"{v.predict_gemm(c, op_time=True) / 1e12:.1f}"


def test_unseen_sources_pooled_within_the_target() -> None:
    """Issue 18's target, GPU microbenchmarks median <= 10 % on sources the fit did not see:
    pooled over every NVIDIA case judged that way (it is 9.9 %; the groups are not each within
    it, the page says which)."""
    last = v.unseen_table().splitlines()[-1].split("|")
    assert last[1].strip() == "all" and int(last[2]) > 300
    assert float(last[3].strip().rstrip("%")) <= 10.0
    assert {c.id for c in v.nvidia_control_cases()} == {
        "mamf H100 SXM bf16", "mamf A100 SXM bf16", "mamf B200 SXM bf16", "mamf B200 SXM fp8",
        "mamf A100 PCIe bf16"}
