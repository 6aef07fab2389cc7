"""An absurd spec (a peak of 5e-324 FLOP/s) gives a result that says it is not finite, without
numpy RuntimeWarnings (0 × inf, inf − inf) from the time model: its rates are flagged once
(``TimeModel.finite``) and only such a model pays for ``np.errstate``. (Absurd bandwidths are
not covered: 1e-300 B/s still warns of overflow in engine/lines.py.)"""
from __future__ import annotations

import math
import warnings

import numpy as np

import roofline as rl
from roofline.engine.core import time_model
from roofline.engine.presets import efficiency_for
from roofline.specs.hardware import Hardware, MemoryLevel


def _tiny(peak: float = 5e-324, bw: float = 1e12) -> Hardware:
    return Hardware(key="tiny", name="tiny", kind="gpu", peak_flops_per_s={"fp16": peak},
                    memory=(MemoryLevel(name="HBM", capacity_bytes=80e9, bytes_per_s=bw),))


def test_no_runtime_warning_and_not_finite() -> None:
    hw = _tiny()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning fails the test
        r = rl.solve("resnet50", hw, batch=1)
        s = rl.sweep("resnet50", hw, batch=[1, 2, 64])
        g = rl.model("resnet50").graph(precision="fp16")
        tm = time_model(g, hw, efficiency_for(hw, "default"))
        many = tm.totals_many(np.array([1.0, 8.0]))
        tm.totals_at(3.0)
    assert not tm.finite
    assert not math.isfinite(r.latency) and not r.feasible and "finite" in r.reason
    assert not np.isfinite(many[0]).all()
    # the sweep's rows say so too (they were feasible, with a NaN latency)
    rows = s.to_dicts()
    assert rows and not any(row["feasible"] for row in rows)
    assert all("not a finite non-negative number" in row["reason"] for row in rows)


def test_a_real_part_is_finite() -> None:
    hw = rl.hardware("A100")
    tm = time_model(rl.model("resnet50").graph(precision="fp16"), hw,
                    efficiency_for(hw, "default"))
    assert tm.finite
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rl.solve("resnet50", "A100", batch=1).feasible


def test_denormal_bandwidth_is_not_a_feasible_number() -> None:
    """A main-memory bandwidth of 1e-320 B/s (a denormal: 1 / it overflows to inf) gave a
    feasible 870 us ResNet-50 with t_memory NaN: the closed form's lines dropped the NaN of
    0 × inf. The model is now not finite, summed op by op, and the result infeasible."""
    hw = _tiny(peak=312e12, bw=1e-320)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (bandwidths still warn: see above)
        tm = time_model(rl.model("resnet50").graph(precision="fp16"), hw,
                        efficiency_for(hw, "default"))
        r = rl.solve("resnet50", hw, batch=1)
        rows = rl.sweep("resnet50", hw, batch=[1, 2, 64]).to_dicts()
    assert not math.isfinite(r.latency) and not r.feasible and "finite" in r.reason
    assert rows and not any(row["feasible"] for row in rows)
    assert not tm.finite and not tm.envelope_ok
    # a slow but ordinary bandwidth stays finite and feasible
    assert rl.solve("resnet50", _tiny(peak=312e12, bw=1e9), batch=1).feasible
