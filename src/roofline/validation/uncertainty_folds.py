"""Nested residuals of the held-out classes whose folds refit cheaply (session 30).

A class's residual of a fitted case is its error with the fit made without the case's own
source r: a fit that saw every other source. In the fold that judges source s (its band fitted
without s), r's residual must not rest on s either: ``nested`` refits once without both r and s
for every ordered pair of the fit's sources and prices r's cases with it. Rows of the fold
(held-out source, case id, source, e), e in the class's sign convention (a time's
log(ours / measured)), for residuals.toml's ``[[class.X.fold]]``
(``roofline.validation.uncertainty.fold_view``).

What is not nested here (docs/validation/uncertainty.md, "Closing the leak"): a fit of two
sources (the Megatron training fit: without both, no case is left to fit on), the serving-engine
fit (42 refits of minutes each), and cases priced as shipped with factors fitted on s.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .cases import Case
from .holdout import Refit

__all__ = ["nested", "llamacpp_folds", "rocm_folds", "tpu_folds", "hopper_folds"]

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
            rest = [c for c in cases if c.source not in (s, r)]
            if r == s or not rest:
                continue
            mine = [c for c in cases if c.source == r]
            for c, e in zip(mine, log_errors(fit(rest).values, mine)):
                out.append((s, c.id, r, sign * e))
    return out


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
