"""The residuals behind every uncertainty band (roofline.uncertainty), and their calibration.

``compute_residuals()`` prices every published case and returns, per class, (case id, source,
e) with e = log(ours / measured) of a *time* (for a published rate, the time per unit of work:
e = log(measured rate / our rate)):

* ``gpu-inference`` / ``gpu-inference-bound``: rl.solve (preset default / bound) time per batch
  on the GPU inference cases (data/validation/inference.toml; the default preset is not fitted
  on them, so every residual is out of sample);
* ``serving-ttft``: rl.serve TTFT; ``serving-decode``: TPOT, end-to-end latency and output
  tokens/s (decode-dominated); residuals of
  the serving-engine fit *without the case's source* (``serving_holdout``);
* ``gpu-training``: rl.train step time: the Megatron cases with the training fit without the
  case's source (``training_holdout``), the any-graph cases (not in that fit; their
  samples/s ratio turned into a step-time ratio), and the training runs of other documents
  (data/validation/training_runs.toml, known outliers apart): the bf16 Hopper rows with the
  Hopper GEMM fraction fitted without their source (``hopper_holdout``), the others (fp8, MoE,
  other parts) as priced — nothing was fitted on them;
* ``tpu-training``: rl.train step time on TPUs: the MaxText runs of
  data/validation/tpu_training.toml, the fitted [tpu-trillium] rows with the fraction fitted
  without their source (``tpu_holdout``), the other rows as priced;
* ``serving-llamacpp``: rl.serve(engine="llamacpp") decode (TPOT, tokens/s): the llama.cpp /
  Ollama cases with the profile fitted without their source (``llamacpp_holdout``; its TTFT,
  prompt processing, is not validated and has no band);
* ``serving-vllm-rocm``: rl.serve(engine="vllm-rocm") decode (TPOT, end to end, tokens/s): AMD's
  ROCm vLLM latency rows with the profile fitted without their release (``rocm_holdout``);
  few cases of one publisher, so its between-source variance comes from the serving classes
  too (``between_sources_from``); its TTFT has no band;
* ``serving-mix``: rl.simulate_serving (and rl.plan_serving's simulations) TTFT / TPOT
  percentiles and output tokens/s under a request mix: the cases of
  data/validation/serving_mix.toml (known outliers apart), the vLLM runs with their
  generation's host time fitted without their source (``serving_host.host_holdout``), the
  TensorRT-LLM runs as priced (nothing is fitted on them);
* no class for rl.solve(client=True): its two sources (docs/validation/client.md) differ ×3 in
  offset, and a band built on one covered none of the other's cases (0 of 48): no band
  rather than a wrong one;
* ``cpu-measured``: rl.solve on this project's measured CPU spec against the two committed
  ``roofline validate`` runs (docs/validation/cpu-run*/validate.csv; source = the run).

``write()`` stores them in data/validation/residuals.toml (``python -m
roofline.validation.uncertainty --write``); ``coverage(cls)`` is the calibration: for each
source, the band from every other source's residuals and the fraction of that source's cases it
covers.
"""

from __future__ import annotations

import csv
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..uncertainty import DEFAULT_LEVEL, class_band, classes, quantile, residuals
from .cases import Case
from .holdout import fmt_pct

__all__ = ["DESCRIBES", "compute_residuals", "write", "residuals_text", "coverage", "Coverage",
           "coverage_table", "coverage_figures", "RESIDUALS_PATH", "residuals_as", "clear_bands",
           "fold_view", "FOLDS", "between_of", "BORROW_WHILE_FEW", "OWN_SPREAD_SOURCES"]

ROOT = Path(__file__).resolve().parents[3]
RESIDUALS_PATH = Path(__file__).resolve().parents[1] / "data" / "validation" / "residuals.toml"
CPU_RUNS = {"cpu-run": "docs/validation/cpu-run/validate.csv (2 threads)",
            "cpu-run-1thread": "docs/validation/cpu-run-1thread/validate.csv (1 thread)"}

