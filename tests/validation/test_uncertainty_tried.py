"""The band methods tried and not shipped (roofline.validation.uncertainty_tried): their
formulas by hand, and the page's "tried" table is what the code computes."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from roofline import uncertainty as U
from roofline.errors import RooflineError
from roofline.validation import uncertainty_tried as T

DOC = Path(__file__).parents[2] / "docs" / "validation" / "uncertainty.md"
ROWS = [("A", 0.1), ("A", 0.3), ("B", -0.1), ("B", 0.1)]


def test_digamma_trigamma_by_hand() -> None:
    # ψ(1) = −γ, ψ(½) = −γ − 2 ln 2; ψ′(1) = π²/6, ψ′(½) = π²/2
    g = 0.5772156649015329
    assert T._digamma(1.0) == pytest.approx(-g, abs=1e-10)
    assert T._digamma(0.5) == pytest.approx(-g - 2 * math.log(2), abs=1e-10)
    assert T._trigamma(1.0) == pytest.approx(math.pi ** 2 / 6, abs=1e-10)
    assert T._trigamma(0.5) == pytest.approx(math.pi ** 2 / 2, abs=1e-10)
    assert T._trigamma_inverse(T._trigamma(0.7)) == pytest.approx(0.7, rel=1e-9)


def test_components_by_hand() -> None:
    # means A 0.2, B 0.0: μ 0.1; within SS 4 × 0.01 over N − k = 2: 0.02; means' variance
    # (0.01 + 0.01) / 1 = 0.02
    c = T.components(ROWS)
    assert (c.mu, c.dw, c.dm, c.k, c.n) == (pytest.approx(0.1), 2, 1, 2, 4)
    assert c.s2w == pytest.approx(0.02) and c.s2m == pytest.approx(0.02)


def test_prior_by_hand() -> None:
    # equal estimates with many degrees of freedom differ less than chance: d0 = ∞ and
    # s0² = 0.04 · exp(log 50 − ψ(50)) = 0.04 · exp(0.0100333) = 0.0404033
    d0, s0 = T.prior([(0.04, 100), (0.04, 100)])
    assert math.isinf(d0) and s0 == pytest.approx(0.0404033, rel=1e-5)
    # one estimate: nothing to pool
    assert T.prior([(0.04, 10)]) == (0.0, 0.0)
    # estimates far apart: a finite d0 whose trigamma matches the excess variance of z
    xs = [(0.001, 3), (0.2, 3), (0.05, 20)]
    d0, s0 = T.prior(xs)
    z = [math.log(s) - T._digamma(d / 2) + math.log(d / 2) for s, d in xs]
    zm = sum(z) / 3
    excess = sum((x - zm) ** 2 for x in z) / 2 - sum(T._trigamma(d / 2) for _, d in xs) / 3
    assert T._trigamma(d0 / 2) == pytest.approx(excess, rel=1e-9)
    assert math.log(s0) == pytest.approx(zm + T._digamma(d0 / 2) - math.log(d0 / 2))


def test_moderated_band_by_hand() -> None:
    # no pool: the shipped band (test_uncertainty's hand case, 0.1 ± 0.2563103)
    assert T.moderated_band(ROWS, None) == pytest.approx(U.fit_band(ROWS), abs=1e-12)
    # shrinkage (d s² + d0 s0²) / (d + d0): d 2, s² 0.02, prior d0 2, s0² 0.06 -> 0.04
    assert T._shrunk(0.02, 2, (2.0, 0.06)) == pytest.approx(0.04)
    assert T._shrunk(0.02, 2, (math.inf, 0.06)) == 0.06


def test_centred_tau2_by_hand() -> None:
    """Class X: A 0.1, 0.3; B −0.1, 0.1. Class Y: A 1.0, 1.2; C 0.8, 1.0. Centred on each
    class's mean, the means' SS is 0.02 + 0.02 over 2 degrees of freedom: 0.02; within
    0.02; n̄ = 8 / 4 = 2: τ² = 0.02 − 0.02 / 2 = 0.01. Merged by source name (as shipped), A's
    rows of both classes make one mean (0.65), which the centred form does not."""
    y = [("A", 1.0), ("A", 1.2), ("C", 0.8), ("C", 1.0)]
    assert T.centred_tau2([ROWS, y]) == pytest.approx(0.01)
    assert T.centred_tau2([ROWS]) == pytest.approx(0.01)  # one class: its own τ²
    assert U._spread(ROWS + y)[2] != pytest.approx(0.01)
    # with X's own σ² 0.02, k 2, n 4: v = 0.01 + 0.02 + (0.01 + 0.01) / 2 = 0.04
    lo, hi = T.centred_band(ROWS, [ROWS, y])
    assert hi - 0.1 == pytest.approx(1.2815516 * 0.2, abs=1e-6)


def test_doc_carries_the_tried_table() -> None:
    assert T.band_methods_table() in DOC.read_text(encoding="utf-8"), \
        "docs/validation/uncertainty.md is stale: python -m roofline.validation.regenerate " \
        "--only uncertainty"


def test_tried_coverage_counts_by_hand() -> None:
    """serving-ttft under the moderated method, recounted: each source's cases against the
    band from every class without that source, the other sources' residuals as the fold sees
    them (nested where a class has folds: the serving classes since session 31)."""
    from roofline.validation.uncertainty import fold_view

    rows = U.residuals("serving-ttft")
    k = 0
    for s in {t for _, t, _ in rows}:
        with fold_view(s):
            pool = [[(t, e) for _, t, e in U.residuals(c) if t != s] for c in U.classes()
                    if c not in T.POOL_EXCLUDES]
            rest = [(t, e) for _, t, e in U.residuals("serving-ttft") if t != s]
        lo, hi = T.moderated_band(rest, pool)
        k += sum(lo <= e <= hi for _, t, e in rows if t == s)
    assert T.tried_coverage("serving-ttft", "moderated")[:2] == (k, len(rows))


def test_t_quantile_matches_the_printed_table() -> None:
    """Student's t, 0.90 and 0.95 quantiles (two-sided 80 % / 90 %), from any printed t table:
    ν 1: 3.078 / 6.314; 2: 1.886 / 2.920; 3: 1.638 / 2.353; 10: 1.372 / 1.812; ∞: the normal."""
    for nu, q90, q95 in ((1, 3.078, 6.314), (2, 1.886, 2.920), (3, 1.638, 2.353),
                         (10, 1.372, 1.812), (math.inf, 1.2816, 1.6449)):
        assert T.t_quantile(0.9, nu) == pytest.approx(q90, abs=6e-4)
        assert T.t_quantile(0.95, nu) == pytest.approx(q95, abs=6e-4)


def test_student_band_by_hand() -> None:
    """ROWS (A 0.1, 0.3; B −0.1, 0.1): μ 0.1, σ² 0.02 (N − k = 2), τ² 0.01 (k_B − 1 = 1),
    v = 0.04. a = (1 + 1/2)·0.01 = 0.015, b = 0.02·(1 + 1/4) = 0.025: ν = 0.04² / (0.015² / 1
    + 0.025² / 2) = 0.0016 / 0.0005375 = 2.9767, between the table's ν 2 and 3."""
    nu = 0.04 ** 2 / (0.015 ** 2 + 0.025 ** 2 / 2)
    assert nu == pytest.approx(2.97674, abs=1e-5)
    lo, hi = T.student_band(ROWS, ROWS)
    assert hi - 0.1 == pytest.approx(T.t_quantile(0.9, nu) * 0.2, rel=1e-9)
    assert 1.638 * 0.2 < hi - 0.1 < 1.886 * 0.2 and lo == pytest.approx(0.2 - hi)
    # one source: no between-source part, b alone on N − k degrees of freedom
    one = [("A", 0.1), ("A", 0.3), ("A", 0.2)]  # σ² = 0.01, v = 0.01 (1 + 1/3)
    lo, hi = T.student_band(one, one)
    assert hi - 0.2 == pytest.approx(T.t_quantile(0.9, 2) * math.sqrt(0.01 * 4 / 3))


