"""``simulate_serving``: a deployment's latency distribution under a request mix.

Requests (``Workload``: Poisson or a trace) are routed round-robin to ``replicas`` copies of one
layout (tp × pp devices each); each replica runs the iteration-level scheduler of
``scheduler.run_replica`` with step costs from ``rl.serve`` (``stepcost``). Disaggregated
serving (``prefill_replicas=``): prompts are prefilled on a prefill pool, their KV cache crosses
the link (prompt tokens × KV bytes per token per device / link bandwidth per device, as
``rl.serve`` prices it), and decoding runs on the decode pool, admitted by its KV capacity.

Results: percentiles of TTFT, TPOT (per request: (done − first token)/(output − 1)), end to
end and queueing delay (arrival to first scheduled); goodput (requests/s meeting every SLO);
``overloaded`` when the arrival rate exceeds what the layout serves — then TTFT, e2e and queue
delay are reported as inf (a queue growing without bound has no p99), TPOT stays (it is the
saturated batch's).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .. import _args as A
from .._display import Display
from .._text import summary_str
from ..errors import SpecError
from ..uncertainty import fmt_band
from .scheduler import run_replica
from .stepcost import StepCosts, step_costs
from .workload import SLO, Workload

__all__ = ["Stat", "ServingSim", "simulate_serving", "KV_POLICIES", "TIME_SPLIT",
           "band_class"]

KV_POLICIES = ("dynamic", "reserve")
#: the parts of a request's end-to-end time (``ServingSim.time_split``), in order: waiting for
#: admission (arrival -> admitted; disaggregated: to the prefill pool), prefill (admitted ->
#: its last prompt chunk done: its chunks and the steps it shares with other requests' work),
#: the KV cache's transfer to the decode pool (disaggregated; else 0), waiting for the decode
#: pool (disaggregated; else 0), decode (first token -> last) and what a client adds
#: (``client=True``; else 0)
TIME_SPLIT = ("queue", "prefill", "kv_transfer", "decode_queue", "decode", "client")


@dataclass(frozen=True, slots=True)
class Stat:
    """Summary of one latency metric over the requests (s)."""

    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @staticmethod
    def of(x: np.ndarray) -> Stat:
        x = x[np.isfinite(x)]
        if len(x) == 0:
            return Stat(math.nan, math.nan, math.nan, math.nan, math.nan)
        p = np.percentile(x, [50, 90, 99])
        return Stat(float(x.mean()), float(p[0]), float(p[1]), float(p[2]), float(x.max()))

    @staticmethod
    def unbounded() -> Stat:
        i = math.inf
        return Stat(i, i, i, i, i)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ServingSim(Display):
    """A simulated serving run (SI units)."""

    layout: str  #: what was simulated
    devices: int  #: devices used
    requests: int
    rate: float  #: offered requests/s
    ttft: Stat
    tpot: Stat
    e2e: Stat
    queue_delay: Stat
    throughput_tokens_per_s: float  #: output tokens/s over the run
    tokens_per_s_per_device: float
    completed_rate: float  #: requests/s completed while requests arrived
    overloaded: bool
    overload_reason: str
    goodput: float  #: requests/s meeting every SLO (nan without an SLO)
    goodput_fraction: float  #: share of requests meeting every SLO
    slo: SLO | None
    preemptions: int
    rejected: int  #: requests whose KV can never fit
    iterations: int
    mean_in_system: float  #: time-average requests waiting or running (the scheduler's count)
    littles_rhs: float  #: λ·W over the same span
    mean_batch: float  #: time-average decoding sequences per replica, from the run
    #: where a request's end-to-end time goes: mean s per measured request that completed
    #: (``TIME_SPLIT``: queue, prefill, kv_transfer, decode_queue, decode, client); the parts
    #: add up to ``e2e.mean`` (queue inf when overloaded, as e2e)
    time_split: dict[str, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    _raw: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    #: the uncertainty class of the run's bands (``band_class``; None: no band)
    _band_cls: str | None = field(default=None, repr=False)

    @property
    def uncertainty(self) -> dict[str, Any]:
        """``{"ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "throughput_tokens_per_s",
        "tokens_per_s_per_device"}`` -> Band: 80 % intervals from the request-mix validation
        residuals (class ``serving-mix``, docs/validation/uncertainty.md), for the numbers its
        published cases measure; none for an unbounded TTFT (overloaded), for the mean, p90,
        end-to-end, queue-delay and goodput figures (no case measures them), and empty where
        ``band_class`` gives no class (preset other than default, an engine with no request-mix
        case, disaggregated serving, ``client=True``). The throughputs have a band only when
        capacity sets them (every request at once, as in every throughput case, or overloaded):
        a run that keeps up serves the offered load, which no case judges (the band's upper
        edge would exceed it)."""
        from ..uncertainty import bands

        c = self._band_cls
        if c is None:
            return {}
        want = {"ttft_p50": (self.ttft.p50, c, False), "ttft_p99": (self.ttft.p99, c, False),
                "tpot_p50": (self.tpot.p50, c, False), "tpot_p99": (self.tpot.p99, c, False)}
        if self.overloaded or math.isinf(self.rate):
            want |= {"throughput_tokens_per_s": (self.throughput_tokens_per_s, c, True),
                     "tokens_per_s_per_device": (self.tokens_per_s_per_device, c, True)}
        return bands(want)

    def meets(self, slo: SLO | None = None) -> bool:
        """p99s within ``slo`` (default: the run's) and not overloaded."""
        s = slo or self.slo
        if s is None:
            raise SpecError("meets() needs an SLO (none was given to simulate_serving)")
        if self.overloaded or self.rejected:
            return False
        return all(getattr(self, k.replace("_p99", "")).p99 <= v for k, v in s.items())

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        d["slo"] = None if self.slo is None else asdict(self.slo)
        d["uncertainty"] = {k: b.to_dict() for k, b in self.uncertainty.items()}

        def clean(v: Any) -> Any:
            if isinstance(v, dict):
                return {k: clean(x) for k, x in v.items()}
            if isinstance(v, float) and not math.isfinite(v):
                return None if math.isnan(v) else "inf"
            return v

        return clean(d)

    @summary_str
    def __str__(self) -> str:
        def row(name: str, s: Stat) -> str:
            return (f"  {name:<12} mean {_ms(s.mean)}, p50 {_ms(s.p50)}, p90 {_ms(s.p90)}, "
                    f"p99 {_ms(s.p99)}")
        u = self.uncertainty

        def banded(name: str) -> list[str]:
            bs = [(q, u[f"{name.lower()}_{q}"]) for q in ("p50", "p99") if f"{name.lower()}_{q}"
                  in u]
            if not bs:
                return []
            b = bs[0][1]
            return [f"  {'':<12} {b.level:.0%}".replace("%", " %") + ": " + ", ".join(
                f"{q} {x.low * 1e3:,.1f}–{x.high * 1e3:,.1f} ms" for q, x in bs)
                + f" (from {b.n} published cases)"]

        lines = [f"{self.layout}: {self.requests:,} requests at {self.rate:g} req/s on "
                 f"{self.devices} devices",
                 row("TTFT", self.ttft), *banded("TTFT"), row("TPOT", self.tpot),
                 *banded("TPOT"), row("end to end", self.e2e),
                 row("queue delay", self.queue_delay),
                 f"  throughput   {self.throughput_tokens_per_s:,.0f} output tokens/s ("
                 + fmt_band(u.get("throughput_tokens_per_s"), lambda v: f"{v:,.0f}")[2:-1]
                 + ("; " if "throughput_tokens_per_s" in u else "")
                 + f"{self.tokens_per_s_per_device:,.0f} per device), mean decode batch "
                 f"{self.mean_batch:.1f} per replica"]
        if self.slo is not None:
            lines.append(f"  goodput      {self.goodput:.2f} req/s ({self.goodput_fraction:.1%} "
                         f"of requests meet {self.slo}); SLO met at p99: "
                         f"{'yes' if self.meets() else 'no'}")
        if self.overloaded:
            lines.append(f"  OVERLOADED   {self.overload_reason}")
        if self.time_split:
            parts = [f"{k.replace('_', ' ')} {_ms(v)}" for k, v in self.time_split.items()
                     if v != 0]
            lines.append("  mean request " + ", ".join(parts) + " (where end to end goes)")
        if self.preemptions or self.rejected:
            lines.append(f"  KV pressure  {self.preemptions} preemptions, {self.rejected} "
                         "requests that never fit")
        return "\n".join(lines)


def _ms(v: float) -> str:
    """A time (s) as the printout shows it: ms, "unbounded" for inf, "n/a" for NaN (no request
    measured)."""
    return "unbounded" if math.isinf(v) else "n/a" if v != v else f"{v * 1e3:,.1f} ms"


_N = A.count(1, A.MAX_DEVICES)
_OPT_DT = A.optional(A.dtype)


@A.checked(model=A.anything, hardware=A.anything,
           workload=A.instance_of(Workload, what="an rl.Workload"),
           requests=A.optional(A.count(1, 10**9)), tp=_N, pp=_N, ep=_N, replicas=_N,
           max_concurrency=A.count(1, 2**20), chunk_size=A.optional(A.count(1, A.MAX_TOKENS)),
           max_batched_tokens=A.optional(A.count(1, A.MAX_TOKENS)), precision=A.dtype,
           kv_precision=_OPT_DT, weight_precision=_OPT_DT, engine=A.anything, preset=A.text,
           kv_policy=A.choice(*KV_POLICIES), block_size=A.count(1, 2**16),
           slo=A.optional(A.instance_of(SLO, what="an rl.SLO")), seed=A.count(0, 2**32 - 1),
           devices=A.optional(_N), prefill_replicas=A.optional(_N), prefill_tp=A.optional(_N),
           kv_link_bytes_per_s=A.optional(A.real(0, 1e15, unit="B/s")),
           costs=A.optional(A.instance_of(StepCosts, what="step tables (stepcost.step_costs)")),
           prefill_costs=A.optional(A.instance_of(StepCosts, what="step tables")),
           warmup=A.optional(A.real(0, 1e12, lo_open=False, unit="s")), client=A.flag)
def simulate_serving(model: Any, hardware: Any, *, workload: Workload,
                     requests: int | None = 10_000,
                     tp: int = 1, pp: int = 1, ep: int = 1, replicas: int = 1,
                     max_concurrency: int = 256,
                     chunk_size: int | None = 2048, max_batched_tokens: int | None = None,
                     precision: str = "bf16", kv_precision: str | None = None,
                     weight_precision: str | None = None,
                     engine: str = "trtllm", preset: str = "default",
                     kv_policy: str = "dynamic", block_size: int = 16, slo: SLO | None = None,
                     seed: int = 0, devices: int | None = None,
                     prefill_replicas: int | None = None, prefill_tp: int | None = None,
                     kv_link_bytes_per_s: float | None = None,
                     costs: StepCosts | None = None,
                     prefill_costs: StepCosts | None = None,
                     warmup: float | None = None, client: bool = False) -> ServingSim:
    """Simulate serving ``workload`` on ``replicas`` × (tp × pp × ep) devices of ``hardware``
    (``ep``: expert-parallel groups of a MoE, as ``rl.serve`` takes it; ``weight_precision``:
    weight-only quantisation, "int8" / "int4").

    ``chunk_size``: chunked prefill with that token budget per step (vLLM's
    max_num_batched_tokens); None: whole prompts, up to ``max_batched_tokens`` a step (8192),
    the same budget (a different pair is refused). ``kv_policy``: "dynamic" (vLLM: allocate
    as tokens are written, preempt and recompute the newest request when blocks run out) or
    "reserve" (TensorRT-LLM GUARANTEED_NO_EVICT: prompt + output reserved at admission).
    ``prefill_replicas`` (and ``prefill_tp``): disaggregated serving, that many prefill
    workers; ``replicas`` are then the decode workers. ``kv_link_bytes_per_s``: the prefill to
    decode KV link (default: the scale-up link, else the host link); refused without
    ``prefill_replicas``, as ``prefill_tp`` is. ``devices``: what you have; a layout needing
    more raises. ``costs``: step tables from ``stepcost.step_costs`` to reuse.
    ``warmup``: s; requests arriving earlier (while the system fills from empty) are simulated
    but left out of the latency statistics and goodput.
    ``client=True``: TTFT, TPOT and end to end as a client timing each request sees them — a
    per-request floor, its prompt in and its output out over the host link and through the
    serving stack (``engine/client.request_client``: ``serve(client=True)`` at batch 1); the
    device timeline (batches, queueing, throughput) is unchanged; off by default.
    """
    # (types and ranges: the @checked rules above)
    R, mc = replicas, max_concurrency
    budget = _budget(chunk_size, max_batched_tokens, mc)
    disagg = _disaggregated(prefill_replicas, prefill_tp, kv_link_bytes_per_s)
    Rp = prefill_replicas or 0
    tpp = (prefill_tp or tp) if disagg else 0
    used = R * tp * pp * ep + Rp * tpp * pp * ep
    if devices is not None and used > devices:
        raise SpecError(f"devices={devices} is fewer than the layout needs: {used} "
                        f"({R} replicas × tp {tp} × pp {pp}" + (f" × ep {ep}" if ep > 1 else "")
                        + (f" + {Rp} prefill workers × tp {tpp} × pp {pp}" if disagg else "")
                        + ")")
    arr, isl, osl = workload.sample(requests, seed)
    _check_context(model, isl, osl)
    n = len(arr)
    kw: dict[str, Any] = dict(precision=precision, kv_precision=kv_precision, engine=engine,
                              preset=preset, block_size=block_size,
                              weight_precision=weight_precision, ep=ep)
    refs = _ref_prompts(isl)
    n_max = (budget + mc) if chunk_size is not None else max(budget, int(isl.max())) + mc
    if costs is None:
        costs = step_costs(model, hardware, tp=tp, pp=pp, max_tokens=n_max, ref_prompts=refs,
                           **kw)
    if not costs.feasible:
        raise SpecError(f"{costs.label} cannot serve {model}: {costs.reason}")
    notes: list[str] = []
    done = np.full(n, math.nan)
    first = np.full(n, math.nan)
    admit = np.full(n, math.nan)
    admit_d = None  # decode-pool admissions (disaggregated)
    pre = iters = 0
    area = 0.0
    chunked = chunk_size is not None
    if not disagg:
        for r in range(R):
            sel = slice(r, None, R)
            o = run_replica(arr[sel], isl[sel], osl[sel], costs, max_concurrency=mc,
                            budget=budget, chunked=chunked, kv_policy=kv_policy)
            done[sel], first[sel], admit[sel] = o["done"], o["first"], o["admit"]
            pre += int(o["preemptions"])
            iters += int(o["iterations"])
            area += float(o["area"])
        label = f"{R} × {costs.label}"
    else:
        if prefill_costs is None:
            prefill_costs = step_costs(model, hardware, tp=tpp, pp=pp, max_tokens=n_max,
                                       ref_prompts=refs, **kw)
        if not prefill_costs.feasible:
            raise SpecError(f"prefill {prefill_costs.label}: {prefill_costs.reason}")
        ones = np.ones(n, dtype=np.int64)
        for r in range(Rp):
            sel = slice(r, None, Rp)
            o = run_replica(arr[sel], isl[sel], ones[sel], prefill_costs, max_concurrency=mc,
                            budget=budget, chunked=chunked, kv_policy=kv_policy)
            first[sel], admit[sel] = o["done"], o["admit"]
            iters += int(o["iterations"])
            area += float(o["area"])
        bw = kv_link_bytes_per_s or _link_bw(hardware)
        # each prefill device sends its shard of the prompt's KV over its own link
        transfer = isl * prefill_costs.kv_bytes_per_token / bw
        first = first + transfer
        area += float(transfer[np.isfinite(first)].sum())  # requests in flight on the link
        order = np.argsort(first, kind="stable")
        ok = np.isfinite(first[order])
        order = order[ok]
        admit_d = np.full(n, math.inf)
        for r in range(R):
            idx = order[r::R]
            o = run_replica(first[idx], isl[idx], osl[idx], costs, max_concurrency=mc,
                            budget=budget, chunked=chunked, kv_policy=kv_policy, prefill=False)
            done[idx] = o["done"]
            admit_d[idx] = o["admit"]
            pre += int(o["preemptions"])
            iters += int(o["iterations"])
            area += float(o["area"])
        done[~np.isfinite(first)] = math.inf
        label = f"{Rp}P × {prefill_costs.label} + {R}D × {costs.label}"
        notes.append(f"KV transfer over {bw / 1e9:.0f} GB/s per device")
    extra = _client(hardware, isl, osl, notes) if client else None
    return _summarise(arr, isl, osl, admit, first, done, admit_d, warmup=float(warmup or 0.0),
                      label=label, devices=used, slo=slo, preemptions=pre, iterations=iters,
                      replicas=R, notes=tuple(notes), rate=workload.arrival_rate, area=area,
                      client=extra, transfer=transfer if disagg else None,
                      band_cls=band_class(engine, preset, disagg, client))


#: engines with no request-mix case that are not a vLLM or TensorRT-LLM release on CUDA (the
#: class's runs): llama.cpp, vLLM on ROCm (their own single-request classes are not judged
#: under a mix) and PyTorch eager (no case at all): their simulations carry no band
NO_MIX_BAND = ("llamacpp", "vllm-rocm", "eager")


def band_class(engine: Any, preset: str, disaggregated: bool, client: bool) -> str | None:
    """The uncertainty class of a simulation's bands: ``serving-mix`` (its cases: vLLM and
    TensorRT-LLM runs, aggregated, device-side) for the default preset and a named engine
    other than ``NO_MIX_BAND``; None (no band) for another preset, a custom engine profile,
    disaggregated serving or ``client=True``, which no request-mix case judges."""
    if preset != "default" or not isinstance(engine, str) or engine in NO_MIX_BAND \
            or disaggregated or client:
        return None
    return "serving-mix"


def _client(hardware: Any, isl: np.ndarray, osl: np.ndarray,
            notes: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """simulate_serving(client=True): (TTFT, TPOT) a client adds to each request; a note."""
    from ..engine.client import client_factors, request_client
    from ..specs.resolve import hardware as resolve

    hw = resolve(hardware)
    floor = client_factors().floor_s
    per_token = request_client(1, 2, hw)[0] - floor
    notes.append(f"client=True: each request as a client times it, + {floor * 1e3:.3g} ms floor "
                 f"and {per_token * 1e9:.3g} ns per prompt or output token (host link and "
                 "serving stack) on its TTFT, TPOT and end to end; the device timeline "
                 "(batches, queueing, throughput) is unchanged")
    return request_client(isl, osl, hw)


def _budget(chunk_size: int | None, max_batched_tokens: int | None, mc: int) -> int:
    """A step's token budget: ``chunk_size`` under chunked prefill, else
    ``max_batched_tokens`` (default 8192). Both given and different is refused: they are the
    same budget (vLLM's max_num_batched_tokens) and the chunked one would win silently; so is
    a chunk not above max_concurrency ``mc``."""
    if chunk_size is None:
        return 8192 if max_batched_tokens is None else max_batched_tokens
    if max_batched_tokens is not None and max_batched_tokens != chunk_size:
        raise SpecError(f"max_batched_tokens={max_batched_tokens} with chunk_size={chunk_size}: "
                        "under chunked prefill chunk_size is the step's token budget (vLLM's "
                        "max_num_batched_tokens), and max_batched_tokens is read only with "
                        "chunk_size=None (whole prompts); give one, or both equal")
    if mc >= chunk_size:
        raise SpecError(f"max_concurrency={mc} must be below chunk_size={chunk_size}: each "
                        "decoding sequence takes one token of the step's budget")
    return chunk_size


def _disaggregated(prefill_replicas: int | None, prefill_tp: int | None,
                   kv_link: float | None = None) -> bool:
    """Whether prefill runs on its own workers; a prefill_tp or a KV link without them is
    refused (each was ignored)."""
    if prefill_tp is not None and prefill_replicas is None:
        raise SpecError(f"prefill_tp={prefill_tp} sizes the prefill workers of disaggregated "
                        "serving: give prefill_replicas= too")
    if kv_link is not None and prefill_replicas is None:
        raise SpecError(f"kv_link_bytes_per_s={kv_link:g} is the prefill-to-decode KV link of "
                        "disaggregated serving: give prefill_replicas= too, or leave it out")
    return prefill_replicas is not None


def _check_context(model: Any, isl: np.ndarray, osl: np.ndarray) -> None:
    """Refuse a workload that draws a request longer than the model's context (prompt +
    output past max_position_embeddings, the rule ``rl.serve`` marks infeasible): the step
    tables are read at capped lengths and would price it silently."""
    from ..graphs.resolve import model as resolve_model

    cfg = resolve_model(model).config
    cap = getattr(cfg, "max_positions", None) if cfg is not None else None
    if not cap or len(isl) == 0:
        return
    total = isl + osl
    over = total > cap + 1
    if over.any():
        raise SpecError(
            f"the workload draws {int(over.sum())} of {len(isl)} requests longer than the "
            f"context of {resolve_model(model).name}: prompt + output up to {int(total.max())} "
            f"tokens, max_position_embeddings={cap}; cap the lengths "
            "(lengths(..., max=...)) or trim the trace")


def _ref_prompts(isl: np.ndarray) -> tuple[int, ...]:
    """Prompt lengths at which prefill attention is read from rl.serve: the distinct lengths
    when there are few, else 4 quantiles."""
    u = np.unique(isl)
    if len(u) <= 4:
        return tuple(int(x) for x in u)
    return tuple(int(x) for x in np.unique(np.percentile(isl, [5, 50, 90, 100]).round()))


def _link_bw(hardware: Any) -> float:
    from ..specs.resolve import hardware as resolve

    hw = resolve(hardware)
    lk = hw.scale_up_link or hw.host_link
    if lk is None or not (lk.bytes_per_s > 0):
        raise SpecError(f"disaggregated serving needs kv_link_bytes_per_s: {hw.name} has no link")
    return float(lk.bytes_per_s)


def _summarise(arr: np.ndarray, isl: np.ndarray, osl: np.ndarray, admit: np.ndarray,
               first: np.ndarray, done: np.ndarray, admit_d: np.ndarray | None, *,
               warmup: float, label: str, devices: int,
               slo: SLO | None, preemptions: int, iterations: int, replicas: int,
               notes: tuple[str, ...], rate: float, area: float,
               client: tuple[np.ndarray, np.ndarray] | None = None,
               transfer: np.ndarray | None = None,
               band_cls: str | None = None) -> ServingSim:
    n = len(arr)
    ok = np.isfinite(done)
    rejected = int((~ok).sum())
    # client: (TTFT, TPOT) a client adds per request; the device times stay for the rest
    c_ttft, c_tpot = client if client is not None else (0.0, 0.0)
    ttft = first - arr + c_ttft
    e2e_dev = done - arr
    e2e = e2e_dev + c_ttft + c_tpot * np.maximum(osl - 1, 0)
    qd = admit - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(osl > 1, (done - first) / np.maximum(osl - 1, 1) + c_tpot, np.nan)
    tpot_all, ttft_all, e2e_all = tpot, ttft, e2e
    t0, t_last = float(arr[0]), float(arr[-1])
    t_end = float(done[ok].max()) if ok.any() else t_last
    span = max(t_end - t0, 1e-12)
    out_tokens = float(osl[ok].sum())
    # overload: over the second half of the arrival window the waiting queue (arrived, not yet
    # admitted; disaggregated: in either pool's queue) grows by more than fluctuation explains.
    # A stable queue's length stays bounded; requests in service are bounded by the slots.
    mid = t0 + (t_last - t0) / 2

    def waiting(t: float) -> int:
        w = int((arr <= t).sum() - (admit <= t).sum())
        if admit_d is not None:
            w += int((first <= t).sum() - (admit_d <= t).sum())
        return w

    arrived = int(((arr > mid) & (arr <= t_last)).sum())
    growth = waiting(t_last) - waiting(mid)
    win = max(t_last - mid, 1e-12)
    completed_rate = int(((done > mid) & (done <= t_last)).sum()) / win
    overloaded = n >= 50 and growth > max(0.03 * arrived, 20)
    reason = ""
    if overloaded:
        reason = (f"the queue of requests waiting for admission grew by {growth} over the "
                  f"second half of the arrivals ({arrived / win:.3g} req/s arriving): the "
                  "arrival rate exceeds what the layout serves, and the queue keeps growing")
    # latency statistics: requests arriving after the warm-up
    st = arr >= t0 + warmup
    if not st.any():
        raise SpecError(f"warmup={warmup:g} s leaves no request to measure (the last arrives at "
                        f"{t_last - t0:.3g} s)")
    good_frac, good = math.nan, math.nan
    if slo is not None:
        m = ok[st].copy()
        ttft, tpot, e2e = ttft[st], tpot[st], e2e[st]
        if slo.ttft_p99 is not None:
            m &= ttft <= slo.ttft_p99
        if slo.tpot_p99 is not None:
            m &= ~(tpot > slo.tpot_p99)
        if slo.e2e_p99 is not None:
            m &= e2e <= slo.e2e_p99
        good_frac = float(m.mean())
        t_st = float(arr[st][0])
        good = 0.0 if overloaded else float(m.sum()) / max(t_last - t_st, 1e-12) \
            if m.size > 1 else math.nan
        ttft, tpot, e2e = ttft_all, tpot_all, e2e_all
    # Little's law over [t0, t_end]: L from the scheduler's own counts of waiting and running
    # requests, λ·W from the recorded times
    L = area / span
    lam_w = (int(ok.sum()) / span) * float(e2e_dev[ok].mean()) if ok.any() else math.nan
    # time-average decoding sequences per replica
    dec_time = float(((done - first)[ok & (osl > 1)]).sum())
    mean_batch = dec_time / span / replicas
    unb = Stat.unbounded()
    split = _time_split(arr, admit, first, done, admit_d, transfer,
                        None if client is None else e2e - e2e_dev, st & ok, overloaded)
    return ServingSim(
        layout=label, devices=devices, requests=n, rate=rate,
        ttft=unb if overloaded else Stat.of(ttft[st]), tpot=Stat.of(tpot[st]),
        e2e=unb if overloaded else Stat.of(e2e[st]),
        queue_delay=unb if overloaded else Stat.of(qd[st]),
        throughput_tokens_per_s=out_tokens / span, tokens_per_s_per_device=out_tokens / span /
        devices, completed_rate=completed_rate, overloaded=overloaded, overload_reason=reason,
        goodput=good, goodput_fraction=good_frac, slo=slo, preemptions=preemptions,
        rejected=rejected, iterations=iterations, mean_in_system=L, littles_rhs=lam_w,
        mean_batch=mean_batch, time_split=split, notes=notes,
        _raw={"arrival": arr, "prompt": isl, "output": osl, "admit": admit, "first": first,
              "done": done, "measured": st},  # measured: arrived after the warm-up
        _band_cls=band_cls)


def _time_split(arr: np.ndarray, admit: np.ndarray, first: np.ndarray, done: np.ndarray,
                admit_d: np.ndarray | None, transfer: np.ndarray | None,
                client: np.ndarray | None, m: np.ndarray, overloaded: bool) -> dict[str, float]:
    """``ServingSim.time_split``: the mean of each part (``TIME_SPLIT``) of the end-to-end time
    of the requests ``m`` (measured, completed); an overloaded run's queue is unbounded."""
    idx = np.flatnonzero(m)
    if not len(idx):
        return dict.fromkeys(TIME_SPLIT, math.nan)
    # the measured requests are those arriving after the warm-up (a suffix: arrivals are
    # sorted); unless some were rejected, a slice (a view: boolean indexing copies, ~10x slower)
    first_i, last_i = int(idx[0]), int(idx[-1])
    sel: Any = slice(first_i, last_i + 1) if last_i - first_i + 1 == len(idx) else m

    def mean(x: np.ndarray | None, y: np.ndarray | None = None) -> float:
        if x is None:
            return 0.0
        return float((x[sel] if y is None else x[sel] - y[sel]).mean())

    tr = mean(transfer)
    out = {"queue": math.inf if overloaded else mean(admit, arr),
           "prefill": mean(first, admit) - tr, "kv_transfer": tr,
           "decode_queue": mean(admit_d, first), "decode": mean(done, admit_d if admit_d is
                                                               not None else first),
           "client": mean(client)}
    return out
