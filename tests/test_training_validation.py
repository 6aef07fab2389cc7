"""The training model against published Megatron-LM runs (docs/validation/training.md).

Tolerance, stated: median |error| of the step time ≤ 8 % and every case within 20 %, with the
factors of data/presets/training.toml (fitted once over all these cases, not per case). Today:
median 2.8 %, max 16.3 % (Korthikanti 1T, over-predicted).
"""

from __future__ import annotations

import numpy as np
import pytest

from roofline.scenarios._training_validation import CASES, errors

MEDIAN_TOL = 0.08
MAX_TOL = 0.20


def test_published_runs_within_tolerance() -> None:
    res = errors()
    err = np.array([e for _, _, e, _ in res])
    worst = max(res, key=lambda x: abs(x[2]))
    assert np.median(np.abs(err)) <= MEDIAN_TOL, np.round(err, 3)
    assert np.abs(err).max() <= MAX_TOL, f"{worst[0].name}: {worst[2]:+.1%}"
    # not fitted per case: the errors keep both signs
    assert (err > 0).any() and (err < 0).any()


@pytest.mark.parametrize("name,pflops", [("N21 1.7B", 4.4), ("N21 145.6B", 227.1),
                                         ("N21 1008.0B", 502.0)])
def test_transcription_of_table1(name: str, pflops: float) -> None:
    """Narayanan Table 1: Eq. 3 FLOPs / our derived step time = the aggregate PFLOP/s column."""
    c = next(c for c in CASES if c.name == name)
    B, s, L, h, V = c.global_batch, c.seq_len, c.layers, c.hidden, c.vocab
    F = 96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h))
    assert F / c.step_time_s / 1e15 == pytest.approx(pflops, rel=0.01)


def test_selective_is_faster_than_full_as_published() -> None:
    """Korthikanti Table 5: selective + SP is 29–32 % faster than full recompute; ours too."""
    res = {c.name: t for c, t, _, _ in errors()}
    for size in ("22B", "175B", "530B", "1T"):
        ratio = res[f"K22 {size} full"] / res[f"K22 {size} sel+SP"]
        assert 1.2 < ratio < 1.45, (size, ratio)
