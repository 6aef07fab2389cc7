"""Roofline charts: files written, log axes, one point per op plus the whole model."""

import math

import numpy as np
import pytest

import roofline as rl
from roofline.errors import SpecError

mpl = pytest.importorskip("matplotlib")


def _points(ax):
    """(x, y) of every scatter point on the axes (operator dots and whole-model stars)."""
    from matplotlib.collections import PathCollection

    pts = [c.get_offsets() for c in ax.collections if isinstance(c, PathCollection)]
    return np.concatenate(pts) if pts else np.empty((0, 2))


def test_result_plot_png_one_point_per_op_plus_model(tmp_path):
    r = rl.solve("resnet50", "A100", batch=1, precision="fp16")
    path = tmp_path / "r50.png"
    fig = r.plot(path)
    assert path.stat().st_size > 10_000
    ax = fig.axes[0]
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    # every ResNet-50 op has FLOPs > 0 and bytes > 0, so all 174 are drawn, plus the model
    assert len(r.ops) == 174
    pts = _points(ax)
    assert len(pts) == len(r.ops) + 1
    # the whole-model star sits at (flops / bytes, flops / latency)
    assert np.any(np.isclose(pts[:, 0], r.arithmetic_intensity)
                  & np.isclose(pts[:, 1], r.flops / r.latency))
    # each op point sits at (its intensity, flops / its time) and never above its roofline
    hw = rl.hardware("A100")
    roof = np.minimum(hw.peak("fp16"), hw.memory_bytes_per_s * pts[:, 0])
    assert np.all(pts[:, 1] <= roof * (1 + 1e-9))
    title = ax.get_title()
    assert "ResNet-50" in title and "A100" in title and "batch 1" in title and "fp16" in title
    assert any("2 FLOPs per multiply-add" in t.get_text() for t in fig.texts)


def test_zero_flop_ops_are_left_off(tmp_path):
    # decode has embedding lookups and KV-cache writes: no FLOPs, no place on a log axis
    r = rl.solve("llama-3.1-8b", "A100", batch=1, phase="decode")
    flops = np.asarray(r.ops["flops"], float)
    byts = np.asarray(r.ops["bytes"], float)
    n_drawn = int(((flops > 0) & (byts > 0)).sum())
    assert 0 < n_drawn < len(r.ops)
    fig = r.plot(tmp_path / "llama.svg")
    assert len(_points(fig.axes[0])) == n_drawn + 1
    assert (tmp_path / "llama.svg").read_text().lstrip().startswith("<?xml")


def test_ceilings_one_roof_per_distinct_peak_and_a_ridge(tmp_path):
    r = rl.solve("resnet50", "A100", batch=1)
    fig = rl.plot_roofline(r, path=tmp_path / "c.png")
    ax = fig.axes[0]
    hw = rl.hardware("A100")
    texts = [t.get_text() for t in ax.texts]
    # A100: fp64 and fp32 share 19.5 T, bf16 and fp16 share 312 T -> 5 distinct roofs
    distinct = {v for v in hw.peak_flops_per_s.values()}
    assert len([t for t in texts if "TFLOP/s" in t]) == len(distinct) == 5
    assert any(t.startswith("bf16/fp16 312 TFLOP/s") for t in texts)
    labels = ax.get_legend_handles_labels()[1]
    assert any("HBM2e 2,039 GB/s" in lab for lab in labels)
    # ridge 312e12 / 2.039e12 = 153.0 FLOP/B
    assert any("ridge fp16: 153 FLOP/B" in lab for lab in labels)
    # the result's dtype roof is solid, the others dashed
    roofs = [ln for ln in ax.get_lines() if len(ln.get_ydata()) == 2
             and ln.get_ydata()[0] == ln.get_ydata()[1]]
    solid = [ln for ln in roofs if ln.get_linestyle() == "-"]
    assert len(solid) == 1 and solid[0].get_ydata()[0] == pytest.approx(312e12)


def test_marker_area_is_proportional_to_time_share(tmp_path):
    r = rl.solve("llama-3.1-8b", "A100", batch=1, phase="decode")
    fig = r.plot(tmp_path / "l.png")
    from matplotlib.collections import PathCollection

    ops = [c for c in fig.axes[0].collections if isinstance(c, PathCollection)
           and len(c.get_offsets()) > 1]
    sizes = np.concatenate([c.get_sizes() for c in ops])
    share = np.sort(np.asarray(r.ops["share"], float)[np.asarray(r.ops["flops"], float) > 0])
    big = np.sort(sizes)[-2:]
    # lm_head (5.8 % of time) against a down_proj (0.66 %): areas in the same ratio
    assert big[-1] / big[-2] == pytest.approx(share[-1] / share[-2], rel=1e-6)


def test_several_results_on_one_chart(tmp_path):
    rs = [rl.solve("resnet50", "A100", batch=b, preset="mlsysim") for b in (1, 2, 4, 8)]
    fig = rl.plot_roofline(rs, path=tmp_path / "sweep.png")
    ax = fig.axes[0]
    pts = _points(ax)
    assert len(pts) == 4  # mlsysim has no per-op table: one star per batch
    assert list(pts[:, 0]) == pytest.approx([r.arithmetic_intensity for r in rs])
    assert "batch 1–8" in ax.get_title()
    assert any("1 FLOP per multiply-add" in t.get_text() for t in fig.texts)
    # a star for batch 1 at 7.56 TFLOP/s: 4.1e9 / 0.5426 ms (the seed's "7.6 TFLOP/s")
    assert pts[0, 1] == pytest.approx(4.1e9 / rs[0].latency)
    assert pts[0, 1] / 1e12 == pytest.approx(7.56, abs=0.01)


def test_sweep_and_two_hardware(tmp_path):
    s = rl.sweep("resnet50", ["A100", "H100"], batch=[1, 8, 64])
    fig = rl.plot_roofline(s, path=tmp_path / "s.png")
    ax = fig.axes[0]
    assert len(_points(ax)) == 6
    labels = ax.get_legend_handles_labels()[1]
    assert any(lab.startswith("A100 SXM4 80GB: HBM2e") for lab in labels)
    assert any(lab.startswith("H100 SXM5 80GB: HBM3") for lab in labels)


def test_hardware_only_and_existing_axes():
    from matplotlib.figure import Figure

    fig = Figure()
    ax = fig.add_subplot()
    out = rl.plot_roofline(["H100", rl.hardware("T4")], ax=ax)
    assert out is fig and ax.get_xscale() == "log"
    assert len(_points(ax)) == 0
    assert "H100" in ax.get_title() and "T4" in ax.get_title()


def test_bad_input():
    with pytest.raises(SpecError, match="at least one"):
        rl.plot_roofline([])
    with pytest.raises(SpecError, match="cannot plot a int"):
        rl.plot_roofline([3])
    with pytest.raises(SpecError, match="dtypes"):
        rl.plot_roofline("T4", dtypes=["fp8"])
    with pytest.raises(KeyError, match="Did you mean"):
        rl.plot_roofline("H1000")


def test_points_are_finite_for_an_infeasible_but_priced_result(tmp_path):
    # Llama-3.1-70B in fp16 does not fit in 80 GB, yet it is priced: still plottable
    r = rl.solve("llama-3.1-70b", "A100", batch=1, phase="decode")
    assert not r.feasible and math.isfinite(r.latency)
    fig = r.plot(tmp_path / "big.png")
    assert len(_points(fig.axes[0])) >= 2
