"""``plan_serving``: which layout serves a request mix at a rate within p99 SLOs, on how many
of the given devices — aggregated or disaggregated — and the throughput/interactivity frontier.

The search, in three passes:

1. **Layouts** (one replica): every tensor-parallel degree the model allows up to ``max_tp``
   (one scale-up domain, 8 by default) × pipeline depth × (weight, KV) precision; step costs
   from ``rl.serve`` (``stepcost.step_costs``). A layout that does not fit, or whose unloaded
   TTFT of the p99 prompt or batch-1 TPOT already breaks the SLO, is listed in
   ``infeasible`` with the reason.
2. **Frontier** (closed form, ``plan_frontier``): each feasible layout at each max
   concurrency C of a ladder up to its KV capacity, in steady state with C requests in
   flight: a decode step at C sequences of the mean context, plus, per completed request,
   the prefill of a mean prompt mixed into those steps. Gives TPOT, requests/s per replica
   and the two frontier axes — output tokens/s per device and per user (1/TPOT).
   Disaggregated xPyD pairs a prefill layout (its rate 1/prefill time of a mean prompt per
   worker) with a decode layout whose steps carry no prefill; the KV transfer of each prompt
   is added to TTFT.
3. **Sizing by simulation**: candidates that meet the TPOT target analytically are ranked by
   devices needed (replicas = ⌈rate / (0.85 · rate per replica)⌉) and simulated
   (``simulate_serving``) at the workload's rate; replicas are added until the simulated
   p99s meet the SLO or the devices run out. ``best``: the passing layout with the most
   goodput per device (fewest devices; then lowest p99 TTFT); its chunked-prefill size is
   then chosen among ``chunk_sizes`` by simulation too.

The seed system's M/M/c with Kingman's correction (``queueing.tail_latency``) is reported
for ``best`` as the analytic cross-check: c = replicas × concurrency slots, service = the
simulated mean time in service and its coefficient of variation.

Each frontier point also carries its cost, energy and carbon per token (``plan_power``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TextIO

import numpy as np

from .. import _args as A
from .._display import Display
from .._text import a_family, summary_str
from ..engine.client import request_client
from ..engine.table import Table
from ..errors import SpecError
from ..graphs.shard import tp_problem
from ..progress import Progress, progress_stream
from .economics import check_economics
from .plan_frontier import (
    LADDER,  # noqa: F401 - importable from here, as before the split
    _frontier,
    _label,
    _pareto,
    _Point,
    _shortfall,
)
from .plan_power import points_table
from .queueing import TailLatency, tail_latency
from .simulate import KV_POLICIES, ServingSim, simulate_serving
from .stepcost import StepCosts, step_costs
from .workload import SLO, Workload

__all__ = ["ServingPlan", "PlanChoice", "plan_serving", "PRECISIONS"]

#: (compute and weights, KV cache[, weight-only quantisation]) precisions searched when the
#: hardware has an fp8 peak: bf16, fp8 KV, fp8 (W8A8), and bf16 compute over int4 weights
#: (weight-only, W4A16 kernels). Weight-only int8 (W8A16) is left out there: it reads the
#: bytes fp8 reads with no faster GEMM, so it never beats fp8 (pass it in ``precisions``)
PRECISIONS = (("bf16", "bf16"), ("bf16", "fp8"), ("fp8", "fp8"), ("bf16", "fp8", "int4"))
#: without an fp8 peak: bf16, and bf16 compute over int8 / int4 weights (W8A16 / W4A16)
PRECISIONS_NO_FP8 = (("bf16", "bf16"), ("bf16", "bf16", "int8"), ("bf16", "bf16", "int4"))
HEADROOM = 0.85  #: replicas are first sized for this utilisation of the closed-form capacity


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class PlanChoice(Display):
    """One deployment: a layout, how many of it, and its simulation."""

    mode: str  #: "aggregated" or "disaggregated"
    layout: str  #: e.g. "tp8 fp8" or "2P tp4 + 3D tp8"
    tp: int
    pp: int
    precision: str
    kv_precision: str
    ep: int = 1  #: expert-parallel groups per replica (MoE)
    weight_precision: str | None = None  #: weight-only quantisation (None: the precision's)
    replicas: int  #: decode (or aggregated) replicas
    prefill_replicas: int  #: prefill workers (0: aggregated)
    prefill_tp: int
    max_concurrency: int
    chunk_size: int | None
    devices: int
    sim: ServingSim
    why: str = ""
    cross_check: TailLatency | None = None
    _point: Any = field(default=None, repr=False)

    @property
    def goodput_per_device(self) -> float:
        """Output tokens/s of requests meeting every SLO, per device."""
        return self.sim.goodput * self.sim._raw["output"].mean() / self.devices

    @summary_str
    def __str__(self) -> str:
        head = (f"{self.mode} {self.layout}, max concurrency {self.max_concurrency}, chunk "
                f"{self.chunk_size or 'whole prompts'}: {self.devices} devices")
        return head + "\n" + str(self.sim) + (f"\n  why: {self.why}" if self.why else "")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ServingPlan(Display):
    """The outcome of ``plan_serving``."""

    model: str
    hardware: str
    devices: int
    workload: Workload
    slo: SLO
    best: PlanChoice | None  #: None when nothing meets the SLO on the devices given
    pareto: Table  #: non-dominated (tokens/s per device, tokens/s per user) rows
    layouts: Table  #: every (layout, concurrency) point of the frontier pass
    infeasible: Table  #: layouts that cannot serve, with the reason
    simulated: Table  #: the sizing simulations run
    notes: tuple[str, ...] = ()
    _points: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def plot(self, ax: Any = None, path: str | None = None) -> Any:
        """The frontier (tokens/s per device vs per user), SLO region shaded
        (``roofline.viz.charts.plot_plan``; needs ``pip install 'roofline[plot]'``)."""
        from ..viz.charts import plot_plan

        return plot_plan(self, ax=ax, path=path)

    def to_dict(self) -> dict[str, Any]:
        b = self.best
        return {"model": self.model, "hardware": self.hardware, "devices": self.devices,
                "workload": str(self.workload), "slo": str(self.slo),
                "best": None if b is None else {
                    "mode": b.mode, "layout": b.layout, "tp": b.tp, "pp": b.pp, "ep": b.ep,
                    "precision": b.precision, "kv_precision": b.kv_precision,
                    "weight_precision": b.weight_precision,
                    "replicas": b.replicas, "prefill_replicas": b.prefill_replicas,
                    "prefill_tp": b.prefill_tp, "max_concurrency": b.max_concurrency,
                    "chunk_size": b.chunk_size, "devices": b.devices, "why": b.why,
                    "simulation": b.sim.to_dict(),
                    "cross_check": None if b.cross_check is None else b.cross_check.to_dict()},
                "pareto": self.pareto.to_dicts(), "infeasible": self.infeasible.to_dicts(),
                "simulated": self.simulated.to_dicts(), "notes": list(self.notes)}

    @summary_str
    def __str__(self) -> str:
        lines = [f"Serving plan: {self.model} on up to {self.devices}× {self.hardware}; "
                 f"{self.workload}; {self.slo}"]
        if self.best is None:
            lines.append("  no layout meets the SLO on these devices (see .simulated and "
                         ".infeasible)")
            lines.extend(f"  {n}" for n in self.notes)
        else:
            lines.append("best: " + str(self.best))
            cc = self.best.cross_check
            if cc is not None:
                lines.append(f"  M/M/c + Kingman cross-check: p99 e2e {cc.p99:.2f} s "
                             f"(simulated {self.best.sim.e2e.p99:.2f} s), utilisation "
                             f"{cc.utilisation:.0%}")
        lines.append(f"{len(self.pareto)} Pareto rows, {len(self.layouts)} frontier points, "
                     f"{len(self.infeasible)} infeasible layouts, {len(self.simulated)} "
                     "simulations")
        return "\n".join(lines)


# -- candidates --------------------------------------------------------------------------------

def _check_precisions(precisions: Any) -> list[tuple[str, str, str | None]]:
    """(compute, KV[, weight-only]) tuples, each a 2- or 3-tuple of dtype names."""
    out = []
    try:
        items = list(precisions)
    except TypeError:
        items = [precisions]
    for t in items:
        if not isinstance(t, tuple | list) or len(t) not in (2, 3) or \
                not all(isinstance(x, str) for x in t[:2]) or \
                (len(t) == 3 and t[2] is not None and not isinstance(t[2], str)):
            raise SpecError(f"precisions: each entry must be (compute, kv) or (compute, kv, "
                            f"weights) dtype names, e.g. ('bf16', 'fp8', 'int4'); got {t!r}")
        out.append((t[0], t[1], t[2] if len(t) == 3 else None))
    if not out:
        raise SpecError("precisions must name at least one (compute, kv) pair")
    return out


def _ep_options(cfg: Any, ep_options: Any) -> list[int]:
    if not cfg.n_experts:
        if ep_options is not None and any(e != 1 for e in ep_options):
            raise SpecError(f"ep_options={ep_options!r}: {cfg.name} has no experts (a dense "
                            "model); expert parallelism needs a mixture of experts")
        return [1]
    if ep_options is None:
        return [e for e in (1, 2, 4, 8, 16, 32, 64) if cfg.n_experts % e == 0]
    eps = list(ep_options) if isinstance(ep_options, tuple | list) else [ep_options]
    for e in eps:
        if isinstance(e, bool) or not isinstance(e, int) or e < 1 or cfg.n_experts % e:
            raise SpecError(f"ep_options: {e!r} is not an expert-parallel degree of "
                            f"{cfg.name} (positive integers dividing its {cfg.n_experts} "
                            "experts)")
    return eps


def most_common(reasons: list[str]) -> str:
    """The reason given most often, the first given among equals (a set's order, which the
    tie fell to before, changes with the process's string hashing: the note did too)."""
    return max(dict.fromkeys(reasons), key=reasons.count)


def _why_not(c: StepCosts, slo: SLO, p99_prompt: float, mean_context: float,
             client: tuple[float, float] = (0.0, 0.0)) -> str:
    """Why a layout cannot serve (empty: it can): it does not fit, or even unloaded its TTFT
    of the p99 prompt or its batch-1 TPOT (+ ``client``'s, ``request_client``) breaks the SLO."""
    if not c.feasible:  # (reason: memory, a dtype the part lacks, the model's context)
        return (f"does not fit: {c.reason}" if c.reason.startswith("needs ")
                else f"cannot run: {c.reason}")
    c_ttft, c_tpot = client
    t_ttft = c.prefill_time(int(p99_prompt)) + c_ttft
    if slo.ttft_p99 is not None and t_ttft > slo.ttft_p99:
        return (f"SLO impossible even unloaded: TTFT of the p99 prompt ({p99_prompt:.0f} "
                f"tokens) is {t_ttft:.3g} s > {slo.ttft_p99:g} s")
    t1 = c.decode_time(1, mean_context) + c_tpot
    if slo.tpot_p99 is not None and t1 > slo.tpot_p99:
        return (f"SLO impossible even unloaded: batch-1 TPOT {t1 * 1e3:.3g} ms > "
                f"{slo.tpot_p99 * 1e3:g} ms")
    return ""


def _tp_options(cfg: Any, max_tp: int, devices: int) -> list[int]:
    """The powers of two up to 64 (and ``max_tp``, ``devices``) that split ``cfg``: the
    heads, KV heads and MLP widths rule of ``graphs.shard.tp_problem``, written once."""
    return [t for t in (1, 2, 4, 8, 16, 32, 64)
            if t <= max_tp and t <= devices and tp_problem(cfg, t) is None]


_DEGREES = A.seq(A.count(1, A.MAX_DEVICES), scalar=True, what="parallel degrees (positive "
                 "integers)")


@A.checked(model=A.anything, hardware=A.anything, devices=A.count(1, A.MAX_DEVICES),
           workload=A.instance_of(Workload, what="an rl.Workload"),
           slo=A.instance_of(SLO, what="an rl.SLO"), precisions=A.anything,
           max_tp=A.count(1, A.MAX_DEVICES), pp_options=_DEGREES,
           ep_options=A.optional(_DEGREES),
           chunk_sizes=A.seq(A.optional(A.count(1, A.MAX_TOKENS)), scalar=True,
                             what="chunked-prefill budgets (tokens) or None (whole prompts)"),
           disaggregated=A.flag, engine=A.anything, preset=A.text,
           kv_policy=A.choice(*KV_POLICIES),
           kv_link_bytes_per_s=A.optional(A.real(0, 1e15, unit="B/s")), requests=A.count(),
           seed=A.count(0, 2**32 - 1), max_simulations=A.count(), price_per_hour=A.anything,
           region=A.anything, pue=A.anything, progress=A.progress, client=A.flag)
def plan_serving(model: Any, hardware: Any, *, devices: int, workload: Workload, slo: SLO,
                 precisions: Any = None, max_tp: int = 8, pp_options: tuple[int, ...] = (1, 2, 4),
                 ep_options: tuple[int, ...] | None = None,
                 chunk_sizes: tuple[int | None, ...] = (2048, 512, 8192, None),
                 disaggregated: bool = True, engine: str = "trtllm", preset: str = "default",
                 kv_policy: str = "dynamic", kv_link_bytes_per_s: float | None = None,
                 requests: int = 2000, seed: int = 0, max_simulations: int = 16,
                 price_per_hour: float | None = None, region: str | None = None,
                 pue: float | None = None, progress: bool | TextIO = False,
                 client: bool = False) -> ServingPlan:
    """Search layouts for serving ``workload`` within ``slo`` on at most ``devices`` devices.

    ``precisions``: (compute and weights, KV[, weight-only quantisation]) tuples (default
    ``PRECISIONS`` where the hardware has fp8, else ``PRECISIONS_NO_FP8``, with fp16 for bf16
    on a part without bf16: V100, T4). ``pp_options``:
    pipeline depths. ``ep_options``: expert-parallel groups per replica for a MoE (default:
    the powers of two dividing its experts; searched at tp = pp = 1, i.e. ep single-device
    attention groups sharing the experts; ignored for a dense model). ``chunk_sizes``:
    chunked-prefill budgets tried on the winner (None: whole prompts).
    ``kv_link_bytes_per_s``: the prefill-to-decode KV link of the disaggregated layouts
    (default: the part's scale-up link); refused with ``disaggregated=False``, which has none.
    ``requests``: per sizing simulation.
    ``price_per_hour``, ``region``, ``pue``: as in ``rl.serve``, for the cost, energy and carbon
    columns of ``layouts`` and ``pareto`` (``plan_power``; NaN without a price or region).
    ``progress``: a line per layout priced and per sizing simulation, with the rate and the
    time left (True: on stderr when it is a terminal; a stream: there; ``roofline.progress``).
    ``client=True``: TTFT and TPOT as a client timing each request sees them (per-request floor,
    prompt in and output out: ``simulate_serving(client=True)``), in the SLO checks, the
    frontier's TPOT and the sizing simulations; off by default.
    """
    price_per_hour, region, pue = check_economics(price_per_hour, region, pue)
    if kv_link_bytes_per_s is not None and not disaggregated:
        raise SpecError(f"kv_link_bytes_per_s={kv_link_bytes_per_s:g} prices the KV transfer of "
                        "disaggregated layouts, and disaggregated=False searches none: leave "
                        "it out, or allow disaggregated=True")
    from ..graphs.resolve import model as resolve_model
    from ..specs.resolve import hardware as resolve_hw

    # devices, workload and slo are checked by @A.checked (count, rl.Workload, rl.SLO)
    progress = A.progress("progress", progress)
    out = progress_stream(progress)
    m = resolve_model(model)
    hw = resolve_hw(hardware)
    cfg = m.config
    if cfg is None or cfg.arch != "decoder":
        raise SpecError(f"plan_serving needs a decoder LLM; {m.name} is {a_family(m.family)} model")
    if precisions is None:
        precisions = PRECISIONS if hw.has("fp8") else PRECISIONS_NO_FP8
        if not hw.has("bf16") and hw.has("fp16"):  # V100, T4: the part's 16-bit dtype
            precisions = tuple(tuple("fp16" if d == "bf16" else d for d in pr)
                               for pr in precisions)
    precisions = _check_precisions(precisions)
    eps = _ep_options(cfg, ep_options)
    lam = workload.arrival_rate
    Pm, nm = workload.mean_prompt(), workload.mean_output()
    _, isl_s, _ = workload.sample(min(requests, 5000), seed)
    P99 = float(np.percentile(isl_s, 99))
    refs = (int(np.percentile(isl_s, 50).round()),)
    n_max = max(max(cs for cs in chunk_sizes if cs) if any(chunk_sizes) else 0,
                int(isl_s.max())) + 1024
    bad: dict[str, list[Any]] = {"layout": [], "reason": []}
    feas: list[StepCosts] = []
    notes = []
    tps = _tp_options(cfg, max_tp, devices)
    # pipeline stages extend a replica past one scale-up domain: within it, tensor
    # parallelism is faster per step at the same device count (rl.serve prices a pp step as
    # pp stages in turn), so pp > 1 is searched at the largest tp only; expert parallelism as
    # DP-attention deployments run it, ep groups of one device (tp = 1, pp = 1: rl.serve
    # prices tp × ep hybrids, the search leaves them out — each MoE layout costs ~50 graph
    # builds); weight-only quantisation without pipeline stages
    combos = [(tp, pp, ep, w, kv, wq) for tp in tps for pp in pp_options for ep in eps
              if not (tp * pp * ep > devices or pp > cfg.n_layers or
                      (pp > 1 and tp != tps[-1]) or (ep > 1 and (pp > 1 or tp > 1)))
              for w, kv, wq in precisions if not (wq is not None and pp > 1)]
    bar = Progress(len(combos), out, unit="layout")
    cl = request_client(P99, nm, hw) if client else (0.0, 0.0)  # (TTFT, TPOT) a client adds
    for tp, pp, ep, w, kv, wq in combos:
        c = step_costs(m, hw, tp=tp, pp=pp, ep=ep, precision=w, kv_precision=kv,
                       weight_precision=wq, engine=engine, preset=preset, max_tokens=n_max,
                       ref_prompts=refs, ref_output=max(2, int(nm)))
        why = _why_not(c, slo, P99, Pm + nm / 2, cl)
        if why:
            bad["layout"].append(c.label)
            bad["reason"].append(why)
        else:
            feas.append(c)
        bar.step(f"layout {c.label}", why[:60] or "can serve")
    bar.close()
    # -- closed-form frontier
    pts = _frontier(feas, hw, Pm, nm, disaggregated, cl[1])
    layouts = points_table(pts, [_label(p) for p in pts], hw, price_per_hour, region, pue,
                           preset)
    pareto = _pareto(layouts)
    # -- sizing by simulation
    best, sims = _size(m, hw, pts, workload, slo, devices, lam, chunk_sizes, kv_policy,
                       kv_link_bytes_per_s, requests, seed, max_simulations, engine, preset,
                       out, client)
    if best is None and not feas:  # nothing runs or meets the SLO unloaded: say why
        notes.append(f"no layout can serve on these devices; {len(bad['reason'])} refused, "
                     f"most often: {most_common(bad['reason'])}" if bad["reason"] else
                     "no layout to search on these devices")
    elif best is None:
        notes.append(_shortfall(pts, slo, devices, lam))
    return ServingPlan(model=m.name, hardware=hw.name, devices=devices, workload=workload,
                       slo=slo, best=best, pareto=pareto, layouts=layouts,
                       infeasible=Table(bad, title="infeasible layouts"), simulated=sims,
                       notes=tuple(notes))


def _size(m: Any, hw: Any, pts: list[_Point], wl: Workload, slo: SLO, devices: int, lam: float,
          chunk_sizes: tuple[int | None, ...], kv_policy: str, link: float | None,
          requests: int, seed: int, max_sims: int, engine: str,
          preset: str, out: TextIO | None = None,
          client: bool = False) -> tuple[PlanChoice | None, Table]:
    cand = []
    for p in pts:
        if slo.tpot_p99 is not None and p.tpot > slo.tpot_p99:
            continue
        if p.mode == "aggregated":
            R = math.ceil(lam / (HEADROOM * p.rate))
            dev = R * p.costs.devices
            cand.append((dev, p, R, 0))
        else:
            assert p.pcosts is not None
            R = math.ceil(lam / (HEADROOM * p.rate))
            X = max(1, math.ceil(R * p.ratio / HEADROOM))
            dev = R * p.costs.devices + X * p.pcosts.devices
            cand.append((dev, p, R, X))
    cand = [c for c in cand if c[0] <= devices]
    cand.sort(key=lambda c: (c[0], -c[1].conc))
    rows: dict[str, list[Any]] = {k: [] for k in (
        "mode", "layout", "max_concurrency", "chunk", "devices", "ttft_p99_s", "tpot_p99_ms",
        "e2e_p99_s", "goodput_req_per_s", "overloaded", "meets_slo")}
    best: tuple[int, float, PlanChoice] | None = None
    n_sims = 0
    chunk0 = chunk_sizes[0]
    tried: set[tuple[Any, ...]] = set()
    # at most: 3 tries per candidate up to max_sims, then each other chunk size on the winner
    bar = Progress(min(max_sims, 3 * len(cand)) + len(chunk_sizes) - 1, out, unit="simulation")

    def done(ch: PlanChoice) -> None:
        bar.step(f"simulated {ch.mode} {ch.layout} ×{ch.devices} devices, chunk "
                 f"{ch.chunk_size or 'whole'}", "meets the SLO" if ch.sim.meets() else "misses")

    for dev, p, R, X in cand:
        if n_sims >= max_sims or (best is not None and dev > best[0]):
            break
        for _extra in range(3):
            key = (id(p.costs), id(p.pcosts), p.conc, R, X)
            if key in tried or dev > devices:
                break
            tried.add(key)
            ch = _sim(m, hw, p, R, X, chunk0, wl, slo, kv_policy, link, requests, seed,
                      engine, preset, devices, client)
            n_sims += 1
            _row(rows, ch)
            done(ch)
            if ch.sim.meets():
                score = (ch.devices, ch.sim.ttft.p99)
                if best is None or score < (best[0], best[1]):
                    best = (ch.devices, ch.sim.ttft.p99, ch)
                break
            # more replicas of the bottleneck pool
            if p.mode == "aggregated":
                R += 1
                dev = R * p.costs.devices
            else:
                assert p.pcosts is not None
                if ch.sim.ttft.p99 > (slo.ttft_p99 or math.inf):
                    X += 1
                else:
                    R += 1
                dev = R * p.costs.devices + X * p.pcosts.devices
            if best is not None and dev > best[0]:
                break
    show = ("layout", "max_concurrency", "chunk", "devices", "ttft_p99_s", "tpot_p99_ms",
            "e2e_p99_s", "meets_slo", "goodput_req_per_s", "overloaded", "mode")
    if best is None:
        bar.close()
        return None, Table(rows, title="sizing simulations", show=show)
    choice = best[2]
    # chunked-prefill size: the other budgets on the winner, same replicas
    for cs in chunk_sizes[1:]:
        if cs is not None and cs <= choice.max_concurrency:
            continue
        ch = _sim(m, hw, choice._point, choice.replicas, choice.prefill_replicas, cs, wl, slo,
                  kv_policy, link, requests, seed, engine, preset, devices, client)
        _row(rows, ch)
        done(ch)
        if ch.sim.meets() and ch.sim.ttft.p99 < choice.sim.ttft.p99:
            choice = ch
    bar.close()
    choice = _explain(choice, slo, devices, len(cand))
    return choice, Table(rows, title="sizing simulations", show=show)


def _sim(m: Any, hw: Any, p: _Point, R: int, X: int, chunk: int | None, wl: Workload, slo: SLO,
         kv_policy: str, link: float | None, requests: int, seed: int, engine: str, preset: str,
         devices: int, client: bool = False) -> PlanChoice:
    c = p.costs
    w, kvp, tp, pp, ep = c.precision, c.kv_precision, c.tp, c.pp, c.ep
    if chunk is not None and chunk <= p.conc:
        chunk = max(2048, 2 * p.conc)
    # the population fills from empty over about one time in system W: leave it out, and
    # measure at least 2 W of arrivals after it
    W = p.tpot * wl.mean_output()
    lam = wl.arrival_rate
    n_req = requests
    if wl._trace is None:
        n_req = int(min(max(requests, math.ceil(lam * 3 * W)), 20_000))
    sim = simulate_serving(m, hw, workload=wl, requests=n_req, tp=tp, pp=pp, ep=ep, replicas=R,
                           warmup=min(W, 0.5 * n_req / lam) if wl._trace is None else 0.0,
                           max_concurrency=p.conc, chunk_size=chunk, precision=w,
                           kv_precision=kvp, weight_precision=c.weight_precision,
                           engine=engine, preset=preset, kv_policy=kv_policy,
                           slo=slo, seed=seed, costs=c, devices=devices,
                           prefill_replicas=X if p.mode == "disaggregated" else None,
                           prefill_tp=(p.pcosts.tp if p.pcosts is not None else None),
                           kv_link_bytes_per_s=link if p.mode == "disaggregated" else None,
                           prefill_costs=p.pcosts, client=client)
    label = _label(p, R, X) if p.mode == "disaggregated" else f"{R} × {c.label}"
    prefill_tp = p.pcosts.tp if p.pcosts is not None else 0
    ch = PlanChoice(mode=p.mode, layout=label, tp=tp, pp=pp, ep=ep, precision=w,
                    kv_precision=kvp, weight_precision=c.weight_precision,
                    replicas=R, prefill_replicas=X,
                    prefill_tp=prefill_tp,
                    max_concurrency=p.conc, chunk_size=chunk, devices=sim.devices, sim=sim,
                    _point=p)
    return ch


def _row(rows: dict[str, list[Any]], ch: PlanChoice) -> None:
    s = ch.sim
    for k, v in (("mode", ch.mode), ("layout", ch.layout), ("max_concurrency", ch.max_concurrency),
                 ("chunk", str(ch.chunk_size or "whole")), ("devices", ch.devices),
                 ("ttft_p99_s", s.ttft.p99), ("tpot_p99_ms", s.tpot.p99 * 1e3),
                 ("e2e_p99_s", s.e2e.p99), ("goodput_req_per_s", s.goodput),
                 ("overloaded", s.overloaded), ("meets_slo", s.meets())):
        rows[k].append(v)


def _explain(ch: PlanChoice, slo: SLO, devices: int, n_cand: int) -> PlanChoice:
    s = ch.sim
    raw = s._raw
    svc = raw["done"] - raw["admit"]
    svc = svc[np.isfinite(svc)]
    cv = float(svc.std() / svc.mean()) if len(svc) > 1 and svc.mean() > 0 else 1.0
    servers = ch.replicas * ch.max_concurrency
    cc = tail_latency(s.rate, float(svc.mean()), servers, cv) if len(svc) else None
    why = (f"fewest devices ({ch.devices} of {devices}) among {n_cand} candidates whose "
           f"closed-form TPOT meets the target, and its simulation meets {slo} at "
           f"{s.rate:g} req/s: p99 TTFT {s.ttft.p99:.3g} s, p99 TPOT {s.tpot.p99 * 1e3:.3g} ms; "
           f"goodput {s.goodput:.3g} req/s ({s.goodput_fraction:.1%} of requests)")
    from dataclasses import replace

    return replace(ch, why=why, cross_check=cc)
