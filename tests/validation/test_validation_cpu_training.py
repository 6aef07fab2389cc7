"""Measured-CPU training (issue 16): the step times benchmarks/bench_train_cpu.py measured on
this repository's dev VM (docs/validation/cpu-train/steps.json, quiet machine) against
``rl.train`` on the spec ``roofline measure`` wrote there minutes before (measured.toml).

The test re-prices the three modules from the recorded spec (nothing fitted to these runs), so
a model change that moves our side shows up here, and checks the doc's table states the errors
those numbers give."""
import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "docs" / "validation" / "cpu-train"


def _bench():
    spec = importlib.util.spec_from_file_location(
        "bench_train_cpu", ROOT / "benchmarks" / "bench_train_cpu.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows():
    return json.loads((RUN / "steps.json").read_text())["rows"]


def test_the_run_was_quiet_and_the_spec_is_the_one_recorded():
    doc = json.loads((RUN / "steps.json").read_text())
    assert doc["spec"] == "measured.toml" and (RUN / doc["spec"]).exists()
    # a run taken beside other jobs is not a validation (the earlier attempt at load ~8 was not)
    assert all(r["load_1min"] < 2.0 for r in doc["rows"])


def test_our_side_is_recomputed_from_the_recorded_spec():
    bench = _bench()
    nets = bench.models()
    for row in _rows():
        net, shape, _ = nets[row["model"]]
        ours = bench.predict(net, shape, str(RUN / "measured.toml")).step_time
        assert ours == pytest.approx(row["ours_s"], rel=1e-6), row["model"]


def test_the_doc_table_states_the_errors_these_numbers_give():
    text = (ROOT / "docs" / "validation" / "training.md").read_text()
    section = text.split("## Measured CPU")[1].split("\n## ")[0]
    for row in _rows():
        err = row["ours_s"] / row["measured_s"] - 1
        line = next(ln for ln in section.splitlines()
                    if ln.startswith(f"| {row['model'].split(' (')[0]},"))
        assert line.rstrip(" |").endswith(f"{err * 100:+.1f} %"), (line, err)
