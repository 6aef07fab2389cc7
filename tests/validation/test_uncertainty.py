"""Uncertainty bands (roofline.uncertainty) and their calibration (docs/validation/uncertainty.md).

The residual file data/validation/residuals.toml must hold what the code computes today: the
fast classes are recomputed here; the serving / training held-out residuals are checked in
test_validation_serving.py / test_validation_training.py against the hold-out reports those
files compute anyway. The doc's coverage table must be what ``coverage_table()`` prints.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

import roofline as rl
from roofline import uncertainty as U
from roofline.errors import RooflineError
from roofline.validation import load_cases
from roofline.validation import uncertainty as V

DOC = Path(__file__).parents[2] / "docs" / "validation" / "uncertainty.md"


def test_quantile_matches_numpy():
    xs = [0.3, -0.1, 0.05, 0.2, -0.4, 0.0, 0.12]
    for q in (0.0, 0.1, 0.37, 0.5, 0.9, 1.0):
        assert U.quantile(xs, q) == pytest.approx(float(np.quantile(xs, q)))


def test_fit_band_by_hand():
    """Sources A: e = 0.1, 0.3 and B: e = −0.1, 0.1. Source means 0.2, 0.0, μ = 0.1;
    σ² = (4 × 0.01) / (4 − 2) = 0.02; variance of the means = 0.02, τ² = 0.02 − 0.02 / 2 = 0.01;
    v = 0.01 + 0.02 + (0.01 + 0.02 / 2) / 2 = 0.04, √v = 0.2; z(0.9) = 1.281552:
    e in 0.1 ± 0.2563103."""
    lo, hi = U.fit_band([("A", 0.1), ("A", 0.3), ("B", -0.1), ("B", 0.1)])
    assert lo == pytest.approx(0.1 - 0.2563103, abs=1e-6)
    assert hi == pytest.approx(0.1 + 0.2563103, abs=1e-6)
    # one source: τ² = 0; σ² = 0.02, v = 0.02 + 0.02 / 2 = 0.03
    lo1, hi1 = U.fit_band([("A", 0.1), ("A", 0.3)])
    assert hi1 - 0.2 == pytest.approx(1.281552 * math.sqrt(0.03), abs=1e-6)


def test_band_applies_the_class_fit():
    """A result's band is the class's shipped band (session 31: "rescaled, never wider",
    ``class_band``): the normal band's centre and √v with its quantile min(z, q) — never wider
    than the normal band, and for gpu-inference (4 sources, own quantile below z) narrower."""
    rows = U.residuals("gpu-inference")
    lo, hi = U.class_band("gpu-inference")
    lo_n, hi_n = U.fit_band([(s, e) for _, s, e in rows])
    assert (lo + hi) / 2 == pytest.approx((lo_n + hi_n) / 2, abs=1e-12)
    q = min(1.2815516, U.rescale_quantile("gpu-inference"))
    assert (hi - lo) / (hi_n - lo_n) == pytest.approx(q / 1.2815516, abs=1e-6)
    assert hi - lo < hi_n - lo_n
    b = U.band(2e-3, "gpu-inference")
    assert b.low == pytest.approx(2e-3 * math.exp(-hi))
    assert b.high == pytest.approx(2e-3 * math.exp(-lo))
    assert (b.level, b.cls, b.n) == (0.8, "gpu-inference", len(rows))
    lo_, hi_ = b  # a (low, high) pair with its level, class and case count beside it
    assert (lo_, hi_) == (b.low, b.high) and len(b) == 2
    with pytest.raises(AttributeError):
        b.low = 0.0  # type: ignore[misc]
    r = U.band(500.0, "gpu-inference", rate=True)  # a rate: the time band inverted
    assert r.low == pytest.approx(500.0 * math.exp(lo))
    assert r.high == pytest.approx(500.0 * math.exp(hi))
    import pickle

    assert pickle.loads(pickle.dumps(b)).cls == "gpu-inference"


def test_band_level_checked():
    for bad in (0, 1, 1.5, -0.2, True, "0.8"):
        with pytest.raises(RooflineError, match="level"):
            U.band(1.0, "gpu-inference", level=bad)
    with pytest.raises(RooflineError, match="uncertainty class"):
        U.band(1.0, "no-such-class")
    wider = U.band(1.0, "gpu-inference", level=0.95)
    b = U.band(1.0, "gpu-inference")
    assert wider.low <= b.low and wider.high >= b.high


def test_solve_serve_train_carry_bands():
    r = rl.solve("resnet50", "A100", batch=8)
    b = r.uncertainty["latency"]
    lo, hi = b[0], b[1]
    assert lo < hi and b.cls == "gpu-inference" and b.n == len(load_cases("inference").cases)
    assert "80 %:" in str(r) and f"from {b.n} published cases" in str(r)
    d = json.loads(json.dumps(r.to_dict()))
    assert d["uncertainty"]["latency"]["low"] == pytest.approx(lo)
    assert d["uncertainty"]["latency"]["class"] == "gpu-inference"
    assert rl.solve("resnet50", "A100", batch=8, preset="bound").uncertainty["latency"].cls == \
        "gpu-inference-bound"
    s = rl.serve("llama-3.1-8b", "H100", batch=1, prompt_len=512, output_len=64)
    assert s.uncertainty["ttft"].cls == "serving-ttft"
    assert s.uncertainty["tpot"].cls == "serving-decode"
    assert s.uncertainty["tpot"][0] < s.uncertainty["tpot"][1]
    assert "ttft" in s.to_dict()["uncertainty"] and "from" in str(s)
    t = rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=2048)
    st = t.uncertainty["step_time"]
    assert st.cls == "gpu-training" and st.low < st.high
    assert t.to_dict()["uncertainty"]["step_time"]["n"] == st.n


def test_cpu_hardware_uses_cpu_class():
    cpus = [h for h in rl.list_hardware() if rl.hardware(h).kind == "cpu"]
    assert cpus
    r = rl.solve("resnet50", cpus[0], batch=1, precision="fp32")
    assert r.feasible, r.reason
    assert r.uncertainty["latency"].cls == "cpu-measured"


def test_fast_residual_classes_match_the_code(monkeypatch):
    """gpu-inference(-bound) and cpu-measured recomputed now equal the stored residuals
    (regenerate: python -m roofline.validation.uncertainty --write)."""
    from pathlib import Path

    # the CPU runs are read from the repository's docs/, wherever the package is installed
    monkeypatch.setattr(V, "ROOT", Path(__file__).resolve().parents[2])
    for cls, rows in (("gpu-inference", V._inference("default")),
                      ("gpu-inference-bound", V._inference("bound")),
                      ("cpu-measured", V._cpu())):
        stored = U.residuals(cls)
        assert [i for i, _, _ in stored] == [i for i, _, _ in rows], cls
        for (i, _, e), (_, _, want) in zip(stored, rows):
            assert e == pytest.approx(want, abs=2e-3), (cls, i)


def _nested(cls, held_out):
    """cls's (id, source, e) as the fold without ``held_out`` sees them: residuals.toml's
    ``[[class.X.fold]]`` rows of that fold in place of the stored ones."""
    from roofline.uncertainty import _data

    sub = {f["id"]: f["e"] for f in _data()["class"][cls].get("fold", [])
           if f["held_out"] == held_out}
    return [(i, s, sub.get(i, e)) for i, s, e in U.residuals(cls)]


def test_coverage_counts_by_hand():
    """LOSO coverage of four classes recounted here: each source's cases against the band as
    shipped fitted on the other sources, the fold's residuals written out from residuals.toml's
    nested rows (serving-ttft: its own τ², 3 sources, the serving pair refits; serving-vllm-rocm:
    τ² over the serving classes without the source; serving-mix: the other sources' nested
    residuals, fitted without the held-out source too)."""
    for cls, between in (("gpu-inference", ("gpu-inference",)),
                         ("serving-ttft", ("serving-ttft",)),
                         ("serving-vllm-rocm", ("serving-vllm-rocm", "serving-ttft",
                                                "serving-decode")),
                         ("serving-mix", ("serving-mix",))):
        rows = U.residuals(cls)
        k = 0
        for s in {t for _, t, _ in rows}:
            # the fold's residuals written out (the nested rows in place of the stored ones)
            # and the band as shipped fitted on them without s
            view = {"class": {c: {**U._data()["class"][c], "case": [
                {"id": i, "source": t, "e": e} for i, t, e in _nested(c, s)]}
                for c in dict.fromkeys((cls, *between))}}
            with V.residuals_as(view):
                lo, hi = U.class_band(cls, 0.8, frozenset({s}))
            k += sum(lo <= e <= hi for _, t, e in rows if t == s)
        cv = V.coverage(cls)
        assert cv.covered == k and cv.n == len(rows)
        assert sum(c for _, _, c in cv.per_source) == k


def test_doc_carries_the_coverage_table():
    assert V.coverage_table() in DOC.read_text(encoding="utf-8"), \
        "docs/validation/uncertainty.md is stale: paste roofline.validation.uncertainty." \
        "coverage_table()"


def test_doc_example_prints_what_the_doc_shows():
    """The worked example's output (rewrite with ROOFLINE_UPDATE_DOCS=1 after a change)."""
    import contextlib
    import io
    import os
    import re

    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"```python\n(.*?)```\n<!-- output -->\n```text\n(.*?)```", text, re.DOTALL)
    assert m
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(m.group(1), "<doc>", "exec"), {})  # noqa: S102 - the doc's own example
    if os.environ.get("ROOFLINE_UPDATE_DOCS"):
        DOC.write_text(text[:m.start(2)] + buf.getvalue() + text[m.end(2):], encoding="utf-8")
        return
    assert buf.getvalue() == m.group(2)


