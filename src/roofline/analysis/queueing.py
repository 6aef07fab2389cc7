"""Closed-form queues: the analytic cross-checks of the serving simulation.

- ``md1_wait``: M/D/1 mean wait, Pollaczek–Khinchine, W_q = ρ·s / (2(1 − ρ)), ρ = λ·s
  (Kleinrock, Queueing Systems vol. 1, §5.7, with C_s² = 0).
- ``erlang_c``: probability of waiting in M/M/c (Erlang C), in log space so c in the thousands
  does not overflow.
- ``tail_latency``: p50/p99 of the response time of c servers, as mlsysim 0.1.1's
  TailLatencyModel frames it: M/M/c with Kingman's (C_a² + C_s²)/2 correction of the wait
  (Poisson arrivals: (1 + cv²)/2); the conditional wait is exponential with rate cμ(1 − ρ), so
  P(W > t) = P_wait·e^(−cμ(1−ρ)t) and the q-quantile wait is ln(P_wait/(1 − q)) / (cμ(1 − ρ))
  (0 when P_wait ≤ 1 − q). Response time = wait + the mean service time (as mlsysim adds it).
- ``replicas_for``: the fewest servers whose p99 response time meets a target.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from .._display import Display
from ..errors import SpecError

__all__ = ["TailLatency", "erlang_c", "md1_wait", "replicas_for", "tail_latency"]


def _pos(name: str, v: Any) -> float:
    if not (isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v > 0):
        raise SpecError(f"{name} must be > 0, got {v!r}")
    return float(v)


def md1_wait(rate: float, service_s: float) -> float:
    """Mean wait in queue of M/D/1 (s); inf when ρ = λ·s ≥ 1."""
    lam, s = _pos("rate", rate), _pos("service_s", service_s)
    rho = lam * s
    return math.inf if rho >= 1 else rho * s / (2 * (1 - rho))


def erlang_c(servers: int, offered: float) -> float:
    """P(an arrival waits) in M/M/c with offered load a = λ/μ < c."""
    c = int(servers)
    if c < 1:
        raise SpecError(f"servers must be >= 1, got {servers!r}")
    a = float(offered)
    if a <= 0:
        return 0.0
    if a >= c:
        return 1.0
    rho = a / c
    logs = [i * math.log(a) - math.lgamma(i + 1) for i in range(c)]
    last = c * math.log(a) - math.lgamma(c + 1) - math.log(1 - rho)
    m = max(max(logs), last)
    den = sum(math.exp(x - m) for x in logs) + math.exp(last - m)
    return math.exp(last - m) / den


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class TailLatency(Display):
    """Response time of c servers under Poisson arrivals (s)."""

    utilisation: float  #: ρ = λ / (c·μ)
    p_wait: float  #: Erlang C
    wait_mean: float  #: s, Kingman-corrected
    p50: float  #: s, wait quantile + mean service
    p99: float  #: s
    stable: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tail_latency(rate: float, service_s: float, servers: int = 1,
                 service_cv: float = 1.0) -> TailLatency:
    """M/M/c response-time percentiles with Kingman's correction for a service-time
    coefficient of variation ``service_cv`` (1: exponential, 0: deterministic)."""
    lam, s = _pos("rate", rate), _pos("service_s", service_s)
    if not (math.isfinite(service_cv) and service_cv >= 0):
        raise SpecError(f"service_cv must be >= 0, got {service_cv!r}")
    c = int(servers)
    mu = 1.0 / s
    rho = lam / (c * mu)
    if rho >= 1:
        return TailLatency(utilisation=rho, p_wait=1.0, wait_mean=math.inf, p50=math.inf,
                           p99=math.inf, stable=False)
    pw = erlang_c(c, lam / mu)
    k = (1 + service_cv ** 2) / 2
    r = c * mu * (1 - rho)

    def q(p: float) -> float:
        return 0.0 if pw <= 1 - p else math.log(pw / (1 - p)) / r * k

    return TailLatency(utilisation=rho, p_wait=pw, wait_mean=pw / r * k, p50=q(0.5) + s,
                       p99=q(0.99) + s, stable=True)


def replicas_for(rate: float, service_s: float, p99_target: float, service_cv: float = 1.0,
                 max_servers: int = 1_000_000) -> int:
    """Fewest servers with p99 response time ≤ ``p99_target`` (0: impossible, the service
    time alone exceeds it)."""
    t = _pos("p99_target", p99_target)
    if service_s > t:
        return 0
    lo = max(1, math.ceil(rate * service_s))

    def ok(c: int) -> bool:
        return tail_latency(rate, service_s, c, service_cv).p99 <= t

    hi = lo
    while not ok(hi):
        if hi >= max_servers:
            return 0
        lo, hi = hi + 1, min(max_servers, hi * 2)
    while lo < hi:  # p99 falls as servers are added: bisect to the fewest
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi
