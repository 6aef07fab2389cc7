"""The charts of issue 15: distinct colour and marker per device and batch, legends outside the
plot, roof labels that do not overlap, ridge labels naming their dtype, sweep / serving /
training / per-layer charts whose drawn data are the library's numbers."""

import math

import numpy as np
import pytest

import roofline as rl
from roofline.cli import main

mpl = pytest.importorskip("matplotlib")


def _stars(ax):
    from matplotlib.collections import PathCollection

    return [c for c in ax.collections if isinstance(c, PathCollection)
            and len(c.get_offsets()) == 1]


def test_several_devices_and_batches_distinct_styles(tmp_path):
    rs = [rl.solve("resnet50", hw, batch=b) for hw in ("A100", "H100", "L4") for b in (1, 8, 64)]
    fig = rl.plot_roofline(rs, path=tmp_path / "m.png")
    ax = fig.axes[0]
    pts = _stars(ax)
    assert len(pts) == 9
    styles = {(tuple(np.round(c.get_facecolor()[0], 3)), c.get_paths()[0].vertices.tobytes())
              for c in pts}
    assert len(styles) == 9  # no two (device, batch) points look alike
    colours = [tuple(np.round(c.get_facecolor()[0], 3)) for c in pts]
    assert len(set(colours)) == 3  # one colour per device ...
    assert len({c.get_paths()[0].vertices.tobytes() for c in pts}) == 3  # ... a marker per batch
    leg = ax.get_legend()
    bbox = leg.get_window_extent(fig.canvas.get_renderer())
    axbox = ax.get_window_extent(fig.canvas.get_renderer())
    assert bbox.x0 >= axbox.x1  # the legend sits outside the plot area


def test_roof_labels_do_not_overlap_and_ridge_names_its_dtype(tmp_path):
    fig = rl.plot_roofline(["A100"], path=tmp_path / "c.png")
    ax = fig.axes[0]
    r = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(r) for t in ax.texts if "TFLOP/s" in t.get_text()]
    assert len(boxes) == 5
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert not a.overlaps(b)
    labels = ax.get_legend_handles_labels()[1]
    # no result: the ridge of the top roof, int4 1248e12 / 2.039e12 = 612.1 FLOP/B, says so
    assert any(lab == "ridge int4: 612.1 FLOP/B" for lab in labels)


def test_prefill_title_has_its_length(tmp_path):
    r = rl.solve("llama-3.1-8b", "H100", phase="prefill", seq_len=2048, precision="bf16")
    fig = r.plot(tmp_path / "p.png")
    assert "prefill, T=2048" in fig.axes[0].get_title()


def test_sweep_chart(tmp_path):
    s = rl.sweep("resnet50", ["A100", "H100"], batch=[1, 2, 4, 8, 16], preset="mlsysim")
    fig = s.plot(tmp_path / "s.png")
    ax_t, ax_l = fig.axes[:2]
    lines = [ln for ln in ax_t.get_lines() if len(ln.get_xdata()) == 5]
    assert len(lines) == 2
    a100 = s["throughput"][s["hardware"] == "NVIDIA A100 SXM4 80GB"]
    assert np.allclose(lines[0].get_ydata(), a100)
    labels = ax_t.get_legend_handles_labels()[1]
    assert labels == ["A100 SXM4 80GB (compute-bound from 2)",
                      "H100 SXM5 80GB (compute-bound from 4)"]
    assert ax_l.get_legend() is not None and (tmp_path / "s.png").stat().st_size > 10_000


def test_serving_chart(tmp_path):
    rs = [rl.serve("llama-3.1-8b", hw, batch=b) for hw in ("H100", "L4") for b in (1, 8, 64)]
    fig = rl.plot_serving(rs, path=tmp_path / "v.png")
    ax_f, ax_p = fig.axes[:2]
    fits = [r for r in rs if r.feasible]
    drawn = sum(len(ln.get_xdata()) for ln in ax_f.get_lines())
    assert drawn == len(fits)
    h100 = [r.tpot for r in rs if r.hardware.startswith("NVIDIA H100") and r.feasible]
    assert np.allclose(ax_p.get_lines()[0].get_ydata(), h100)
    if len(fits) < len(rs):
        assert f"{len(rs) - len(fits)} configurations that do not fit" in fig._suptitle.get_text()