def test_serving_mix_residuals_match_the_code():
    """serving-mix recomputed now (the vLLM runs' errors from the host-time fit without their
    source, the TensorRT-LLM runs as priced; a throughput's sign flipped to the time
    convention) equals the stored residuals; the known outliers are not among them."""
    rows = V._mix()
    stored = U.residuals("serving-mix")
    assert [i for i, _, _ in stored] == [i for i, _, _ in rows]
    for (i, _, e), (_, _, want) in zip(stored, rows):
        assert e == pytest.approx(want, abs=2e-3), i
    mix = load_cases("serving_mix").cases
    assert len(rows) == sum(not c.known_outlier for c in mix) < len(mix)
    # every vLLM run's error is held out (its source left out of the host-time fit); only the
    # TensorRT-LLM runs, on which nothing is fitted, are taken as priced
    from roofline.validation.serving_host import host_holdout

    held = host_holdout().held_out_errors
    assert {c.id for c in mix if not c.known_outlier and c.id not in held} == \
        {c.id for c in mix if str(c["engine"]).startswith("trtllm")} != set()
    # a throughput case's time residual is log(measured / ours)
    from roofline.validation.serving_mix import predict

    c = next(c for c in mix if c.source == "trtbench16")
    assert dict((i, e) for i, _, e in rows)[c.id] == pytest.approx(
        math.log(c.value_si / predict(c)[0]), abs=1e-9)


