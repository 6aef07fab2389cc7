"""The sweep table carries ``t_overhead`` and ``t_fill`` (s), the two shares its ``bottleneck``
label counts as overhead, equal to a single solve's, whose fill is checked here by hand."""
from __future__ import annotations

import math

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import time_model
from roofline.engine.presets import efficiency_for


def _rn50(batch: int, preset: str = "default") -> rl.Result:
    return rl.solve("resnet50", "A100", batch=batch, precision="fp16", fuse=True, preset=preset)


def test_hand_checked_solve_fill_and_overhead() -> None:
    """ResNet-50 fp16 on an A100 at batch 1, by hand from the op table: an op's launch overhead
    is its time minus its kernel time max(t_compute, t_memory); a tiled op's fill share is the
    part of the fill F its memory time does not hide, min(F, max(tc − tm, 0))."""
    r = _rn50(1)
    hw = rl.hardware("A100")
    g = rl.model("resnet50").graph(precision="fp16", batch=1, fuse=True)
    w = time_model(g, hw, efficiency_for(hw, "default")).waves
    assert w is not None
    F = w.fill
    assert F == pytest.approx(6e-6)  # data/presets/tiles.toml, Ampere: fill = 6 us
    tiled = np.zeros(len(r.ops["t_compute"]), dtype=bool)
    # ops priced as tiles: those of the wave list with at least the smallest tile's rows
    tiled[w.idx] = (np.maximum(w.m1 * 1.0, 1.0) >= w.rows_min)[w.inv]
    tc, tm = np.asarray(r.ops["t_compute"]), np.asarray(r.ops["t_memory"])
    fill = np.where(tiled, np.minimum(F, np.maximum(tc - tm, 0.0)), 0.0)
    over = np.asarray(r.ops["time"]) - np.maximum(tc, tm)
    assert tiled.sum() > 10  # the convolutions and the classifier
    assert r.t_fill == pytest.approx(float(fill.sum()), rel=1e-9)
    assert r.t_overhead == pytest.approx(float(over.sum()), rel=1e-9)
    # 0 < t_fill <= (tiled ops) x 6 us
    assert 0 < r.t_fill <= tiled.sum() * F * (1 + 1e-12)


def test_sweep_columns_equal_the_solves() -> None:
    bs = [1, 3, 8, 17, 64]
    s = rl.sweep("resnet50", "A100", batch=bs, precision="fp16", fuse=True)
    rows = s.to_dicts()
    assert [k for k in rows[0] if k.startswith("t_")] == ["t_overhead", "t_fill"]
    assert s.table.units["t_overhead"] == s.table.units["t_fill"] == "s"
    for row, b in zip(rows, bs):
        r = _rn50(b)
        assert row["t_overhead"] == pytest.approx(r.t_overhead, rel=1e-9)
        assert row["t_fill"] == pytest.approx(r.t_fill, rel=1e-9)
        assert row["t_fill"] > 0
        # the label's overhead share is these two (solve's rule)
        assert (row["bottleneck"] == "overhead") == (r.bottleneck == "overhead")
    df_cols = list(s.table.to_dicts()[0])
    assert df_cols.index("t_overhead") == df_cols.index("latency_bound") + 1


def test_per_config_paths_and_missing_dtype() -> None:
    # the mlsysim preset prices per configuration (no tiles: fill 0), as does a MoE graph
    s = rl.sweep("resnet50", "A100", batch=[1, 8], precision="fp16", preset="mlsysim")
    for row in s.to_dicts():
        r = rl.solve("resnet50", "A100", batch=row["batch"], precision="fp16", preset="mlsysim")
        assert row["t_fill"] == 0.0 and row["t_overhead"] == pytest.approx(r.t_overhead)
    m = rl.model("mixtral-8x7b")
    assert m.batch_dependent
    s = rl.sweep(m, "H100", batch=[1, 16], precision="bf16", phase="decode", context=512)
    for row in s.to_dicts():
        r = rl.solve(m, "H100", batch=row["batch"], precision="bf16", phase="decode",
                     context=512)
        assert row["t_overhead"] == pytest.approx(r.t_overhead, rel=1e-12) and r.t_overhead > 0
        assert row["t_fill"] == pytest.approx(r.t_fill, rel=1e-12, abs=0.0)
    # a part without the dtype: NaN (not priced), not 0
    s = rl.sweep("resnet18", ["A100", "H100"], batch=[1], precision="fp8")
    a100 = [x for x in s.to_dicts() if "A100" in x["hardware"]]
    assert a100 and all(math.isnan(x["t_fill"]) and math.isnan(x["t_overhead"]) for x in a100)
    h100 = [x for x in s.to_dicts() if "H100" in x["hardware"]]
    assert h100 and h100[0]["t_overhead"] > 0


def test_text_and_csv_name_the_columns() -> None:
    s = rl.sweep("resnet50", "A100", batch=[1], precision="fp16", fuse=True)
    text = s.to_string(width=None)
    assert "t_overhead [µs]" in text and "t_fill [µs]" in text
    assert "t_overhead" in s.to_string(width=100)  # named among the columns left out