DESCRIBES = {
    "gpu-inference": "rl.solve latency, preset default, GPU (MLPerf, TensorRT, PyTorch cases)",
    "gpu-inference-bound": "rl.solve latency, preset bound, GPU (same cases)",
    "serving-ttft": "rl.serve TTFT (TensorRT-LLM, NIM, vLLM cases; serving fit without the "
                    "case's source)",
    "serving-decode": "rl.serve TPOT, end-to-end latency and tokens/s (same sources; fit "
                      "without the case's source)",
    "gpu-training": "rl.train step time (Megatron runs, training fit without the case's "
                    "source; ResNet-50 / BERT-large any-graph runs; the training runs of "
                    "other documents, Hopper fit without the case's source)",
    "tpu-training": "rl.train step time on a TPU (MaxText runs; the Trillium fraction fit "
                    "without the case's source)",
    "serving-llamacpp": "rl.serve(engine='llamacpp') TPOT and tokens/s (llama.cpp / Ollama "
                        "batch-1 decode; profile fit without the case's source)",
    "serving-vllm-rocm": "rl.serve(engine='vllm-rocm') TPOT, end-to-end latency and tokens/s "
                         "(AMD's ROCm vLLM tables: 8 Llama 3.1 70B rows on 8 MI300X, batch "
                         "1-4, three container releases of one publisher, the profile fit "
                         "without the case's release; between-source spread from the serving "
                         "classes; its TTFT is not validated and has no band)",
    "serving-mix": "rl.simulate_serving TTFT / TPOT p50 and p99 and output tokens/s under a "
                   "request mix (data/validation/serving_mix.toml, known outliers apart; the "
                   "vLLM runs with their generation's host time fit without the case's "
                   "source, the TensorRT-LLM runs as priced)",
    "cpu-measured": "rl.solve latency on a measured CPU spec (the two committed roofline "
                    "validate runs of docs/validation/cpu.md; source = the run)",
}


#: classes whose between-source spread may be estimated over their domain
BETWEEN = {"serving-ttft": ("serving-ttft", "serving-decode"),
           "serving-decode": ("serving-ttft", "serving-decode"),
           # the ROCm rows are one publisher's (AMD, three container releases): their spread
           # between releases says nothing of a new setup's offset, the serving domain's does
           "serving-vllm-rocm": ("serving-vllm-rocm", "serving-ttft", "serving-decode")}
#: classes that borrow their domain's spread for lack of sources only (serving-ttft had two
#: until session 27): with at least OWN_SPREAD_SOURCES sources of their own they estimate τ²
#: from their own source means (session 29, "own spread", judged on
#: docs/validation/uncertainty.md); serving-vllm-rocm borrows for another reason
BORROW_WHILE_FEW = ("serving-ttft", "serving-decode")
OWN_SPREAD_SOURCES = 3


def between_of(cls: str, rows: list[tuple[str, str, float]]) -> tuple[str, ...] | None:
    """The classes whose sources the τ² of ``cls`` is estimated over (residuals.toml's
    ``between_sources_from``), given its (id, source, e) ``rows``; None: its own."""
    if cls not in BETWEEN:
        return None
    if cls in BORROW_WHILE_FEW and len({s for _, s, _ in rows}) >= OWN_SPREAD_SOURCES:
        return None
    return BETWEEN[cls]


def _inference(preset: str) -> list[tuple[str, str, float]]:
    from .inference import inference_cases, measured_seconds, predicted_seconds

    return [(c.id, c.source, math.log(predicted_seconds(c, preset) / measured_seconds(c)))
            for c in inference_cases().cases]


def _held(cases: tuple[Case, ...], rep: Any) -> list[tuple[str, str, float]]:
    return [(c.id, c.source, float(rep.held_out_errors[c.id])) for c in cases]


_RATES = ("tok_s", "tok_s_gpu")