def test_rescaled_by_hand() -> None:
    """Class X, no borrowed spread: A 0.0, 0.2; B −0.1, 0.1; C 0.3, 0.5 (within variance 0.02
    each). Without A (B, C): μ 0.2, σ² 0.02, means' variance 0.08, τ² 0.08 − 0.02/2 = 0.07,
    v = 0.07 + 0.02 + (0.07 + 0.01)/2 = 0.13: A's z = 0.2/√0.13 = 0.5547, 0. Without B:
    μ 0.25, τ² 0.045 − 0.01 = 0.035, v = 0.0775: B's z = 0.35/√0.0775 = 1.25724, 0.538816.
    Without C: μ 0.05, τ² max(0, 0.005 − 0.01) = 0, v = 0.02 + 0.01/2 = 0.025: C's z 1.58114,
    2.84605. Every case weighs 1/6; the cumulative weight reaches 0.8 at the fifth: q = 1.58114.
    All three: μ 1/6, σ² 0.02, means' variance 0.043333, τ² 0.033333, v = 0.053333 +
    (0.033333 + 0.01)/3 = 0.067778: band μ ± 1.58114 · 0.260342 = ±0.411637; never wider: the
    shipped ±1.2815516 · 0.260342."""
    from roofline.validation.uncertainty import residuals_as

    rows = [("A", 0.0), ("A", 0.2), ("B", -0.1), ("B", 0.1), ("C", 0.3), ("C", 0.5)]
    parsed = {"class": {"X": {"describes": "", "case": [
        {"id": f"{s}{i}", "source": s, "e": e} for i, (s, e) in enumerate(rows)]}}}
    with residuals_as(parsed):
        assert T.rescale_quantile("X") == pytest.approx(1.58114, abs=1e-5)
        lo, hi = T.rescaled_band("X")
        assert (lo + hi) / 2 == pytest.approx(1 / 6) and (hi - lo) / 2 == pytest.approx(
            0.411637, abs=1e-5)
        lo, hi = T.rescaled_band("X", narrow_only=True)
        assert (hi - lo) / 2 == pytest.approx(1.2815516 * 0.260342, abs=1e-5)
        assert (lo, hi) == pytest.approx(U.fit_band(rows), abs=1e-12)
        assert U.class_band("X") == (lo, hi)  # the shipped band (session 31) is the narrow form
        # without C (A, B): source means 0.1, 0.0, μ 0.05, σ² 0.02, means' variance 0.005,
        # τ² max(0, 0.005 − 0.02/2) = 0, v = 0.02 + (0.02 · 2/4)/2 = 0.025, √v 0.158114; its
        # own quantile 0.2/√0.03 = 1.154701 (below) is under z: the shipped band narrows to
        # 0.05 ± 1.154701 · 0.158114 = ±0.182574
        assert U.class_band("X", 0.8, frozenset({"C"})) == pytest.approx(
            (0.05 - 0.182574, 0.05 + 0.182574), abs=1e-6)
        # without C, two sources are left: A's and B's z against the other alone
        # (one source: τ² 0, v = 0.02 + 0.02/2 = 0.03): |0 − 0|, |0.2 − 0| / √0.03 ... q is
        # the larger source's: weights 1/4 each, the fourth reaches 0.8
        assert T.rescale_quantile("X", frozenset({"C"})) == pytest.approx(
            max(abs(e - m) for e, m in ((0.0, 0.0), (0.2, 0.0), (-0.1, 0.1), (0.1, 0.1)))
            / math.sqrt(0.03))
    # fewer than MIN_SOURCES sources: the shipped band
    two = [r for r in rows if r[0] != "C"]
    parsed2 = {"class": {"X": {"describes": "", "case": [
        {"id": f"{s}{i}", "source": s, "e": e} for i, (s, e) in enumerate(two)]}}}
    with residuals_as(parsed2):
        assert T.rescaled_band("X") == pytest.approx(U.fit_band(two), abs=1e-12)


