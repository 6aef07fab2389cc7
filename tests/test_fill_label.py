"""The fixed per-kernel fill of tiled matmuls (engine/tiles.py) is latency, not compute: an op is
compute-bound when ``tc − fill ≥ tm``, and the fill is a share of its own (``Totals.t_fill``)
that the bottleneck label counts with launch and dispatch. Times do not move."""
from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import fill_share, time_model
from roofline.engine.presets import efficiency_for
from roofline.engine.result import fill_phrase
from roofline.units import fmt_time


def test_fill_share_by_hand() -> None:
    # tc 10 µs (6 of them fill), tm 3: work 4 >= 3, compute-bound; the fill adds 10 - 4 = 6
    cb, fs = fill_share(np.array([10.0, 8.0, 3.0, 5.0]), np.array([3.0, 3.0, 10.0, 4.0]),
                        np.array([6.0, 6.0, 6.0, 0.0]))
    assert cb.tolist() == [True, False, False, True]
    # tc 8, tm 3: work 2 < 3, memory-bound; the fill adds 8 - 3 = 5 above the memory time;
    # tc 3 under tm 10: the memory time hides the fill (0); no fill: the plain tc >= tm
    assert fs.tolist() == [6.0, 5.0, 0.0, 0.0]


def _words(s: str) -> str:
    """``s`` with its line wraps undone."""
    return " ".join(s.split())


def _rn50(batch: int) -> rl.Result:
    return rl.solve("resnet50", "A100", batch=batch, precision="fp16", fuse=True)


def _model(batch: int):  # type: ignore[no-untyped-def]
    """solve's time model of ``_rn50(batch)``."""
    hw = rl.hardware("A100")
    g = rl.model("resnet50").graph(precision="fp16", batch=batch, fuse=True)
    return time_model(g, hw, efficiency_for(hw, "default"))


def test_resnet50_a100_batch1_is_latency_not_compute() -> None:
    r = _rn50(1)
    tm = _model(1)
    assert tm is not None and tm.waves is not None
    tot = tm.totals_at(1)
    fill = tm.waves.fill
    # by hand: every tiled op (rows >= the smallest tile) adds at most its fill above its work
    n_tiled = int((np.maximum(tm.waves.m1 * 1.0, 1.0) >= tm.waves.rows_min)[tm.waves.inv].sum())
    assert n_tiled > 0 and 0.0 < tot.t_fill <= n_tiled * fill * (1 + 1e-12)
    # the shares add up to the latency, and the time is the time before (compute incl. fill)
    assert tot.t_overhead + tot.t_compute_bound_ops + tot.t_memory_bound_ops + tot.t_fill \
        == pytest.approx(tot.latency, rel=1e-12)
    assert r.latency == pytest.approx(tot.latency, rel=1e-12)
    # fill plus launch outweigh the work: not compute-bound at batch 1
    assert tot.t_overhead + tot.t_fill > max(tot.t_compute_bound_ops, tot.t_memory_bound_ops)
    assert r.bottleneck == "overhead"
    assert _rn50(32).bottleneck == "compute"


def test_ridge_lever_finds_a_real_batch() -> None:
    lv = _rn50(1).levers(only=["batch"], combine=0, latency_slo=2e-3)
    ridge = [row for row in lv if "ridge point" in row.setting]
    assert len(ridge) == 1 and ridge[0].applies
    b = int(ridge[0].setting.split()[1])
    assert b > 1 and _rn50(b).bottleneck == "compute" and _rn50(b - 1).bottleneck != "compute"


@pytest.mark.parametrize("batch", [1, 3, 8, 17])
def test_every_path_splits_the_fill_alike(batch: int) -> None:
    tm = _model(batch)
    direct = tm.evaluate(float(batch)).totals()
    split = tm.totals_at(float(batch))
    many = tm.totals_many(np.array([float(batch), 64.0]))[:, 0]
    for name, i in (("t_fill", 9), ("t_compute_bound_ops", 7), ("latency", 0)):
        assert getattr(split, name) == pytest.approx(getattr(direct, name), rel=1e-9, abs=1e-15)
        assert many[i] == pytest.approx(getattr(direct, name), rel=1e-9, abs=1e-15)


def test_sweep_labels_as_solve_does() -> None:
    bs = [1, 2, 4, 8, 16, 32]
    s = rl.sweep("resnet50", "A100", batch=bs, precision="fp16", fuse=True)
    got = list(s.to_pandas()["bottleneck"])
    assert got == [_rn50(b).bottleneck for b in bs]


