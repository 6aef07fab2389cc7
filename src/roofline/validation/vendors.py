"""Per-architecture factors of the default preset for parts that are not NVIDIA (AMD CDNA 3 /
CDNA 4, Intel Gaudi 2 / 3): their fit and their errors (docs/validation/vendors.md).

The GPU / accelerator kinds' factors of data/presets/default.toml were set from NVIDIA
measurements (an H200's bf16 GEMM at 0.80 of peak). A ``[<kind>-<arch>]`` table of that file
patches them for the parts its ``devices`` list names (engine/presets.py ``arch_tables``). Here
its large-GEMM fraction ``gemm.max`` is fitted on published matmul microbenchmarks and its
``memory.max`` on STREAM kernels (data/validation/vendors.toml, cases with ``role = "fit"``): a
grid search (0.30 … 1.00, step 0.005) minimising the mean squared log(ours / published) of the
architecture's fit cases of that kind, a matmul priced as one op of the default preset's smooth
matmul model (its tile penalty and launch floor included; not the whole-wave tile sets of
data/presets/tiles.toml, which price solve's matmuls on CDNA parts: validation/cdna.py), a
STREAM kernel as the preset's main-memory rate. Judge rows are priced as solve prices them (the
tile sets where the part has them).
Cases with ``role = "judge"`` are never fitted on: fp8 rows where the fit sets the 16-bit
fraction, NVIDIA control rows (their factors are not refitted here), and end-to-end serving runs
of other sources.

Held-out errors: with one microbenchmark source per architecture a leave-one-source-out fit
inside the kernel rows is impossible; each architecture's fit is judged (1) leave one
*device* out where the architecture has several parts (fit on the others, judge the one left
out) and (2) on the judge rows of other sources (end-to-end runs).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from .cases import Case, load_cases

__all__ = ["vendor_cases", "arch_of", "predict", "fit_arch", "shipped_value", "FACTOR",
           "VendorReport", "vendors_report", "case_table", "fit_table", "judged_table",
           "median_abs", "judged_figures"]

_GRID = tuple(round(0.30 + 0.005 * i, 3) for i in range(141))  # 0.300 … 1.000


def vendor_cases() -> tuple[Case, ...]:
    """The published cases of data/validation/vendors.toml."""
    return load_cases("vendors").cases


def arch_of(hardware: str) -> str | None:
    """The default.toml architecture table that prices ``hardware`` (a zoo key or alias), or
    None where its kind's table does."""
    from ..engine.presets import arch_tables
    from ..specs.hardware import hardware as load

    hw = load(hardware)
    hit = arch_tables().get(hw.key.split("~", 1)[0])
    return hit[0] if hit is not None and hit[0].split("-", 1)[0] == hw.kind else None


#: the factor each case kind fits: gemm -> the matmul model's max, stream -> the memory fraction
FACTOR = {"gemm": "gemm.max", "stream": "memory.max"}


def _eff(hardware: str, factor: str | None = None, value: float | None = None) -> Any:
    from ..engine.presets import efficiency_for
    from ..specs.hardware import hardware as load

    eff = efficiency_for(load(hardware), "default")
    if value is None:
        return eff
    group, fld = (factor or "gemm.max").split(".")
    return replace(eff, **{group: replace(getattr(eff, group), **{fld: value})},
                   label=f"{eff.label}/fit")


def _gemm_tflops(c: Case, value: float | None) -> float:
    from ..engine.core import time_model
    from ..graphs.graph import GraphBuilder
    from ..specs.dtypes import precision as make_precision
    from ..specs.hardware import hardware as load

    sc = c.scenario
    m, n, k = sc["m"], sc["n"], sc["k"]
    b = GraphBuilder(f"matmul {m}x{n}x{k}", "forward", make_precision(sc["dtype"]))
    b.add("linear", "matmul", tokens=m, d_in=k, d_out=n)
    eff = _eff(sc["hardware"], "gemm.max", value)
    if value is not None or sc["role"] == "fit":
        # the fitted gemm.max is the smooth model's: it prices what the tile sets do not
        # (serve, train, matrix-vector products); a part's tiles (solve's matmuls, fitted in
        # validation/gemm.py and validation/cdna.py) would hide it
        eff = replace(eff, tiles=None)
    from .gemm import clocked

    t = time_model(b.build(), clocked(load(sc["hardware"]), sc.get("clock")), eff).totals_at(1)
    return 2.0 * m * n * k / t.latency