def test_rule_by_hand() -> None:
    """The amended rule (session 29), clause by clause, on made-up counts of three classes."""
    shipped = {"a": (10, 10), "b": (8, 10), "c": (80, 100)}  # a over-covered, b and c inside
    ok = {"a": (9, 10), "b": (8, 10), "c": (80, 100)}  # a brought in (90 %), others unmoved
    assert T.rule_failures(shipped, ok) == []
    # 1: pooled outside 70–90 % (60 of 120 = 50 %)
    assert [f for f in T.rule_failures(shipped, {**ok, "c": (42, 100)}) if f.startswith("1:")]
    # 2: an inside class pushed out, its count inconsistent with 80 % at its n (c 80 -> 95 of
    # 100: binomial p far below 0.05)
    f = [f for f in T.rule_failures(shipped, {**ok, "c": (95, 100)}) if f.startswith("2:")]
    assert f == ["2: c pushed out, 80/100 (80 %) -> 95/100 (95 %), binomial p = 0.000 < 0.05 "
                 "against 80 %"]
    # 3: nothing brought in (a stays at 100 %)
    assert T.rule_failures(shipped, {**ok, "a": (10, 10)}) == [
        "3: no class outside the target brought in"]
    # 4: a crosses 80 % and ends further (100 % -> 70 %: 0.1 from 80 % against 0.2: allowed;
    # but c, inside, 80 % -> 81 % is on the same side? c₀ = 0.8 exactly: no side, no crossing)
    assert T.rule_failures(shipped, {**ok, "a": (7, 10), "c": (81, 100)}) == []
    # an inside class crossing 80 % and ending further: b 8/10 is exactly 80 % (no side); use c
    s2 = {**shipped, "c": (79, 100)}  # 1 point under
    f = T.rule_failures(s2, {**ok, "c": (83, 100)})  # 3 points over: further, other side
    assert f == ["4: c 79/100 (79 %) -> 83/100 (83 %), further from 80 % on the other side"]
    assert T.rule_failures(s2, {**ok, "c": (81, 100)}) == []  # 1 point over: as far, allowed
    # 5: over-covered to under-covered though closer to 80 % (100 % -> 65 %: 0.15 < 0.2)
    f = T.rule_failures(shipped, {**ok, "a": (13, 20)})
    assert f == ["5: a 10/10 (100 %) -> 13/20 (65 %), outside on the other side",
                 "3: no class outside the target brought in"]
    # session 28's "rescaled, never wider" for serving-ttft: 100 % -> 50 % fails 4 and 5
    f = T.rule_failures({**shipped, "t": (34, 34)}, {**ok, "t": (17, 34)})
    assert [x[:2] for x in f] == ["4:", "5:"]
    with pytest.raises(RooflineError, match="different classes"):
        T.rule_failures(shipped, {"a": (1, 1)})


