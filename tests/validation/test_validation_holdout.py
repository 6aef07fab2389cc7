"""leave_one_source_out on a model whose fit is known in closed form: predict one constant k
for every case; the least-squares fit of log error is the geometric mean of the measurements."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest

from roofline.errors import SpecError
from roofline.validation import Case, Refit, error_summary, holdout_tables, leave_one_source_out

MEASURED = {"a1": ("A", 1.0), "a2": ("A", 4.0), "b1": ("B", 2.0), "c1": ("C", 16.0)}


def _cases() -> list[Case]:
    return [Case(id=i, domain="serving", source=s, where="Table 1", metric="e2e", measured=m,
                 unit="s", value_si=m, scenario=MappingProxyType({}))
            for i, (s, m) in MEASURED.items()]


def test_loso_by_hand() -> None:
    seen: list[set[str]] = []

    def fit(cases: list[Case]) -> Refit:
        seen.append({c.id for c in cases})
        return Refit(values={"k": math.exp(sum(math.log(c.value_si) for c in cases) /
                                           len(cases))})

    def log_errors(values: dict[str, float] | None, cases: list[Case]) -> list[float]:
        k = 3.0 if values is None else values["k"]
        return [math.log(k / c.value_si) for c in cases]

    rep = leave_one_source_out("toy", _cases(), ["k"], {"k": 3.0}, fit, log_errors)
    # fit on all, then without A, B, C: each fit sees exactly the other sources' cases
    assert seen == [{"a1", "a2", "b1", "c1"}, {"b1", "c1"}, {"a1", "a2", "c1"},
                    {"a1", "a2", "b1"}]
    # all: (1·4·2·16)^(1/4) = 128^(1/4) = 3.3636; without A: √(2·16) = 5.6569;
    # without B: (1·4·16)^(1/3) = 4; without C: (1·4·2)^(1/3) = 2
    assert rep.refit.values["k"] == pytest.approx(128 ** 0.25)
    per = {p.source: p for p in rep.per_source}
    assert per["A"].fitted_without.values["k"] == pytest.approx(32 ** 0.5)
    assert per["B"].fitted_without.values["k"] == pytest.approx(4.0)
    assert per["C"].fitted_without.values["k"] == pytest.approx(2.0)
    # held out: a1 5.657/1 = +465.7 %, a2 5.657/4 = +41.4 %, b1 4/2 = +100 %, c1 2/16 = -87.5 %
    # median |error| = (0.875 + 1.0) / 2 = 0.9375; worst is c1 (|log| 2.079 > 1.733)
    # RMS log = sqrt((1.7329² + 0.3466² + 0.6931² + 2.0794²) / 4) = sqrt(7.9275 / 4) = 1.4078
    assert rep.loso.n == 4
    assert rep.loso.median_abs == pytest.approx(0.9375)
    assert (rep.loso.worst_case, rep.loso.worst) == ("c1", pytest.approx(-0.875))
    assert rep.loso.rms_log == pytest.approx(1.4078, abs=1e-4)
    assert per["A"].held_out.median_abs == pytest.approx((4.6569 + 0.4142) / 2, abs=1e-4)
    # in-sample with the shipped k = 3: a1 +200 %, a2 -25 %, b1 +50 %, c1 -81.25 %
    assert rep.shipped_in_sample.median_abs == pytest.approx((0.5 + 0.8125) / 2)
    assert per["C"].in_sample.worst == pytest.approx(3 / 16 - 1)
    text = holdout_tables(rep)
    assert "| k | 3 | 3.364 | 5.657 | 4 | 2 |" in text
    assert "| all, each predicted without its source (LOSO) | 4 | 93.8% | 1.408 | -87.5% (c1) |" \
        in text


def test_needs_two_sources_and_finite_errors() -> None:
    one = [c for c in _cases() if c.source == "A"]
    with pytest.raises(SpecError, match="2 or more sources"):
        leave_one_source_out("toy", one, ["k"], {"k": 1.0}, lambda cs: Refit(values={"k": 1}),
                             lambda v, cs: [0.0] * len(cs))
    with pytest.raises(SpecError, match="'x'"):
        error_summary([("x", float("inf"))])
    with pytest.raises(SpecError, match="none"):
        error_summary([])


def test_golden_bracket_closes_on_the_minimum() -> None:
    from roofline.validation.holdout import golden_bracket

    calls = []

    def f(x: float) -> float:
        calls.append(x)
        return (x - 0.3) ** 2

    lo, hi = golden_bracket(f, 0.0, 1.0, 1e-3)
    assert lo <= 0.3 <= hi and hi - lo <= 1e-3
    # one new evaluation per step: the bracket shrinks by the golden ratio each time
    assert len(calls) <= 2 + math.ceil(math.log(1e-3) / math.log((math.sqrt(5) - 1) / 2))


def test_one_golden_section_for_both_stop_rules_and_tie_rules() -> None:
    """golden_section serves golden_bracket (tolerance, ties left) and serving's step-count
    search (serving._golden: ties right, the better interior point)."""
    from roofline.validation.holdout import golden_section
    from roofline.validation.serving import _golden

    g = (math.sqrt(5) - 1) / 2
    # by hand, one step on [0, 1] of a flat function: the points are 1 - g and g; a tie keeps
    # [0, g] (left) or [1 - g, 1] (right)
    lo, hi, (x1, _), (x2, _) = golden_section(lambda x: 1.0, 0.0, 1.0, steps=1)
    assert (lo, hi) == (0.0, pytest.approx(g)) and x2 == pytest.approx(1 - g)
    lo, hi, _, _ = golden_section(lambda x: 1.0, 0.0, 1.0, steps=1, left_ties=False)
    assert (lo, hi) == (pytest.approx(1 - g), 1.0)
    # 18 steps shrink [0, 10] to 10 g^18 (~0.02); the best point is within it of the minimum
    x, fx = _golden(lambda x: (x - 3.7) ** 2, 0.0, 10.0, steps=18)
    assert abs(x - 3.7) < 10 * g ** 18 and fx == pytest.approx((x - 3.7) ** 2)


def test_span_pct_by_hand() -> None:
    from roofline.validation.holdout import span_pct

    # signed: -0.076 .. +0.070 -> "−8 … +7 %" (typographic minus, as the pages write it)
    assert span_pct([0.070, -0.076, 0.01]) == "−8 … +7 %"
    # sizes of one sign: |-0.206| .. |-0.328| -> "21–33 %"
    assert span_pct([-0.206, -0.328, -0.219], signed=False) == "21–33 %"
    assert span_pct([0.4644, 0.711], signed=False, digits=1) == "46.4–71.1 %"
    # both ends round alike: one figure (|-0.0197| and 0.0200 -> 2 and 2)
    assert span_pct([-0.0197, 0.0200], signed=False) == "2 %"
    assert span_pct([0.021, 0.024]) == "+2 %"


def test_fmt_pct_by_hand() -> None:
    from roofline.validation.holdout import fmt_pct

    # 0.1234 -> 12.34 % -> "+12 %" (signed, no decimals by default)
    assert fmt_pct(0.1234) == "+12 %"
    # -0.0764 -> -7.64 % -> one decimal "−7.6 %" with the typographic minus the pages use
    assert fmt_pct(-0.0764, 1) == "−7.6 %"
    # a size: no "+" ("16.5 %"); a negative value keeps its (typographic) minus
    assert fmt_pct(0.165, 1, sign=False) == "16.5 %"
    assert fmt_pct(-0.2, sign=False) == "−20 %"
    # −0.4 % rounds to zero: no minus on a zero ("+0 %", "0.0 %")
    assert fmt_pct(-0.004) == "+0 %" and fmt_pct(-0.0004, 1, sign=False) == "0.0 %"
    # the same text as Python's "%" format for a share (what the pages printed before)
    assert fmt_pct(0.0625, 1, sign=False) == f"{0.0625:.1%}".replace("%", " %")
