"""All-reduce on NVSwitch nodes against published nccl-tests bus bandwidths
(docs/validation/collectives.md).

Tolerance, stated: over the NVLS cases (forced NVLS or NCCL's default) median |error| of the
bus bandwidth ≤ 5 % and every case within 15 %, with the shipped NVLS fraction (0.61, from one
source); the page's tables are what the code computes today.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from roofline.validation import collectives as v
from roofline.validation import load_cases

DOC = Path(__file__).parents[2] / "docs" / "validation" / "collectives.md"


def test_nvls_cases_within_tolerance() -> None:
    res = [(c, e) for c, _, e in v.collective_errors() if c["algorithm"] != "ring"]
    err = np.array([e for _, e in res])
    assert len(err) == 8
    assert np.median(np.abs(err)) <= 0.05, np.round(err, 3)
    assert np.abs(err).max() <= 0.15
    assert (err > 0).any() and (err < 0).any()  # not fitted per case


def test_the_ring_alone_was_a_third_too_slow() -> None:
    """Without NVLS the H100 8-GPU all-reduce is the ring at 0.70 of 450 GB/s: busbw 315 GB/s,
    34 % below the published 480 (issue 18, item 5)."""
    c = load_cases("collectives").case("H100 x8 all-reduce (NCCL default: NVLS)")
    n = 4294967296
    t_ring = 14 * 2e-6 + 1.75 * n / 315e9  # 2(p-1) steps of 2 us, 2(p-1)/p of n at 315 GB/s
    assert v.predict_busbw(c, 0.0) == pytest.approx(1.75 * n / t_ring, rel=1e-9)
    assert 1.75 * n / t_ring / 1e9 == pytest.approx(314.6, abs=0.1)
    # with NVLS: 2 steps of 2 us + n at 0.61 · 450 = 274.5 GB/s; busbw = 1.75 n / t = 480.3
    t_nvls = 4e-6 + n / 274.5e9
    assert v.predict_busbw(c) == pytest.approx(1.75 * n / t_nvls, rel=1e-9)
    assert 1.75 * n / t_nvls / 1e9 == pytest.approx(480.3, abs=0.1)


def test_holdout_each_source_predicted_without_itself() -> None:
    rep = v.collectives_holdout()
    assert {p.source for p in rep.per_source} == {"nccl212", "nccl1455", "nccl272", "nccl1374"}
    assert rep.loso.n == 8 and rep.loso.median_abs <= 0.05
    # the fit without the shipped value's source still lands near it
    w = next(p for p in rep.per_source if p.source == "nccl212")
    assert w.fitted_without.values["nvls"] == pytest.approx(0.61, abs=0.03)


def test_page_shows_what_the_code_computes() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert v.collectives_case_table() in text
    assert v.collectives_holdout_table() in text
