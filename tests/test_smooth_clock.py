"""The smooth matmul model at a part's measured engine clock (engine/efficiency.py
``Efficiency.clock``): the ratios are the tile sets' own (data/presets/tiles.toml
``[arch.cdna3.clock]``, one table), serve and train keep them when they strip the tiles, a
matmul's compute time is divided by the ratio (by hand), and a ratio that would price a matmul
above the peak is refused."""
from __future__ import annotations

import pytest

import roofline as rl
from roofline.engine.core import time_model
from roofline.engine.efficiency import Efficiency, Gemm
from roofline.engine.presets import efficiency_for
from roofline.engine.tiles import tiles_for, without_tiles
from roofline.errors import SpecError
from roofline.graphs.graph import GraphBuilder
from roofline.specs.dtypes import precision


def _mm(m: int, n: int, k: int, dtype: str) -> object:
    b = GraphBuilder(f"matmul {m}x{n}x{k}", "forward", precision(dtype))
    b.add("linear", "matmul", tokens=m, d_in=k, d_out=n)
    return b.build()


def test_the_clock_is_the_tile_sets_one_table() -> None:
    mi325, mi300 = rl.hardware("mi325x"), rl.hardware("mi300x")
    e325 = efficiency_for(mi325, "default")
    t325 = tiles_for(mi325)
    assert t325 is not None and e325.clock == t325.clock  # one reading of one table
    assert e325.clock_of("bf16") == pytest.approx(1447 / 1207, rel=1e-12)  # 1.199
    assert e325.clock_of("fp16") == pytest.approx(1354 / 1115, rel=1e-12)  # 1.214
    assert e325.clock_of("fp8") == pytest.approx(1464 / 1230, rel=1e-12)  # 1.190
    assert e325.clock_of("int8") == 1.0  # not measured
    e300 = efficiency_for(mi300, "default")
    assert all(e300.clock_of(d) == 1.0 for d in ("bf16", "fp16", "fp8"))  # the reference
    # parts without a clock table, and the pure roofline, have none
    assert efficiency_for(rl.hardware("h100-sxm5"), "default").clock == ()
    assert efficiency_for(rl.hardware("mi355x"), "default").clock == ()
    assert efficiency_for(mi325, "bound").clock == ()


def test_serve_and_train_keep_the_clock() -> None:
    from roofline.scenarios.serving.plan import efficiency as serving_efficiency
    from roofline.scenarios.serving.plan import serving_factors
    from roofline.scenarios.training.factors import training_factors

    mi325 = rl.hardware("mi325x")
    base = efficiency_for(mi325, "default")
    smooth = without_tiles(base)
    assert smooth.tiles is None and smooth.clock == base.clock
    s = serving_efficiency(mi325, "default", serving_factors("vllm"), "fp8")
    assert s.tiles is None and s.clock == base.clock
    t = training_factors("gpu", "mi325x").efficiency(smooth, "gpu")
    assert t.clock == base.clock
    # the training fraction at the MI300X's clock, on the MI325X: 0.440 x 1447 / 1207 = 0.527
    assert t.gemm.max * t.clock_of("bf16") == pytest.approx(0.440 * 1447 / 1207, rel=1e-12)


@pytest.mark.parametrize("dtype, peak, k_dtype, c325, c300", [
    ("bf16", 1307.4e12, 1.0, 1447, 1207), ("fp8", 2614.9e12, 0.6125, 1464, 1230)])
def test_smooth_matmul_at_the_clock_by_hand(dtype: str, peak: float, k_dtype: float,
                                            c325: int, c300: int) -> None:
    """t = 2·M·N·K · (1 + 32/M + 32/N + 16/K) / (peak · 0.51 · k_dtype · clock ratio)."""
    m, n, k = 8192, 8192, 8192
    g = _mm(m, n, k, dtype)
    pen = 1 + 32 / m + 32 / n + 16 / k  # 1.00977
    ts = {}
    for part, clock in (("mi325x", c325 / c300), ("mi300x", 1.0)):
        hw = rl.hardware(part)
        assert hw.peak(dtype) == pytest.approx(peak, rel=1e-4)
        eff = without_tiles(efficiency_for(hw, "default"))
        ts[part] = time_model(g, hw, eff).totals_at(1).t_compute
        # bf16: 1.0995e12 FLOP x 1.00977 / (1307.4e12 x 0.51 x 1.199) = 1.388 ms on the MI325X
        want = 2 * m * n * k * pen / (hw.peak(dtype) * 0.51 * k_dtype * clock)
        assert ts[part] == pytest.approx(want, rel=1e-9)
    assert ts["mi300x"] / ts["mi325x"] == pytest.approx(c325 / c300, rel=1e-9)


def test_a_clock_may_not_price_a_matmul_above_the_peak() -> None:
    Efficiency(gemm=Gemm(max=0.8), clock=(("bf16", 1.25),), label="ok")  # 0.8 x 1.25 = 1
    with pytest.raises(SpecError, match=r"clock\.bf16=1\.3"):
        Efficiency(gemm=Gemm(max=0.8), clock=(("bf16", 1.3),), label="t")  # 1.04 > 1
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(SpecError, match=r"clock\.bf16"):
            Efficiency(gemm=Gemm(max=0.5), clock=(("bf16", bad),), label="t")
