"""A factor patch changes the factors it names and nothing else: the whole-wave tile model of
the base (A100 / Hopper / Blackwell) survives ``EfficiencyPatch.apply`` and
``flat_efficiency``; before, both rebuilt the efficiency without it, so a what-if on one factor
silently switched the matmuls to the smooth model too."""
from __future__ import annotations

import roofline as rl
from roofline.engine.core import time_model
from roofline.engine.efficiency import flat_efficiency, read_patch
from roofline.engine.presets import efficiency_for
from roofline.engine.tiles import without_tiles


def _a100() -> tuple[rl.Hardware, object]:
    hw = rl.hardware("a100-sxm4-80gb")
    return hw, efficiency_for(hw, "default")


def test_flat_efficiency_keeps_the_tiles() -> None:
    _, base = _a100()
    assert base.tiles is not None  # the A100 has a tile set (engine/tiles.py data)
    eff = flat_efficiency(base=base, label="what-if", vector_max=base.vector.max)
    assert eff.tiles == base.tiles
    assert eff.gemm == base.gemm and eff.vector == base.vector


def test_patch_apply_keeps_the_tiles_and_changes_only_its_factors() -> None:
    _, base = _a100()
    half = {"value": 0.5, "unit": "1", "source": "t", "derivation": "assumed: a test value"}
    patch = read_patch({"memory": {"max": half}}, sources={"t": "this test"}, origin="test")
    eff = patch.apply(base, label="patched")
    assert eff.tiles == base.tiles
    assert eff.memory.max == 0.5 and base.memory.max != 0.5
    # the smooth-model base stays smooth: apply adds no tiles
    assert patch.apply(without_tiles(base), label="smooth").tiles is None


def test_a_neutral_what_if_prices_as_solve() -> None:
    # a 1024^3-ish GEMM where whole waves matter: the unchanged what-if equals rl.solve
    hw, base = _a100()
    m = rl.model("bert-base")
    g = m.graph(precision="fp16", seq_len=128, batch=1)
    same = flat_efficiency(base=base, label="what-if")
    t_base = time_model(g, hw, base).totals_at(1).latency
    t_same = time_model(g, hw, same).totals_at(1).latency
    t_smooth = time_model(g, hw, without_tiles(base)).totals_at(1).latency
    assert t_same == t_base
    assert t_smooth != t_base  # the tile model does change this graph's time
