"""benchmarks/outputs_digest.py ``--no-bands``: with the bands switched off a result's digest
depends on its numbers only, so a change that moves only bands leaves it as it was (the
speed-work check "no number moved" is then provable), while the default digest sees the band."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

import roofline as rl
from roofline import uncertainty as U

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("outputs_digest",
                                               ROOT / "benchmarks" / "outputs_digest.py")
assert _spec is not None and _spec.loader is not None
D = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(D)

KW = dict(global_batch=256, seq_len=4096, tp=2, pp=2, nodes=2)


def _digests() -> tuple[str, str, str]:
    r = rl.train("llama-2-7b", "dgx-a100", **KW)
    s = rl.serve("llama-3.1-8b", "H100", batch=8, prompt_len=2048, output_len=256)
    o = rl.solve("resnet50", "A100", batch=1)
    return tuple(D._digest((str(x) + "\n" + repr(x.to_dict())).encode())  # type: ignore
                 for x in (r, s, o))


def test_no_bands_removes_every_band() -> None:
    with D.no_bands():
        for x in (rl.train("llama-2-7b", "dgx-a100", **KW),
                  rl.serve("llama-3.1-8b", "H100", batch=8, prompt_len=2048, output_len=256),
                  rl.solve("resnet50", "A100", batch=1)):
            assert x.uncertainty == {} and "80 %" not in str(x)
    assert "80 %" in str(rl.train("llama-2-7b", "dgx-a100", **KW))  # restored after


def test_a_band_only_change_leaves_the_no_bands_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    with D.no_bands():
        numbers = _digests()
    banded = _digests()
    # a band-only change: every class's quantiles widened (as a new validation row would)
    q = U._quantiles.__wrapped__

    def wider(cls: str, level: float) -> tuple[float, float, int]:
        lo, hi, n = q(cls, level)
        return lo - 0.1, hi + 0.1, n

    monkeypatch.setattr(U, "_quantiles", wider)
    with D.no_bands():
        assert _digests() == numbers
    moved = _digests()
    assert all(a != b for a, b in zip(moved, banded))


def test_the_command_line_flag_is_not_the_mode() -> None:
    """``--no-bands`` may stand before or after the mode; an unknown mode is still refused."""
    import os

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for argv in (["nothing", "--no-bands"], ["--no-bands", "nothing"]):
        out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "outputs_digest.py"),
                              *argv], capture_output=True, text=True, env=env)
        assert out.returncode != 0 and "KeyError: 'nothing'" in out.stderr


def test_stable_digest_ignores_a_new_field_not_a_declared_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``--stable``: a field added to a result (every default digest moves) leaves the stable
    digest as it was; a declared field's value moving changes it; a declared field that is gone
    is refused. Every declared field exists on today's results."""
    from roofline.scenarios.training.result import TrainingResult as TrainResult

    r = rl.train("llama-2-7b", "dgx-a100", **KW)
    s = rl.serve("llama-3.1-8b", "H100", batch=8, prompt_len=2048, output_len=256)
    o = rl.solve("resnet50", "A100", batch=1)
    wl = rl.Workload(prompt=rl.lengths("fixed", 100), output=rl.lengths("fixed", 10), rate=2.0)
    m = rl.simulate_serving("llama-3.1-8b", "H100", workload=wl, requests=50, seed=1)
    for x, kind in ((r, "train"), (s, "serve"), (o, "solve"), (m, "simulate")):
        assert set(D.STABLE_FIELDS[kind]) <= set(x.to_dict()), kind
    full, stable = D.result_digest(r, "train", False), D.result_digest(r, "train", True)
    orig = TrainResult.to_dict

    def with_new_field(self):  # type: ignore[no-untyped-def]
        return {**orig(self), "a_new_field": 1.0}

    monkeypatch.setattr(TrainResult, "to_dict", with_new_field)
    assert D.result_digest(r, "train", False) != full
    assert D.result_digest(r, "train", True) == stable

    def moved(self):  # type: ignore[no-untyped-def]
        return {**orig(self), "step_time": orig(self)["step_time"] * (1 + 1e-12)}

    monkeypatch.setattr(TrainResult, "to_dict", moved)
    assert D.result_digest(r, "train", True) != stable

    def renamed(self):  # type: ignore[no-untyped-def]
        d = orig(self)
        d["step_seconds"] = d.pop("step_time")
        return d

    monkeypatch.setattr(TrainResult, "to_dict", renamed)
    with pytest.raises(KeyError, match="step_time"):
        D.result_digest(r, "train", True)
