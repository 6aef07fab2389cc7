"""Fit the training factors (data/presets/training.toml [gpu]) once, jointly, on all cases.

    python -m roofline.scenarios._training_fit            # fit on every case, print the table
    python -m roofline.scenarios._training_fit --holdout  # fit on one paper, test on the other

Coordinate descent on a grid: ``gemm_max`` (achievable matmul fraction in training kernels),
``scale_up_efficiency`` and ``scale_out_efficiency`` (bus bandwidth / line rate), minimising the
mean absolute log error of the step time over the cases of ``_training_validation.CASES``.
The result is written by hand into the TOML with this script named as its provenance.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence

import numpy as np

from . import training as T
from ._training_validation import CASES, Case, predict

__all__ = ["fit", "score"]

GRID = {
    "gemm_max": [round(0.55 + 0.01 * i, 2) for i in range(41)],
    "gemm_half_size": [16.0, 32.0, 64.0, 96.0, 128.0, 192.0, 256.0, 384.0, 512.0],
    "scale_up_efficiency": [round(0.4 + 0.05 * i, 2) for i in range(13)],
    "scale_out_efficiency": [round(0.3 + 0.05 * i, 2) for i in range(15)],
}


def score(factors: dict[str, float], cases: Sequence[Case]) -> tuple[float, list[float]]:
    """Mean |log(pred / published)| and the signed relative errors."""
    T._OVERRIDE["gpu"] = T.TrainingFactors.fitted(
        gemm_max=factors["gemm_max"], gemm_half_size=factors["gemm_half_size"],
        scale_up_efficiency=factors["scale_up_efficiency"],
        scale_out_efficiency=factors["scale_out_efficiency"])
    try:
        errs = [predict(c)[0] / c.step_time_s - 1.0 for c in cases]
    finally:
        T._OVERRIDE.pop("gpu", None)
    return float(np.mean([abs(math.log1p(e)) for e in errs])), errs


def fit(cases: Sequence[Case], rounds: int = 3) -> dict[str, float]:
    cur = {"gemm_max": 0.75, "gemm_half_size": 32.0, "scale_up_efficiency": 0.8,
           "scale_out_efficiency": 0.8}
    for _ in range(rounds):
        for k, grid in GRID.items():
            best = min(grid, key=lambda x: score({**cur, k: x}, cases)[0])
            cur[k] = best
    return cur


def _report(label: str, factors: dict[str, float], cases: Sequence[Case]) -> None:
    obj, errs = score(factors, cases)
    a = np.abs(errs)
    print(f"{label}: {factors}  mean|log| {obj:.4f}  median |err| {np.median(a):.1%}  "
          f"max |err| {a.max():.1%}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--holdout", action="store_true")
    args = ap.parse_args()
    if args.holdout:
        n21 = [c for c in CASES if c.name.startswith("N21")]
        k22 = [c for c in CASES if c.name.startswith("K22")]
        f1 = fit(n21)
        _report("fit on N21", f1, n21)
        _report("  tested on K22", f1, k22)
        f2 = fit(k22)
        _report("fit on K22", f2, k22)
        _report("  tested on N21", f2, n21)
        return
    f = fit(CASES)
    _report("fit on all", f, CASES)
    _, errs = score(f, CASES)
    for c, e in zip(CASES, errs):
        print(f"  {c.name:24s} {e:+.1%}")


if __name__ == "__main__":
    main()
