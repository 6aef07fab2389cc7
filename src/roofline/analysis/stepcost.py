"""Closed-form costs of one continuous-batching iteration, from ``rl.serve``'s per-step model.

An engine iteration (vLLM, TensorRT-LLM in-flight batching) runs the ``b`` sequences that are
decoding (one token each, total cached context ``C``) together with ``T`` prefill tokens of
newly admitted prompts (whole, or a chunk over an already-cached prefix ``c``). Its time is

    t(b, C, chunks) = dec(b) + slope(b)·C + [pre(b + T) − pre(b)]
                      + Σ_chunks a(T_i)·T_i·(c_i + (T_i + 1)/2)

- ``dec(b)``: a decode step of b sequences at context → 0 — weights, GEMMs and logits of b
  tokens, all-reduces, launch — from ``serve_sweep`` (dense, pp = 1) or
  ``rl.serve(batch=b, output_len=2)``, plus the engine's host time of a step of b sequences
  (``serving.plan.host_step``); ``slope(b)``: its cost per token of cached context (KV
  reads), from the steps at two contexts;
- ``pre(N)``: the context-free part of a prefill of N tokens (logits of its last tokens only):
  ``rl.serve(batch=N/16, prompt_len=16, output_len=1).ttft`` (16-token prompts carry ~1e-4 of
  their time in attention); ``pre(b + T) − pre(b)`` is what T prompt tokens add to a pass that
  already runs b tokens through the weights (nothing while memory-bound, T tokens' GEMMs
  once compute-bound);
- ``a(T)``: prefill attention per (query, key) pair for a chunk of T tokens:
  (``rl.serve(batch=1, prompt_len=T, output_len=1).ttft`` − pre(T)) / (T(T+1)/2) at a few T,
  interpolated in log T. A lone prompt therefore costs exactly ``rl.serve``'s unloaded TTFT at
  those T, and a decode-only step exactly ``rl.serve``'s step at the same batch and context.

Host time (the engine profile's step_overhead, layer_overhead, request_overhead,
seq_overhead): the tables are read from ``rl.serve`` with those four at 0 and the host terms
are added by ``with_host`` through the same two functions ``rl.serve`` sums
(``serving.plan.host_step`` / ``host_prefill``): ``dec(b)`` gets a step's host time at b
sequences, ``pre(N)`` a prefill call's fixed part, and each prefill chunk of a step one
``seq_overhead`` (``StepCosts.seq_overhead``; with ``ep`` groups, each with its own host and
1/ep of the sequences, 1/ep of it). ``with_host`` swaps the host terms of built tables without
re-reading serve (the serving fit varies them that way).

Assumptions: decode attention is affine in the context (sliding windows are not capped here);
the per-pair attention cost of a chunk over a cached prefix is that of the same pairs in a
fresh prompt. KV capacity: per-device HBM − weights − workspace − activations of the largest step,
in blocks of ``block_size`` tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..errors import SpecError

__all__ = ["HOST_FACTORS", "StepCosts", "step_costs", "with_host"]

#: the engine-profile factors that are host time, added to the tables by ``with_host``
HOST_FACTORS = ("step_overhead", "layer_overhead", "request_overhead", "seq_overhead")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StepCosts:
    """Per-iteration cost tables of one replica layout (SI units)."""

    label: str  #: the layout, e.g. "tp8 bf16/kv fp8"
    devices: int  #: devices per replica (tp × pp × ep)
    tp: int
    pp: int
    precision: str  #: compute/weights
    kv_precision: str  #: KV cache
    lin: np.ndarray  #: [N+1] s, decode step of N sequences at context 0 (index 0: 0)
    slope: np.ndarray  #: [N+1] s per token of cached context, for b decoding sequences
    pre: np.ndarray  #: [N+1] s, context-free prefill of N tokens (index 0: 0)
    pair: np.ndarray  #: [N+1] s per (query, key) attention pair of a T-token prefill chunk
    kv_bytes_per_token: float  #: per device
    kv_budget_bytes: float  #: per device, for the KV cache
    block_size: int  #: tokens per KV block
    total_blocks: int  #: KV blocks that fit
    weights_bytes: float
    capacity_bytes: float
    ttft_ref: dict[int, float] = field(default_factory=dict)  #: serve's unloaded TTFT by T
    ep: int = 1  #: expert-parallel groups (MoE, ``rl.serve``'s ep)
    weight_precision: str | None = None  #: weight-only quantisation (None: the precision's)
    tpot_ref: float = math.nan  #: serve's batch-1 TPOT at the reference lengths
    feasible: bool = True
    reason: str = ""
    #: s of host time per prefill chunk in a step (the engine's seq_overhead, / ep); the
    #: decoding sequences' share is in ``lin``
    seq_overhead: float = 0.0
    #: the engine profile whose host factors (HOST_FACTORS) the tables hold (None: none)
    host: Any = None
    host_layers: int = 0  #: layers a token crosses (every stage's), for layer_overhead
    #: the engine's scheduling rule (its profile's prefill_first): without chunked prefill, a
    #: step with prompts runs only their prefill, the decoding sequences wait
    prefill_first: bool = False

    @property
    def n_max(self) -> int:
        return len(self.lin) - 1

    def _at(self, tbl: np.ndarray, n: float) -> float:
        N = self.n_max
        if n <= N:
            return float(tbl[int(n)])
        return float(tbl[N] + (tbl[N] - tbl[N - 1]) * (n - N))

    def prefill_time(self, tokens: int, cached: int = 0) -> float:
        """One prompt of ``tokens`` new tokens over ``cached`` cached ones, alone in a step."""
        T = int(tokens)
        return self._at(self.pre, T) + float(self.pair[min(T, self.n_max)]) * T * \
            (cached + (T + 1) / 2) + self.seq_overhead

    def prompt_add(self, tokens_before: float, tokens: float, attention: float) -> float:
        """What one prompt of ``tokens`` tokens (its attention ``attention`` s) adds to a step
        that already runs ``tokens_before`` tokens: its tokens through the weights, its
        attention and its sequence's host time."""
        return self._at(self.pre, tokens_before + tokens) - self._at(self.pre, tokens_before) \
            + attention + self.seq_overhead

    def decode_time(self, batch: int, context_total: float) -> float:
        """A decode-only step of ``batch`` sequences holding ``context_total`` tokens (their
        attention contexts, the token being written included)."""
        return self._at(self.lin, batch) + float(self.slope[min(batch, self.n_max)]) * \
            context_total

    def step_time(self, batch: int, context_total: float, chunks: list[tuple[int, int]]) -> float:
        """One mixed iteration: ``batch`` decoding sequences and prefill ``chunks`` of
        (tokens, cached prefix)."""
        T = sum(t for t, _ in chunks)
        att = sum(float(self.pair[min(t, self.n_max)]) * t * (c + (t + 1) / 2) for t, c in chunks)
        dec = self.decode_time(batch, context_total) if batch else 0.0
        return dec + self._at(self.pre, batch + T) - self._at(self.pre, batch) + att + \
            self.seq_overhead * len(chunks)

    def kv_capacity_batch(self, tokens_per_seq: float) -> int:
        """Sequences of ``tokens_per_seq`` tokens whose KV blocks fit."""
        per = math.ceil(tokens_per_seq / self.block_size)
        return int(self.total_blocks // per) if per > 0 else 0


def _grid(n_max: int) -> np.ndarray:
    """Every integer to 64, then steps of ~6 % (the step time is piecewise linear in N)."""
    g = list(range(1, min(n_max, 64) + 1))
    x = 64.0
    while g[-1] < n_max:
        x *= 1.06
        g.append(min(n_max, int(round(x))))
    return np.unique(np.asarray(g, dtype=np.float64))


def step_costs(model: Any, hardware: Any, *, tp: int = 1, pp: int = 1, precision: str = "bf16",
               kv_precision: str | None = None, weight_precision: str | None = None,
               ep: int = 1, engine: Any = "trtllm", preset: str = "default",
               max_tokens: int = 8192, ref_prompts: tuple[int, ...] = (1024,),
               ref_output: int = 128, block_size: int = 16, kv_window: str = "ring",
               pre_points: int = 16) -> StepCosts:
    """Build the tables for one replica layout from ``rl.serve`` / ``serve_sweep``.

    ``max_tokens``: the most tokens one step can carry (chunk budget + decoding sequences);
    ``ref_prompts``: prompt lengths at which prefill attention is read from ``rl.serve`` (the
    step model reproduces its TTFT exactly there); ``pre_points``: batch sizes at which the
    context-free prefill is read (geometric; it is flat while memory-bound, then linear).
    """
    from ..scenarios.serving import serve, serve_sweep
    from ..scenarios.serving.plan import serving_factors, without_host

    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise SpecError(f"block_size must be a positive integer (tokens per KV block), got "
                        f"{block_size!r}")
    n_max = max(int(max_tokens), 2)
    refs = sorted({max(1, min(int(t), n_max)) for t in ref_prompts})
    # the tables are read with the engine's host time at 0; with_host adds it (module doc)
    host = None if preset in ("bound", "mlsysim") else serving_factors(engine)
    dev_engine = engine if host is None else without_host(host)
    kw: dict[str, Any] = dict(precision=precision, kv_precision=kv_precision, tp=tp, preset=preset,
              engine=dev_engine, kv_window=kv_window, weight_precision=weight_precision)
    label = f"tp{tp}" + (f" pp{pp}" if pp > 1 else "") + (f" ep{ep}" if ep > 1 else "") + \
        f" {precision}" + (f" w{weight_precision}" if weight_precision else "") + \
        (f"/kv {kv_precision}" if kv_precision and kv_precision != precision else "")
    ekw: dict[str, Any] = {"ep": ep} if ep > 1 else {}  # (serve_sweep: dense models, no ep)
    from ..graphs.resolve import model as resolve_model

    cap = getattr(resolve_model(model).config, "max_positions", None)
    if cap:  # a prompt near the context: the reference generation stops at it (serve's rule)
        ref_output = max(1, min(ref_output, cap + 1 - refs[-1]))
    one = serve(model, hardware, batch=1, prompt_len=refs[-1], output_len=ref_output, pp=pp,
                **kw, **ekw)
    nan = np.full(2, math.nan)
    dev = tp * pp * ep
    if not one.feasible:
        return StepCosts(label=label, devices=dev, tp=tp, pp=pp, ep=ep,
                         weight_precision=weight_precision, precision=precision,
                         kv_precision=kv_precision or precision, lin=nan, slope=nan,
                         pair=nan, pre=nan,
                         kv_bytes_per_token=math.nan, kv_budget_bytes=0.0,
                         block_size=block_size, total_blocks=0,
                         weights_bytes=one.memory_breakdown.get("weights", math.nan),
                         capacity_bytes=one.memory_capacity, feasible=False, reason=one.reason)
    grid = np.union1d(_grid(n_max), np.asarray(refs, dtype=np.float64))
    s1, s2 = 1, refs[-1] + 1  # decode contexts
    from ..graphs.shard import shard_config

    cfg = resolve_model(model).config
    if cfg is not None and cfg.max_positions and s2 > cfg.max_positions:
        s2 = cfg.max_positions  # a prompt filling the context: read the last step it can run
    layers = shard_config(cfg, tp, pp).n_layers * pp if cfg is not None else 0
    if pp == 1 and cfg is not None and not cfg.n_experts and preset != "mlsysim":
        sw = serve_sweep(model, hardware, batch=grid, context=[s1, s2], **kw)
        t1, t2 = sw["tpot"][0, 0, :, 0], sw["tpot"][0, 0, :, 1]
    else:  # MoE or pipeline stages: serve per batch (decode step at context P + 1)
        # one serve call per point: a coarser grid (MoE graphs are built per batch: coarser)
        pts = 14 if cfg is not None and cfg.n_experts else 24
        grid = np.union1d(np.unique(np.rint(np.geomspace(1, n_max, pts))), refs)
        s1 = 17  # a 16-token prompt (the prefill graph below) + its first decode step
        t1 = np.array([serve(model, hardware, batch=int(b), prompt_len=16, output_len=2, pp=pp,
                             **kw, **ekw).tpot for b in grid])
        t2 = np.array([serve(model, hardware, batch=int(b), prompt_len=s2 - 1, output_len=2,
                             pp=pp, **kw, **ekw).tpot for b in grid])
    d1 = (t2 - t1) / (s2 - s1)  # per sequence-context token, at batch b: whole-step slope / b
    t0 = t1 - d1 * s1
    Ns = np.arange(n_max + 1, dtype=np.float64)
    lin = np.interp(Ns, grid, t0)
    slope = np.interp(Ns, grid, d1 / grid)
    lin[0] = 0.0
    # context-free prefill: batches of 16-token prompts (attention ~1e-4 of their time)
    T0 = 16
    top = max(1, math.ceil(n_max / T0))
    pb = np.unique(np.rint(np.geomspace(1, top, pre_points)))
    pb = np.union1d(pb, np.maximum(1, np.rint(np.asarray(refs, dtype=np.float64) / T0)))
    pt = np.array([serve(model, hardware, batch=int(B), prompt_len=T0, output_len=1, pp=pp,
                         **kw, **ekw).ttft for B in pb])
    pre = np.interp(Ns, pb * T0, pt)
    pre[0] = 0.0
    ttft, pair = _pair_costs(model, hardware, refs, one, pre, Ns, T0, ep, pp, kw, ekw)
    # KV capacity (per device): what serve's memory model leaves after weights, workspace and
    # the activations of the largest step; with ep groups each holds its own sequences' KV
    # (one pool of ep × a device's blocks, balanced over the groups; a step's tokens split too)
    # preset "mlsysim" (scenarios/serving/mlsysim.py) counts weights and a KV cache of the
    # prompt only (its seq_len = prompt_len; feasible when weights + KV fit): no activations,
    # no workspace, so those terms are 0 there and its KV covers refs[-1] tokens
    mb = one.memory_breakdown
    kv_tok = mb["kv_cache"] / (refs[-1] + (0 if preset == "mlsysim" else ref_output))
    act_tok = mb.get("activations", 0.0) / refs[-1]
    ws = mb.get("workspace", 0.0)
    budget = one.memory_capacity - mb["weights"] - ws - act_tok * n_max / ep
    blocks = ep * int(budget // (kv_tok * block_size)) if budget > 0 and kv_tok > 0 else 0
    feasible, reason = blocks > 0, ""
    if not feasible:
        reason = (f"no room for the KV cache: {one.memory_capacity / 1e9:.1f} GB per device − "
                  f"weights {mb['weights'] / 1e9:.1f} GB − workspace and step activations "
                  f"{(ws + act_tok * n_max / ep) / 1e9:.1f} GB")
    dev_costs = StepCosts(label=label, devices=dev, tp=tp, pp=pp, ep=ep,
                          weight_precision=weight_precision, precision=precision,
                          kv_precision=kv_precision or precision, lin=lin, slope=slope,
                          pair=pair, pre=pre,
                          kv_bytes_per_token=kv_tok, kv_budget_bytes=max(budget, 0.0),
                          block_size=block_size, total_blocks=blocks,
                          weights_bytes=mb["weights"], capacity_bytes=one.memory_capacity,
                          ttft_ref=ttft, tpot_ref=one.tpot, feasible=feasible, reason=reason,
                          host_layers=layers)
    return dev_costs if host is None else with_host(dev_costs, host)


def _pair_costs(model: Any, hardware: Any, refs: list[int], one: Any, pre: np.ndarray,
                Ns: np.ndarray, T0: int, ep: int, pp: int, kw: dict[str, Any],
                ekw: dict[str, Any]) -> tuple[dict[int, float], np.ndarray]:
    """Prefill attention per (query, key) pair, from serve's TTFT at the reference prompt
    lengths ``refs`` (``one``: the serve at the longest) less the context-free prefill ``pre``:
    ({prompt: TTFT}, the cost per pair at every step size in ``Ns``)."""
    from ..scenarios.serving import serve

    ttft = {}
    pairs_cost = []
    for T in refs:
        r = one if T == refs[-1] else serve(model, hardware, batch=1, prompt_len=T,
                                            output_len=one.output_len, pp=pp, **kw, **ekw)
        ttft[T] = r.ttft
        if ep == 1:
            pairs_cost.append(max(0.0, (r.ttft - pre[T]) / (T * (T + 1) / 2)))
            continue
        # ep groups: the tables describe steps balanced over the groups, so a chunk's pairs
        # cost 1/ep of what they cost the group running them (ep chunks side by side). A
        # group's attention per pair is that of the same tp × pp layout without ep (a lone
        # prompt's TTFT less the context-free time of its T tokens)
        Bq = max(1, round(T / T0))
        free = serve(model, hardware, batch=Bq, prompt_len=T0, output_len=1, pp=pp,
                     **kw).ttft * T / (Bq * T0)
        r1 = serve(model, hardware, batch=1, prompt_len=T, output_len=1, pp=pp, **kw)
        pairs_cost.append(max(0.0, (r1.ttft - free) / (T * (T + 1) / 2)) / ep)
    if len(refs) == 1:
        return ttft, np.full(len(Ns), pairs_cost[0])
    return ttft, np.interp(np.log(np.maximum(Ns, 1)), np.log(refs), pairs_cost)


def with_host(c: StepCosts, factors: Any) -> StepCosts:
    """``c`` with the host time of the engine profile ``factors`` (its HOST_FACTORS) in place
    of the one its tables hold: ``dec(N)`` gets ``host_step`` at N sequences (N / ep per
    group), ``pre(N)`` ``host_prefill``'s fixed part, each prefill chunk ``seq_overhead``
    (/ ep); the serve references move with them, and the profile's scheduling rule
    (``prefill_first``) comes along. The device parts are unchanged."""
    from ..scenarios.serving.plan import NEUTRAL, host_prefill, host_step

    old = c.host if c.host is not None else NEUTRAL
    new = factors if factors is not None else NEUTRAL
    if not c.feasible:
        return replace(c, host=factors, prefill_first=bool(new.prefill_first))
    L, pp, ep = c.host_layers, c.pp, c.ep
    Ns = np.arange(c.n_max + 1, dtype=np.float64)
    lin = c.lin + (host_step(new, L, Ns / ep, pp) - host_step(old, L, Ns / ep, pp))
    d_pre = host_prefill(new, L, 0) - host_prefill(old, L, 0)
    pre = c.pre + d_pre
    lin[0] = pre[0] = 0.0
    d1 = host_prefill(new, L, 1 / ep) - host_prefill(old, L, 1 / ep)
    return replace(c, lin=lin, pre=pre, seq_overhead=new.seq_overhead / ep, host=factors,
                   prefill_first=bool(new.prefill_first),
                   ttft_ref={T: v + d1 for T, v in c.ttft_ref.items()},
                   tpot_ref=c.tpot_ref + host_step(new, L, 1, pp) - host_step(old, L, 1, pp))
