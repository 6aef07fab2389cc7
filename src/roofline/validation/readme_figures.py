"""The figures README.md's "How close to reality" table quotes (inline ``<!--v:KEY-->`` markers
that ``python -m roofline.validation.regenerate`` rewrites, step ``readme``), each from the
function behind the validation page the row links to: inference (``inference.rows`` /
``summary``), serving (``serving.serving_errors`` / ``serving_summary``), the serving simulation
(``serving_mix.predictions`` / ``summary``), training (``training.training_errors``), failures
and power (``economics_figures``), the bands' calibration (``uncertainty.coverage``, from the
stored residuals or the run's); the edge row comes from ``edge.predict_edge``; the
measured-CPU row is a hand-kept table checked with a tolerance. The held-out serving figures
(median, RMS, worst of the serving fit without each case's source) and the held-out training
figures (median, worst of the Megatron fit without each case's paper) are read from
data/validation/residuals.toml, where the residuals step stores every case's held-out error
(``uncertainty.compute_residuals``): the readme step needs no fit of its own, and in a run that
also recomputes the residuals it reads the run's (``regenerate``: ``uncertainty.residuals_as``)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .holdout import fmt_pct

__all__ = ["readme_figures"]


def _inference(rows: Sequence[Any]) -> dict[str, str]:
    from .inference import summary

    inl = [r for r in rows if not r.outlier]
    s, b = summary(inl, "r_default"), summary(inl, "r_bound")
    return {"readme.inference.n": str(len(inl)),
            "readme.inference.outliers": str(len(rows) - len(inl)),
            "readme.inference.median": f"×{s['median']:.2f}",
            "readme.inference.geomean": f"×{s['geomean']:.2f}",
            "readme.inference.worst": f"×{s['worst']:.2f}",
            "readme.inference.bound_median": f"×{b['median']:.2f}"}


def _serving(errs: Sequence[Any], mix: Sequence[Any]) -> dict[str, str]:
    from .serving import JUDGED_SOURCES, serving_summary
    from .serving_mix import summary as mix_summary

    s = serving_summary(errs)
    worst = max((e for _, _, e in errs), key=abs)
    tb = [math.expm1(math.log(v / c.value_si)) for c, v, _ in mix if c.source == "trtbench16"]
    ms = mix_summary(list(mix))["trtbench16"]
    judged = sum(c.source in JUDGED_SOURCES for c, _, _ in errs)
    return {"readme.serving.n": str(s["n"]), "readme.serving.judged": str(judged),
            "readme.serving.bound_rms": f"{_bound_rms():.2f}",
            "readme.serving.median": fmt_pct(math.expm1(s["median_abs_log"]), sign=False),
            "readme.serving.rms": f"{s['rms_log']:.3f}",
            "readme.serving.worst": fmt_pct(math.expm1(worst)),
            "readme.mix.n": str(ms["n"]), "readme.mix.rms": f"{ms['rms_log']:.2f}",
            "readme.mix.range": f"{fmt_pct(min(tb))} … {fmt_pct(max(tb))}"}


def _serving_held() -> dict[str, str]:
    """The serving fit's leave-one-source-out median, RMS and worst (``serving_holdout().loso``)
    from the held-out errors stored per case in the residuals file (classes serving-ttft and
    serving-decode, time convention: a rate's error is stored negated, undone here)."""
    from ..uncertainty import residuals
    from .holdout import error_summary
    from .serving import serving_cases

    rate = {c.id: c.metric in ("tok_s", "tok_s_gpu") for c in serving_cases()}
    rows = [(i, -e if rate[i] else e) for cls in ("serving-ttft", "serving-decode")
            for i, _, e in residuals(cls)]
    s = error_summary(rows)
    return {"readme.serving.held_median": fmt_pct(s.median_abs, 1, sign=False),
            "readme.serving.held_rms": f"{s.rms_log:.3f}",
            "readme.serving.held_worst": fmt_pct(s.worst)}


def _bound_rms() -> float:
    """RMS of log(ours / measured) over the serving cases priced with ``preset="bound"`` (the
    pure roofline), every other argument the case's (``serving.predict_serving``)."""
    from .serving import predict_serving, serving_cases

    logs = [math.log(predict_serving(c, preset="bound") / c.value_si) for c in serving_cases()]
    return math.sqrt(sum(x * x for x in logs) / len(logs))


def _training(errs: Sequence[Any]) -> dict[str, str]:
    e = [abs(x) for _, _, x, _ in errs]
    return {"readme.training.n": str(len(e)),
            "readme.training.median": fmt_pct(statistics.median(e), 1, sign=False),
            "readme.training.worst": fmt_pct(max(e), 1, sign=False)}


def _training_held() -> dict[str, str]:
    """The Megatron training fit's leave-one-source-out median and worst
    (``training_holdout().loso``, the figures training.md quotes as ``trm.loso.*``) from the
    held-out errors stored per case in the residuals file (class gpu-training, whose Megatron
    rows are the fit without the case's paper; its other rows are not this fit's)."""
    from ..uncertainty import residuals
    from .holdout import error_summary
    from .training import training_cases

    ids = {c.id for c in training_cases()}
    s = error_summary([(i, e) for i, _, e in residuals("gpu-training") if i in ids])
    return {"readme.training.held_median": fmt_pct(s.median_abs, 1, sign=False),
            "readme.training.held_worst": fmt_pct(s.worst, 1)}


def _bands() -> dict[str, str]:
    """The 80 % bands' leave-one-source-out calibration (``uncertainty.coverage``, as
    docs/validation/uncertainty.md's table): pooled cases inside the band fitted without their
    source, and the classes within the target 70–90 %."""
    from ..uncertainty import classes
    from .uncertainty import coverage
    from .uncertainty_tried import TARGET

    cvs = [coverage(c) for c in classes()]
    n, k = sum(cv.n for cv in cvs), sum(cv.covered for cv in cvs)
    return {"readme.bands.n": str(n), "readme.bands.covered": str(k),
            "readme.bands.loso": fmt_pct(k / n, sign=False),
            "readme.bands.classes": str(len(cvs)),
            "readme.bands.inside": str(sum(TARGET[0] <= cv.fraction <= TARGET[1] for cv in cvs))}


def _economics(f: Mapping[str, str]) -> dict[str, str]:
    from ..analysis.reliability import validation_rows

    llama = [r for r in validation_rows() if r["fit"].startswith("Llama 3")]
    opt = next(r for r in llama if r["case"].startswith("OPT"))
    b200 = next(r for r in llama if r["case"].startswith("B200"))
    lo, hi = f["econ.fail.span"].split(" to ")
    return {"readme.fail.opt": f"{opt['ratio']:.2f}", "readme.fail.b200": f"{b200['ratio']:.2f}",
            "readme.fail.span": f"×{lo}–×{hi}",
            "readme.power.median_in": f["econ.pw.median.in"],
            "readme.power.median_loso": f["econ.pw.median.loso"],
            "readme.power.b1_in": f"×{f['econ.pw.b1.in']}",
            "readme.power.b1_loso": f"×{f['econ.pw.b1.loso']}",
            "readme.power.b1_prev": f"×{f['econ.pw.b1.prev']}",
            "readme.power.l8b": f"×{f['econ.pw.l8b.in']}"}


def readme_figures(reports: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Every inline figure of README.md by key; ``reports`` holds what the run computed already
    (``inference``: inference.rows(), ``serving-errors``: serving.serving_errors(), ``mix``:
    serving_mix.predictions(), ``training-errors``: training.training_errors(), ``economics``:
    economics_figures()); what is missing is computed here."""
    from . import inference, serving, serving_mix, training
    from .economics_figures import economics_figures

    r = dict(reports or {})
    get: dict[str, Callable[[], Any]] = {
        "inference": inference.rows, "serving-errors": serving.serving_errors,
        "mix": serving_mix.predictions, "training-errors": training.training_errors,
        "economics": economics_figures}
    for k, make in get.items():
        if r.get(k) is None:
            r[k] = make()
    from .edge import edge_figures

    return (edge_figures() | _inference(r["inference"]) | _serving(r["serving-errors"], r["mix"])
            | _serving_held() | _bands()
            | _training(r["training-errors"]) | _training_held() | _economics(r["economics"]))