def _serving() -> tuple[list[tuple[str, str, float]], list[tuple[str, str, float]]]:
    from .serving import serving_cases, serving_holdout

    cs = serving_cases()
    # time convention: a rate's residual log(ours / measured) is the negative of its time's
    rows = [(i, s, -e if c.metric in _RATES else e)
            for (i, s, e), c in zip(_held(cs, serving_holdout()), cs)]
    ttft = [r for r, c in zip(rows, cs) if c.metric == "ttft"]
    return ttft, [r for r, c in zip(rows, cs) if c.metric != "ttft"]


def _training() -> list[tuple[str, str, float]]:
    from . import training_graphs
    from .training import training_cases, training_holdout

    out = _held(training_cases(), training_holdout())
    for r in training_graphs.rows():  # samples/s: step-time ratio = published / ours
        out.append((r["id"], r["source"], math.log(r["published"] / r["ours"])))
    return out + _training_runs()


def _training_runs(rows: list[dict[str, Any]] | None = None,
                   hopper: Any = None) -> list[tuple[str, str, float]]:
    """The other documents' runs (tokens/s/GPU or MFU: rates, so the time residual is
    log(published / ours)); the Hopper fit's cases held out by source. ``rows`` /
    ``hopper``: ``training_runs.rows()`` / ``hopper_holdout()`` when already computed."""
    from . import training_runs as tr

    held = (tr.hopper_holdout() if hopper is None else hopper).held_out_errors
    out = []
    for r in tr.rows() if rows is None else rows:
        if r["outlier"]:
            continue
        # the Hopper held-out error is log(ours / published) of the rate
        e = -float(held[r["id"]]) if r["id"] in held else math.log(r["published"] / r["ours"])
        out.append((r["id"], r["source"], e))
    return out


def _tpu() -> list[tuple[str, str, float]]:
    """The MaxText runs (tokens/s/chip: time residual = −log(ours / published))."""
    from . import tpu_training as tt

    held = tt.tpu_holdout().held_out_errors
    return [(c.id, c.source, -float(held[c.id]) if c.id in held
             else -math.log(tt.tpu_ours(c) / c.value_si)) for c in tt.cases()]


def _llamacpp() -> list[tuple[str, str, float]]:
    from .llamacpp import fitted_cases, llamacpp_holdout

    return [(i, s, -e) for i, s, e in _held(fitted_cases(), llamacpp_holdout())]  # a rate


def _rocm() -> list[tuple[str, str, float]]:
    from .rocm_serving import rocm_fit_cases, rocm_holdout

    return _held(rocm_fit_cases(), rocm_holdout())  # end-to-end latency: a time


def _mix() -> list[tuple[str, str, float]]:
    """The request-mix cases (serving_mix.toml, known outliers apart): a vLLM run's error with
    its generation's host time fitted without its source, a TensorRT-LLM run's as priced; a
    throughput's time residual is −log(ours / measured)."""
    from .cases import load_cases
    from .serving_host import host_holdout
    from .serving_mix import predict

    held = host_holdout().held_out_errors
    out = []
    for c in load_cases("serving_mix").cases:
        if c.known_outlier:
            continue
        e = float(held[c.id]) if c.id in held else math.log(predict(c)[0] / c.value_si)
        out.append((c.id, c.source, -e if c.metric in _RATES else e))
    return out


def _mix_folds() -> list[tuple[str, str, str, float]]:
    """(held-out source, case id, source, e): the nested residuals of ``serving-mix``. A vLLM
    run's residual in the class is its error with the host time fitted without its own source
    r, a fit that saw every other source; in the fold that judges source s it must not have
    seen s either. So, for every pair of request-mix vLLM sources s ≠ r, r's cases with the
    host time fitted without both (``serving_host.fit_host``: 6 fits, ~1.5 min on 2 cores).
    The TensorRT-LLM runs are priced with nothing fitted on them: no nested residual."""
    from .cases import load_cases
    from .serving_host import fit_host, host_cases, host_errors

    hc = host_cases()
    fitted_ids = {c.id for c in hc}
    mix = [c for c in load_cases("serving_mix").cases if not c.known_outlier]
    srcs = list(dict.fromkeys(c.source for c in mix if c.id in fitted_ids))
    out = []
    for s in srcs:
        for r in srcs:
            if r == s:
                continue
            fit = fit_host([c for c in hc if c.source not in (s, r)])
            for c, _, e in host_errors(fit.values, [c for c in mix if c.source == r]):
                out.append((s, c.id, r, -e if c.metric in _RATES else e))
    return out