def test_rule_clause_2_tests_at_the_class_size(monkeypatch) -> None:
    """Clause 2 as revised in session 30: a class within 70–90 % may leave it only where its
    count is consistent with 80 % at its own n by the exact two-sided binomial test (p ≥
    ALPHA). 10 of 10 at 80 %: P(10) = 0.8¹⁰ = 0.10737; the counts no more likely are 0–6
    (P(6) = 0.08808, P(5) = 0.02642, P(4) = 0.00551, P(3) … P(0) = 0.00086 together), so
    p = 0.22825: allowed. 20 of 20: P(20) = 0.01153, and 0–11 are no more likely (P(11) =
    0.00739, P(12) = 0.02216), P(0…11) = 0.00998: p = 0.02151 < 0.05, refused."""
    from roofline.validation.lever_pairs import binomial_p

    assert binomial_p(10, 10, 0.8) == pytest.approx(0.22825, abs=1e-5)
    assert binomial_p(20, 20, 0.8) == pytest.approx(0.02151, abs=1e-5)
    z = (800, 1000)  # a large class that holds the pooled coverage near 80 %
    shipped = {"a": (10, 10), "b": (8, 10), "d": (16, 20), "z": z}
    ok = {"a": (9, 10), "b": (8, 10), "d": (16, 20), "z": z}
    assert T.rule_failures(shipped, {**ok, "b": (10, 10)}) == []
    assert T.rule_failures(shipped, {**ok, "d": (20, 20)}) == [
        "2: d pushed out, 16/20 (80 %) -> 20/20 (100 %), binomial p = 0.022 < 0.05 against 80 %"]
    # the bound is ALPHA's: raised past 10 of 10's p, the small class is refused too
    monkeypatch.setattr(T, "ALPHA", 0.25)
    assert [f[:2] for f in T.rule_failures(shipped, {**ok, "b": (10, 10)})] == ["2:"]
    monkeypatch.setattr(T, "ALPHA", 0.05)
    # the pooled coverage still binds (clause 1): b exits to 100 % (allowed at its n), but with
    # the large class over-covered the pooled 955 of 1040 (92 %) is outside 70–90 %
    f = T.rule_failures({**shipped, "z": (950, 1000)}, {**ok, "b": (10, 10), "z": (920, 1000)})
    assert [x[:2] for x in f] == ["1:"]  # z over-covered both ways


