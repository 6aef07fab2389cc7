"""Nested residuals of the held-out classes whose folds refit cheaply (session 30).

A class's residual of a fitted case is its error with the fit made without the case's own
source r: a fit that saw every other source. In the fold that judges source s (its band fitted
without s), r's residual must not rest on s either: ``nested`` refits once without both r and s
for every ordered pair of the fit's sources and prices r's cases with it. Rows of the fold
(held-out source, case id, source, e), e in the class's sign convention (a time's
log(ours / measured)), for residuals.toml's ``[[class.X.fold]]``
(``roofline.validation.uncertainty.fold_view``).

The serving-engine fit's pairs (42 refits, seconds each on an idle machine, half an hour in all
on a loaded one) are computed pair by pair (``serving_pair``) and stored in a content-keyed cache
(``fold_cache``, session 31). What is not nested (docs/validation/uncertainty.md, "Closing the
leak"): a fit of two sources (the Megatron training fit: without both, no case is left to fit
on), and cases priced as shipped with factors fitted on s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .cases import Case
from .holdout import Refit

__all__ = ["nested", "llamacpp_folds", "rocm_folds", "tpu_folds", "hopper_folds", "serving_pairs",
           "serving_pair_inputs", "serving_pair", "serving_folds", "pair_fold", "llamacpp_pairs",
           "llamacpp_pair_inputs", "llamacpp_pair"]

Fold = tuple[str, str, str, float]


def nested(cases: Sequence[Case], fit: Callable[[Sequence[Case]], Refit],
           log_errors: Callable[[Mapping[str, float] | None, Sequence[Case]], list[float]],
           sign: float = 1.0) -> list[Fold]:
    """For every ordered pair of the cases' sources s ≠ r: r's cases priced with ``fit`` on
    the cases of neither (``sign`` × log(ours / measured); −1 for a published rate). A pair
    that leaves no case to fit on gives no row (the fold keeps r's stored residual)."""
    srcs = list(dict.fromkeys(c.source for c in cases))
    out: list[Fold] = []
    for s in srcs:
        for r in srcs:
            if r == s or not any(c.source not in (s, r) for c in cases):
                continue
            _, rows = pair_fold(cases, fit, log_errors, s, r)
            out += [(s, c.id, r, sign * e) for c, e in rows]
    return out


def pair_fold(cases: Sequence[Case], fit: Callable[[Sequence[Case]], Refit],
              log_errors: Callable[[Mapping[str, float] | None, Sequence[Case]], list[float]],
              s: str, r: str) -> tuple[Refit, list[tuple[Case, float]]]:
    """One pair of ``nested``: ``fit`` on the cases of neither s nor r, and r's cases with
    their log(ours / measured) under it."""
    got = fit([c for c in cases if c.source not in (s, r)])
    mine = [c for c in cases if c.source == r]
    return got, list(zip(mine, log_errors(got.values, mine)))


def llamacpp_folds() -> list[Fold]:
    """serving-llamacpp: the profile (memory fraction, per-layer cost) refitted without each
    pair of sources; a rate, so the time residual is −e."""
    from .llamacpp import _log_errors, fit_llamacpp, fitted_cases

    return nested(fitted_cases(), fit_llamacpp, _log_errors, -1.0)


def rocm_folds() -> list[Fold]:
    """serving-vllm-rocm: the per-layer cost refitted without each pair of releases (a time)."""
    from .rocm_serving import _log_errors, fit_rocm, rocm_fit_cases

    return nested(rocm_fit_cases(), fit_rocm, _log_errors)


def tpu_folds() -> list[Fold]:
    """tpu-training: the Trillium GEMM fraction refitted without each pair of sources (a
    rate: −e)."""
    from .tpu_training import _log_errors, fit_tpu, tpu_fit_cases

    return nested(tpu_fit_cases(), fit_tpu, _log_errors, -1.0)


def hopper_folds() -> list[Fold]:
    """gpu-training, the bf16 Hopper rows of other documents: the Hopper GEMM fraction
    refitted without each pair of sources (a rate: −e)."""
    from .training_runs import _hopper_log_errors, fit_hopper, hopper_cases

    return nested(hopper_cases(), fit_hopper, _hopper_log_errors, -1.0)


def serving_pairs() -> list[tuple[str, str]]:
    """The ordered pairs (s, r), s ≠ r, of the serving-engine fit's sources (7 sources: 42)."""
    from .serving import serving_cases

    srcs = list(dict.fromkeys(c.source for c in serving_cases()))
    return [(s, r) for s in srcs for r in srcs if r != s]


def serving_pair_inputs(s: str, r: str) -> dict[str, list[str]]:
    """The case ids pair (s, r) fits on (neither s's nor r's) and prices (r's): part of its
    cache key (``fold_cache``)."""
    from .serving import serving_cases

    cs = serving_cases()
    return {"fit": sorted(c.id for c in cs if c.source not in (s, r)),
            "priced": sorted(c.id for c in cs if c.source == r)}


def serving_pair(s: str, r: str) -> dict[str, object]:
    """The serving-engine fit (``serving.fit_serving``) without sources s and r, and r's cases
    priced with it: {"values", "note", "rows": [[case id, e], ...]}, e in the serving classes'
    time convention (a rate's residual is −log(ours / measured))."""
    from .serving import _errors, _profiles, fit_serving, serving_cases

    def log_errors(values: Mapping[str, float] | None, sub: Sequence[Case]) -> list[float]:
        return [e for _, _, e in _errors(_profiles(values), sub)]  # as serving_holdout's

    fit, rows = pair_fold(serving_cases(), fit_serving, log_errors, s, r)
    return {"values": dict(fit.values), "note": fit.note,
            "rows": [[c.id, -e if c.metric in _RATES else e] for c, e in rows]}


_RATES = ("tok_s", "tok_s_gpu")  # the serving metrics that are rates (uncertainty._RATES)


def serving_folds() -> list[Fold]:
    """serving-ttft / serving-decode: the serving-engine fit without each pair of sources
    (``serving_pair``), as stored in the content-keyed cache (``fold_cache``, job "serving"):
    42 refits, refreshed by the residuals step when an input changed."""
    from .fold_cache import cached_rows

    return cached_rows("serving")


def llamacpp_pairs() -> list[tuple[str, str]]:
    """The ordered pairs of the llama.cpp profile fit's sources (a small job: tests run the
    cache's worker on it, ``fold_cache``)."""
    from .llamacpp import fitted_cases

    srcs = list(dict.fromkeys(c.source for c in fitted_cases()))
    return [(s, r) for s in srcs for r in srcs if r != s]


def llamacpp_pair_inputs(s: str, r: str) -> dict[str, list[str]]:
    from .llamacpp import fitted_cases

    cs = fitted_cases()
    return {"fit": sorted(c.id for c in cs if c.source not in (s, r)),
            "priced": sorted(c.id for c in cs if c.source == r)}


def llamacpp_pair(s: str, r: str) -> dict[str, object]:
    """One row group of ``llamacpp_folds``: the profile without s and r, r's cases priced."""
    from .llamacpp import _log_errors, fit_llamacpp, fitted_cases

    fit, rows = pair_fold(fitted_cases(), fit_llamacpp, _log_errors, s, r)
    return {"values": dict(fit.values), "note": fit.note, "rows": [[c.id, -e] for c, e in rows]}