def test_result_carries_and_prints_the_fill() -> None:
    r = _rn50(1)
    tot = _model(1).totals_at(1)
    assert r.t_fill == pytest.approx(tot.t_fill, rel=1e-12) and r.t_fill > 0
    # part of the compute time, not added on top of it
    assert r.t_fill < r.t_compute
    assert r.to_dict()["t_fill"] == r.t_fill
    # said once, under the time split: part of compute, and counted as overhead by the label
    lines = [x.strip() for x in str(r).splitlines() if "kernel fill" in x]
    assert lines == [fill_phrase(r.t_fill, "the compute time")]
    assert lines[0] == (f"kernel fill {fmt_time(r.t_fill)} (in the compute time; fixed per "
                        "kernel: overhead in the bottleneck)")
    # the label's overhead share is launch + fill: larger than either share of the work
    assert r.t_overhead + r.t_fill > r.latency - r.t_overhead - r.t_fill - tot.t_memory_bound_ops
    # no tiles, no fill: the mlsysim preset prints no fill and carries 0
    m = rl.solve("resnet50", "A100", batch=1, precision="fp16", preset="mlsysim")
    assert m.t_fill == 0.0 and "kernel fill" not in str(m)


def test_fill_share_nan_in_nan_out_without_warnings() -> None:
    import warnings

    nan, inf = np.nan, np.inf
    tc = np.array([nan, 10.0, 10.0, inf, 1.0, inf, inf, inf, 10.0])
    tm = np.array([3.0, nan, 3.0, 1.0, inf, inf, inf, 1.0, 3.0])
    fl = np.array([6.0, 6.0, nan, 6.0, 6.0, 0.0, 6.0, inf, 6.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning fails the test
        cb, fs = fill_share(tc, tm, fl)
        s_cb, s_fs = fill_share(nan, 3.0, 6.0)  # scalars too
    # NaN in: NaN share, never a number; the flag is False (a comparison with NaN)
    assert np.isnan(fs[:3]).all() and not cb[:3].any()
    assert np.isnan(s_fs) and not s_cb
    # infinite compute over finite memory: compute-bound, the share is the fill (its limit);
    # infinite memory hides a finite op's fill; no fill, no share, even where both are inf
    assert cb[3] and fs[3] == 6.0
    assert not cb[4] and fs[4] == 0.0
    assert fs[5] == 0.0
    # both infinite under a fill, or an infinite fill: no limit, NaN
    assert np.isnan(fs[6]) and np.isnan(fs[7])
    # a finite op keeps the formula: 10 − max(4, 3) = 6
    assert cb[8] and fs[8] == 6.0


def test_layer_chart_and_report_put_the_fill_in_overhead() -> None:
    from roofline.report.page import _time_breakdown
    from roofline.viz.charts import layer_times

    r = _rn50(1)
    tot = _model(1).totals_at(1)
    # the op table carries each op's fill; they add up to the result's
    assert float(np.sum(r.ops["fill"])) == pytest.approx(r.t_fill, rel=1e-12)
    lt = layer_times(r)
    parts = {k: sum(v[k] for v in lt.values()) for k in ("compute-bound", "memory-bound",
                                                          "overhead")}
    # the buckets are the label's shares: launch + fill, and the work of each kind of op
    assert parts["overhead"] == pytest.approx(tot.t_overhead + tot.t_fill, rel=1e-9)
    assert parts["compute-bound"] == pytest.approx(tot.t_compute_bound_ops, rel=1e-9)
    assert parts["memory-bound"] == pytest.approx(tot.t_memory_bound_ops, rel=1e-9)
    assert max(parts, key=parts.__getitem__) == "overhead" == r.bottleneck
    html = _time_breakdown(r)
    assert "launch/dispatch overhead and kernel fill" in html
    # the mlsysim preset's one-row table has the column too (no tiles: 0), so both still draw
    m = rl.solve("resnet50", "A100", batch=1, precision="fp16", preset="mlsysim")
    assert list(m.ops["fill"]) == [0.0]
    (row,) = layer_times(m).values()
    assert row["overhead"] == pytest.approx(min(m.t_overhead, m.latency), rel=1e-12)
    assert "launch/dispatch overhead and kernel fill" in _time_breakdown(m)


def test_serving_phases_carry_their_fill() -> None:
    s = rl.serve("llama-3.1-8b", "H100", batch=8, prompt_len=512, output_len=32)
    for ph in (s.prefill, s.decode):
        # each phase's Result carries the fill its label counted (0: serving prices the smooth
        # matmul model, no tiles) and its shares add up to the latency as solve's do
        assert ph.t_fill == 0.0
        assert ph.bottleneck in ("compute", "memory", "overhead")
    assert s.t_fill == 0.0 and s.to_dict()["t_fill"] == 0.0
    assert "kernel fill" not in str(s)
    # a fill, when there is one, is printed in the words every result uses
    from dataclasses import replace

    f = replace(s, t_fill=1.5e-5)
    assert _words(fill_phrase(1.5e-5, "the end-to-end latency")) in _words(str(f))


def test_phase_result_passes_the_totals_fill() -> None:
    """_phase_result gives its Result the fill of the time model it prices with: with the tile
    sets kept (solve's efficiency) the decode phase of a dense model has a fill > 0."""
    from roofline.scenarios.serving import plan as sp
    from roofline.scenarios.serving.phases import _phase_result

    m = rl.model("llama-3.1-8b")
    hw = rl.hardware("H100")
    p = rl.precision("bf16")
    plan = sp.device_plan(m.config, p, tp=1, pp=1, fuse=True, fused_attention=True)
    eff = efficiency_for(hw, "default")
    r = _phase_result(m, plan, hw, eff, "default", "prefill", 1, 128, 0)
    g = plan.graph("prefill", seq_len=128, context=0, batch=1, compressed=False)
    tot = time_model(g, hw, eff).evaluate(1).totals()
    assert tot.t_fill > 0 and r.t_fill == pytest.approx(tot.t_fill, rel=1e-12)
    parts = {"compute": tot.t_compute_bound_ops, "memory": tot.t_memory_bound_ops,
             "overhead": tot.t_overhead + tot.t_fill}
    assert r.bottleneck == max(parts, key=parts.__getitem__)


def test_smooth_fill() -> None:
    from roofline.engine.tiles import smooth_fill, without_tiles

    eff = efficiency_for(rl.hardware("A100"), "default")
    assert eff.tiles is not None
    assert smooth_fill(without_tiles(eff)) == 0.0
    # a path that would price tiles without summing their fill says NaN, not 0
    assert np.isnan(smooth_fill(without_tiles(eff), eff))


def test_training_carries_the_fill_and_labels_it_as_overhead() -> None:
    from dataclasses import replace

    from roofline.analysis.levers import _train_bottleneck

    t = rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=8, seq_len=1024,
                 micro_batch=1)
    assert t.t_fill == 0.0 and t.to_dict()["t_fill"] == 0.0 and "kernel fill" not in str(t)
    assert _train_bottleneck(t) == "compute"
    # a fill is printed in the same words and counted as overhead, not compute work
    comp = sum(t.breakdown[k] for k in ("forward", "backward", "recompute", "optimizer"))
    f = replace(t, t_fill=0.6 * comp)
    assert _words(fill_phrase(0.6 * comp, "forward and backward")) in _words(str(f))
    assert _train_bottleneck(f) == "overhead"
    assert _train_bottleneck(replace(t, t_fill=0.1 * comp)) == "compute"


def test_json_and_html_carry_the_fill(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.cli import main
    from roofline.report.notebook import result_rows

    # --json prints to_dict: every result type has its t_fill there
    for argv, want in ((["solve", "resnet50", "A100", "--batch", "1", "--precision", "fp16"],
                        rl.solve("resnet50", "A100", batch=1, precision="fp16").t_fill),
                       (["serve", "llama-3.1-8b", "H100", "--batch", "2", "--prompt", "256",
                         "--output-len", "8"], 0.0),
                       (["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "8",
                         "--seq-len", "1024", "--micro-batch", "1"], 0.0)):
        assert main([*argv, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["t_fill"] == pytest.approx(want, rel=1e-12)
    # the HTML card's time split says it in the same words as str()
    r = _rn50(1)
    split = dict(result_rows(r))["time split"]
    assert split.endswith("; " + fill_phrase(r.t_fill, "the compute time"))


def test_a_sweep_rows_point_has_no_fill_number() -> None:
    """plot_roofline's points from sweep rows know no time split: t_fill NaN like t_overhead,
    not a 0 that reads as 'no fill'."""
    from roofline.viz.roofline import _sweep_results

    s = rl.sweep("resnet50", "A100", batch=[1, 8], precision="fp16")
    pts = _sweep_results(s)
    assert len(pts) == 2
    assert all(np.isnan(p.t_fill) and np.isnan(p.t_overhead) for p in pts)
    assert [p.bottleneck for p in pts] == list(s.to_pandas()["bottleneck"])