def test_simulate_serving_carries_the_mix_band():
    """rl.simulate_serving's TTFT / TPOT p50 and p99 and throughput carry the serving-mix band
    (a throughput: the time band inverted); in to_dict / JSON and the printed text."""
    wl = rl.Workload(prompt=512, output=64, rate=2.0)
    s = rl.simulate_serving("llama-3.1-8b", "H100", workload=wl, requests=200)
    u = s.uncertainty
    # a run that keeps up serves the offered load (2 req/s × 64 tokens): no throughput band
    assert s.throughput_tokens_per_s == pytest.approx(2.0 * 64, rel=0.05)
    assert set(u) == {"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99"}
    lo, hi = U.class_band("serving-mix")
    b = u["tpot_p99"]
    assert (b.cls, b.n, b.level) == ("serving-mix", len(U.residuals("serving-mix")), 0.8)
    assert b.low == pytest.approx(s.tpot.p99 * math.exp(-hi))
    assert b.high == pytest.approx(s.tpot.p99 * math.exp(-lo))
    # every request at once (as every throughput case): capacity sets the throughput, banded
    a = rl.simulate_serving("llama-3.1-8b", "H100", workload=rl.Workload(trace=[(512, 64, 0.0)]
                                                                         * 200))
    r = a.uncertainty["throughput_tokens_per_s"]
    assert set(a.uncertainty) == set(u) | {"throughput_tokens_per_s", "tokens_per_s_per_device"}
    assert r.low == pytest.approx(a.throughput_tokens_per_s * math.exp(lo))
    assert r.high == pytest.approx(a.throughput_tokens_per_s * math.exp(hi))
    d = json.loads(json.dumps(s.to_dict()))
    assert d["uncertainty"]["ttft_p50"]["class"] == "serving-mix"
    assert d["uncertainty"]["ttft_p50"]["low"] == pytest.approx(u["ttft_p50"].low)
    text = str(s)
    assert f"p99 {b.low * 1e3:,.1f}–{b.high * 1e3:,.1f} ms (from {b.n} published cases)" in text
    assert "published cases;" not in text
    assert f"(80 %: {r.low:,.0f}–{r.high:,.0f}, from {r.n} published cases;" in str(a)
    # a band is absent where no request-mix case judges the number (client=True here; the
    # other cases of band_class in test_band_class_rules)
    c = rl.simulate_serving("llama-3.1-8b", "H100", workload=wl, requests=50, client=True)
    assert c.uncertainty == {} and c.to_dict()["uncertainty"] == {}
    assert "published cases" not in str(c)


