"""Request mixes for serving: length distributions, arrivals and latency objectives.

``lengths(kind, ...)`` draws token counts (fixed, uniform, lognormal, empirical), ``Workload``
pairs a prompt and an output distribution with Poisson arrivals at ``rate`` requests/s, or
replays a trace of (prompt tokens, output tokens, arrival s); ``SLO`` holds p99 targets. Every
draw comes from a seeded ``numpy.random.Generator``: the same seed gives the same requests, and
the prompt, output and arrival streams are independent children of one ``SeedSequence`` (a
change to one distribution leaves the others' draws unchanged).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import SpecError

__all__ = ["KINDS", "Lengths", "SLO", "Workload", "lengths", "parse_lengths"]

KINDS = ("fixed", "uniform", "lognormal", "empirical")


def _pos(name: str, v: Any, *, integer: bool = False, zero_ok: bool = False) -> Any:
    ok = isinstance(v, int | float | np.integer | np.floating) and not isinstance(v, bool) \
        and math.isfinite(float(v)) and (float(v) >= 0 if zero_ok else float(v) > 0)
    if ok and integer:
        ok = float(v).is_integer()
    if not ok:
        what = "integer" if integer else "number"
        raise SpecError(f"{name} must be a {'non-negative' if zero_ok else 'positive'} finite "
                        f"{what}, got {v!r}")
    return int(v) if integer else float(v)


@dataclass(frozen=True, slots=True, kw_only=True)
class Lengths:
    """A distribution of token counts (integers >= 1), truncated to [min, max]."""

    kind: str  #: "fixed", "uniform", "lognormal" or "empirical"
    value: int = 0  #: fixed: the length
    min: int = 1  #: smallest length drawn (uniform: lower end, inclusive)
    max: int | None = None  #: largest length drawn (uniform: upper end, inclusive)
    mu: float = 0.0  #: lognormal: mean of log(length) before truncation
    sigma: float = 0.0  #: lognormal: standard deviation of log(length)
    values: tuple[int, ...] = ()  #: empirical: the observed lengths
    weights: tuple[float, ...] = ()  #: empirical: their probabilities (empty: equal)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SpecError(f"lengths kind {self.kind!r} is not known; allowed: {', '.join(KINDS)}")
        _pos("min", self.min, integer=True)
        if self.max is not None:
            _pos("max", self.max, integer=True)
            if self.max < self.min:
                raise SpecError(f"max={self.max} is smaller than min={self.min}: a length "
                                "distribution needs max >= min")
        if self.kind == "fixed":
            _pos("value", self.value, integer=True)
        if self.kind == "uniform" and self.max is None:
            raise SpecError("uniform lengths need max (the upper end, inclusive)")
        if self.kind == "lognormal":
            _pos("sigma", self.sigma)
            if not math.isfinite(self.mu):
                raise SpecError(f"lognormal mu must be finite, got {self.mu!r}")
        if self.kind == "empirical":
            if not self.values:
                raise SpecError("empirical lengths need values (a non-empty list of lengths)")
            for v in self.values:
                _pos("values", v, integer=True)
            if self.weights:
                if len(self.weights) != len(self.values):
                    raise SpecError(f"weights has {len(self.weights)} entries, values "
                                    f"{len(self.values)}: one weight per value")
                for w in self.weights:
                    _pos("weights", w, zero_ok=True)
                if sum(self.weights) <= 0:
                    raise SpecError("weights must not all be zero")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` lengths (int64) drawn with ``rng``."""
        lo, hi = self.min, self.max if self.max is not None else 2**31
        if self.kind == "fixed":
            return np.full(n, self.value, dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(lo, hi + 1, size=n, dtype=np.int64)
        if self.kind == "empirical":
            v = np.asarray(self.values, dtype=np.int64)
            p = None
            if self.weights:
                w = np.asarray(self.weights, dtype=np.float64)
                p = w / w.sum()
            return rng.choice(v, size=n, p=p)
        # lognormal truncated to [min, max] by rejection (vectorised, a few rounds)
        out = np.empty(0, dtype=np.int64)
        drawn = 0
        while len(out) < n:
            need = n - len(out)
            x = np.rint(rng.lognormal(self.mu, self.sigma, size=max(2 * need, 64)))
            drawn += len(x)
            x = x[(x >= lo) & (x <= hi)].astype(np.int64)
            out = np.concatenate([out, x[:need]])
            if drawn > 1000 * n + 10_000 and len(out) < n:
                raise SpecError(f"lognormal(mu={self.mu:.3g}, sigma={self.sigma:.3g}) has almost "
                                f"no mass in [min={lo}, max={hi}]: widen the range")
        return out

    def mean(self) -> float:
        """Expected length (lognormal: of the truncated, rounded distribution, by a 20,001-point
        quadrature of its density)."""
        if self.kind == "fixed":
            return float(self.value)
        if self.kind == "uniform":
            return (self.min + (self.max or self.min)) / 2.0
        if self.kind == "empirical":
            v = np.asarray(self.values, dtype=np.float64)
            w = np.asarray(self.weights, dtype=np.float64) if self.weights else np.ones(len(v))
            return float(v @ w / w.sum())
        hi = self.max if self.max is not None else math.exp(self.mu + 8 * self.sigma)
        x = np.linspace(max(self.min - 0.5, 1e-9), hi + 0.5, 20_001)
        pdf = np.exp(-(np.log(x) - self.mu) ** 2 / (2 * self.sigma ** 2)) / x
        num = np.trapezoid(pdf * np.clip(np.rint(x), self.min, hi), x)
        return float(num / np.trapezoid(pdf, x))

    def upper(self) -> int:
        """The largest length this distribution can draw (lognormal without max: its 99.99th
        percentile)."""
        if self.kind == "fixed":
            return self.value
        if self.kind == "empirical":
            return int(max(self.values))
        if self.max is not None:
            return int(self.max)
        return int(math.ceil(math.exp(self.mu + 3.72 * self.sigma)))

    def __str__(self) -> str:
        rng = f", min {self.min}" if self.min > 1 else ""
        rng += f", max {self.max}" if self.max is not None and self.kind != "uniform" else ""
        if self.kind == "fixed":
            return f"fixed {self.value}"
        if self.kind == "uniform":
            return f"uniform {self.min}..{self.max}"
        if self.kind == "empirical":
            return f"empirical ({len(self.values)} values, mean {self.mean():.0f})"
        return (f"lognormal (median {math.exp(self.mu):.0f}, sigma {self.sigma:g}{rng}; "
                f"mean {self.mean():.0f})")


def lengths(kind: str, *args: Any, mean: float | None = None, median: float | None = None,
            drawn_mean: float | None = None, sigma: float | None = None, min: int | None = None,
            max: int | None = None, value: int | None = None,
            values: Sequence[int] | None = None,
            weights: Sequence[float] | None = None) -> Lengths:
    """A length distribution.

    - ``lengths("fixed", 2048)``
    - ``lengths("uniform", 1000, 8000)`` (or ``min=``, ``max=``; both ends inclusive)
    - ``lengths("lognormal", mean=3000, sigma=0.8, max=8192)``: ``mean`` is the mean of the
      untruncated lognormal (μ = ln mean − σ²/2), *not* of the lengths drawn: draws outside
      [min, max] are redrawn (truncation, not clipping), so with a cap the drawn mean is lower
      (``Lengths.mean()`` gives it). Or give ``median=`` (μ = ln median), or ``drawn_mean=``:
      the mean of the lengths as drawn (truncated to [min, max] and rounded), μ solved for
      numerically (bisection on ``Lengths.mean()``); it must lie strictly inside (min, max).
    - ``lengths("empirical", [812, 95, 4020, ...])`` (or ``values=``, optional ``weights=``):
      draws from the observed lengths, e.g. a dataset's prompt lengths.
    """

    if kind not in KINDS:
        raise SpecError(f"lengths kind {kind!r} is not known; allowed: {', '.join(KINDS)}")
    lo = 1 if min is None else _pos("min", min, integer=True)
    if kind == "fixed":
        v = value if value is not None else (args[0] if args else None)
        if v is None:
            raise SpecError("fixed lengths need a value: lengths('fixed', 2048)")
        return Lengths(kind="fixed", value=_pos("value", v, integer=True))
    if kind == "uniform":
        a = list(args)
        lo = _pos("min", a[0] if a else (min if min is not None else 1), integer=True)
        hi = a[1] if len(a) > 1 else max
        if hi is None:
            raise SpecError("uniform lengths need max: lengths('uniform', 1000, 8000)")
        return Lengths(kind="uniform", min=lo, max=_pos("max", hi, integer=True))
    if kind == "empirical":
        vals = values if values is not None else (args[0] if args else None)
        if vals is None or len(vals) == 0:
            raise SpecError("empirical lengths need values: lengths('empirical', [812, 95, ...])")
        return Lengths(kind="empirical", values=tuple(int(v) if float(v).is_integer() else v
                                                      for v in vals),
                       weights=tuple(float(w) for w in weights) if weights is not None else ())
    # lognormal
    if sigma is None:
        if len(args) >= 2:
            sigma = args[1]
        else:
            raise SpecError("lognormal lengths need sigma (std of log length), e.g. 0.8")
    s = _pos("sigma", sigma)
    if mean is None and median is None and drawn_mean is None and args:
        mean = args[0]
    if sum(x is not None for x in (mean, median, drawn_mean)) != 1:
        raise SpecError("lognormal lengths need exactly one of mean= (untruncated), median= or "
                        "drawn_mean= (of the lengths as drawn)")
    hi = None if max is None else _pos("max", max, integer=True)
    if hi is not None and hi < lo:
        raise SpecError(f"max={hi} is smaller than min={lo}: a length distribution needs "
                        "max >= min")
    for name, v in (("mean", mean), ("median", median), ("drawn_mean", drawn_mean)):
        if v is not None and hi is not None and _pos(name, v) >= hi:
            raise SpecError(f"lognormal {name}={v!r} is not below max={hi}: lengths are "
                            f"truncated to [min, max], so {name} must be < max")
    if drawn_mean is not None:
        return _solve_drawn_mean(_pos("drawn_mean", drawn_mean), s, lo, hi)
    mu = math.log(_pos("median", median)) if median is not None else \
        math.log(_pos("mean", mean)) - s * s / 2
    return Lengths(kind="lognormal", mu=mu, sigma=s, min=lo, max=hi)


def _solve_drawn_mean(target: float, sigma: float, lo: int, hi: int | None) -> Lengths:
    """The lognormal (σ, [lo, hi]) whose drawn mean (``Lengths.mean()``: truncated to
    [lo, hi] and rounded) is ``target``: bisection on μ (the drawn mean rises with μ)."""
    if target <= lo:
        raise SpecError(f"lognormal drawn_mean={target:g} is not above min={lo}: the mean of "
                        "lengths drawn in [min, max] lies strictly inside it")
    a, b = math.log(lo) - 6 * sigma, math.log(hi if hi is not None else target) + 6 * sigma
    for _ in range(80):
        m = (a + b) / 2
        if Lengths(kind="lognormal", mu=m, sigma=sigma, min=lo, max=hi).mean() < target:
            a = m
        else:
            b = m
    out = Lengths(kind="lognormal", mu=(a + b) / 2, sigma=sigma, min=lo, max=hi)
    if abs(out.mean() - target) > 1e-3 * target:
        raise SpecError(f"lognormal drawn_mean={target:g} is not reachable with sigma={sigma:g} "
                        f"in [min={lo}, max={hi}] (closest drawn mean {out.mean():.4g})")
    return out


def parse_lengths(spec: str, name: str = "length") -> Lengths:
    """CLI form: ``2048`` (fixed), ``uniform:1000,8000``, ``lognormal:MEAN,SIGMA[,MAX]``
    (MEAN: of the untruncated lognormal, as ``lengths(mean=)``), the keyword form
    ``lognormal:drawn_mean=213.3,sigma=1.0,max=1024`` (keys mean, median, drawn_mean, sigma,
    min, max; ``drawn_mean``: the mean of the lengths as drawn, after the cap),
    ``empirical:FILE`` (one length per line) or ``empirical:812,95,4020``."""
    s = str(spec).strip()
    kind, _, rest = s.partition(":")
    try:
        if not rest:
            return lengths("fixed", _num(kind, name))
        if kind == "fixed":
            return lengths("fixed", _num(rest, name))
        if kind == "uniform":
            a, b = (_num(x, name) for x in rest.split(","))
            return lengths("uniform", a, b)
        if kind == "lognormal":
            return _parse_lognormal(rest, spec, name)
        if kind == "empirical":
            from pathlib import Path

            p = Path(rest)
            text = p.read_text() if p.exists() else rest.replace(",", "\n")
            return lengths("empirical", [_num(x, name) for x in text.split() if x.strip()])
    except (ValueError, TypeError) as e:
        if isinstance(e, SpecError):
            raise
        raise SpecError(f"{name} {spec!r} is not a length distribution: use N, uniform:MIN,MAX, "
                        "lognormal:MEAN,SIGMA[,MAX], lognormal:drawn_mean=M,sigma=S[,max=N] or "
                        "empirical:FILE|N,N,...") from None
    raise SpecError(f"{name} {spec!r}: unknown kind {kind!r}; allowed: {', '.join(KINDS)}")


_LOGNORMAL_KEYS = ("mean", "median", "drawn_mean", "sigma", "min", "max")


def _parse_lognormal(rest: str, spec: str, name: str) -> Lengths:
    items = [x.strip() for x in rest.split(",")]
    if all("=" in x for x in items):
        kw: dict[str, float] = {}
        for x in items:
            k, _, v = x.partition("=")
            k = k.strip()
            if k not in _LOGNORMAL_KEYS or k in kw:
                raise SpecError(f"{name} {spec!r}: lognormal key {k!r} is unknown or repeated; "
                                f"allowed once each: {', '.join(_LOGNORMAL_KEYS)}")
            kw[k] = float(v)
        bounds = {k: _num(str(kw.pop(k)), name) for k in ("min", "max") if k in kw}
        return lengths("lognormal", **kw, **bounds)  # type: ignore[arg-type]
    if any("=" in x for x in items):
        raise ValueError
    parts = [float(x) for x in items]
    if len(parts) not in (2, 3):
        raise ValueError
    return lengths("lognormal", mean=parts[0], sigma=parts[1],
                   max=_num(items[2], name) if len(parts) == 3 else None)


def _num(x: str, name: str) -> int:
    v = float(x)
    if not v.is_integer():
        raise SpecError(f"{name}: lengths are whole tokens, got {x!r}")
    return int(v)


def _as_lengths(v: Any, name: str) -> Lengths:
    if isinstance(v, Lengths):
        return v
    if isinstance(v, str):
        return parse_lengths(v, name)
    return lengths("fixed", _pos(name, v, integer=True))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Workload:
    """Requests to serve: Poisson arrivals at ``rate`` with lengths drawn from ``prompt`` and
    ``output``, or a ``trace`` of (prompt tokens, output tokens, arrival time s) rows."""

    prompt: Any = None  #: Lengths (or an int: fixed; or a CLI string like "lognormal:3000,0.8")
    output: Any = None  #: Lengths of the generated tokens (the first comes from the prefill)
    rate: float | None = None  #: requests/s (Poisson)
    trace: Any = None  #: rows (isl, osl, t) in time order; replaces prompt/output/rate
    _trace: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.trace is not None:
            a = np.asarray(self.trace, dtype=np.float64)
            if a.ndim != 2 or a.shape[1] != 3 or len(a) == 0:
                raise SpecError("trace must be a non-empty list of (prompt tokens, output tokens, "
                                f"arrival s) rows, got shape {a.shape}")
            isl, osl, t = a[:, 0], a[:, 1], a[:, 2]
            for nm, col in (("trace prompt tokens", isl), ("trace output tokens", osl)):
                bad = ~((col >= 1) & (col == np.rint(col)))
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise SpecError(f"{nm} must be positive integers; row {i} has {col[i]!r}")
            if not (np.isfinite(t).all() and (t >= 0).all()):
                raise SpecError("trace arrival times must be finite and >= 0 s")
            d = np.diff(t)
            if (d < 0).any():
                i = int(np.flatnonzero(d < 0)[0]) + 1
                raise SpecError(f"trace is not time-ordered: row {i} arrives at {t[i]:g} s, "
                                f"before row {i - 1} at {t[i - 1]:g} s (sort it by arrival time)")
            object.__setattr__(self, "_trace", (isl.astype(np.int64), osl.astype(np.int64),
                                                t - t[0]))
            if self.rate is not None or self.prompt is not None or self.output is not None:
                raise SpecError("give either trace= or prompt/output/rate, not both")
            return
        if self.prompt is None or self.output is None:
            raise SpecError("a Workload needs prompt= and output= lengths (or a trace=)")
        object.__setattr__(self, "prompt", _as_lengths(self.prompt, "prompt"))
        object.__setattr__(self, "output", _as_lengths(self.output, "output"))
        if self.rate is None:
            raise SpecError("a Workload needs rate= (requests/s, Poisson arrivals) or a trace=")
        object.__setattr__(self, "rate", _rate(self.rate))

    @property
    def arrival_rate(self) -> float:
        """requests/s: ``rate``, or a trace's requests over its span."""
        if self._trace is None:
            return float(self.rate)  # type: ignore[arg-type]
        t = self._trace[2]
        return (len(t) - 1) / t[-1] if len(t) > 1 and t[-1] > 0 else math.inf

    def mean_prompt(self) -> float:
        return float(self._trace[0].mean()) if self._trace is not None else self.prompt.mean()

    def mean_output(self) -> float:
        return float(self._trace[1].mean()) if self._trace is not None else self.output.mean()

    def max_prompt(self) -> int:
        return int(self._trace[0].max()) if self._trace is not None else self.prompt.upper()

    def max_output(self) -> int:
        return int(self._trace[1].max()) if self._trace is not None else self.output.upper()

    def with_rate(self, rate: float) -> Workload:
        if self._trace is not None:
            raise SpecError("a trace has its own arrival times; scale them instead of the rate")
        return Workload(prompt=self.prompt, output=self.output, rate=rate)

    def sample(self, n: int | None, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(arrival s, prompt tokens, output tokens) of ``n`` requests (a trace: its first n
        rows, or all)."""
        if self._trace is not None:
            isl, osl, t = self._trace
            k = len(t) if n is None else min(int(n), len(t))
            return t[:k].copy(), isl[:k].copy(), osl[:k].copy()
        n = _pos("requests", n if n is not None else 10_000, integer=True)
        ss = np.random.SeedSequence(seed)
        ra, rp, ro = (np.random.default_rng(c) for c in ss.spawn(3))
        t = np.cumsum(ra.exponential(1.0 / float(self.rate), size=n))  # type: ignore[arg-type]
        return t, self.prompt.sample(n, rp), self.output.sample(n, ro)

    def __str__(self) -> str:
        if self._trace is not None:
            return (f"trace of {len(self._trace[2])} requests ({self.arrival_rate:.3g} req/s, mean "
                    f"prompt {self.mean_prompt():.0f}, output {self.mean_output():.0f})")
        return f"{self.rate:g} req/s Poisson, prompt {self.prompt}, output {self.output}"


def _rate(v: Any) -> float:
    if not (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
        raise SpecError(f"rate must be > 0 requests/s, got {v!r}")
    return float(v)


@dataclass(frozen=True, slots=True, kw_only=True)
class SLO:
    """Latency objectives at the 99th percentile (s); None: no objective on that metric."""

    ttft_p99: float | None = None  #: s, time to first token
    tpot_p99: float | None = None  #: s, mean time per output token after the first, per request
    e2e_p99: float | None = None  #: s, arrival to last token

    def __post_init__(self) -> None:
        for nm in ("ttft_p99", "tpot_p99", "e2e_p99"):
            v = getattr(self, nm)
            if v is not None and not (isinstance(v, int | float) and not isinstance(v, bool)
                                      and math.isfinite(v) and v > 0):
                raise SpecError(f"SLO {nm} must be > 0 seconds, got {v!r}")
        if self.ttft_p99 is None and self.tpot_p99 is None and self.e2e_p99 is None:
            raise SpecError("an SLO needs at least one of ttft_p99, tpot_p99, e2e_p99")

    def items(self) -> list[tuple[str, float]]:
        return [(k, float(v)) for k in ("ttft_p99", "tpot_p99", "e2e_p99")
                if (v := getattr(self, k)) is not None]

    def __str__(self) -> str:
        return ", ".join(f"{k.replace('_p99', '')} p99 <= {v * 1e3:g} ms" for k, v in self.items())
