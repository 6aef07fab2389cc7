"""Why the remaining GEMM misses of docs/validation/gemm.md are not one-parameter fixes.

1. How close *any* time model that never gets faster with more work can come to a GEMM table.

A kernel-time model in which a larger m, n or k never takes less time (the whole-wave tile
model of engine/tiles.py is one: more rows, columns or a longer K loop add tiles or
iterations, and the best of its candidates is a minimum of such functions) cannot follow a
table whose measured time *falls* when a dimension grows (a different kernel picked at the
larger size). The least-squares fit of log(time) among all such monotone functions on the
table's own points is the projection onto that cone; its RMS log error is a floor for every
monotone model, fitted or not (``monotone_floor``). Computed here for each XLA / ROCm XLA
table (a full m × n × k grid: the cone is the intersection of "non-decreasing along m",
"along n" and "along k", projected onto by Dykstra's alternating projections, each a
pool-adjacent-violators pass per line) and for the Triton tutorial's square A100 sweeps (a
chain: one pass). The table in docs/validation/gemm.md sets each floor beside the shipped
model's in-sample error.

2. The A100 sweep of source tri6523 against two one-parameter corrections fitted on its own
rows (diagnostics, never shipped: they would be fitted on the rows they are judged on): a
fixed cost per call outside the kernel (t + x) and a rate (t / s). Which one fits says what
kind of difference it is (``a100_gap``).

3. What the A100 misses follow: the signed error of every A100 row per source and size class
(``a100_by_size``): the calls the per-kernel fill and the launch decide, the mid sizes whole
waves decide, and the large ones the tile set's limit decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from numbers import Real

import numpy as np

from ..errors import SpecError, unknown
from .cases import Case

__all__ = ["pava", "monotone_fit", "MonotoneFloor", "monotone_floor", "monotone_table",
           "Gap", "a100_gap", "a100_gap_table", "A100_SIZES", "a100_size_class", "a100_by_size",
           "a100_size_table"]


def pava(y: Sequence[float] | np.ndarray) -> np.ndarray:
    """The non-decreasing sequence nearest ``y`` in least squares (pool adjacent violators,
    equal weights)."""
    vals: list[float] = []
    lens: list[int] = []
    for x in y:
        vals.append(float(x))
        lens.append(1)
        while len(vals) > 1 and vals[-2] > vals[-1]:
            n = lens[-2] + lens[-1]
            vals[-2] = (vals[-2] * lens[-2] + vals[-1] * lens[-1]) / n
            lens[-2] = n
            vals.pop()
            lens.pop()
    return np.repeat(vals, lens)


def monotone_fit(y: np.ndarray, *, tol: float = 1e-12, max_iter: int = 5000) -> np.ndarray:
    """The array nearest ``y`` (least squares) that is non-decreasing along every axis:
    Dykstra's alternating projections onto the per-axis cones (each a ``pava`` per line)."""
    x = np.asarray(y, dtype=np.float64).copy()
    incr = [np.zeros_like(x) for _ in range(x.ndim)]
    for _ in range(max_iter):
        before = x.copy()
        for a in range(x.ndim):
            z = np.apply_along_axis(pava, a, x + incr[a])
            incr[a] = x + incr[a] - z
            x = z
        if float(np.max(np.abs(x - before))) < tol:
            break
    return x


@dataclass(frozen=True)
class MonotoneFloor:
    source: str
    label: str  #: part and dtype
    n: int
    floor_median: float  #: median |error| of the best monotone fit (FLOP/s, ours / measured − 1)
    floor_rms: float  #: its RMS log error: no monotone model has less
    model_median: float  #: the shipped model, in sample
    model_rms: float
    model_monotone: bool  #: whether the shipped model's own times are monotone on these points


