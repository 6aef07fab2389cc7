"""The vLLM generation profiles' host time (roofline.validation.serving_host;
docs/validation/serving.md, "vLLM generations"): the profiles as data, the stored fits being
the fit's minima, and the page's tables being what the code produces.

The fit itself (several minutes: every trial simulates the saturated Lambda runs) is run by
``python -m roofline.validation.serving_host --write``, which rewrites
data/validation/serving_host_fits.toml; here each stored fit is checked to be a minimum of the
fit's objective along each factor (a stored value that is not would fail)."""

import math
from pathlib import Path

import pytest

from roofline.scenarios.serving.plan import host_step, serving_factors
from roofline.validation import serving_host as h

DOC = Path(__file__).parents[2] / "docs" / "validation" / "serving.md"


@pytest.fixture(scope="module")
def report():
    return h.host_holdout()


def test_cases_carry_their_generation_and_version_note():
    cs = h.host_cases()
    srcs = {c.source for c in cs}
    assert srcs == {"vllm_ci", "vllm2192", "oci405", "vllm_azure", "lambda_vllm", "lambda_traces",
                    "lambda_ms_traces"}
    # the known outliers (a row its own numbers contradict) are shown, not fitted or counted
    out = h.outlier_cases()
    assert [c.source for c in out] == ["lambda_vllm"] * 2
    assert not {c.id for c in out} & {c.id for c in cs}
    assert all("Little's law" in c.reason for c in out)
    for c in cs:
        eng = h._engine(c)
        assert eng in ("vllm-v0", "vllm-v0-multistep", "vllm-v1"), c.id
        assert "vLLM version" in c.note, c.id  # stated from the source, or the assumption
        if c.source == "lambda_vllm":  # the table states the version: V0 throughout
            v = "v0.5.4" if "v0.5.4" in c.id else "v0.6.0"
            assert v in c.note
            assert eng == ("vllm-v0-multistep" if "steps 10" in c.id else "vllm-v0")
        if c.source == "lambda_traces":  # the driver script's image: v0.5.4, single-step
            assert "v0.5.4" in c.note and eng == "vllm-v0" and c.get("trace")
        if c.source == "lambda_ms_traces":  # not stated: multi-step read off the file
            assert "assumption" in c.note and eng == "vllm-v0-multistep" and c.get("trace")
        if c.source == "vllm_azure":  # the publisher's repository: 0.7.3 (V0), priced as V1
            assert eng == "vllm-v1" and "v0.7.3" in c.note and "643c866" in c.note
            assert "V0 engine" in c.note and "priced all the same with vllm-v1" in c.note.lower()


def test_profiles_inherit_vllm_and_multistep_derives_from_v0():
    base, v0, ms, v1 = (serving_factors(n) for n in
                        ("vllm", "vllm-v0", "vllm-v0-multistep", "vllm-v1"))
    for f in (v0, ms, v1):  # kernels, all-reduces and the per-layer term are vllm's
        for k in ("layer_overhead", "request_overhead", "allreduce_alpha", "fuse",
                  "host_allreduce_alpha", "patch"):
            assert getattr(f, k) == getattr(base, k), (f.name, k)
    assert (ms.step_overhead, ms.seq_overhead) == (v0.step_overhead, v0.seq_overhead)
    assert ms.scheduler_steps == 10 and v0.scheduler_steps == 1
    # the default engine="vllm" is unchanged: no per-sequence term
    assert base.seq_overhead == 0 and base.layer_overhead == pytest.approx(107e-6)
    # multi-step pays the step and sequence host time once per 10 steps, by hand:
    # (2 stages x s + 256 x q) / 10 + 80 layers x 107 us
    want = (2 * v0.step_overhead + 256 * v0.seq_overhead) / 10 + 80 * base.layer_overhead
    assert host_step(ms, 80, 256, 2) == pytest.approx(want, rel=1e-12)


def test_shipped_values_are_the_stored_fit():
    fit = h.stored_fits()["all"].values
    for k, v in h.shipped_host_values().items():
        assert v == pytest.approx(fit[k], rel=0.01, abs=2e-5), k  # rounded to 3 digits


def _objective(values, cases):
    es = [e for _, _, e in h.host_errors(values, cases)]
    return math.sqrt(sum(e * e for e in es) / len(es))