def _cpu() -> list[tuple[str, str, float]]:
    out = []
    for run in CPU_RUNS:
        with open(ROOT / "docs" / "validation" / run / "validate.csv", newline="") as f:
            for row in csv.DictReader(f):
                out.append((f"{run}: {row['name']}", run,
                            math.log(float(row["predicted_s"]) / float(row["measured_s"]))))
    return out


def _folds() -> dict[str, Any]:
    """class -> the function giving its nested residuals (``fold_view``): ``serving-mix``
    (session 29), since session 30 the cheap refits of ``uncertainty_folds``, since session 31
    the serving classes (their 42 pair refits stored in ``fold_cache``, keyed on what each
    read); the Megatron cases of ``gpu-training`` still see the held-out source in the other
    sources' fits (docs/validation/uncertainty.md, "Closing the leak")."""
    from . import uncertainty_folds as uf

    return {"serving-mix": _mix_folds, "serving-llamacpp": uf.llamacpp_folds,
            "serving-vllm-rocm": uf.rocm_folds, "tpu-training": uf.tpu_folds,
            "gpu-training": uf.hopper_folds, "serving-ttft": uf.serving_folds,
            "serving-decode": uf.serving_folds}


FOLDS = _folds()


def compute_residuals() -> dict[str, list[tuple[str, str, float]]]:
    """class -> [(case id, source, log(ours / measured))], priced by the code now."""
    ttft, decode = _serving()
    return {"gpu-inference": _inference("default"), "gpu-inference-bound": _inference("bound"),
            "serving-ttft": ttft, "serving-decode": decode, "gpu-training": _training(),
            "tpu-training": _tpu(), "serving-llamacpp": _llamacpp(),
            "serving-vllm-rocm": _rocm(), "serving-mix": _mix(), "cpu-measured": _cpu()}


def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def write(path: Path = RESIDUALS_PATH) -> None:
    """Write data/validation/residuals.toml from ``compute_residuals()``, the serving folds'
    cache refreshed first where an input of a refit changed (``fold_cache.refresh``)."""
    from .fold_cache import refresh

    refresh("serving")
    path.write_text(residuals_text(), encoding="utf-8")


def residuals_text() -> str:
    """The text of data/validation/residuals.toml from ``compute_residuals()`` and the nested
    folds (``FOLDS``; the serving ones as the cache stores them: ``fold_cache.stale`` says
    whether they are current)."""
    res = compute_residuals()
    folds = {cls: f() for cls, f in FOLDS.items()}
    lines = ["# Residuals e = log(ours / measured) of every published case, per uncertainty class.",
             "# Generated by `python -m roofline.validation.uncertainty --write` (do not edit);",
             "# tests/validation/test_uncertainty.py checks they match the code. Method:",
             "# docs/validation/uncertainty.md. Sources: the [sources] of each validation file.",
             ""]
    for cls, rows in res.items():
        lines += [f"[class.{_q(cls)}]", f"describes = {_q(DESCRIBES[cls])}"]
        if (dom := between_of(cls, rows)) is not None:
            lines.append("between_sources_from = [" + ", ".join(map(_q, dom)) + "]")
        lines.append("")
        for cid, src, e in rows:
            lines += [f"[[class.{_q(cls)}.case]]", f"id = {_q(cid)}", f"source = {_q(src)}",
                      f"e = {e:.6f}", ""]
        ids = {cid for cid, _, _ in rows}  # a fit's known outliers are not in the class
        for held, cid, src, e in folds.get(cls, []):
            if cid not in ids:
                continue
            lines += [f"[[class.{_q(cls)}.fold]]", f"held_out = {_q(held)}", f"id = {_q(cid)}",
                      f"source = {_q(src)}", f"e = {e:.6f}", ""]
    return "\n".join(lines)


