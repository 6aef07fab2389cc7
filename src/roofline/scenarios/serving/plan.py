"""Serving internals: per-device graphs (TP/PP sharding), compressed graphs, and the closed-form
sum of decode-step times over a generation.

Why it is fast: a transformer's layers repeat, so ``compress`` keeps one op per distinct
(kind, costs, GEMM dims, window) with a multiplicity — ~20 ops instead of ~500. Decode-step
costs are affine in the context S for every op (attention FLOPs and KV bytes grow linearly;
everything else is constant), so the per-op compute and memory times at S = 1 and S = 2 give
the times at any S, and the sum over S = S0+1 … S0+n of ``max(compute, memory) (+ launch)``
is a sum of a maximum of affine functions: exact in closed form (the engine's one sum-of-max
helper, ``engine.lines``).
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from typing import Any

import numpy as np

from ..._cache import make_room
from ..._data import DATA, read_toml
from ...engine.attention import resolve_kernel
from ...engine.core import time_model
from ...engine.efficiency import EfficiencyPatch, read_patch
from ...engine.lines import max_at, op_lines, sum_max_lines
from ...engine.presets import Efficiency, efficiency_for, registered_epoch
from ...engine.tiles import without_tiles
from ...errors import SpecError, unknown
from ...graphs.graph import Graph, Q
from ...graphs.shard import shard_config
from ...graphs.transformer import TransformerConfig, transformer_graph
from ...specs.dtypes import Precision
from ...specs.hardware import Hardware, spec_key
from ...specs.sourced import Provenance, check_number, read_quantity

__all__ = [
    "ENGINES",
    "KV_WINDOWS",
    "Plan",
    "ServingFactors",
    "check_kv_window",
    "host_prefill",
    "host_step",
    "without_host",
    "compress",
    "device_plan",
    "serving_factors",
    "shard_config",
]

#: every engine profile of data/presets/serving.toml (a test keeps the two equal)
ENGINES = ("trtllm", "trtllm-legacy", "trtllm-v08", "vllm", "vllm-legacy", "vllm-rocm", "vllm-v0",
           "vllm-v0-multistep", "vllm-v1", "eager", "llamacpp")

#: how sliding-window layers are stored in the KV cache: "ring" keeps at most the window per
#: layer (TensorRT-LLM's cyclic cache / per-window pools, vLLM V1's hybrid KV-cache manager,
#: Hugging Face's HybridCache), "full" keeps every token in every layer (vLLM with the hybrid
#: manager disabled, which stores windowed layers of a mixed model like global ones)
KV_WINDOWS = ("ring", "full")


def check_kv_window(kv_window: Any) -> str:
    if kv_window not in KV_WINDOWS:
        raise SpecError(f"kv_window={kv_window!r} is not a KV-cache layout; allowed: "
                        f"{', '.join(repr(k) for k in KV_WINDOWS)} (ring: sliding-window layers "
                        "hold at most their window; full: every layer holds every token)")
    return str(kv_window)


# -- fitted factors ----------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class ServingFactors:
    """One serving-engine profile from data/presets/serving.toml (SI units)."""

    name: str
    fuse: bool = False  #: price the epilogue-fused graph
    #: the engine's own efficiency factors (``[engine.<name>.efficiency]``: its launch model),
    #: applied to the device's preset; None: the preset's
    patch: EfficiencyPatch | None = None
    step_overhead: float = 0.0  #: s of host time per decode step of each pipeline stage
    layer_overhead: float = 0.0  #: s per layer (on a device) per step: per-layer plugin/sync cost
    request_overhead: float = 0.0  #: s per prefill call
    #: s of host time per sequence per engine step (scheduling, sampling, output processing
    #: of each sequence: each decode step and the prefill step that samples a first token)
    seq_overhead: float = 0.0
    #: engine steps per host pass (vLLM V0's multi-step scheduling, --num-scheduler-steps):
    #: the per-step and per-sequence host time is paid once per that many steps
    scheduler_steps: float = 1.0
    #: without chunked prefill, a step with prompts to prefill runs them alone and the decoding
    #: sequences wait (vLLM V0's default scheduler); False: prompts join the decode step
    prefill_first: bool = False
    #: decode attention reads each KV head's cache once per query head it serves (TensorRT-LLM's
    #: masked-MHA kernel before XQA: one thread block per sequence and query head); False: once
    #: per KV head, shared by its GQA group (FlashAttention-style decode kernels)
    kv_per_query_head: bool = False
    #: a trial value of the narrow-dtype multiplier (the serving fit's): an fp8 / fp4 / int4
    #: matmul reaches this times the part's 16-bit fraction of its own peak, as the preset's
    #: ``[gpu.gemm_dtype]`` factor does; None: the preset's, as solve and train use it
    gemm_dtype_fp8: float | None = None
    allreduce_efficiency: float = 1.0  #: achieved / link bandwidth of a TP all-reduce
    allreduce_alpha: float = 0.0  #: s of latency per all-reduce *call* at p = 2 ranks
    allreduce_alpha_per_rank: float = 0.0  #: s added to that latency per rank beyond 2
    allreduce_custom: bool = False  #: one-shot / two-shot kernels (else NCCL: α + ring bytes)
    p2p_latency: float = 0.0  #: s per pipeline-stage send/recv
    #: NCCL over the host link (PCIe), for a TP group larger than the scale-up link's domain:
    #: s of latency per all-reduce call (0: no fallback, the scale-up link is used) and the
    #: fraction of the host link's bandwidth the ring reaches
    host_allreduce_alpha: float = 0.0
    host_allreduce_efficiency: float = 1.0
    #: the fused-attention kernel the engine runs (engine/attention.py; "auto": the engine's
    #: on the part's architecture, data/presets/attention.toml [engine.<name>], else the
    #: architecture's default); ``serve(attention_kernel=...)`` replaces it
    attention_kernel: str = "auto"
    provenance: dict[str, Provenance] | None = field(default=None, compare=False, hash=False)
    _hash: int = field(default=0, init=False, repr=False, compare=False, hash=False)

    def __hash__(self) -> int:  # computed once: the efficiency cache looks it up every call
        return self._hash

    def __post_init__(self) -> None:
        self._check()
        object.__setattr__(self, "_hash", hash(tuple(
            getattr(self, f.name) for f in fields(self) if f.compare)))

    def _check(self) -> None:
        """A profile built in code (``serve(engine=ServingFactors(...))``, a fit's trial) is
        checked as data/presets/serving.toml's entries are: host times in [0, 60] s, an
        efficiency or multiplier > 0, at least one step per host pass, the four switches
        booleans."""
        where = f"engine profile {self.name!r}"
        for k, dim in _DIM.items():
            v = getattr(self, k)
            if k in _BOOL:
                if not isinstance(v, bool):
                    raise SpecError(f"{where}: {k}={v!r} must be true or false")
            elif dim == "time":
                check_number(v, f"{where}: {k}", hi=60.0, unit="s")
            elif k == "scheduler_steps":
                check_number(v, f"{where}: {k}", lo=1.0)
            elif v is not None or k != "gemm_dtype_fp8":
                check_number(v, f"{where}: {k}", above=True)

    def efficiency(self, base: Efficiency, compute_dtype: str) -> Efficiency:
        """The default preset's factors with this engine's launch model (and fp8 fraction):
        ``dataclasses.replace`` of the base."""
        out = base
        if self.patch is not None:
            out = self.patch.apply(base, label=f"{base.label}/{self.name}")
        if self.gemm_dtype_fp8 is not None and compute_dtype in ("fp8", "fp4", "int4"):
            # a fit's trial value of the shared narrow-dtype multiplier, applied where the
            # shipped one is (the preset's [gpu.gemm_dtype], the same for solve, serve and
            # train): on each part's own 16-bit fraction
            out = replace(out, gemm_dtype=replace(out.gemm_dtype,
                                                  **{compute_dtype: self.gemm_dtype_fp8}))
        return out


_DIM = {"fuse": "ratio", "step_overhead": "time",
        "layer_overhead": "time", "seq_overhead": "time", "scheduler_steps": "ratio",
        "prefill_first": "ratio", "kv_per_query_head": "ratio",
        "request_overhead": "time", "gemm_dtype_fp8": "ratio", "allreduce_efficiency": "ratio",
        "allreduce_alpha": "time", "allreduce_alpha_per_rank": "time",
        "allreduce_custom": "ratio", "p2p_latency": "time", "host_allreduce_alpha": "time",
        "host_allreduce_efficiency": "ratio"}
_BOOL = ("fuse", "allreduce_custom", "prefill_first", "kv_per_query_head")
NEUTRAL = ServingFactors(name="none")


@lru_cache(maxsize=1)
def _factor_table() -> dict[str, ServingFactors]:
    doc = read_toml(DATA / "presets" / "serving.toml")
    src = doc.get("sources", {})
    engines = doc.get("engine", {})
    own: dict[str, tuple[dict[str, Any], dict[str, Provenance]]] = {}
    for name, tbl in engines.items():
        vals: dict[str, Any] = {}
        prov: dict[str, Provenance] = {}
        origin = f"data/presets/serving.toml [engine.{name}]"
        for k, raw in tbl.items():
            if k in ("description", "base"):
                continue
            if k == "efficiency":
                vals["patch"] = read_patch(raw, sources=src, origin=f"{origin} efficiency")
                continue
            if k not in _DIM:
                raise SpecError(f"{origin}: unknown factor {k!r}; allowed: "
                                f"{', '.join(_DIM)}, efficiency (a table of preset factors), "
                                "base (a profile whose factors this one starts from)")
            v, pv = read_quantity(raw, field=k, dimension=_DIM[k], sources=src,
                                  origin=f"data/presets/serving.toml [engine.{name}]")
            vals[k] = bool(v) if k in _BOOL else v
            prov[k] = pv
        own[name] = (vals, prov)

    def resolved(name: str, seen: tuple[str, ...] = ()) -> tuple[dict[str, Any],
                                                                  dict[str, Provenance]]:
        base = engines[name].get("base")
        if base is None:
            return own[name]
        if base not in engines or base in seen:
            others = ", ".join(n for n in engines if n != name)
            raise SpecError(f"data/presets/serving.toml [engine.{name}]: base={base!r} is not "
                            f"another profile; allowed: {others}")
        bv, bp = resolved(base, (*seen, name))
        return {**bv, **own[name][0]}, {**bp, **own[name][1]}

    out = {}
    for name in engines:
        vals, prov = resolved(name)
        out[name] = ServingFactors(name=name, provenance=prov, **vals)
    return out


def serving_factors(engine: str | ServingFactors) -> ServingFactors:
    if isinstance(engine, ServingFactors):
        return engine
    tbl = _factor_table()
    if engine not in tbl:
        raise unknown("engine", str(engine), list(tbl))
    return tbl[engine]


def host_step(f: ServingFactors, layers: int, seqs: Any, stages: int = 1) -> Any:
    """The engine's host time of one decode step (s): ``step_overhead`` per pipeline stage,
    ``layer_overhead`` per layer the token crosses (``layers``: every stage's), and
    ``seq_overhead`` per sequence in the step (``seqs``: a number or an array). The one
    formula serve, serve_sweep, the speculative path and the step tables use. With
    ``scheduler_steps`` k > 1 (multi-step scheduling) the step and sequence terms are paid once
    per k steps: 1/k of them per step; the per-layer term (launch and sync on the device's
    stream) every step."""
    return (f.step_overhead * stages + f.seq_overhead * seqs) / f.scheduler_steps + \
        f.layer_overhead * layers


def without_host(f: ServingFactors) -> ServingFactors:
    """``f`` with its four host terms (step, layer, request and sequence overheads) at 0."""
    return replace(f, step_overhead=0.0, layer_overhead=0.0, request_overhead=0.0,
                   seq_overhead=0.0)


def host_prefill(f: ServingFactors, layers: int, seqs: Any) -> Any:
    """The engine's host time of one prefill call (s): ``request_overhead``,
    ``layer_overhead`` per layer the prompt crosses and ``seq_overhead`` per sequence (each
    samples its first token)."""
    return f.request_overhead + f.layer_overhead * layers + f.seq_overhead * seqs


# -- compression -------------------------------------------------------------------------------

_LAYER = re.compile(r"^layers\.(\d+)\.")


def _op_windows(cfg: TransformerConfig, names: tuple[str, ...]) -> np.ndarray:
    """Sliding window per op (inf: none); attention ops of windowed layers get theirs."""
    w = np.full(len(names), np.inf)
    if cfg.sliding_window is None:
        return w
    for i, nm in enumerate(names):
        mt = _LAYER.match(nm)
        if mt and ".attn." in nm:
            lw = cfg.layer_window(int(mt.group(1)))
            if lw is not None:
                w[i] = lw
    return w


@dataclass(frozen=True, slots=True, eq=False)
class Compressed:
    graph: Graph  #: one op per distinct op
    counts: np.ndarray  #: [u] multiplicity
    window: np.ndarray  #: [u] sliding window (inf: none)


def compress(g: Graph, window: np.ndarray | None = None) -> Compressed:
    """Merge identical ops (same kind, class, costs, GEMM dims, window) into one with a count."""
    n = len(g)
    win = np.full(n, np.inf) if window is None else window
    kinds = {k: i for i, k in enumerate(sorted(set(g.kinds)))}
    code = np.array([kinds[k] for k in g.kinds], dtype=np.float64)
    key = np.vstack([g.c0, g.c1, g.gemm, code[None], np.where(np.isinf(win), -1, win)[None]])
    _, first, inv, counts = np.unique(key.T, axis=0, return_index=True, return_inverse=True,
                                      return_counts=True)
    order = np.argsort(first)
    idx = first[order]
    names = tuple(_LAYER.sub("layers.*.", g.names[i]) for i in idx)
    cg = Graph(name=g.name, phase=g.phase, precision=g.precision, names=names,
               kinds=tuple(g.kinds[i] for i in idx), classes=tuple(g.classes[i] for i in idx),
               c0=g.c0[:, idx], c1=g.c1[:, idx], gemm=g.gemm[:, idx],
               params=np.bincount(inv.ravel(), weights=g.params, minlength=len(first))[order],
               weight_footprint_bytes=g.weight_footprint_bytes,
               state_bytes_per_sample=g.state_bytes_per_sample, fixed_batch=g.fixed_batch,
               tokens_per_sample=g.tokens_per_sample, meta=dict(g.meta))
    return Compressed(cg, counts[order].astype(np.float64), win[idx])


def kv_read_per_query_head(g: Graph, group: int) -> Graph:
    """``g`` (a decode graph) with each attention op's KV-cache reads ``group`` times over: the
    KV head's cache streamed once per query head of its GQA group (``group`` = query heads per
    KV head on the device), as a decode kernel with one thread block per (sequence, query head)
    reads it — TensorRT-LLM's masked-MHA kernel before XQA (data/presets/serving.toml,
    ``kv_per_query_head``). Nothing else changes (FLOPs, KV writes, the KV footprint)."""
    if group <= 1:
        return g
    mask = np.array([k == "attention" for k in g.kinds], dtype=bool)
    c0, c1 = g.c0.copy(), g.c1.copy()
    r = Q["kv_bytes_read"]
    c0[r, mask] *= group
    c1[r, mask] *= group
    return replace(g, c0=c0, c1=c1, meta={k: v for k, v in g.meta.items()
                                          if not k.startswith("_")})


def concat(graphs: list[Graph]) -> Graph:
    """Ops of several graphs (same precision) side by side, priced in one engine call."""
    g0 = graphs[0]
    return Graph(name=g0.name, phase="serve", precision=g0.precision,
                 names=sum((g.names for g in graphs), ()), kinds=sum((g.kinds for g in graphs), ()),
                 classes=sum((g.classes for g in graphs), ()),
                 c0=np.hstack([g.c0 for g in graphs]), c1=np.hstack([g.c1 for g in graphs]),
                 gemm=np.hstack([g.gemm for g in graphs]),
                 params=np.hstack([g.params for g in graphs]), weight_footprint_bytes=0.0)


# -- plans: cached per-device graphs -----------------------------------------------------------


@dataclass(eq=False)
class Plan:
    """Everything about one (model, precision, tp, pp, engine graph options) that does not
    depend on the batch or the lengths: the per-device config and cached compressed graphs."""

    cfg: TransformerConfig  #: per-device (sharded) config
    full: TransformerConfig
    precision: Precision
    fuse: bool
    fused_attention: bool
    tp: int
    pp: int
    _cache: OrderedDict[tuple[Any, ...], Any]
    #: the checkpoint's stored weight format (graphs/quantization.py), applied to every graph
    weight_format: Any = None
    #: decode attention reads the KV cache once per query head (ServingFactors)
    kv_per_query_head: bool = False

    @property
    def moe(self) -> bool:
        return self.cfg.n_experts > 0

    def graph(self, phase: str, *, seq_len: int = 1, context: int = 0, batch: int | None = None,
              logits: str | None = None, compressed: bool = True) -> Any:
        key = (phase, seq_len, context, batch if self.moe else None, logits, compressed)
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        cfg = self.cfg
        if phase == "decode" and cfg.max_positions and context > cfg.max_positions:
            cfg = replace(cfg, max_positions=0)  # reference contexts only; caller checks limits
        g = transformer_graph(cfg, self.precision, phase=phase, seq_len=seq_len,
                              context=context, fused_attention=self.fused_attention,
                              batch=batch if self.moe else None, logits=logits)
        if self.weight_format is not None:
            g = self.weight_format.apply(g)
        if self.kv_per_query_head and phase == "decode":
            g = kv_read_per_query_head(g, cfg.n_heads // cfg.n_kv_heads)
        if self.fuse:
            from ...graphs.fusion import fuse_epilogues

            g = fuse_epilogues(g)
        out: Any = compress(g, _op_windows(cfg, g.names)) if compressed else g
        self._cache[key] = out
        if len(self._cache) > 256:
            self._cache.popitem(last=False)
        return out

    def prefill_times(self, hw: Hardware, eff: Efficiency, batch: int, seq_len: int,
                      context: int = 0, logits: str | None = None) -> PhaseTimes:
        key = ("P", spec_key(hw), eff, batch, seq_len, context, logits)
        hit = self._cache.get(key)
        if hit is None:
            c = self.graph("prefill", seq_len=seq_len, context=context, batch=batch,
                           logits=logits)
            hit = price_static(c, hw, eff, batch)
            self._cache[key] = hit
        return hit

    def lines(self, hw: Hardware, eff: Efficiency, batch: int, phase: str = "decode",
              seq_len: int = 1, logits: str | None = None) -> DecodeLines:
        """Per-step costs as lines in the context S (decode; or prefill/verify of ``seq_len``
        tokens over a cached prefix S)."""
        key = ("L", spec_key(hw), eff, batch, phase, seq_len, logits)
        hit = self._cache.get(key)
        if hit is None:
            c1 = self.graph(phase, seq_len=seq_len, context=1, batch=batch, logits=logits)
            c2 = self.graph(phase, seq_len=seq_len, context=2, batch=batch, logits=logits)
            hit = DecodeLines(c1, c2, hw, eff, batch)
            self._cache[key] = hit
        return hit

    def live_activations(self, batch: int, seq_len: int, context: int) -> float:
        key = ("A", batch, seq_len, context)
        hit = self._cache.get(key)
        if hit is None:
            c = self.graph("prefill", seq_len=seq_len, context=context, batch=batch)
            hit = float(c.graph.live_activation_bytes(batch))
            self._cache[key] = hit
        return hit

    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes per token on one device (every layer at every token)."""
        return self.cfg.kv_bytes_per_token(self.precision.kv_bytes)

    def kv_bytes_per_sequence(self, tokens: Any, kv_window: str = "ring") -> Any:
        """KV cache one sequence holds on one device at ``tokens`` tokens (number or array).

        ``kv_window="ring"``: sliding-window layers hold at most their window
        (``TransformerConfig.kv_bytes_per_sequence``); ``"full"``: every layer holds every
        token (``tokens × kv_bytes_per_token``, engines that store windowed layers like global
        ones). With pp > 1 the stages hold different layers — for Gemma 2 with 21 layers per
        stage one stage has 11 global layers, the other 10 — so the footprint is that of the
        stage holding the most; the weights are those of the priced stage (the one with the
        embedding and LM head), so the per-device sum is an upper bound on every device.
        """
        check_kv_window(kv_window)
        kvb = self.precision.kv_bytes
        if kv_window == "full" or self.full.sliding_window is None:
            return tokens * self.cfg.kv_bytes_per_token(kvb) + self.cfg.cross_kv_bytes(kvb)
        if self.pp == 1:
            return self.cfg.kv_bytes_per_sequence(tokens, kvb)
        tp_cfg = shard_config(self.full, self.tp, 1)  # KV heads per device, all L layers
        L, per = self.full.n_layers, self.cfg.n_layers  # ⌈L/pp⌉ layers per stage
        stages = [range(lo, min(L, lo + per)) for lo in range(0, L, per)]
        return np.max([tp_cfg.kv_bytes_per_sequence(tokens, kvb, layers=r) for r in stages],
                      axis=0)