@pytest.mark.parametrize("label", ["all", "without lambda_vllm", "without lambda_traces"])
def test_stored_fits_are_minima_along_each_factor(label):
    """Moving any fitted factor by 5 % of its search interval (inside it) makes the fit's
    objective — the RMS log error over that generation's cases — worse: each stored value is
    a minimum along its factor, as the coordinate search leaves it."""
    cs = h.host_cases()
    left = label.removeprefix("without ").split(", ") if label != "all" else []
    sub = [c for c in cs if c.source not in left]
    fit = dict(h.stored_fits()[label].values)
    for g in h.GENERATIONS:
        mine = [c for c in sub if h.DERIVED.get(h._engine(c), h._engine(c)) == g]
        if not mine:
            continue
        best = _objective(fit, mine)
        for nm in h.HOST_PARAMS:
            k = f"{g}.{nm}"
            lo, hi = h.HOST_BOUNDS[nm]
            d = 0.05 * (hi - lo)
            for v in (fit[k] - d, fit[k] + d):
                if lo <= v <= hi:
                    assert _objective({**fit, k: v}, mine) >= best - 1e-4, (label, k, v)


def test_holdout_is_worse_than_in_sample_and_improves_on_the_shared_profile(report):
    per = {p.source: p for p in report.per_source}
    assert report.loso.rms_log > report.refit_in_sample.rms_log
    # without vllm_azure no V1 case is left: V1 takes V0's host time, the note says so
    assert "no vllm-v1 case left" in per["vllm_azure"].fitted_without.note
    # the unseen-source medians this work set out to lower (before: 25.3 % on vllm_azure with
    # the shared vllm profile; lambda_vllm throughputs +44 ... +307 %)
    assert per["vllm_azure"].held_out.median_abs < 0.253
    assert per["lambda_vllm"].held_out.rms_log < 1.117
    # with the per-request traces as a second V0 source with per-sequence information, each
    # Lambda source is predicted from the others (and the static cases): held out, lambda_vllm
    # 21.0 % (39.6 % before, with the static cases alone; 21.0 % too with its outlier row
    # counted), lambda_traces 19.1 % (22.9 % with the previous V0 fit, which had not seen
    # it), lambda_ms_traces 2.9 % (the derived multi-step profile); all 45 cases 16.7 %
    # (23.3 % over 37 before)
    assert per["lambda_vllm"].held_out.median_abs < 0.25
    assert per["lambda_traces"].held_out.median_abs < 0.25
    assert per["lambda_ms_traces"].held_out.median_abs < 0.10
    assert report.loso.median_abs < 0.20


def test_page_shows_what_the_code_produces(report):
    page = DOC.read_text(encoding="utf-8")
    assert h.host_holdout_table(report) in page, \
        "docs/validation/serving.md is stale: paste serving_host.host_holdout_table()"
    assert h.host_case_table(h.host_errors(), report.held_out_errors) in page
    assert h.host_miss_table(h.host_errors(), report.held_out_errors) in page
    assert h.host_direction_table(h.host_errors(), report.held_out_errors) in page
    assert h.tpot_spread_table(h.host_errors()) in page
    assert h.outlier_table() in page


def _case(cid: str, source: str, si: float, metric: str = "tpot"):
    from roofline.validation.cases import Case

    return Case(id=cid, domain="serving", source=source, where="", metric=metric, measured=si,
                unit="s", value_si=si, scenario={})


def test_miss_table_by_hand():
    """Three made-up cases of two sources. A: +20 % in-sample, +5 % held out (|log| of 1.2 and
    1.05); A2: −5 % / −30 %; B: +12 % / +12 %. A's medians: held out (5 + 30) / 2 = 17.5 %,
    in-sample (20 + 5) / 2 = 12.5 %; over 10 %: held out 1 (A2), in-sample 1 (A). With A's
    cases at their in-sample errors and B held out: {20, 5, 12}, median 12 %; with B's: the
    held-out {5, 30, 12}, median 12 %. Every case: held out {5, 30, 12} 12 %, in-sample
    {20, 5, 12} 12 %, over 10 % 2 and 2."""
    cs = [_case("a1", "A", 1.0), _case("a2", "A", 1.0), _case("b1", "B", 1.0)]
    ins, out = [1.2, 0.95, 1.12], [1.05, 0.70, 1.12]
    errs = [(c, v, math.log(v)) for c, v in zip(cs, ins)]
    held = {c.id: math.log(v) for c, v in zip(cs, out)}
    rows = h.host_miss_table(errs, held).splitlines()[2:]
    assert rows == ["| A | 2 | 17.5 % | 12.5 % | 1 | 1 | 12.0 % |",
                    "| B | 1 | 12.0 % | 12.0 % | 1 | 1 | 12.0 % |",
                    "| every case | 3 | 12.0 % | 12.0 % | 2 | 2 | |"]