def _stream_rate(c: Case, value: float | None) -> float:
    """A STREAM kernel on a large array: the default preset's main-memory rate, bandwidth ×
    memory.max (the time model's bytes / (bandwidth · memory.max); launch cost negligible at
    the sizes these benchmarks run)."""
    from ..specs.hardware import hardware as load

    hw = load(c.scenario["hardware"])
    return float(hw.main_memory.bytes_per_s * _eff(hw.key, "memory.max", value).memory.max)


def _serving(c: Case) -> float:
    from ..scenarios.serving import serve
    from ..specs.dtypes import precision as make_precision

    sc = c.scenario
    p = make_precision(sc["precision"], activations=sc["activations"], kv=sc["kv"])
    s = serve(sc["model"], sc["hardware"], batch=sc["batch"], prompt_len=sc["prompt"],
              output_len=sc["output"], precision=p, tp=sc["tp"], engine=sc["engine"])
    if not s.feasible:
        raise AssertionError(f"{c.id}: does not fit: {s.reason}")
    return float(s.e2e_latency if c.metric == "e2e" else s.tokens_per_s)


def predict(c: Case, value: float | None = None) -> float:
    """Our number for ``c`` in SI (FLOP/s of the matmul, bytes/s of a STREAM kernel, seconds end
    to end, or generated tokens per second of the deployment); ``value``: the factor its kind
    fits (``FACTOR``) to price it with instead of the shipped one."""
    kind = c.scenario["kind"]
    if kind == "gemm":
        return _gemm_tflops(c, value)
    if kind == "stream":
        return _stream_rate(c, value)
    if kind == "serving":
        return _serving(c)
    raise AssertionError(f"{c.id}: unknown kind {kind!r}")


def _error(c: Case, value: float | None = None) -> float:
    return predict(c, value) / c.value_si - 1.0


def fit_arch(cs: Sequence[Case]) -> float:
    """The value of the grid minimising the mean squared log(ours / published) over ``cs``
    (cases of one architecture and one kind: its ``FACTOR``); ties go to the smaller value.
    A matmul fraction stops where a part's clock ratio (Efficiency.clock) would price a
    matmul above the peak (max x ratio <= 1)."""
    if not cs:
        raise ValueError("fit_arch: no cases")
    best, best_v = math.inf, _GRID[0]
    hi = min(1.0 / max((r for _, r in _eff(c.scenario["hardware"]).clock), default=1.0)
             if c.scenario["kind"] == "gemm" else 1.0 for c in cs)
    for v in (v for v in _GRID if v <= hi):
        loss = sum(math.log(predict(c, v) / c.value_si) ** 2 for c in cs) / len(cs)
        if loss < best - 1e-12:
            best, best_v = loss, v
    return best_v


def shipped_value(arch: str, factor: str = "gemm.max") -> float:
    """The shipped ``factor`` ("group.field") of the default.toml table ``arch``."""
    from ..engine.presets import arch_tables

    group, fld = factor.split(".")
    for name, eff in arch_tables().values():
        if name == arch:
            return float(getattr(getattr(eff, group), fld))
    raise KeyError(arch)