def test_serving_chart_overlays_the_planners_frontier(tmp_path):
    from roofline.errors import RooflineError

    wl = rl.Workload(prompt=rl.lengths("uniform", 500, 1500),
                     output=rl.lengths("uniform", 50, 150), rate=10.0)
    plan = rl.plan_serving("llama-3.1-8b", "H100", devices=4, workload=wl,
                           slo=rl.SLO(ttft_p99=1.0, tpot_p99=0.03), requests=300)
    rs = [rl.serve("llama-3.1-8b", "H100", batch=b, prompt_len=1000, output_len=100)
          for b in (1, 8, 64)]
    fig = rl.plot_serving(rs, plan=plan, path=tmp_path / "f.png")
    assert len(fig.axes) == 3 and (tmp_path / "f.png").stat().st_size > 10_000
    ax = fig.axes[2]
    lines = ax.get_lines()
    # the Pareto frontier, in order of tokens/s per user
    P = plan.pareto
    o = np.argsort(P["tokens_per_s_per_user"])
    front = lines[0]
    assert np.allclose(front.get_xdata(), P["tokens_per_s_per_user"][o])
    assert np.allclose(front.get_ydata(), P["tokens_per_s_per_device"][o])
    # the results: tokens/s per device against 1 / TPOT
    mine = lines[1]
    assert np.allclose(mine.get_xdata(), [1 / r.tpot for r in rs])
    assert np.allclose(mine.get_ydata(), [r.tokens_per_s_per_device for r in rs])
    labels = ax.get_legend_handles_labels()[1]
    assert "meets TPOT p99 ≤ 30 ms" in labels
    assert f"planner's best: {plan.best.layout} (simulated)" in labels
    # every grey point is one layout × concurrency
    assert len(ax.collections[0].get_offsets()) == len(plan.layouts)
    with pytest.raises(RooflineError, match="plan must be a ServingPlan"):
        rl.plot_serving(rs, plan=rs[0])


def test_training_chart_bars_sum_to_step_time(tmp_path):
    ts = [rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=4096, tp=tp)
          for tp in (8, 4, 1)]
    bad = rl.train("llama-3.1-70b", "dgx-h100", global_batch=64, seq_len=4096, tp=1)
    fig = rl.plot_training([*ts, bad], path=tmp_path / "t.png")
    ax = fig.axes[0]
    ends = {}
    for p in ax.patches:
        y = round(p.get_y() + p.get_height() / 2, 6)
        ends[y] = max(ends.get(y, 0.0), p.get_x() + p.get_width())
    got = sorted(v for v in ends.values() if v > 0)
    assert got == pytest.approx(sorted(t.step_time for t in ts), rel=1e-9)
    assert any("does not run" in t.get_text() for t in ax.texts)


def test_layers_chart_adds_up_to_the_latency(tmp_path):
    r = rl.solve("resnet50", "A100", batch=8)
    from roofline.viz.charts import layer_times

    lt = layer_times(r)
    assert "layer4.2" in lt and "conv1" in lt and len(lt) == 22
    assert sum(sum(v.values()) for v in lt.values()) == pytest.approx(r.latency, rel=1e-9)
    fig = r.plot_layers(tmp_path / "l.png")
    total_us = sum(p.get_width() for p in fig.axes[0].patches)
    assert total_us == pytest.approx(r.latency * 1e6, rel=1e-9)
    assert "time [µs]" == fig.axes[0].get_xlabel()


def test_cli_plot_kinds(tmp_path, capsys):
    out = tmp_path / "s.png"
    assert main(["plot", "resnet50", "A100", "H100", "--kind", "sweep", "-o", str(out)]) == 0
    assert "2 lines over batches 1–256" in capsys.readouterr().out
    out = tmp_path / "l.svg"
    assert main(["plot", "resnet50", "A100", "--kind", "layers", "-o", str(out)]) == 0
    assert "time of 22 layers" in capsys.readouterr().out
    assert main(["plot", "resnet50", "A100", "H100", "--kind", "layers", "-o", str(out)]) == 2
    assert "one device" in capsys.readouterr().err
    assert math.isfinite(out.stat().st_size)
