"""Session 30's nested folds (roofline.validation.uncertainty_folds; docs/validation/
uncertainty.md, "Closing the leak"): in the fold that judges source s, another source r's
residual comes from the fit made without both r and s."""

from __future__ import annotations

import math

import pytest

from roofline import uncertainty as U
from roofline.validation import uncertainty as V
from roofline.validation import uncertainty_folds as F
from roofline.validation.cases import Case
from roofline.validation.holdout import Refit


def _case(i: str, src: str, v: float) -> Case:
    return Case(id=i, domain="serving", source=src, where="-", metric="tpot", measured=v,
                unit="s", value_si=v, scenario={})


def _fit(cs):  # one factor: the geometric mean of the cases' values
    return Refit(values={"k": math.exp(sum(math.log(c.value_si) for c in cs) / len(cs))})


def _errors(values, cs):
    return [math.log(values["k"] / c.value_si) for c in cs]


def test_nested_by_hand():
    """Sources A (1, 4), B (2), C (8). The fold without A sees B priced by the fit on C alone
    (k = 8: log(8 / 2)) and C by the fit on B alone (log(2 / 8)); every ordered pair once; the
    sign flips a rate's residual."""
    cs = [_case("a1", "A", 1.0), _case("a2", "A", 4.0), _case("b", "B", 2.0),
          _case("c", "C", 8.0)]
    rows = F.nested(cs, _fit, _errors)
    assert {(s, r) for s, _, r, _ in rows} == {(s, r) for s in "ABC" for r in "ABC" if s != r}
    got = {(s, i): e for s, i, _, e in rows}
    assert got[("A", "b")] == pytest.approx(math.log(4.0))
    assert got[("A", "c")] == pytest.approx(math.log(0.25))
    assert got[("C", "a1")] == pytest.approx(math.log(2.0))  # fit on B: k = 2
    assert got[("C", "a2")] == pytest.approx(math.log(0.5))
    assert {k: -e for k, e in got.items()} == pytest.approx(
        {(s, i): e for s, i, _, e in F.nested(cs, _fit, _errors, -1.0)})


def test_nested_skips_a_pair_with_nothing_left():
    """Two sources: without both, no case is left to fit on: no row (the fold keeps the
    stored residual, the leak the page states for the Megatron fit)."""
    assert F.nested([_case("a", "A", 1.0), _case("b", "B", 2.0)], _fit, _errors) == []


@pytest.mark.parametrize("cls, make", [("serving-llamacpp", F.llamacpp_folds),
                                       ("serving-vllm-rocm", F.rocm_folds),
                                       ("tpu-training", F.tpu_folds),
                                       ("gpu-training", F.hopper_folds)])
def test_stored_folds_are_what_the_code_refits(cls, make):
    """residuals.toml's [[class.X.fold]] rows of the session-30 classes are the pair refits
    computed now (the class's own cases only), and at least one differs from the stored single
    hold-out residual (the fold's fit left out the judged source)."""
    from roofline.uncertainty import _data

    stored = {(f["held_out"], f["id"]): f["e"] for f in _data()["class"][cls]["fold"]}
    ids = {i for i, _, _ in U.residuals(cls)}
    want = {(s, i): e for s, i, _, e in make() if i in ids}
    assert stored.keys() == want.keys()
    for k, e in want.items():
        assert stored[k] == pytest.approx(e, abs=2e-3), k
    plain = {i: e for i, _, e in U.residuals(cls)}
    assert any(abs(e - plain[i]) > 1e-3 for (_, i), e in stored.items())
    assert cls in V.FOLDS