_PLANS: OrderedDict[tuple[Any, ...], Plan] = OrderedDict()


def device_plan(cfg: TransformerConfig, p: Precision, *, tp: int, pp: int, fuse: bool,
             fused_attention: bool, weight_format: Any = None, ep: int = 1,
             kv_per_query_head: bool = False) -> Plan:
    """The plan of one device of a tp × pp (× ep) replica. ``ep`` > 1: expert parallelism
    with data-parallel attention — ep groups of tp × pp devices, each serving its share of the
    sequences with the dense weights replicated, the routed experts split among the groups
    (``TransformerConfig.expert_groups``)."""
    key = (cfg, p, tp, pp, fuse, fused_attention, weight_format, ep, kv_per_query_head)
    pl = _PLANS.get(key)
    if pl is None:
        dev = shard_config(cfg, tp, pp, ep)
        if ep > 1:
            dev = replace(dev, expert_groups=ep)
        pl = Plan(cfg=dev, full=cfg, precision=p, fuse=fuse,
                  fused_attention=fused_attention, tp=tp, pp=pp, _cache=OrderedDict(),
                  weight_format=weight_format, kv_per_query_head=kv_per_query_head)
        _PLANS[key] = pl
        if len(_PLANS) > 64:
            _PLANS.popitem(last=False)
    return pl


