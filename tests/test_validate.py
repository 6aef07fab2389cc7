"""`roofline validate`: summary arithmetic, bad input, and a small real run kept in tolerance."""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pytest

from roofline.calibrate.validate import Row, Validation, error_factor, summarize, validate
from roofline.calibrate.workloads import model_items, op_items
from roofline.errors import MissingExtraError


def _row(name: str, group: str, meas: float, pred: float, bound: float) -> Row:
    return Row(name=name, group=group, measured_s=meas, spread=0.0, predicted_s=pred,
               bound_s=bound)


def test_error_factor_and_summary_by_hand() -> None:
    assert error_factor(2.0, 1.0) == error_factor(1.0, 2.0) == 2.0
    assert math.isinf(error_factor(0.0, 1.0))
    rows = [_row("a", "compute", 1.0, 1.2, 0.5), _row("b", "memory", 1.0, 0.5, 0.25),
            _row("c", "model", 2.0, 2.0, 1.0), _row("d", "memory", 1.0, 1.4, 1.0)]
    s = summarize(rows)
    # errors 1.2, 2.0, 1.0, 1.4: geomean = (1.2*2*1*1.4)^(1/4) = 3.36^(1/4) = 1.35391
    assert s["default"]["all"]["geomean"] == pytest.approx(3.36 ** 0.25)
    assert s["default"]["all"]["within_1.25"] == 0.5  # 1.2 and 1.0
    assert s["default"]["all"]["within_1.5"] == 0.75  # + 1.4
    assert s["default"]["all"]["within_2.0"] == 1.0
    # memory: 2.0 and 1.4 -> sqrt(2.8)
    assert s["default"]["memory"]["geomean"] == pytest.approx(math.sqrt(2.8))
    # bound errors 2, 4, 2, 1 -> 16^(1/4) = 2
    assert s["bound"]["all"]["geomean"] == pytest.approx(2.0)
    v = Validation(hardware="hw", rows=tuple(rows), summary=s)
    text = v.to_string()
    assert "all         4" in text and "1.354x" in text


def test_suite_has_enough_items() -> None:
    ops, models = op_items(), model_items()
    assert len(ops) >= 30
    names = " ".join(i.name for i in ops + models)
    for needed in ("conv b1", "conv b8", "M=1 ", "sdpa", "softmax", "layernorm", "resnet18 b1",
                   "resnet50 b8", "gpt2 prefill", "gpt2 decode"):
        assert needed in names


def test_validate_without_torch_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingExtraError, match=r"roofline\[torch\]"):
        validate("nothing.toml", progress=False)


def test_quick_subset_within_tolerance(tmp_path: Path) -> None:
    """Stated tolerance for the quick subset on a noisy shared 2-core machine: geometric-mean
    error <= 1.5x and every stably measured item within 3x (the full suite's targets are in
    docs/validation/cpu.md). Measured ceilings and workloads run in the same call, on one
    thread: with two OpenMP threads on two shared cores, every parallel region waits for a
    descheduled thread and a whole model runs 10-20x slower than alone (seen here), which no
    ceiling measured a second earlier predicts. Two retries absorb bursts from other tenants.
    A broken model (no per-op cost, wrong peak, wrong vector rate) misses by far more.

    The tolerance is a statement about a machine this run has to itself. When every try ran
    with more runnable tasks than cores (the 1-minute load average above the core count, e.g.
    a second test suite beside this one), the timings measure the neighbours, not the model:
    the test then skips with the loads it saw instead of failing or widening the tolerance.
    On a quiet machine a miss fails. The outputs (rows, CSV, plot) are checked either way."""
    pytest.importorskip("torch")
    pytest.importorskip("matplotlib")
    csv_path, png = tmp_path / "v.csv", tmp_path / "v.png"
    cores = os.cpu_count() or 1
    loads: list[float] = []
    for _attempt in range(3):
        v = validate(quick=True, progress=False, csv_path=csv_path, plot_path=png, threads=1)
        loads.append(os.getloadavg()[0])
        g = v.summary["default"]["all"]["geomean"]
        # items whose timing rounds never agreed undisturbed (load from other tenants) are
        # marked and kept out of the summary (issue 11 §4); the tolerance holds for the rest,
        # and at least half the items must be measurable
        stable = [r for r in v.rows if not r.unstable]
        worst = max(r.error for r in stable) if stable else math.inf
        if g <= 1.5 and worst <= 3.0 and 2 * len(stable) >= len(v.rows):
            break
    assert len(v.rows) == len(op_items(True)) + len(model_items(True))
    assert csv_path.read_text().startswith("name,group,measured_s")
    assert png.stat().st_size > 10_000
    assert {r.group for r in v.rows} >= {"model"}
    if g <= 1.5 and worst <= 3.0 and 2 * len(stable) >= len(v.rows):
        return
    message = (f"quick validation out of tolerance: geomean {g:.2f}x, worst {worst:.2f}x; "
               f"1-min load after each try {', '.join(f'{x:.1f}' for x in loads)} "
               f"on {cores} cores")
    if min(loads) > cores:
        pytest.skip(f"{message}: every try shared the machine, so the timings are not "
                    f"the model's (run benchmarks/bench_calibrate_cpu.py on a quiet machine)")
    pytest.fail(f"{message}\n{v}")