def _log_times(cases: Sequence[Case]) -> tuple[np.ndarray, np.ndarray, tuple[int, ...]]:
    """(measured log time, the shipped model's log time, shape) of a full grid or a chain."""
    from .gemm import predict_gemm

    def flops(c: Case) -> float:
        return 2.0 * c["m"] * c["n"] * c["k"] * c["b"]

    if not cases:
        raise SpecError("monotone_floor: cases=[] (empty); allowed: a full m x n x k grid or "
                        "a chain of squares of one table")
    axes = [sorted({c[d] for c in cases}) for d in ("m", "n", "k")]
    if len(cases) == math.prod(len(a) for a in axes):  # a full grid
        shape = tuple(len(a) for a in axes)
        pos = [tuple(a.index(c[d]) for a, d in zip(axes, ("m", "n", "k"))) for c in cases]
    elif all(c["m"] == c["n"] == c["k"] for c in cases):  # a chain of squares
        shape = (len(cases),)
        pos = [(axes[0].index(c["m"]),) for c in cases]
    else:
        raise SpecError(f"monotone_floor: cases ({len(cases)} of them) are neither a full "
                        "m x n x k grid nor a chain of squares")
    meas, ours = np.empty(shape), np.empty(shape)
    for c, p in zip(cases, pos):
        meas[p] = math.log(flops(c) / c.value_si)
        ours[p] = math.log(flops(c) / predict_gemm(c))
    return meas, ours, shape


def _is_monotone(x: np.ndarray) -> bool:
    return all(bool(np.all(np.diff(x, axis=a) >= -1e-12)) for a in range(x.ndim))


def monotone_floor(source: str, label: str, cases: Sequence[Case]) -> MonotoneFloor:
    """The floor and the shipped model's in-sample error on ``cases`` (one table)."""
    meas, ours, _ = _log_times(cases)
    fit = monotone_fit(meas)

    def med(e: np.ndarray) -> float:  # e: log(our time / measured time)
        return float(np.median(np.abs(np.expm1(-e))))

    def rms(e: np.ndarray) -> float:
        return float(np.sqrt(np.mean(e ** 2)))

    return MonotoneFloor(source, label, int(meas.size), med(fit - meas), rms(fit - meas),
                         med(ours - meas), rms(ours - meas), _is_monotone(ours))


def _tables() -> list[tuple[str, str, list[Case]]]:
    from .cdna import cdna_table_cases
    from .gemm import gemm_cases

    out: list[tuple[str, str, list[Case]]] = []
    cs = gemm_cases() + cdna_table_cases()
    for src in dict.fromkeys(c.source for c in cs):
        if not src.startswith(("xla", "tri")):
            continue  # not one grid or chain of one dtype (azure_a100, the zzc sweeps)
        mine = [c for c in cs if c.source == src]
        label = f"{mine[0]['hardware']} {mine[0]['dtype']}"
        out.append((src, label, mine))
    return out