@dataclass(frozen=True, slots=True)
class ArchFit:
    arch: str
    factor: str  #: "gemm.max" or "memory.max"
    shipped: float
    refit: float
    kind_default: float  #: the kind's value of the factor the table replaces
    in_sample: tuple[tuple[str, float], ...]  #: (case id, error at the shipped value)
    #: (case id, value fitted without that case's device, its error there)
    left_out: tuple[tuple[str, float, float], ...]
    before: tuple[tuple[str, float], ...]  #: (case id, error at the kind's factor)


@dataclass(frozen=True, slots=True)
class VendorReport:
    fits: tuple[ArchFit, ...]
    judged: tuple[tuple[str, str | None, float, float, float], ...]
    """(case id, architecture, ours, published, error) of the role = "judge" cases (SI)"""
    judged_before: tuple[tuple[str, float], ...] = ()
    """(case id, error) of the judge cases on an architecture's part priced with its kind's
    factors (what the default preset did before the architecture tables)"""


@contextmanager
def _kind_factors(hardware: str) -> Iterator[None]:
    """Price ``hardware`` with its kind's default factors (its architecture table ignored)
    while the block runs (engine.presets.register_efficiency, removed after)."""
    from ..engine.presets import default_tables, register_efficiency
    from ..specs.hardware import hardware as load

    hw = load(hardware)
    register_efficiency(hw, default_tables()[hw.kind])
    try:
        yield
    finally:
        register_efficiency(hw, None)


def _kind_value(hardware: str, factor: str) -> float:
    from ..engine.presets import default_tables
    from ..specs.hardware import hardware as load

    group, fld = factor.split(".")
    return float(getattr(getattr(default_tables()[load(hardware).kind], group), fld))


def vendors_report() -> VendorReport:
    """Every architecture's fit (shipped, refit, in sample, leave one device out, before) and
    the judged cases."""
    cs = vendor_cases()
    fit = [c for c in cs if c.scenario["role"] == "fit"]
    by_arch: dict[tuple[str, str], list[Case]] = {}
    for c in fit:
        a = arch_of(c.scenario["hardware"])
        if a is None:
            raise AssertionError(f"{c.id}: role 'fit' on {c.scenario['hardware']}, which no "
                                 "architecture table of default.toml lists")
        by_arch.setdefault((a, FACTOR[c.scenario["kind"]]), []).append(c)
    fits = []
    for (a, factor), acs in sorted(by_arch.items()):
        left = []
        for c in acs:
            rest = [x for x in acs if x.scenario["hardware"] != c.scenario["hardware"]]
            if rest:
                v = fit_arch(rest)
                left.append((c.id, v, _error(c, v)))
        kv = _kind_value(acs[0].scenario["hardware"], factor)
        was = []
        for c in acs:  # the kind's factors as they were: no architecture table, no clock
            with _kind_factors(c.scenario["hardware"]):
                was.append((c.id, _error(c)))
        fits.append(ArchFit(arch=a, factor=factor, shipped=shipped_value(a, factor),
                            refit=fit_arch(acs), kind_default=kv,
                            in_sample=tuple((c.id, _error(c)) for c in acs),
                            left_out=tuple(left), before=tuple(was)))
    jcs = [c for c in cs if c.scenario["role"] == "judge"]
    judged = tuple((c.id, arch_of(c.scenario["hardware"]), predict(c), c.value_si, _error(c))
                   for c in jcs)
    before = []
    for c in jcs:
        if arch_of(c.scenario["hardware"]) is not None:
            with _kind_factors(c.scenario["hardware"]):
                before.append((c.id, _error(c)))
    return VendorReport(fits=tuple(fits), judged=judged, judged_before=tuple(before))


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def _fmt(c: Case, v: float) -> str:
    if c.metric == "tflops":
        return f"{v / 1e12:.1f} TFLOP/s"
    if c.metric == "tbps":
        return f"{v / 1e12:.2f} TB/s"
    return f"{v:.3f} s" if c.metric == "e2e" else f"{v:,.0f} tok/s"