def test_rule_clause_2_never_exempts_a_narrow_exit() -> None:
    """Clause 2 as amended at the end of session 30: the binomial exemption covers an exit on
    the wide side only. 6 of 8 (75 %) -> 5 of 8 (62.5 %) crosses no side of 80 % (clause 4 is
    silent) and 5 of 8 is consistent with 80 % (P(5) = 0.14680, and 0-5 are no more likely:
    P(0..5) = 0.20308 = p >= 0.05), yet it is refused: a band that errs narrow is a wrong
    number. A class at 7 of 8 (87.5 %) going to 8 of 8 (100 %, p = 0.37) on the wide side, the
    same side of 80 %, is allowed."""
    from roofline.validation.lever_pairs import binomial_p

    assert binomial_p(5, 8, 0.8) == pytest.approx(0.20308, abs=1e-5)
    z = (800, 1000)
    shipped = {"r": (6, 8), "w": (7, 8), "z": z}
    assert T.rule_failures(shipped, {**shipped, "r": (5, 8)}, band_method=False) == [
        "2: r pushed out on the narrow side, 6/8 (75 %) -> 5/8 (62 %)"]
    assert T.rule_failures(shipped, {**shipped, "w": (8, 8)}, band_method=False) == []


def test_rule_for_a_model_change_drops_clause_3() -> None:
    """A change of the model judged by its bands (``band_method=False``) sets out to mend no
    class: clause 3 does not apply; clauses 1, 2, 4, 5 do."""
    shipped = {"a": (10, 10), "c": (80, 100), "z": (800, 1000)}
    assert T.rule_failures(shipped, shipped) == ["3: no class outside the target brought in"]
    assert T.rule_failures(shipped, shipped, band_method=False) == []
    f = T.rule_failures(shipped, {**shipped, "c": (95, 100)}, band_method=False)
    assert [x[:2] for x in f] == ["2:"]
    f = T.rule_failures(shipped, {**shipped, "a": (6, 10)}, band_method=False)
    assert [x[:2] for x in f] == ["5:"]


@pytest.mark.parametrize("bad", [(0, 0), (5, 3), (-1, 3), (1.0, 3), (True, 3), (1, 2, 3), [1, 3]])
def test_rule_refuses_impossible_counts(bad) -> None:
    """A class with no case divided by zero; more covered than cases, a negative or a
    non-integer count was judged as a coverage above 100 % (or below 0); each is refused, naming
    the argument and the class, in either argument; so is an empty judgement."""
    ok = {"a": (9, 10), "b": (8, 10)}
    with pytest.raises(RooflineError, match=r"method\['b'\]"):
        T.rule_failures(ok, {**ok, "b": bad})
    with pytest.raises(RooflineError, match=r"shipped\['b'\]"):
        T.rule_failures({**ok, "b": bad}, ok)
    with pytest.raises(RooflineError, match="no class"):
        T.rule_failures({}, {})


def test_rule_judges_the_tried_methods() -> None:
    """Every method on the page's "tried" table fails the amended rule on the classes' held-out
    counts, as the page says (none is shipped), but those of ``PASSES_NOT_SHIPPED``, which pass
    and whose not shipping the page states (session 30); the page's verdicts are the rule's.
    Every figure
    ``band_methods_figures`` gives is quoted on the page or one of its per-method families
    (``tried.<method>.*``, ``tried.classes``): none is computed for nothing."""
    res = T._results(U.DEFAULT_LEVEL)
    base = {c: (k, n) for c, (k, n, _, _) in res["shipped"].items()}
    figs = T.band_methods_figures()
    for m in T.METHODS:
        fails = T.rule_failures(base, {c: (k, n) for c, (k, n, _, _) in res[m].items()})
        if m in T.PASSES_NOT_SHIPPED:
            assert not fails, f"{m} fails the rule now ({fails}): drop it from PASSES_NOT_SHIPPED"
            assert figs[f"tried.{m}.verdict"] == "passes"
            assert "**not shipped in session 30**" in DOC.read_text(encoding="utf-8")
            continue
        assert fails, f"{m} passes the rule: judge shipping it (docs/validation/uncertainty.md)"
        assert figs[f"tried.{m}.verdict"].startswith("fails rule ")
        assert f"<!--v:tried.{m}.verdict-->{figs[f'tried.{m}.verdict']}<!--/v-->" in \
            DOC.read_text(encoding="utf-8")
    quoted = set(re.findall(r"<!--v:(tried\.[^>]*?)-->", DOC.read_text(encoding="utf-8")))
    per_method = {k for k in figs if k.split(".")[1] in {"shipped", *T.METHODS}}
    assert set(figs) - quoted - per_method - {"tried.classes"} == set()


