"""Hopper's tiled-GEMM streaming fraction (data/presets/tiles.toml [arch.hopper] memory,
engine/tiles.py ``Tiles.memory`` / ``mem_ratio``): the memory side of a matmul the tiles price
is bytes / (bandwidth · 0.80) instead of the preset's copy fraction 0.88; the smooth model
(fewer rows than the smallest tile, serve / train without tiles) and parts without the field
keep 0.88."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import time_model
from roofline.engine.presets import efficiency_for
from roofline.engine.tiles import mem_ratio, tiles_for, without_tiles
from roofline.errors import SpecError
from roofline.graphs.graph import GraphBuilder
from roofline.specs.dtypes import precision
from roofline.specs.hardware import hardware


def _dot(m: int, n: int, k: int, dtype: str = "bf16"):  # type: ignore[no-untyped-def]
    b = GraphBuilder(f"dot {m}x{n}x{k}", "forward", precision(dtype))
    b.add("matmul", "dot", m=m, k=k, n=n)
    return b.build()


def test_fraction_is_sourced_and_shared_by_the_narrow_sets() -> None:
    t = tiles_for(hardware("h100-sxm5"))
    assert t is not None and t.memory == pytest.approx(0.80)
    assert t.for_dtype("fp8").memory == t.memory  # type: ignore[union-attr]
    eff = efficiency_for(hardware("h100-sxm5"), "default")
    assert eff.memory.max == pytest.approx(0.88)
    assert mem_ratio(t, eff) == pytest.approx(0.88 / 0.80)
    a100 = tiles_for(hardware("a100-sxm4-80gb"))
    assert a100 is not None and a100.memory == 0.0
    assert mem_ratio(a100, efficiency_for(hardware("a100-sxm4-80gb"), "default")) == 1.0


def test_memory_side_of_a_tiled_matmul_and_of_a_gemv() -> None:
    """A memory-bound 64 x 8192 x 8192 bf16 dot on the H100: its memory time is the smooth
    model's × 0.88 / 0.80; an 8-row one (below the 64-row tile: the smooth GEMV model) keeps
    the smooth model's memory time; on the A100 (no fraction of its own) nothing moves."""
    h = hardware("h100-sxm5")
    eff = efficiency_for(h, "default")
    for m, ratio in ((64, 0.88 / 0.80), (8, 1.0)):
        g = _dot(m, 8192, 8192)
        tiled = time_model(g, h, eff).evaluate(1.0)
        smooth = time_model(g, h, without_tiles(eff)).evaluate(1.0)
        assert float(tiled.t_memory[0]) == pytest.approx(float(smooth.t_memory[0]) * ratio,
                                                         rel=1e-12)
    # by hand: A 64·8192·2 B, B 8192·8192·2 B, D 64·8192·2 B; the weights stream from HBM
    main = 8192 * 8192 * 2
    ot = time_model(_dot(64, 8192, 8192), h, eff).evaluate(1.0)
    assert float(ot.t_memory[0]) >= main / (3.35e12 * 0.80)
    a = hardware("a100-sxm4-80gb")
    ea = efficiency_for(a, "default")
    g = _dot(64, 8192, 8192)
    assert float(time_model(g, a, ea).evaluate(1.0).t_memory[0]) == pytest.approx(
        float(time_model(g, a, without_tiles(ea)).evaluate(1.0).t_memory[0]), rel=1e-12)


def test_batch_paths_agree() -> None:
    """The op-by-op evaluation at many batches, one batch at a time, and the solve / sweep
    paths (WaveSplit, split.many_split) price the fraction alike."""
    h = hardware("h100-sxm5")
    eff = efficiency_for(h, "default")
    g = _dot(1, 8192, 8192)  # M = batch: a GEMV below 64 rows, tiles from 64
    tm = time_model(g, h, eff)
    bs = np.array([1.0, 32.0, 64.0, 96.0, 512.0])
    many = tm.ops(bs).t_memory[:, 0]
    one = [float(tm.evaluate(float(b)).t_memory[0]) for b in bs]
    assert np.allclose(many, one, rtol=1e-12)
    s = rl.sweep("llama-3.1-8b", "h100-sxm5", batch=[8, 96], precision="bf16",
                 phase="decode")
    for i, b in enumerate((8, 96)):
        r = rl.solve("llama-3.1-8b", "h100-sxm5", batch=b, precision="bf16", phase="decode")
        assert s["latency"][i] == pytest.approx(r.latency, rel=1e-9)


def test_bad_fraction_is_refused() -> None:
    t = tiles_for(hardware("h100-sxm5"))
    assert t is not None
    with pytest.raises(SpecError, match="memory"):
        replace(t, memory=1.5).check("test")
    with pytest.raises(SpecError, match="memory"):
        replace(t, memory=-0.1).check("test")


def test_convolutions_keep_the_copy_fraction() -> None:
    """A conv priced by the tiles (an implicit GEMM) keeps memory.max: the fraction is measured
    on GEMM kernels only (DeepGEMM, cuBLASLt), and the MLPerf ResNet-50 int8 H100 rows, whose
    convs are memory-bound at batch 2048, were 3.2 % (SXM) / 5.1 % (PCIe) too slow with it and
    went 9.6 / 11.6 % too slow (docs/validation/gemm.md). In a graph with both, the matmul's
    memory time moves and the conv's does not."""
    h = hardware("h100-sxm5")
    eff = efficiency_for(h, "default")
    assert eff.tiles is not None
    plain = replace(eff, tiles=replace(eff.tiles, memory=0.0))
    b = GraphBuilder("c", "forward", precision("int8"))
    b.add("conv2d", "conv", params=256 * 256, c_in=256, h=56, w=56, c_out=256, kernel=1,
          stride=1, padding=0, dilation=1, groups=1, bias=False)
    b.add("matmul", "dot", m=64, k=8192, n=8192)
    g = b.build()
    w = time_model(g, h, eff).waves
    assert w is not None and sorted(w.idx.tolist()) == [0, 1]  # both priced by the tiles
    for batch in (64.0, 256.0):
        new = time_model(g, h, eff).evaluate(batch).t_memory
        old = time_model(g, h, plain).evaluate(batch).t_memory
        assert float(new[0]) == pytest.approx(float(old[0]), rel=1e-12)
        assert float(new[1]) == pytest.approx(float(old[1]) * 0.88 / 0.80, rel=1e-12)