def fit_table(rep: VendorReport | None = None) -> str:
    """Markdown: per architecture the kind's factor, the shipped (fitted) one, in-sample and
    leave-one-device-out errors."""
    rep = rep or vendors_report()
    rows = ["| architecture | factor | kind's value | fitted | cases | error before "
            "(kind's value) | in-sample error | leave one device out |",
            "|---|---|---|---|---|---|---|---|"]
    for f in rep.fits:
        before = ", ".join(_pct(e) for _, e in f.before)
        ins = ", ".join(_pct(e) for _, e in f.in_sample)
        lo = ", ".join(f"{_pct(e)} (fit {v:.3f})" for _, v, e in f.left_out) or "n/a (one device)"
        rows.append(f"| {f.arch} | {f.factor} | {f.kind_default:.3f} | {f.shipped:.3f} | "
                    f"{len(f.in_sample)} | {before} | {ins} | {lo} |")
    return "\n".join(rows)


def case_table(rep: VendorReport | None = None) -> str:
    """Markdown: every case with its role, our number, the published one and the error."""
    rep = rep or vendors_report()
    cs = {c.id: c for c in vendor_cases()}
    ours = {cid: e for f in rep.fits for cid, e in f.in_sample}
    before = dict(rep.judged_before) | {cid: e for f in rep.fits for cid, e in f.before}
    rows = ["| case | source | role | architecture | ours | published | error | error with "
            "the kind's factors |", "|---|---|---|---|---|---|---|---|"]
    for cid, c in cs.items():
        if cid in ours:
            e, a = ours[cid], arch_of(c.scenario["hardware"])
        else:
            _, a, _, _, e = next(j for j in rep.judged if j[0] == cid)
        v = c.value_si * (1 + e)
        b = _pct(before[cid]) if cid in before else "(same)"
        rows.append(f"| {cid} | {c.source} | {c.scenario['role']} | {a or '(kind)'} | "
                    f"{_fmt(c, v)} | {_fmt(c, c.value_si)} | {_pct(e)} | {b} |")
    return "\n".join(rows)


def judged_table(rep: VendorReport | None = None) -> str:
    """Markdown: per source and architecture, the judge rows' median |error| and worst, now and
    with the kind's factors."""
    rep = rep or vendors_report()
    cs = {c.id: c for c in vendor_cases()}
    before = dict(rep.judged_before)
    groups: dict[tuple[str, str], list[str]] = {}
    for cid, a, _, _, _ in rep.judged:
        groups.setdefault((cs[cid].source, a or "(kind)"), []).append(cid)
    err = {cid: e for cid, _, _, _, e in rep.judged}
    rows = ["| source | architecture | cases | median \\|error\\| | worst | before: median "
            "\\|error\\| | before: worst |", "|---|---|---|---|---|---|---|"]
    for (src, a), ids in groups.items():
        now = [err[i] for i in ids]
        was = [before[i] for i in ids if i in before]
        b = (f"{median_abs(was):.1%} | {_pct(max(was, key=abs))}" if was
             else "(same) | (same)")
        rows.append(f"| {src} | {a} | {len(ids)} | {median_abs(now):.1%} | "
                    f"{_pct(max(now, key=abs))} | {b} |")
    return "\n".join(rows)


def median_abs(errors: Sequence[float]) -> float:
    return float(statistics.median(abs(e) for e in errors))


def judged_figures(rep: VendorReport | None = None) -> dict[str, str]:
    """The judged rows' errors docs/validation/vendors.md's prose quotes (inline
    ``<!--v:judged/SOURCE-->`` markers): per source, the range of |error|, "54–68 %"."""
    from .holdout import span_pct

    rep = rep or vendors_report()
    src = {c.id: c.source for c in vendor_cases()}
    by: dict[str, list[float]] = {}
    for cid, _, _, _, e in rep.judged:
        by.setdefault(src[cid], []).append(e)
    return {f"judged/{s}": span_pct(es, signed=False) for s, es in by.items()}
