"""A part's measured engine clock within its tile set (engine/tiles.py ``Tiles.clock``,
data/presets/tiles.toml ``[arch.<name>.clock]``): the ratios read from the data, the refusals
of a malformed clock table, and the bound that keeps a faster clock from pricing a tile above
the datasheet peak."""
from __future__ import annotations

from dataclasses import replace

import pytest

from roofline.engine.tiles import _clock_ratios, tiles_for
from roofline.errors import SpecError
from roofline.specs.hardware import hardware

SRC = {"amdmaf": "a test source"}


def _mhz(v: float) -> dict[str, object]:
    return {"value": v, "unit": "MHz", "source": "amdmaf"}


def test_ratios_from_the_data_by_hand() -> None:
    t325 = tiles_for(hardware("mi325x"))
    t300 = tiles_for(hardware("mi300x"))
    assert t325 is not None and t300 is not None
    assert t325.clock_of("bf16") == pytest.approx(1447 / 1207, rel=1e-12)
    assert t325.clock_of("fp16") == pytest.approx(1354 / 1115, rel=1e-12)
    assert t325.for_dtype("fp8").clock_of("fp8") == pytest.approx(1464 / 1230, rel=1e-12)
    assert t325.clock_of("int8") == 1.0  # not measured
    assert all(t300.clock_of(d) == 1.0 for d in ("bf16", "fp16", "fp8"))  # the reference
    for key in ("mi355x", "h100-sxm5", "a100-sxm4-80gb"):  # no clock table: 1
        t = tiles_for(hardware(key))
        assert t is not None and t.clock == () and t.clock_of("bf16") == 1.0


def test_clock_table_refusals() -> None:
    tbl = {"clock_reference": "p1", "clock": {"p1": {"bf16": _mhz(1000)},
                                              "p2": {"bf16": _mhz(1250)}}}
    assert _clock_ratios(tbl, "t", SRC, "t") == {"p1": (("bf16", 1.0),), "p2": (("bf16", 1.25),)}
    with pytest.raises(SpecError, match="clock_reference='p3'"):
        _clock_ratios({**tbl, "clock_reference": "p3"}, "t", SRC, "t")
    with pytest.raises(SpecError, match="fp8"):
        _clock_ratios({"clock_reference": "p1", "clock": {
            "p1": {"bf16": _mhz(1000)}, "p2": {"bf16": _mhz(1250), "fp8": _mhz(1)}}},
            "t", SRC, "t")
    assert _clock_ratios({}, "t", SRC, "t") == {}


def test_a_clock_may_not_lift_the_best_tile_above_the_peak() -> None:
    t = tiles_for(hardware("mi325x"))
    assert t is not None
    t.check("shipped")  # 0.65 x 1.214 / (1 + 32/512 + 32/288) = 0.67 of the peak at best
    fast = replace(t, max=0.9, a=0.0, b=0.0, clock=(("bf16", 1.2),))  # 0.9 x 1.2 = 1.08 > 1
    with pytest.raises(SpecError, match=r"clock\[bf16\]"):
        fast.check("test")
    with pytest.raises(SpecError, match=r"clock\[bf16\]"):
        replace(t, clock=(("bf16", 0.0),)).check("test")