def monotone_table() -> str:
    """Markdown: per table, the floor of any monotone model and the shipped model's error."""
    lines = ["| source | part, dtype | n | best monotone fit: median \\|error\\| | RMS log "
             "(floor) | shipped model, in sample: median | RMS log | model monotone here |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for src, label, cs in _tables():
        f = monotone_floor(src, label, cs)
        lines.append(f"| {src} | {label} | {f.n} | {f.floor_median:.1%} | {f.floor_rms:.3f} | "
                     f"{f.model_median:.1%} | {f.model_rms:.3f} | "
                     f"{'yes' if f.model_monotone else 'no'} |")
    return "\n".join(lines)


@dataclass(frozen=True)
class Gap:
    source: str
    n: int
    shipped: tuple[float, float]  #: (median |error|, RMS log) as shipped
    per_call: float  #: seconds added to every call's time, fitted on this source's rows
    per_call_err: tuple[float, float]
    rate: float  #: s: every call's time divided by s (its rate times s), fitted likewise
    rate_err: tuple[float, float]


#: the grids of the two diagnostics: a cost per call 0 … 100 µs (step 0.5 µs) and a rate
#: factor 0.30 … 1.20 (step 0.005)
PER_CALL_GRID = tuple(0.5e-6 * i for i in range(201))
RATE_GRID = tuple(round(0.30 + 0.005 * i, 3) for i in range(181))


def _errs(ours_t: np.ndarray, meas_t: np.ndarray) -> tuple[float, float]:
    e = np.log(meas_t / ours_t)  # log(our FLOP/s / measured)
    return float(np.median(np.abs(np.expm1(e)))), float(np.sqrt(np.mean(e ** 2)))


def a100_gap(source: str) -> Gap:
    """The two one-parameter corrections of the A100 source ``source`` (least squares in log
    time on each grid), fitted on its own rows: diagnostics, not shipped."""
    from .gemm import a100_cases, predict_gemm

    cs = [c for c in a100_cases() if c.source == source]
    if not cs:
        raise unknown("A100 source of a100_gap", source, {c.source for c in a100_cases()})
    fl = np.array([2.0 * c["m"] * c["n"] * c["k"] * c["b"] for c in cs])
    meas = fl / np.array([c.value_si for c in cs])
    ours = fl / np.array([predict_gemm(c) for c in cs])

    def loss(t: np.ndarray) -> float:
        return float(np.sum(np.log(t / meas) ** 2))

    x = min(PER_CALL_GRID, key=lambda v: (loss(ours + v), v))
    s = min(RATE_GRID, key=lambda v: (loss(ours / v), -v))
    return Gap(source, len(cs), _errs(ours, meas), x, _errs(ours + x, meas), s,
               _errs(ours / s, meas))


def a100_gap_table(sources: Sequence[str] = ("tri6523", "tri3551")) -> str:
    """Markdown: per source, as shipped and with each one-parameter correction."""
    lines = ["| source | n | shipped: median \\|error\\| | RMS log | time + x per call: x "
             "| median | RMS log | time ÷ s: s | median | RMS log |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for src in sources:
        g = a100_gap(src)
        lines.append(f"| {src} | {g.n} | {g.shipped[0]:.1%} | {g.shipped[1]:.3f} | "
                     f"{g.per_call * 1e6:g} µs | {g.per_call_err[0]:.1%} | "
                     f"{g.per_call_err[1]:.3f} | {g.rate:g} | {g.rate_err[0]:.1%} | "
                     f"{g.rate_err[1]:.3f} |")
    return "\n".join(lines)


#: the size classes of ``a100_by_size``, by the cube root of m·n·k (upper bounds, inclusive):
#: up to 896³ the per-kernel fill is at least 44 % of the shipped model's kernel time, up to
#: 3200³ (the sweeps' largest square size) whole waves of 64- to 256-wide tiles decide, above
#: it the set's large-GEMM limit (Azure's rows from 4096³, and its thin 802816 × 192 × 768)
A100_SIZES = (("small (≤ 896³)", 896.0), ("mid (1024³ … 3200³)", 3200.0),
              ("large (> 3200³)", float("inf")))


def a100_size_class(c: Case) -> str:
    """The ``A100_SIZES`` label of an A100 case, by the cube root of its b·m·n·k (b = 1 on
    every A100 row). A size that is not a finite number > 0 raises ``SpecError``."""
    for name in ("m", "n", "k", "b"):
        x = c[name]
        if isinstance(x, bool) or not isinstance(x, Real) or not 0 < float(x) < math.inf:
            raise SpecError(f"a100_size_class: {name}={x!r}; allowed: a finite number > 0")
    side = (float(c["m"]) * c["n"] * c["k"] * c["b"]) ** (1.0 / 3.0)
    return next(lab for lab, top in A100_SIZES if side <= top * (1.0 + 1e-9))


def a100_by_size() -> dict[tuple[str, str], list[float]]:
    """(source, size class) → the signed errors (ours / measured FLOP/s − 1) of its A100 rows
    with the shipped model, in the order of ``gemm.a100_cases``."""
    from .gemm import a100_cases, gemm_errors

    out: dict[tuple[str, str], list[float]] = {}
    for c, _, e in gemm_errors(cases=a100_cases()):
        out.setdefault((c.source, a100_size_class(c)), []).append(e)
    return out


def a100_size_table() -> str:
    """Markdown: per A100 source, the median signed error and the count of each size class."""
    groups = a100_by_size()
    sources = list(dict.fromkeys(s for s, _ in groups))
    head = " | ".join(lab for lab, _ in A100_SIZES)
    lines = [f"| source | {head} |", "|---|" + "---:|" * len(A100_SIZES)]
    for src in sources:
        cells = []
        for lab, _ in A100_SIZES:
            e = groups.get((src, lab))
            cells.append("—" if not e else f"{float(np.median(e)):+.1%} (n {len(e)})")
        lines.append(f"| {src} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