def test_band_class_rules():
    from roofline.analysis.simulate import band_class

    assert band_class("trtllm", "default", False, False) == "serving-mix"
    assert band_class("vllm-v1", "default", False, False) == "serving-mix"
    assert band_class("llamacpp", "default", False, False) is None
    assert band_class("vllm-rocm", "default", False, False) is None
    assert band_class("eager", "default", False, False) is None  # neither vLLM nor TRT-LLM
    assert band_class("trtllm-v08", "default", False, False) == "serving-mix"
    assert band_class("trtllm", "mlsysim", False, False) is None
    assert band_class("trtllm", "default", True, False) is None  # disaggregated
    assert band_class("trtllm", "default", False, True) is None  # client=True
    assert band_class(object(), "default", False, False) is None  # a custom profile


def test_overloaded_simulation_has_no_ttft_band():
    wl = rl.Workload(prompt=512, output=64, rate=1e4)
    s = rl.simulate_serving("llama-3.1-8b", "H100", workload=wl, requests=300)
    assert s.overloaded and math.isinf(s.ttft.p99)
    assert "ttft_p99" not in s.uncertainty and "tpot_p99" in s.uncertainty
    assert "throughput_tokens_per_s" in s.uncertainty  # saturated: capacity sets it


def test_sum_band_by_hand():
    """A sum of two time terms: each at its class band's ends, added (comonotone); the rate
    W / sum inverted; a term without a band (or no term) gives none."""
    a, b = U.band(1e-3, "serving-decode"), U.band(4e-3, "serving-ttft")
    s = U.sum_band([(1e-3, "serving-decode"), (4e-3, "serving-ttft")])
    assert (s.low, s.high) == pytest.approx((a.low + b.low, a.high + b.high), rel=1e-12)
    assert s.cls == "derived: serving-decode + serving-ttft"
    assert s.n == len(U.residuals("serving-decode")) + len(U.residuals("serving-ttft"))
    r = U.sum_band([(1e-3, "serving-decode"), (4e-3, "serving-ttft")], rate_of=32.0)
    assert (r.low, r.high) == pytest.approx((32 / s.high, 32 / s.low), rel=1e-12)
    # a zero term is left out; the band of one term is its class band (another class name)
    one = U.sum_band([(0.0, "serving-decode"), (4e-3, "serving-ttft")])
    assert (one.low, one.high, one.cls) == (b.low, b.high, "derived: serving-ttft")
    assert U.sum_band([(math.nan, "serving-decode")]) is None
    assert U.sum_band([]) is None
    assert "derived from the serving-ttft bands; no case judges it" in U.fmt_band(one, str)


def test_serve_steady_state_band_is_derived():
    """rl.serve's continuous-batching TPOT = tpot + the prefill stall: the band takes the
    decode class's on tpot and serving-ttft's on the rest, and tokens/s = batch / TPOT its
    inverse; printed as derived; none for llama.cpp / ROCm vLLM (no TTFT band)."""
    s = rl.serve("llama-3.1-8b", "H100", batch=32, prompt_len=512, output_len=128)
    u = s.uncertainty
    stall = s.steady_tpot - s.tpot
    assert stall > 0
    d, t = U.band(s.tpot, "serving-decode"), U.band(stall, "serving-ttft")
    assert (u["steady_tpot"].low, u["steady_tpot"].high) == pytest.approx(
        (d.low + t.low, d.high + t.high), rel=1e-12)
    assert u["steady_tpot"].low < s.steady_tpot < u["steady_tpot"].high
    assert u["steady_tokens_per_s"].low == pytest.approx(32 / u["steady_tpot"].high)
    assert s.steady_tokens_per_s == pytest.approx(32 / s.steady_tpot)
    assert u["steady_tpot"].cls.startswith("derived: ")
    assert "no case judges it" in str(s)
    assert json.loads(json.dumps(s.to_dict()))["uncertainty"]["steady_tpot"]["class"] == \
        "derived: serving-decode + serving-ttft"
    for eng in ("llamacpp", "vllm-rocm"):
        r = rl.serve("llama-3.1-8b", "H100", batch=1, prompt_len=128, output_len=32, engine=eng)
        assert "steady_tpot" not in r.uncertainty and "tpot" in r.uncertainty


