"""In-sample and leave-one-source-out (LOSO) error of a fitted profile.

A profile's factors were fitted on published cases; its error on those same cases flatters it.
``leave_one_source_out`` refits the profile once without each source (every case of one
document left out), predicts the left-out cases with that fit, and reports both: the in-sample
error (the shipped factors on every case; the refit on every case) and the held-out error per
source and pooled over every held-out prediction.

Errors are e = log(ours / measured); the summaries give the median |ours / measured − 1|, the
RMS of e, and the worst case (signed ours / measured − 1 of the case with the largest |e|).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from ..errors import SpecError
from .cases import Case

__all__ = ["ErrorSummary", "Refit", "SourceHoldout", "FitReport", "error_summary", "golden_bracket",
           "golden_section", "leave_one_source_out", "holdout_tables", "holdout_figures",
           "fmt_pct", "span_pct"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSummary:
    """Summary of log errors e = log(ours / measured) over some cases."""

    n: int
    median_abs: float  #: median of |ours / measured − 1|
    rms_log: float  #: sqrt(mean e²)
    worst: float  #: ours / measured − 1 of the case with the largest |e|
    worst_case: str  #: its id


@dataclass(frozen=True, slots=True, kw_only=True)
class Refit:
    """The factor values one fit found (name -> value) and what it could not determine."""

    values: Mapping[str, float]
    note: str = ""  #: e.g. factors no remaining case constrains, and what they were set to


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceHoldout:
    """One source's cases: with the fit on every case, and with the fit without that source."""

    source: str
    n: int
    fitted_without: Refit  #: the factors fitted on every other source
    in_sample: ErrorSummary  #: this source's cases, shipped factors
    held_out: ErrorSummary  #: this source's cases, the fit without them


@dataclass(frozen=True, slots=True, kw_only=True)
class FitReport:
    """In-sample and leave-one-source-out error of one fitted profile."""

    profile: str
    params: tuple[str, ...]  #: the factors the fit adjusts
    shipped: Mapping[str, float]  #: their values in the data file
    refit: Refit  #: the fit reconstructed here, on every case
    shipped_in_sample: ErrorSummary  #: every case, shipped factors
    refit_in_sample: ErrorSummary  #: every case, the refit
    loso: ErrorSummary  #: every case, each predicted by the fit without its source
    per_source: tuple[SourceHoldout, ...]
    #: the same fit on every case started from the shipped values (when the search depends on
    #: its start: how close the reconstructed procedure comes to the shipped numbers)
    refit_from_shipped: Refit | None = None
    #: case id -> log(ours / measured) predicted by the fit without that case's source
    held_out_errors: Mapping[str, float] = field(default_factory=dict)