# -- pricing -----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PhaseTimes:
    total: float  #: s, with efficiencies and launch overhead
    kernel: float  #: s, kernels only (efficiencies, no launch)
    bound: float  #: s, pure roofline Σ max(flops/peak, bytes/bw)
    flops: float
    bytes: float


def price_static(c: Compressed, hw: Hardware, eff: Efficiency, batch: float) -> PhaseTimes:
    """One pass of a compressed graph (prefill, verify) at ``batch``: the time model's per-op
    times weighted by the ops' multiplicities."""
    ot = time_model(c.graph, hw, eff).evaluate(batch)
    w = c.counts
    return PhaseTimes(float(w @ ot.time), float(w @ ot.t_kernel), float(w @ ot.t_bound),
                      float(w @ ot.flops), float(w @ ot.bytes))


class DecodeLines:
    """A decode step at one batch as a function of the context S: the time model's per-op
    lines in S (``engine.lines.op_lines``, from the steps at S = 1 and 2), summed over S by the
    engine's one sum-of-max helper (``sum_max_int``).

    Ops whose time does not depend on S are summed once into ``const``; for the others the
    per-op lines of each row (time, kernel, bound, flops, bytes) are kept as Python floats
    (there are 1-3 of them), with the op's count and sliding window.
    """

    __slots__ = ("const", "dep")

    def __init__(self, c1: Compressed, c2: Compressed, hw: Hardware, eff: Efficiency,
                 batch: float) -> None:
        u = len(c1.graph)
        tm = time_model(concat([c1.graph, c2.graph]), hw, eff)
        ot = tm.evaluate(batch)
        lines = op_lines(tm.select(ot, slice(0, u)), tm.select(ot, slice(u, 2 * u)),
                         tm.gap, tm.sync, tm.has[:u])
        dep = lines.depends
        w = c1.counts
        keys = {"total": "time", "kernel": "kernel", "bound": "bound", "flops": "flops",
                "bytes": "bytes"}
        self.const = {}
        self.dep: list[tuple[float, float, dict[str, tuple[tuple[float, float], ...]]]] = []
        for k, row in keys.items():
            a, b = getattr(lines, row)
            self.const[k] = float(w[~dep] @ max_at(a[:, ~dep], b[:, ~dep], 1.0))
        for i in np.flatnonzero(dep):
            per = {k: tuple(zip(getattr(lines, row)[0][:, i].tolist(),
                                getattr(lines, row)[1][:, i].tolist()))
                   for k, row in keys.items()}
            self.dep.append((float(w[i]), float(c1.window[i]), per))

    def step(self, S: float) -> dict[str, float]:
        """One decode step at context S."""
        return self.total(S, S)

    def total(self, lo: float, hi: float) -> dict[str, float]:
        """Σ over S = lo … hi (integers) of the step: exact, in closed form. A windowed op's
        costs stop growing at its window W: S > W prices as S = W."""
        n = max(hi - lo + 1, 0)
        out = {k: v * n for k, v in self.const.items()}
        for c, W, per in self.dep:
            hi_a = min(hi, W)
            n_flat = max(hi - max(lo - 1, W), 0.0)
            Wf = W if math.isfinite(W) else 0.0
            for key, lines in per.items():
                v = sum_max_lines(lines, lo, hi_a)
                if n_flat:
                    v += n_flat * max(a + b * Wf for a, b in lines)
                out[key] += c * v
        return out


_EFF: dict[tuple[Any, ...], Efficiency] = {}


def efficiency(hw: Hardware, preset: str, factors: ServingFactors, dtype: str) -> Efficiency:
    """The preset's factors on ``hw`` with the engine's launch model (cached on the values that
    enter it: the device's content, the preset, the engine profile, the dtype and the
    ``register_efficiency`` epoch: a table registered for ``hw`` after a first serve applies)."""
    key = (spec_key(hw), preset, factors, dtype, registered_epoch())
    e = _EFF.get(key)
    if e is None:
        # the engine profiles were fitted on the smooth matmul model: no waves of tiles here
        kernel = resolve_kernel(hw, factors.attention_kernel, factors.name)
        base = without_tiles(efficiency_for(hw, preset, kernel))
        e = base if preset == "bound" else factors.efficiency(base, dtype)
        make_room(_EFF, 256)
        _EFF[key] = e
    return e


def nan_times() -> PhaseTimes:
    return PhaseTimes(math.nan, math.nan, math.nan, math.nan, math.nan)