def test_serving_mix_folds_are_nested():
    """The fold that judges a request-mix vLLM source s sees every other vLLM source r with the
    host time fitted without r and s (residuals.toml's [[class."serving-mix".fold]]), one pair
    refitted here (lambda_vllm held out, lambda_ms_traces judged: their fit left out both);
    the TensorRT-LLM runs (nothing fitted) have none, and a nested residual differs from the
    single hold-out one where the held-out source was in its fit."""
    from roofline.uncertainty import _data
    from roofline.validation.serving_host import fit_host, host_cases, host_errors

    folds = _data()["class"]["serving-mix"]["fold"]
    rows = U.residuals("serving-mix")
    src = {i: s for i, s, _ in rows}
    vllm = {s for i, s in src.items() if s != "trtbench16"}
    assert {(f["held_out"], f["source"]) for f in folds} == {
        (a, b) for a in vllm for b in vllm if a != b}
    for a in vllm:  # each fold has every other vLLM source's cases, once
        assert sorted(f["id"] for f in folds if f["held_out"] == a) == sorted(
            i for i, s in src.items() if s in vllm - {a})
    hc = host_cases()
    fit = fit_host([c for c in hc if c.source not in ("lambda_vllm", "lambda_ms_traces")])
    mine = [c for c in hc if c.source == "lambda_ms_traces"]
    want = {c.id: (-e if c.metric in V._RATES else e) for c, _, e in host_errors(fit.values, mine)}
    got = {f["id"]: f["e"] for f in folds
           if f["held_out"] == "lambda_vllm" and f["source"] == "lambda_ms_traces"}
    assert got.keys() == want.keys()
    for i, e in got.items():
        assert e == pytest.approx(want[i], abs=2e-3), i
    stored = {i: e for i, _, e in rows}
    assert any(abs(f["e"] - stored[f["id"]]) > 0.01 for f in folds)


def test_serving_classes_take_their_own_spread_with_three_sources():
    """Session 29's "own spread": serving-ttft / serving-decode borrow τ² over both serving
    classes only while they have fewer than 3 sources; serving-vllm-rocm always borrows (its
    releases are one publisher's). The stored classes say so, and the shipped band is the
    formula on the class's own rows."""
    three = [("a", "A", 0.0), ("b", "B", 0.1), ("c", "C", 0.2)]
    assert V.between_of("serving-ttft", three) is None
    assert V.between_of("serving-ttft", three[:2]) == ("serving-ttft", "serving-decode")
    assert V.between_of("serving-vllm-rocm", three) == V.BETWEEN["serving-vllm-rocm"]
    assert V.between_of("gpu-inference", three) is None
    from roofline.uncertainty import _data

    for cls in ("serving-ttft", "serving-decode"):
        rows = U.residuals(cls)
        assert len({s for _, s, _ in rows}) >= 3
        assert "between_sources_from" not in _data()["class"][cls]
        lo, hi = U.fit_band([(s, e) for _, s, e in rows])  # τ² from its own source means
        mu, sd = U._centre_sd(cls, frozenset(), 0.8)  # the shipped band's centre and √v
        assert (mu - 1.2815516 * sd, mu + 1.2815516 * sd) == pytest.approx((lo, hi), abs=1e-6)
        lo, hi = U.class_band(cls)
        b = U.band(1.0, cls)
        assert (b.low, b.high) == pytest.approx((math.exp(-hi), math.exp(-lo)), rel=1e-12)
    assert _data()["class"]["serving-vllm-rocm"]["between_sources_from"] == list(
        V.BETWEEN["serving-vllm-rocm"])


@pytest.mark.parametrize("bad", [0.0, -8.0, math.nan, math.inf, True, "8"])
def test_sum_band_refuses_a_bad_rate(bad):
    """rate_of W gives the band of W / sum: a W of 0, negative, NaN, infinite or not a number
    would print a band of 0, upside down, NaN or inf; it is refused, naming the argument."""
    from roofline.errors import RooflineError

    with pytest.raises(RooflineError, match="rate_of"):
        U.sum_band([(1e-3, "serving-decode"), (4e-3, "serving-ttft")], rate_of=bad)
    assert U.sum_band([(1e-3, "serving-decode")], rate_of=8) is not None  # an int is a number