def golden_section(f: Callable[[float], float], lo: float, hi: float, *, tol: float = 0.0,
                   steps: int | None = None, left_ties: bool = True
                   ) -> tuple[float, float, tuple[float, float], tuple[float, float]]:
    """Golden-section search for the minimum of a unimodal ``f`` on [lo, hi]: ``steps``
    narrowings (None: until the bracket is narrower than ``tol``). ``left_ties``: on equal
    values the bracket moves left (else right). Returns the final bracket (lo, hi) and its two
    interior points with their values, (x1, f(x1)) and (x2, f(x2)), x1 < x2."""
    g = (math.sqrt(5) - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = f(a), f(b)
    n = 0
    while (hi - lo > tol) if steps is None else n < steps:
        n += 1
        if fa < fb or (left_ties and fa == fb):
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = f(b)
    return lo, hi, (a, fa), (b, fb)


def golden_bracket(f: Callable[[float], float], lo: float, hi: float,
                   tol: float) -> tuple[float, float]:
    """Golden-section search of a one-factor fit: the final bracket (lo, hi), narrower than
    ``tol``, around the minimum of a unimodal ``f`` on [lo, hi] (ties move left)."""
    return golden_section(f, lo, hi, tol=tol)[:2]


def error_summary(errors: Sequence[tuple[str, float]]) -> ErrorSummary:
    """Summary of (case id, log error) pairs."""
    if not errors:
        raise SpecError("error_summary needs at least one (case, log error) pair, got none")
    for cid, e in errors:
        if not math.isfinite(e):
            raise SpecError(f"log error of case {cid!r} is {e!r}; expected a finite number")
    rel = [abs(math.expm1(e)) for _, e in errors]
    cid, w = max(errors, key=lambda t: abs(t[1]))
    return ErrorSummary(n=len(errors), median_abs=statistics.median(rel),
                        rms_log=math.sqrt(statistics.fmean(e * e for _, e in errors)),
                        worst=math.expm1(w), worst_case=cid)


FitFn = Callable[[Sequence[Case]], Refit]
ErrFn = Callable[[Mapping[str, float] | None, Sequence[Case]], list[float]]


def leave_one_source_out(profile: str, cases: Sequence[Case], params: Sequence[str],
                         shipped: Mapping[str, float], fit: FitFn, log_errors: ErrFn,
                         fit_from_shipped: FitFn | None = None) -> FitReport:
    """Refit ``profile`` on every case and once without each source; report the errors.

    ``fit(cases)`` returns a Refit (it must only look at the cases it is given);
    ``log_errors(values, cases)`` returns log(ours / measured) for each case with the factor
    values given (``None``: the shipped ones); ``fit_from_shipped``, if given, is the same fit
    started from the shipped values, run once on every case.
    """
    sources = list(dict.fromkeys(c.source for c in cases))
    if len(sources) < 2:
        raise SpecError(f"{profile}: leave-one-source-out needs cases from 2 or more sources, "
                        f"got {sources}")
    ids = [c.id for c in cases]
    shipped_e = log_errors(None, cases)
    full = fit(cases)
    full_e = log_errors(full.values, cases)
    held: dict[str, float] = {}
    per = []
    for s in sources:
        mine = [c for c in cases if c.source == s]
        rest = [c for c in cases if c.source != s]
        r = fit(rest)
        e = log_errors(r.values, mine)
        held.update(zip((c.id for c in mine), e))
        ins = [(c.id, x) for c, x in zip(cases, shipped_e) if c.source == s]
        per.append(SourceHoldout(source=s, n=len(mine), fitted_without=r,
                                 in_sample=error_summary(ins),
                                 held_out=error_summary(list(zip((c.id for c in mine), e)))))
    return FitReport(profile=profile, params=tuple(params),
                     shipped=MappingProxyType(dict(shipped)), refit=full,
                     shipped_in_sample=error_summary(list(zip(ids, shipped_e))),
                     refit_in_sample=error_summary(list(zip(ids, full_e))),
                     loso=error_summary([(i, held[i]) for i in ids]), per_source=tuple(per),
                     refit_from_shipped=None if fit_from_shipped is None
                     else fit_from_shipped(cases),
                     held_out_errors=MappingProxyType({i: held[i] for i in ids}))


def _row(label: str, s: ErrorSummary) -> str:
    return (f"| {label} | {s.n} | {s.median_abs:.1%} | {s.rms_log:.3f} | {s.worst:+.1%} "
            f"({s.worst_case}) |")


def holdout_figures(rep: FitReport, prefix: str) -> dict[str, str]:
    """The medians of ``rep`` a page's prose quotes, by inline-marker key (``<!--v:KEY-->``;
    ``python -m roofline.validation.regenerate`` fills them): ``PREFIX.in_sample`` /
    ``PREFIX.loso`` (every case, shipped / held out), ``PREFIX/SOURCE.in_sample`` and
    ``PREFIX/SOURCE.held_out``; "16.1 %"."""
    out = {f"{prefix}.in_sample": fmt_pct(rep.shipped_in_sample.median_abs, 1, sign=False),
           f"{prefix}.loso": fmt_pct(rep.loso.median_abs, 1, sign=False)}
    for p in rep.per_source:
        out |= {f"{prefix}/{p.source}.in_sample": fmt_pct(p.in_sample.median_abs, 1, sign=False),
                f"{prefix}/{p.source}.held_out": fmt_pct(p.held_out.median_abs, 1, sign=False)}
    return out


def fmt_pct(x: float, digits: int = 0, *, sign: bool = True) -> str:
    """A fraction (an error ours / measured − 1, a share) as a page's prose quotes it, the one
    formatter of every figures module: "+12 %", "−3.4 %" (``digits=1``); ``sign=False`` drops
    the "+" ("12 %"). The minus is U+2212, as in ``span_pct``; a value that rounds to zero has
    none ("+0 %", "0.0 %")."""
    return f"{x * 100:{'+' if sign else ''}z.{digits}f} %".replace("-", "−")


def span_pct(errors: Sequence[float], signed: bool = True, digits: int = 0) -> str:
    """The range of some errors (ours / measured − 1) as a page's prose quotes it: signed,
    "−9 … +9 %"; else the range of their sizes, "46–71 %" (for errors of one sign); one
    figure where both ends print alike ("2 %", not "2–2 %")."""
    if signed:
        ends = [f"{min(errors) * 100:+.{digits}f}", f"{max(errors) * 100:+.{digits}f}"]
        sep = " … "
    else:
        ends = [f"{min(map(abs, errors)) * 100:.{digits}f}",
                f"{max(map(abs, errors)) * 100:.{digits}f}"]
        sep = "–"
    text = (ends[0] if ends[0] == ends[1] else sep.join(ends)) + " %"
    return text.replace("-", "−")


def holdout_tables(rep: FitReport, fmt: Callable[[str, float], str] | None = None,
                   labels: Mapping[str, str] | None = None) -> str:
    """Markdown: the factors (shipped, refit, each fit without a source) and the errors;
    ``fmt(name, value)`` formats a factor value, ``labels`` renames factor rows."""
    f = fmt or (lambda _k, v: f"{v:.4g}")
    lab = labels or {}
    srcs = [p.source for p in rep.per_source]
    fs = rep.refit_from_shipped
    lines = ["| factor | shipped | " + ("refit from the shipped values | " if fs else "") +
             "refit, all cases | " + " | ".join(f"fit without {s}" for s in srcs) + " |",
             "|---|---:|---:|" + ("---:|" if fs else "") + "---:|" * len(srcs)]
    for k in rep.params:
        lines.append(f"| {lab.get(k, k)} | {f(k, rep.shipped[k])} | " +
                     (f"{f(k, fs.values[k])} | " if fs else "") +
                     f"{f(k, rep.refit.values[k])} | " +
                     " | ".join(f(k, p.fitted_without.values[k]) for p in rep.per_source) + " |")
    lines += ["", "| cases | n | median abs error | RMS log error | worst |",
              "|---|---:|---:|---:|---|",
              _row("all, shipped factors (in-sample)", rep.shipped_in_sample),
              _row("all, refit here (in-sample)", rep.refit_in_sample),
              _row("all, each predicted without its source (LOSO)", rep.loso)]
    for p in rep.per_source:
        lines.append(_row(f"{p.source}, in-sample", p.in_sample))
        lines.append(_row(f"{p.source}, fit without {p.source} (held out)", p.held_out))
    notes = [f"- fit without {p.source}: {p.fitted_without.note}" for p in rep.per_source
             if p.fitted_without.note]
    if rep.refit.note:
        notes.insert(0, f"- refit on all cases: {rep.refit.note}")
    if notes:
        lines += [""] + notes
    return "\n".join(lines)