def test_miss_table_header_names_its_threshold(monkeypatch):
    """The 'over' columns count against MISS_TARGET, and the header says which: at 15 % the
    same three cases have 1 held out (A2's 30 %) and 1 in-sample (A's 20 %) over it."""
    cs = [_case("a1", "A", 1.0), _case("a2", "A", 1.0), _case("b1", "B", 1.0)]
    ins, out = [1.2, 0.95, 1.12], [1.05, 0.70, 1.12]
    errs = [(c, v, math.log(v)) for c, v in zip(cs, ins)]
    held = {c.id: math.log(v) for c, v in zip(cs, out)}
    assert "| over 10 %: held out |" in h.host_miss_table(errs, held).splitlines()[0]
    monkeypatch.setattr(h, "MISS_TARGET", 0.15)
    lines = h.host_miss_table(errs, held).splitlines()
    assert "| over 15 %: held out |" in lines[0] and "10 %" not in lines[0]
    assert lines[-1] == "| every case | 3 | 12.0 % | 12.0 % | 1 | 1 | |"


@pytest.mark.parametrize("table", ["host_miss_table", "host_case_table"])
def test_host_tables_refuse_empty_or_uncovered_input(table):
    """No case, or a held-out map without one of the cases: a SpecError naming the argument
    (before: median([]) raised a bare StatisticsError, a missing id a bare KeyError)."""
    from roofline.errors import SpecError

    fn = getattr(h, table)
    cs = [_case("a1", "A", 1.0), _case("b1", "B", 1.0)]
    errs = [(c, 1.0, 0.0) for c in cs]
    with pytest.raises(SpecError, match=r"errs=\[\]"):
        fn([], {})
    with pytest.raises(SpecError, match="held lacks 1 of the 2 cases .*'b1'"):
        fn(errs, {"a1": 0.0})
    # the header's two lines, a line per case (case table) or per source and "every case"
    assert len(fn(errs, {"a1": 0.0, "b1": 0.1}).splitlines()) == 2 + (2 if table ==
                                                                     "host_case_table" else 3)


def test_direction_table_by_hand():
    """Four made-up cases. A's two p50 TPOTs: held out −20 % and −10 % (median of the logs:
    exp((ln 0.8 + ln 0.9) / 2) − 1 = √0.72 − 1 = −15.1 %), in-sample +10 % and +20 %
    (√1.32 − 1 = +14.9 %); both below measured held out: 2 of 2 priced faster. A's throughput:
    held out +30 % (faster: above measured), in-sample −5 %. B's p50 TTFT: held out +8 %
    (slower), in-sample +8 %: 0 of 1."""
    cs = [_case("a1", "A", 1.0, "tpot_p50"), _case("a2", "A", 1.0, "tpot_p50"),
          _case("a3", "A", 1.0, "tok_s"), _case("b1", "B", 1.0, "ttft_p50")]
    ins, out = [1.1, 1.2, 0.95, 1.08], [0.8, 0.9, 1.3, 1.08]
    errs = [(c, v, math.log(v)) for c, v in zip(cs, ins)]
    held = {c.id: math.log(v) for c, v in zip(cs, out)}
    assert h.host_direction_table(errs, held).splitlines()[2:] == [
        "| A | p50 TPOT | 2 | -15.1 % | +14.9 % | 2 of 2 |",
        "| A | output tok/s | 1 | +30.0 % | -5.0 % | 1 of 1 |",
        "| B | p50 TTFT | 1 | +8.0 % | +8.0 % | 0 of 1 |"]


def test_direction_table_refuses_what_it_cannot_count():
    from roofline.errors import SpecError

    c = _case("a1", "A", 1.0, "tpot_p50")
    with pytest.raises(SpecError, match=r"errs=\[\]"):
        h.host_direction_table([], {})
    with pytest.raises(SpecError, match="held lacks 1 of the 1 cases .*'a1'"):
        h.host_direction_table([(c, 1.0, 0.0)], {})
    # a metric whose direction it does not know (here a throughput in req/s) was counted as a
    # latency: "faster" then meant the opposite of what the column says
    r = _case("r1", "A", 1.0, "req_s")
    with pytest.raises(SpecError, match="'r1' has metric 'req_s'.*tok_s"):
        h.host_direction_table([(r, 1.0, 0.1)], {"r1": 0.1})


def test_tpot_spread_by_hand():
    """A run with both percentiles: measured 40 / 60 ms (1.50), ours 50 / 55 ms (1.10); a p50
    without its p99 is left out."""
    cs = [_case("run p50 TPOT", "A", 0.040), _case("run p99 TPOT", "A", 0.060),
          _case("other p50 TPOT", "A", 0.030)]
    errs = [(c, v, math.log(v / c.value_si)) for c, v in zip(cs, (0.050, 0.055, 0.031))]
    assert h.tpot_spread_table(errs).splitlines()[2:] == [
        "| run | 40.0 / 60.0 ms | 1.50 | 50.0 / 55.0 ms | 1.10 |"]