def test_conformal_by_hand() -> None:
    """test_rescaled_by_hand's class X, nested absolute residuals in log units: without A
    (μ 0.2): 0.2, 0; without B (μ 0.25): 0.35, 0.15; without C (μ 0.05): 0.25, 0.45. Each weighs
    1/6; sorted, the cumulative weight reaches 0.8 at the fifth, 0.35: band 1/6 ± 0.35."""
    from roofline.validation.uncertainty import residuals_as

    rows = [("A", 0.0), ("A", 0.2), ("B", -0.1), ("B", 0.1), ("C", 0.3), ("C", 0.5)]
    parsed = {"class": {"X": {"describes": "", "case": [
        {"id": f"{s}{i}", "source": s, "e": e} for i, (s, e) in enumerate(rows)]}}}
    with residuals_as(parsed):
        assert T.rescale_quantile("X", standardise=False) == pytest.approx(0.35)
        lo, hi = T.conformal_band("X")
        assert (lo, hi) == pytest.approx((1 / 6 - 0.35, 1 / 6 + 0.35))
        # without C: A against B alone (μ 0) and B against A (μ 0.1): 0, 0.2, 0.2, 0 -> the
        # fourth (weight 1) is the largest, 0.2; centre (0.1 + 0) / 2 = 0.05
        assert T.conformal_band("X", frozenset({"C"})) == pytest.approx((-0.15, 0.25))
    two = [r for r in rows if r[0] != "C"]  # fewer than MIN_SOURCES: the shipped band
    parsed2 = {"class": {"X": {"describes": "", "case": [
        {"id": f"{s}{i}", "source": s, "e": e} for i, (s, e) in enumerate(two)]}}}
    with residuals_as(parsed2):
        assert T.conformal_band("X") == pytest.approx(U.fit_band(two), abs=1e-12)


def test_the_target_is_written_once(monkeypatch) -> None:
    """The table's "in 70–90 %" column and the rule read one target (``TARGET``): moved, both
    move (the column repeated 0.7 and 0.9 as literals)."""
    assert T._inside(0.72) == "yes" and T._inside(0.95) == "no"
    monkeypatch.setattr(T, "TARGET", (0.75, 0.85))
    assert T._inside(0.72) == "no" and T._inside(0.8) == "yes"
    assert T.rule_failures({"a": (72, 100)}, {"a": (72, 100)})[0].startswith("1: pooled")


def test_clause_2_refusal_rate_of_a_calibrated_class() -> None:
    """uncertainty.md's account of clause 2's strictness, at the ten classes' sizes in session
    30 (35, 35, 34, 43, 59, 7, 29, 8, 49, 96 cases): with independent cases at exactly 80 %,
    the chance that a class leaves 70–90 % with p < ALPHA is below 0.05 in each (the exact
    test is discrete: 1.0–4.7 %, 3.4 % at 43), and across the ten about 0.27."""
    from math import comb, prod

    from roofline.validation.lever_pairs import binomial_p

    def rate(n: int) -> float:
        return sum(comb(n, k) * 0.8 ** k * 0.2 ** (n - k) for k in range(n + 1)
                   if binomial_p(k, n, 0.8) < T.ALPHA and not 0.7 <= k / n <= 0.9)

    rates = [rate(n) for n in (35, 35, 34, 43, 59, 7, 29, 8, 49, 96)]
    assert max(rates) < 0.05
    assert (round(min(rates), 3), round(max(rates), 3), round(rate(43), 3)) == (0.010, 0.047,
                                                                               0.034)
    assert round(1 - prod(1 - r for r in rates), 2) == 0.27