def clear_bands() -> None:
    """Empty roofline.uncertainty's caches (the stored files are re-read on next use)."""
    from .. import uncertainty as U

    for f in (U._data, U._quantiles, U._pairs, U._pair_h):
        f.cache_clear()


@contextmanager
def residuals_as(parsed: dict[str, Any] | None,
                 pairs: dict[str, Any] | None = None) -> Iterator[None]:
    """roofline.uncertainty reading ``parsed`` (residuals.toml) and ``pairs``
    (lever_pairs.toml) meanwhile (None: the stored file, re-read): the regenerate command's
    check mode judges the pages on what it would write."""
    from .. import uncertainty as U

    clear_bands()
    orig = U._data, U._pairs
    if parsed is not None:
        U._data = lambda: parsed  # type: ignore[assignment]
    if pairs is not None:
        U._pairs = lambda: tuple(pairs.get("pair", []))  # type: ignore[assignment]
    try:
        yield
    finally:
        U._data, U._pairs = orig  # type: ignore[assignment]
        clear_bands()


@contextmanager
def fold_view(held_out: str) -> Iterator[None]:
    """roofline.uncertainty reading the residuals as the fold that judges source ``held_out``
    sees them: a case with a nested residual for that fold (residuals.toml's
    ``[[class.X.fold]]`` with ``held_out``: its error with every fit it rests on made without
    ``held_out`` too) takes it in place of its stored one. Nothing changes for a class without
    nested residuals."""
    from .. import uncertainty as U

    parsed = U._data()
    sub = {(cls, f["id"]): float(f["e"]) for cls, c in parsed["class"].items()
           for f in c.get("fold", []) if f["held_out"] == held_out}
    if not sub:
        yield
        return
    view = {**parsed, "class": {cls: {**c, "case": [
        {**r, "e": sub.get((cls, r["id"]), r["e"])} for r in c["case"]]}
        for cls, c in parsed["class"].items()}}
    orig = U._data
    U._data = lambda: view  # type: ignore[assignment]
    try:
        yield
    finally:
        U._data = orig  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Coverage:
    """Leave-one-source-out calibration of one class's band."""

    cls: str
    level: float
    n: int
    covered: int  #: cases inside the band built without their source
    per_source: tuple[tuple[str, int, int], ...]  #: (source, n, covered)
    in_sample: float  #: fraction covered by the band from every case (for comparison)
    empirical_covered: int  #: the same with plain empirical quantiles of the other sources

    @property
    def fraction(self) -> float:
        return self.covered / self.n


def coverage(cls: str, level: float = DEFAULT_LEVEL) -> Coverage:
    """For each source: the band as shipped (``uncertainty.class_band``) fitted without that
    source's cases (in its class and in the classes its between-source spread comes from);
    count that source's cases whose residual lies inside (the other sources' residuals nested
    where the class has them: ``fold_view``). Also counts the same with empirical quantiles."""
    rows = residuals(cls)
    per, tot, emp = [], 0, 0
    for s in dict.fromkeys(src for _, src, _ in rows):
        with fold_view(s):
            rest = [(src, e) for _, src, e in residuals(cls) if src != s]
            lo, hi = class_band(cls, level, frozenset({s}))
        mine = [e for _, src, e in rows if src == s]
        k = sum(lo <= e <= hi for e in mine)
        per.append((s, len(mine), k))
        tot += k
        es = [e for _, e in rest]
        qlo, qhi = quantile(es, 0.5 - level / 2), quantile(es, 0.5 + level / 2)
        emp += sum(qlo <= e <= qhi for e in mine)
    lo, hi = class_band(cls, level)
    ins = sum(lo <= e <= hi for _, _, e in rows) / len(rows)
    return Coverage(cls, level, len(rows), tot, tuple(per), ins, emp)


