"""The fixed per-kernel fill of tiled matmuls (engine/tiles.py) is latency, not compute: an op is
compute-bound when ``tc − fill ≥ tm``, and the fill is a share of its own (``Totals.t_fill``)
that the bottleneck label counts with launch and dispatch. Times do not move."""
from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import fill_share, time_model
from roofline.engine.presets import efficiency_for


def test_fill_share_by_hand() -> None:
    # tc 10 µs (6 of them fill), tm 3: work 4 >= 3, compute-bound; the fill adds 10 - 4 = 6
    cb, fs = fill_share(np.array([10.0, 8.0, 3.0, 5.0]), np.array([3.0, 3.0, 10.0, 4.0]),
                        np.array([6.0, 6.0, 6.0, 0.0]))
    assert cb.tolist() == [True, False, False, True]
    # tc 8, tm 3: work 2 < 3, memory-bound; the fill adds 8 - 3 = 5 above the memory time;
    # tc 3 under tm 10: the memory time hides the fill (0); no fill: the plain tc >= tm
    assert fs.tolist() == [6.0, 5.0, 0.0, 0.0]


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
    line = next(x for x in str(r).splitlines() if "overhead" in x and "compute" in x)
    assert "kernel fill" in line and "part of compute" in line
    # the label's overhead share is launch + fill: larger than either share of the work
    assert r.t_overhead + r.t_fill > r.latency - r.t_overhead - r.t_fill - tot.t_memory_bound_ops
    # no tiles, no fill: the mlsysim preset prints no fill and carries 0
    m = rl.solve("resnet50", "A100", batch=1, precision="fp16", preset="mlsysim")
    assert m.t_fill == 0.0 and "kernel fill" not in str(m)