def coverage_table(level: float = DEFAULT_LEVEL) -> str:
    """Markdown: per class, cases, sources, band factors and LOSO coverage (the doc's table)."""
    lvl = fmt_pct(level, sign=False)
    lines = [f"| class | cases | sources | {lvl} band (measured / ours) | in-sample coverage | "
             "LOSO coverage | per source (covered / n) | LOSO, empirical quantiles |",
             "|---|---:|---:|---|---:|---:|---|---:|"]
    tn = tk = te = 0
    for cls in classes():
        cv = coverage(cls, level)
        lo, hi = class_band(cls, level)
        per = ", ".join(f"{s} {k}/{n}" for s, n, k in cv.per_source)
        lines.append(f"| {cls} | {cv.n} | {len(cv.per_source)} | ×{math.exp(-hi):.2f} – "
                     f"×{math.exp(-lo):.2f} | {cv.in_sample:.0%} | {cv.fraction:.0%} "
                     f"({cv.covered}/{cv.n}) | {per} | {cv.empirical_covered / cv.n:.0%} |")
        tn, tk, te = tn + cv.n, tk + cv.covered, te + cv.empirical_covered
    lines += ["", f"Pooled over every class: {tk} of {tn} cases ({tk / tn:.0%}) lie inside the "
              f"{lvl} band fitted without their source (empirical quantiles: {te} of {tn}, "
              f"{te / tn:.0%})."]
    return "\n".join(lines).replace("%", " %").replace("  %", " %")


def coverage_figures(level: float = DEFAULT_LEVEL) -> dict[str, str]:
    """The figures docs/validation/uncertainty.md's prose quotes, by key (its inline
    ``<!--v:KEY-->`` markers): per class ``CLS.n``, ``.sources``, ``.band`` (×lo–×hi),
    ``.in_sample``, ``.loso``, ``.covered``; per source ``CLS/SOURCE`` ("k of n"); pooled
    ``pooled.n``, ``.covered``, ``.loso``, ``.empirical``; ``sources.range`` (fewest–most);
    ``cache.python``, ``cache.packages``: the environment the serving folds' cache recorded."""
    out: dict[str, str] = {}
    tn = tk = te = 0
    ks = []
    for cls in classes():
        cv = coverage(cls, level)
        lo, hi = class_band(cls, level)
        out |= {f"{cls}.n": str(cv.n), f"{cls}.sources": str(len(cv.per_source)),
                f"{cls}.band": f"×{math.exp(-hi):.2f}–×{math.exp(-lo):.2f}",
                f"{cls}.in_sample": fmt_pct(cv.in_sample, sign=False),
                f"{cls}.loso": fmt_pct(cv.fraction, sign=False),
                f"{cls}.covered": str(cv.covered)}
        out |= {f"{cls}/{s}": f"{k} of {n}" for s, n, k in cv.per_source}
        tn, tk, te = tn + cv.n, tk + cv.covered, te + cv.empirical_covered
        ks.append(len(cv.per_source))
    out |= {"pooled.n": str(tn), "pooled.covered": str(tk),
            "pooled.loso": fmt_pct(tk / tn, sign=False),
            "pooled.empirical": fmt_pct(te / tn, sign=False),
            "sources.range": f"{min(ks)}–{max(ks)}"}
    from .fold_cache import recorded_env

    env = recorded_env("serving")  # metadata of the serving folds' cache, not in its key
    out |= {"cache.python": env["python"],
            "cache.packages": ", ".join(f"{d} {v}" for d, v in sorted(env["packages"].items()))}
    return out


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    if "--write" in sys.argv:
        write()
        print(f"wrote {RESIDUALS_PATH}")
    print(coverage_table())
