"""LLM serving: prefill, every decode step, and the request rate a deployment sustains.

``serve(model, hardware, batch=, prompt_len=, output_len=)`` prices a *static batch*: the B
prompts are prefilled together (TTFT), then ``output_len − 1`` decode steps run at contexts
S = P+1 … P+n−1 (the first output token comes from the prefill). The decode steps are summed
in closed form (see ``_serving_plan``), so a 32k-token generation costs the same as one step.

Conventions
- ``tpot`` is the mean decode-step time over the generation; ``e2e_latency = ttft + (n−1)·tpot``;
  ``tokens_per_s = B·n / e2e_latency`` counts output tokens of the whole deployment
  (``tokens_per_s_per_device`` divides by tp·pp devices).
- Continuous batching at concurrency C = batch (``steady_*`` fields): requests are at
  uniformly spread positions of their generation, so the mean step costs the mean over the
  contexts; every step also absorbs C/n new prefills (one request each, batch 1), which stall
  decoding: ``steady_tpot = tpot + (C/n)·ttft(batch 1)``.
- Tensor parallelism: Megatron split (``_serving_plan.shard_config``) and 2 all-reduces per
  layer (+1 for the vocabulary-parallel embedding) of B·T·D activations over the hardware's
  ``scale_up_link`` (bytes/s per direction per device), each priced by ``allreduce_time``: one
  latency per collective call (not per ring step) and the faster of a one-shot and a two-shot
  custom all-reduce, or NCCL, per the engine profile.
- Pipeline parallelism: ⌈L/pp⌉ layers per device; a step crosses the pp stages in turn, each
  running a micro-batch of ⌈B/pp⌉ while the others work on the rest:
  step = pp · t_stage(⌈B/pp⌉) + (pp−1) · send(B/pp·T·D).
- ``preset="mlsysim"`` reproduces mlsysim 0.1.1's ServingModel (TTFT, ITL, KV) and its
  Engine.solve decode step as ``.decode`` (docs/mlsysim-conventions.md §4).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from .. import _args as A
from ..engine.presets import check_preset
from ..engine.result import Result
from ..engine.solve import check_batch
from ..errors import SpecError
from ..graphs.model import Model, transformer_model
from ..graphs.model import model as resolve_model
from ..ops import collectives
from ..specs.dtypes import DTYPE_BYTES, PRECISION_ARG, Precision
from ..specs.dtypes import precision as make_precision
from ..specs.hardware import Hardware
from ..specs.hardware import hardware as resolve_hardware
from ..units import fmt_bytes, fmt_time
from . import _serving_plan as sp

__all__ = [
    "QUEUE_MODEL",
    "Capacity",
    "allreduce_time",
    "ServeResult",
    "expected_tokens_per_step",
    "serve",
    "serve_sweep",
    "serving_capacity",
]

QUEUE_MODEL = ("Poisson arrivals; the prefill queue is M/D/1 (deterministic service s = TTFT of "
               "one prompt at batch 1 + request overhead): wait = ρ·s / (2(1−ρ)), ρ = λ·s, plus "
               "half a decode step (the step in flight finishes first); decode concurrency by "
               "Little's law C = λ·(TTFT + (n−1)·TPOT), and decode steps stretch by 1/(1−ρ) "
               "because prefills take the device for a fraction ρ of the time")


def expected_tokens_per_step(acceptance: float, draft_len: int) -> float:
    """Speculative decoding: expected tokens per target step, (1 − α^(k+1)) / (1 − α)
    (Leviathan et al. 2023, eq. 1), with acceptance rate α and k drafted tokens."""
    if not 0 <= acceptance <= 1:
        raise SpecError(f"acceptance must be in [0, 1], got {acceptance!r}")
    if isinstance(draft_len, bool) or not isinstance(draft_len, int) or draft_len < 1:
        raise SpecError(f"draft_len must be a positive integer, got {draft_len!r}")
    if acceptance == 1:
        return float(draft_len + 1)
    return (1 - acceptance ** (draft_len + 1)) / (1 - acceptance)


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ServeResult:
    """One serving scenario: latencies, throughput, memory and why. SI units."""

    model: str
    hardware: str
    batch: int  #: concurrent requests (static batch / continuous-batching concurrency)
    prompt_len: int
    output_len: int
    precision: str
    preset: str
    engine: str
    #: KV layout of sliding-window layers: "ring" (hold at most the window), "full" (every
    #: token); "" when the model has no sliding-window layer (the layout changes nothing)
    kv_window: str = ""
    tp: int = 1
    pp: int = 1
    devices: int = 1
    ttft: float  #: s, time to first token (prefill of the batch, + KV transfer if disaggregated)
    tpot: float  #: s, mean time per output token after the first (inter-token latency)
    e2e_latency: float  #: s, ttft + (output_len − 1)·tpot
    tokens_per_s: float  #: output tokens/s of the deployment
    tokens_per_s_per_device: float
    steady_tpot: float = math.nan  #: s, continuous batching at concurrency=batch
    steady_tokens_per_s: float = math.nan  #: output tokens/s in that steady state
    mbu: float = math.nan  #: decode bytes / (decode time × bandwidth × devices)
    mfu: float = math.nan  #: all FLOPs / (e2e × peak × devices)
    kv_cache_bytes: float = math.nan  #: whole KV cache at the end of the generation (all devices)
    memory_breakdown: dict[str, float] = field(default_factory=dict)  #: per device, bytes
    memory_capacity: float = math.nan  #: per device, bytes
    max_batch: int = 0  #: largest batch whose memory fits
    feasible: bool = True
    reason: str = ""
    shares: dict[str, float] = field(default_factory=dict)  #: s of e2e per cause (sum = e2e)
    notes: tuple[str, ...] = ()
    _prefill: Any = field(default=None, repr=False)
    _decode: Any = field(default=None, repr=False)

    @property
    def prefill(self) -> Result:
        """The prefill pass as a roofline Result (per-op table ``.ops``), one device."""
        r = self._prefill
        return r() if callable(r) else r

    @property
    def decode(self) -> Result:
        """One decode step at the mean context of the generation, one device."""
        r = self._decode
        return r() if callable(r) else r

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        for k, v in d.items():
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        d["notes"] = list(self.notes)
        return d

    def __str__(self) -> str:
        head = (f"{self.model} on {self.devices}× {self.hardware} (tp {self.tp}, pp {self.pp}) — "
                f"batch {self.batch}, prompt {self.prompt_len}, output {self.output_len}, "
                f"{self.precision}, preset {self.preset}, engine {self.engine}")
        if not self.feasible and math.isnan(self.ttft):
            return f"{head}\n  cannot run — {self.reason}"
        lines = [
            head,
            f"  TTFT            {fmt_time(self.ttft)}",
            f"  TPOT            {fmt_time(self.tpot)} ({1 / self.tpot:,.1f} tokens/s per request)",
            f"  end to end      {fmt_time(self.e2e_latency)}",
            (f"  throughput      {self.tokens_per_s:,.0f} output tokens/s "
            f"({self.tokens_per_s_per_device:,.0f} per device)"),
            (f"  continuous      TPOT {fmt_time(self.steady_tpot)}, "
            f"{self.steady_tokens_per_s:,.0f} tokens/s at concurrency {self.batch}"),
            f"  utilisation     MBU {self.mbu:.1%} (decode), MFU {self.mfu:.1%}",
            f"  KV cache        {fmt_bytes(self.kv_cache_bytes)}" + (
                f" (kv_window {self.kv_window!r}: sliding-window layers hold "
                + ("their window)" if self.kv_window == "ring" else "every token)")
                if self.kv_window else ""),
            "  memory/device   " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in
                                              self.memory_breakdown.items())
            + f" of {fmt_bytes(self.memory_capacity)}; max batch {self.max_batch}"
            + ("" if self.feasible else f" — DOES NOT FIT: {self.reason}"),
        ]
        if self.shares:
            tot = sum(self.shares.values()) or 1.0
            lines.append("  where e2e goes  " + ", ".join(
                f"{k} {v / tot:.1%}" for k, v in self.shares.items() if v > 0))
        return "\n".join(lines)


# -- helpers -----------------------------------------------------------------------------------

def _pos_int(v: Any, name: str, zero_ok: bool = False) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < (0 if zero_ok else 1):
        raise SpecError(f"{name} must be a {'non-negative' if zero_ok else 'positive'} integer, "
                        f"got {v!r}")
    return int(v)


def _link(hw: Hardware) -> tuple[float, float]:
    lk = hw.scale_up_link or hw.host_link
    if lk is None:
        return math.nan, 0.0
    lat = lk.latency_s if math.isfinite(lk.latency_s) else 0.0
    return lk.bytes_per_s, lat


def allreduce_time(nbytes: float, tp: int, hw: Hardware, f: sp.ServingFactors) -> float:
    """Seconds for ONE tensor-parallel all-reduce of ``nbytes`` over ``tp`` devices.

    The latency is paid once per collective call, α(p) = allreduce_alpha +
    allreduce_alpha_per_rank·(p − 2), not once per ring step. With custom kernels (TensorRT-LLM,
    vLLM on NVLink/NVSwitch) the engine takes the faster of a one-shot all-reduce
    (α + (p−1)·n/bw', latency-optimal for decode-sized messages) and a two-shot one
    (2α + 2(p−1)/p·n/bw', bandwidth-optimal for prefill-sized ones); with NCCL it is
    α + 2(p−1)/p·n/bw' (ring bytes). bw' = scale-up link bandwidth per direction ×
    allreduce_efficiency. The spec's link latency, when given, is a floor on α.
    """
    if tp == 1 or nbytes == 0:
        return 0.0
    bw, lat = _link(hw)
    if not math.isfinite(bw):
        raise SpecError(f"tp={tp} needs a scale-up link on {hw.name}; its spec has none")
    alpha = max(lat, f.allreduce_alpha + f.allreduce_alpha_per_rank * (tp - 2))
    eff = f.allreduce_efficiency
    if f.allreduce_custom:
        return min(collectives.one_shot_all_reduce(nbytes, tp, bw, alpha, link_efficiency=eff),
                   collectives.two_shot_all_reduce(nbytes, tp, bw, alpha, link_efficiency=eff))
    return alpha + collectives.all_reduce(nbytes, tp, bw, 0.0, link_efficiency=eff)


def _allreduce(nbytes: float, tp: int, hw: Hardware, f: sp.ServingFactors, count: int) -> float:
    return count * allreduce_time(nbytes, tp, hw, f)


def _p2p(nbytes: float, pp: int, hw: Hardware, f: sp.ServingFactors) -> float:
    """(pp − 1) pipeline-stage sends of ``nbytes``: α_p2p + n / (bw·efficiency) each."""
    if pp == 1:
        return 0.0
    bw, lat = _link(hw)
    if not math.isfinite(bw):
        raise SpecError(f"pp={pp} needs a scale-up link on {hw.name}; its spec has none")
    return (pp - 1) * collectives.send_recv(nbytes, bw, max(lat, f.p2p_latency),
                                            link_efficiency=f.allreduce_efficiency)


_PREC: dict[tuple[Any, ...], Precision] = {}


def _precision(spec: Any, kv: Any, weights: Any, group_size: Any) -> Precision:
    """make_precision, memoised for string specs (a serve call is ~tens of µs)."""
    key = (spec, kv, weights, group_size)
    try:
        hit = _PREC.get(key)
    except TypeError:  # unhashable spec: no cache
        hit = None
    if hit is None:
        hit = make_precision(spec, kv=kv, weights=weights, group_size=group_size)
        if len(_PREC) < 1024:
            _PREC[key] = hit
    return hit


def _infeasible(base: dict[str, Any], reason: str, **kw: Any) -> ServeResult:
    nan = math.nan
    return ServeResult(**base, ttft=nan, tpot=nan, e2e_latency=nan, tokens_per_s=0.0,
                       tokens_per_s_per_device=0.0, feasible=False, reason=reason, **kw)


# -- serve ---------------------------------------------------------------------------------------

#: argument rules shared by serve, serving_capacity and serve_sweep
_TOK = A.count(1, A.MAX_TOKENS)
_DEG = A.count(1, A.MAX_DEVICES)
_ENGINE = A.either(A.text, A.instance_of(sp.ServingFactors, what="ServingFactors"),
                   what="a serving-engine name ('trtllm', 'vllm', ...) or ServingFactors")
_KVW = A.choice(*sp.KV_WINDOWS)
_OPT_DTYPE = A.optional(A.dtype)


@A.checked(model=A.anything, hardware=A.anything, batch=A.count(), prompt_len=_TOK,
           output_len=_TOK, precision=PRECISION_ARG, kv_precision=_OPT_DTYPE,
           weight_precision=_OPT_DTYPE, group_size=A.optional(A.count()), tp=_DEG, pp=_DEG,
           preset=A.text, engine=_ENGINE, fused_attention=A.flag,
           prefix_cached=A.count(0, A.MAX_TOKENS), chunk_size=A.optional(_TOK),
           draft=A.anything, draft_len=A.count(1, 1024), acceptance=A.real(0, 1, lo_open=False),
           decode_hardware=A.anything,
           kv_link_bytes_per_s=A.optional(A.real(0, 1e15, unit="B/s")), kv_window=_KVW)
def serve(model: Any, hardware: Any, *, batch: int = 1, prompt_len: int = 1024,
          output_len: int = 128, precision: str | Precision = "bf16",
          kv_precision: str | None = None, weight_precision: str | None = None,
          group_size: int | None = None, tp: int = 1, pp: int = 1, preset: str = "default",
          engine: str = "trtllm", fused_attention: bool = True, prefix_cached: int = 0,
          chunk_size: int | None = None, draft: Any = None, draft_len: int = 4,
          acceptance: float = 0.7, decode_hardware: Any = None,
          kv_link_bytes_per_s: float | None = None, kv_window: str = "ring") -> ServeResult:
    """Predict TTFT, TPOT, end-to-end latency and throughput of serving an LLM.

    ``precision`` sets the compute dtype (its tensor-core peak) and, by default, weights and
    activations; ``weight_precision`` ("int8", "int4", "fp8") and ``group_size`` quantise the
    weights (a 2-byte scale per group), ``kv_precision`` the KV cache. ``tp``/``pp``: tensor
    and pipeline parallel degrees. ``engine``: serving-engine factors from
    data/presets/serving.toml ("trtllm", "trtllm-legacy", "vllm", "eager").
    ``prefix_cached``: prompt tokens whose KV is already cached (prefix caching).
    ``chunk_size``: chunked prefill.
    ``draft``: a draft model for speculative decoding (``draft_len`` tokens, ``acceptance``
    rate). ``decode_hardware``: disaggregated serving — prefill on ``hardware``, decode there,
    the prompt's KV cache sent over ``kv_link_bytes_per_s`` (default: the prefill device's
    scale-up link).
    ``kv_window``: how the KV cache stores sliding-window layers (Mistral, Gemma 2's local
    layers): ``"ring"`` (default) keeps at most the window per such layer, as TensorRT-LLM,
    vLLM V1's hybrid KV-cache manager and Hugging Face's HybridCache do; ``"full"`` keeps
    every token in every layer, as vLLM with the hybrid manager disabled does (docs/serving.md,
    "Sliding-window layers"). Attention reads only the window either way.
    """
    kv_window = sp.check_kv_window(kv_window)
    m = resolve_model(model)
    hw = resolve_hardware(hardware)
    B = check_batch(batch)
    P = _pos_int(prompt_len, "prompt_len")
    n = _pos_int(output_len, "output_len")
    preset = check_preset(preset)
    cfg = m.config
    if cfg is None or cfg.arch != "decoder":
        raise SpecError(f"serve needs a decoder LLM; {m.name} is a {m.family} model")
    p = _precision(precision, kv_precision, weight_precision, group_size)
    pc = _pos_int(prefix_cached, "prefix_cached", zero_ok=True)
    if pc >= P:
        raise SpecError(f"prefix_cached={pc} must be smaller than prompt_len={P}")
    factors = sp.NEUTRAL if preset == "bound" else sp.serving_factors(engine)
    hw_d = hw if decode_hardware is None else resolve_hardware(decode_hardware)
    base = {"model": m.name, "hardware": hw.name if hw_d is hw else f"{hw.name} → {hw_d.name}",
                "batch": B, "prompt_len": P, "output_len": n, "precision": p.label,
                "preset": preset, "engine": factors.name,
                "kv_window": kv_window if cfg.sliding_window is not None else "",
                "tp": tp, "pp": pp, "devices": tp * pp * (1 if hw_d is hw else 2)}
    S_end = P + n - 1  # context of the last decode step
    if cfg.max_positions and P + n > cfg.max_positions + 1:
        return _infeasible(base, f"prompt_len + output_len = {P + n} tokens exceed "
                           f"max_position_embeddings={cfg.max_positions} of {m.name}")
    for h in {hw.key: hw, hw_d.key: hw_d}.values():
        if not h.has(p.compute):
            return _infeasible(base, f"{h.name} has no {p.compute} peak; it has "
                               f"{', '.join(h.dtypes)}")
    if preset == "mlsysim":  # mlsysim's convention: every layer holds every token
        return _serve_mlsysim(m, hw, {**base, "kv_window": "full" if base["kv_window"] else ""},
                              B, P, n, p)
    plan = sp.plan_for(cfg, p, tp=tp, pp=pp, fuse=factors.fuse, fused_attention=fused_attention)
    eff = sp.efficiency(hw, preset, factors, p.compute)
    eff_d = eff if hw_d is hw else sp.efficiency(hw_d, preset, factors, p.compute)
    D = cfg.d_model
    ab = p.act_bytes
    L_dev = plan.cfg.n_layers
    n_ar = 2 * L_dev + 1

    # -- prefill (batch B, all stages in turn for pp > 1)
    Bm = -(-B // pp)  # micro-batch per stage
    T_new = P - pc
    if chunk_size is None or chunk_size >= T_new:
        pre = plan.prefill_times(hw, eff, B, T_new, pc)
        pre_comm = _allreduce(B * T_new * D * ab, tp, hw, factors, n_ar) + \
            _p2p(B * T_new * D * ab, pp, hw, factors)
        pre_parts = (pre.bound * pp, pre.kernel * pp, pre.total * pp)
        pre_flops, _pre_bytes = pre.flops * pp, pre.bytes * pp
    else:
        c = _pos_int(chunk_size, "chunk_size")
        k_full, rest = divmod(T_new, c)
        cl = plan.lines(hw, eff, B, phase="prefill", seq_len=c)
        # chunk i has a cached prefix of pc + i·c tokens: sum over those prefixes
        tot = {k: 0.0 for k in ("total", "kernel", "bound", "flops", "bytes")}
        for i in range(k_full):
            for k, v in cl.step(pc + i * c).items():
                tot[k] += v
        if rest:
            r = plan.prefill_times(hw, eff, B, rest, pc + k_full * c)
            for k, v in (("total", r.total), ("kernel", r.kernel), ("bound", r.bound),
                         ("flops", r.flops), ("bytes", r.bytes)):
                tot[k] += v
        n_chunks = k_full + (1 if rest else 0)
        pre_comm = n_chunks * (_allreduce(B * c * D * ab, tp, hw, factors, n_ar) +
                               _p2p(B * c * D * ab, pp, hw, factors))
        pre_parts = (tot["bound"] * pp, tot["kernel"] * pp, tot["total"] * pp)
        pre_flops, _pre_bytes = tot["flops"] * pp, tot["bytes"] * pp
    kv_transfer = 0.0
    if hw_d is not hw:
        bw = kv_link_bytes_per_s or _link(hw)[0]
        if not (bw and math.isfinite(bw) and bw > 0):
            raise SpecError("disaggregated serving needs kv_link_bytes_per_s (no scale-up link "
                            f"on {hw.name})")
        # the prompt's KV as the prefill device holds it (windowed layers: the window only)
        kv_transfer = B * float(plan.kv_bytes_per_sequence(P, kv_window)) / bw
    req_fixed = factors.request_overhead + factors.layer_overhead * L_dev * pp
    ttft = pre_parts[2] + pre_comm + req_fixed + kv_transfer

    # -- decode steps S = P+1 … P+n−1 (closed form)
    steps = n - 1
    lines = plan.lines(hw_d, eff_d, Bm)
    S_mean = P + n / 2.0
    dec_comm_step = (_allreduce(Bm * D * ab, tp, hw_d, factors, n_ar) +
                     _p2p(Bm * D * ab, pp, hw_d, factors))
    notes: list[str] = []
    if steps > 0:
        dec = {k: v * pp for k, v in lines.total(P + 1, S_end).items()}
    else:
        dec = {"total": 0.0, "kernel": 0.0, "bound": 0.0, "flops": 0.0, "bytes": 0.0}
    dec_comm = steps * dec_comm_step
    step_fixed = factors.step_overhead + factors.layer_overhead * L_dev * pp
    dec_over = steps * step_fixed
    decode_time = dec["total"] + dec_comm + dec_over
    spec_note = None
    if draft is not None and steps > 0:
        decode_time, dec, spec_note = _speculative(
            draft, cfg, plan, p, hw_d, eff_d, factors, Bm, P, S_end, steps, draft_len,
            acceptance, pp, tp, dec_comm_step, fused_attention)
        dec_comm = dec.pop("comm")
        dec_over = dec.pop("overhead")
        notes.append(spec_note)
    tpot = decode_time / steps if steps else 0.0
    e2e = ttft + decode_time
    devices = base["devices"]
    tokens_per_s = B * n / e2e

    # -- continuous batching steady state at concurrency B
    single = pre_parts[2] if B == 1 or pre_parts[2] != pre_parts[2] else \
        plan.prefill_times(hw, eff, 1, T_new, pc).total * pp
    steady_tpot = (tpot if steps else 0.0) + (B / n) * (single + req_fixed)
    steady_tps = B / steady_tpot if steady_tpot > 0 else math.nan

    # -- memory (per device)
    cg = plan.graph("prefill", seq_len=min(T_new, chunk_size or T_new), context=pc, batch=B)
    weights = cg.graph.weight_footprint_bytes
    act = plan.live_activations(B, min(T_new, chunk_size or T_new), pc)
    kv_seq_dev = float(plan.kv_bytes_per_sequence(P + n, kv_window))  # one sequence, 1 device
    # every stage keeps its layers' KV for all B sequences (each micro-batch passes every stage)
    kv_dev = B * kv_seq_dev
    ws = eff.workspace
    breakdown = {"weights": weights, "kv_cache": kv_dev, "activations": act, "workspace": ws}
    cap = hw.memory_capacity_bytes
    if hw_d is not hw:
        cap = min(cap, hw_d.memory_capacity_bytes)
    footprint = sum(breakdown.values())
    per_seq = kv_seq_dev + (act / B if B else 0.0)
    max_batch = int(max(0.0, (cap - weights - ws) // per_seq)) if per_seq > 0 else 0
    feasible = footprint <= cap
    reason = "" if feasible else (
        f"needs {footprint / 1e9:,.2f} GB per device (weights {weights / 1e9:,.2f}, KV "
        f"{kv_dev / 1e9:,.2f}, activations {act / 1e9:,.2f}, workspace {ws / 1e9:,.2f}) but "
        f"{hw.name} has {cap / 1e9:,.2f} GB; the largest batch that fits is {max_batch}")
    kv_total = B * float(cfg.kv_bytes_per_sequence(P + n, p.kv_bytes) if kv_window == "ring"
                         else (P + n) * cfg.kv_bytes_per_token(p.kv_bytes))

    peak = hw_d.peak(p.compute)
    dec_dev_time = dec["total"] if dec["total"] else math.nan
    mbu = dec["bytes"] / (dec_dev_time * hw_d.memory_bytes_per_s) if steps else math.nan
    mfu = (pre_flops + dec["flops"]) / (e2e * peak * pp) if e2e > 0 else math.nan

    shares = {
        "roofline": pre_parts[0] + dec["bound"],
        "efficiency": (pre_parts[1] - pre_parts[0]) + (dec["kernel"] - dec["bound"]),
        "launch": (pre_parts[2] - pre_parts[1]) + (dec["total"] - dec["kernel"]),
        "step_overhead": dec_over + req_fixed,
        "tp_comm": (pre_comm + dec_comm) if tp > 1 else 0.0,
        "pp_comm": 0.0,
        "kv_transfer": kv_transfer,
    }
    if pp > 1:  # split the comm into its TP and PP parts
        ppc = (_p2p(B * T_new * D * ab, pp, hw, factors) +
               steps * _p2p(Bm * D * ab, pp, hw_d, factors))
        shares["pp_comm"] = ppc
        shares["tp_comm"] = pre_comm + dec_comm - ppc
    if tp > cfg.n_kv_heads and not cfg.mla:
        notes.append(f"tp={tp} > {cfg.n_kv_heads} KV heads: each KV head is replicated on "
                     f"{tp // cfg.n_kv_heads} devices")

    sh = plan  # closures for the lazy per-op Results

    def _pre() -> Result:
        return _phase_result(m, sh, hw, eff, preset, "prefill", B, T_new, pc)

    def _dec() -> Result:
        return _phase_result(m, sh, hw_d, eff_d, preset, "decode", Bm, 1, round(S_mean))

    return ServeResult(
        **base, ttft=ttft, tpot=tpot, e2e_latency=e2e, tokens_per_s=tokens_per_s,
        tokens_per_s_per_device=tokens_per_s / devices, steady_tpot=steady_tpot,
        steady_tokens_per_s=steady_tps, mbu=mbu, mfu=mfu, kv_cache_bytes=kv_total,
        memory_breakdown=breakdown, memory_capacity=cap, max_batch=max_batch,
        feasible=feasible, reason=reason, shares=shares, notes=tuple(notes),
        _prefill=_pre, _decode=_dec)


def _phase_result(m: Model, plan: sp.Plan, hw: Hardware, eff: Any, preset: str, phase: str,
                  B: int, T: int, context: int) -> Result:
    """The per-op Result of one phase on one device: the engine's pricing of the full graph
    (as ``solve`` does it, with the serving engine's launch model)."""
    from ..engine.core import plan_for
    from ..engine.result import OpTableSource
    from ..engine.solve import _result

    g = plan.graph(phase, seq_len=T, context=context, batch=B, compressed=False)
    ep = plan_for(g, hw, eff)
    W, cb = ep.evaluate(B)
    (latency, latency_bound, t_compute, t_memory, overhead, flops, byts, t_cb,
     live) = ep.totals(W)
    parts = {"compute": t_cb, "memory": latency - overhead - t_cb, "overhead": overhead}
    dev_model = m if plan.cfg is plan.full else transformer_model(
        plan.cfg, key=m.key, name=f"{m.name} (one of tp={plan.tp} × pp={plan.pp} devices)")
    return _result(dev_model, hw, g, B, plan.precision, preset, phase, latency=latency,
                   latency_bound=latency_bound, t_compute=t_compute, t_memory=t_memory,
                   t_overhead=overhead, bottleneck=max(parts, key=parts.__getitem__),
                   flops=flops, byts=byts,
                   ridge_eff=hw.peak(plan.precision.compute)
                   * eff.gemm_model(plan.precision.compute)[0] /
                   (hw.memory_bytes_per_s * eff.memory_max), workspace=eff.workspace,
                   ops=OpTableSource(g, W, cb, B, latency, ep), seq_len=T,
                   context=context if phase == "decode" else (context or None), live=live)


def _speculative(draft: Any, cfg: Any, plan: sp.Plan, p: Precision, hw: Hardware, eff: Any,
                 factors: sp.ServingFactors, Bm: int, P: int, S_end: int, steps: int, k: int,
                 alpha: float, pp: int, tp: int, comm_step: float,
                 fused_attention: bool) -> tuple[float, dict[str, float], str]:
    """Speculative decoding: per iteration k draft decode steps + one target verification of
    k+1 tokens over the cache; E = (1−α^(k+1))/(1−α) tokens per iteration. Costs are affine in
    the context, so the generation costs (steps/E) iterations at the mean context."""
    dm = resolve_model(draft)
    if dm.config is None or dm.config.arch != "decoder":
        raise SpecError(f"draft must be a decoder LLM, got {dm.name}")
    if dm.config.vocab != cfg.vocab:
        raise SpecError(f"draft {dm.name} has vocab_size={dm.config.vocab}, the target has "
                        f"{cfg.vocab}: speculative decoding needs a shared vocabulary")
    E = expected_tokens_per_step(alpha, k)
    dplan = sp.plan_for(dm.config, p, tp=1, pp=1, fuse=plan.fuse, fused_attention=fused_attention)
    lo, hi = P + 1, S_end
    dd = dplan.lines(hw, eff, Bm).total(lo, hi)
    vv = plan.lines(hw, eff, Bm, phase="prefill", seq_len=k + 1, logits="all").total(lo, hi)
    iters = steps / E
    # means over the contexts, times the number of iterations
    per = {q: (k * float(dd[q]) + float(vv[q]) * pp) / steps for q in dd}
    dec = {q: per[q] * iters for q in per}
    D, ab = cfg.d_model, p.act_bytes
    n_ar = 2 * plan.cfg.n_layers + 1
    comm = iters * (_allreduce(Bm * (k + 1) * D * ab, tp, hw, factors, n_ar) +
                    _p2p(Bm * (k + 1) * D * ab, pp, hw, factors))
    # fixed costs per iteration: k draft steps (the draft's layers) + one verification (the
    # target's layers on each of the pp stages), each a step with its per-layer cost
    over = iters * (k * (factors.step_overhead + factors.layer_overhead * dm.config.n_layers) +
                    factors.step_overhead + factors.layer_overhead * plan.cfg.n_layers * pp)
    dec["comm"] = comm
    dec["overhead"] = over
    note = (f"speculative decoding with {dm.name}: k={k}, acceptance {alpha:g} -> "
            f"{E:.3f} tokens per target step")
    return dec["total"] + comm + over, dec, note


# -- mlsysim conventions -----------------------------------------------------------------------

def _serve_mlsysim(m: Model, hw: Hardware, base: dict[str, Any], B: int, P: int, n: int,
                   p: Precision) -> ServeResult:
    """mlsysim 0.1.1 ServingModel.solve (docs/mlsysim-conventions.md §4), seq_len = prompt_len."""
    from ..engine.mlsysim import conventions, mlsysim_device, mlsysim_model
    from ..engine.solve import solve

    cfg = m.config
    assert cfg is not None
    c = conventions()
    dev = mlsysim_device(hw)
    agg = mlsysim_model(m)
    peak = dev.peak(p.compute, hw)
    if math.isnan(peak):
        peak = hw.peak(p.compute)
    bpp = DTYPE_BYTES[p.weights]
    L, N = cfg.n_layers, cfg.n_heads
    hd = cfg.d_model // N
    S = P
    pre_flops = 2 * agg.params * S * B + 4 * L * N * hd * S * S * B
    ttft = pre_flops / (peak * c["efficiency"]) + dev.dispatch_tax
    kv = 2 * L * cfg.n_kv_heads * hd * S * B * bpp
    W = agg.params * bpp
    itl = (W + kv) / dev.bandwidth + L * c["layer_tax"]
    e2e = ttft + (n - 1) * itl
    cap = hw.memory_capacity_bytes
    feasible = W + kv <= cap
    tps = B * n / e2e
    dec = solve(m, hw, batch=B, precision=p, preset="mlsysim", phase="decode")
    return ServeResult(
        **base, ttft=ttft, tpot=itl, e2e_latency=e2e, tokens_per_s=tps,
        tokens_per_s_per_device=tps, steady_tpot=itl, steady_tokens_per_s=B / itl,
        mbu=(W + kv) / (itl * dev.bandwidth), mfu=(pre_flops + (n - 1) * 2 * agg.params * B) /
        (e2e * peak), kv_cache_bytes=kv, memory_breakdown={"weights": W, "kv_cache": kv},
        memory_capacity=cap, max_batch=int((cap - W) // (kv / B)) if kv else 0,
        feasible=feasible, reason="" if feasible else "weights + KV exceed capacity",
        shares={"compute (TTFT)": ttft, "memory (ITL)": (n - 1) * itl},
        notes=(("mlsysim ServingModel conventions: TTFT compute-only with non-causal S² "
               "attention, ITL memory-only with the whole KV cache read each step"),),
        _prefill=None, _decode=dec)


# -- capacity ----------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    """The highest request rate meeting the SLOs, and the state it runs in."""

    rate_per_s: float  #: requests/s
    concurrency: float  #: mean requests in decode (Little's law)
    ttft: float  #: s, mean TTFT at that rate (queueing included)
    tpot: float  #: s, mean TPOT at that rate
    tokens_per_s: float  #: output tokens/s
    limited_by: str  #: "ttft", "tpot", "memory" or "none"
    queue_model: str = QUEUE_MODEL

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@A.checked(model=A.anything, hardware=A.anything, prompt_len=_TOK, output_len=_TOK,
           ttft_slo=A.real(0, 1e6, unit="s"), tpot_slo=A.real(0, 1e6, unit="s"),
           precision=PRECISION_ARG, kv_precision=_OPT_DTYPE, weight_precision=_OPT_DTYPE,
           tp=_DEG, preset=A.text, engine=_ENGINE, kv_window=_KVW)
def serving_capacity(model: Any, hardware: Any, *, prompt_len: int, output_len: int,
                     ttft_slo: float, tpot_slo: float, precision: str = "bf16",
                     kv_precision: str | None = None, weight_precision: str | None = None,
                     tp: int = 1, preset: str = "default", engine: str = "trtllm",
                     kv_window: str = "ring") -> Capacity:
    """Highest Poisson request rate whose mean TTFT and TPOT meet the SLOs (``QUEUE_MODEL``).
    ``kv_window``: KV layout of sliding-window layers, as in ``serve``."""
    for nm, v in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo)):
        if not (isinstance(v, int | float) and v > 0):
            raise SpecError(f"{nm} must be > 0 seconds, got {v!r}")
    one = serve(model, hardware, batch=1, prompt_len=prompt_len, output_len=output_len,
                precision=precision, kv_precision=kv_precision, weight_precision=weight_precision,
                tp=tp, preset=preset, engine=engine, kv_window=kv_window)
    if not one.feasible and math.isnan(one.ttft):
        raise SpecError(f"cannot serve at all: {one.reason}")
    s = one.ttft  # prefill of one prompt + request overhead
    n = output_len
    cmax = max(one.max_batch, 0)
    step_cache: dict[int, float] = {}

    def step(C: float) -> float:
        c = max(1, min(math.ceil(C), max(cmax, 1)))
        if c not in step_cache:
            r = serve(model, hardware, batch=c, prompt_len=prompt_len, output_len=output_len,
                      precision=precision, kv_precision=kv_precision,
                      weight_precision=weight_precision, tp=tp, preset=preset, engine=engine,
                      kv_window=kv_window)
            step_cache[c] = r.tpot
        return step_cache[c]

    def state(lam: float) -> tuple[float, float, float, bool]:
        rho = lam * s
        if rho >= 1:
            return math.inf, math.inf, math.inf, False
        tpot = step(1) / (1 - rho)
        C = 1.0
        for _ in range(50):
            ttft = s + rho * s / (2 * (1 - rho)) + step(C) / 2
            C_new = lam * (ttft + (n - 1) * tpot)
            tpot = step(C_new) / (1 - rho)
            if abs(C_new - C) < 1e-3 * max(C, 1):
                C = C_new
                break
            C = C_new
        ttft = s + rho * s / (2 * (1 - rho)) + step(C) / 2
        return ttft, tpot, C, C <= max(cmax, 0)

    def ok(lam: float) -> tuple[bool, str]:
        ttft, tpot, _C, fits = state(lam)
        if not fits:
            return False, "memory"
        if ttft > ttft_slo:
            return False, "ttft"
        if tpot > tpot_slo:
            return False, "tpot"
        return True, "none"

    good, why0 = ok(1e-9)
    if not good:
        return Capacity(rate_per_s=0.0, concurrency=0.0, ttft=one.ttft, tpot=one.tpot,
                        tokens_per_s=0.0, limited_by=why0)
    lo, hi = 0.0, 1.0 / s
    why = "none"
    for _ in range(60):
        mid = (lo + hi) / 2
        g, w = ok(mid)
        if g:
            lo = mid
        else:
            hi, why = mid, w
    ttft, tpot, C, _ = state(lo)
    return Capacity(rate_per_s=lo, concurrency=C, ttft=ttft, tpot=tpot,
                    tokens_per_s=lo * output_len, limited_by=why)


# -- vectorised sweep --------------------------------------------------------------------------

@A.checked(model=A.anything, hardware=A.anything,
           batch=A.seq(A.count(), scalar=True, what="positive integers",
                       ints=(1, A.MAX_COUNT)),
           context=A.seq(_TOK, scalar=True, what="positive integers",
                         ints=(1, A.MAX_TOKENS)),
           precision=A.seq(PRECISION_ARG, scalar=True, what="dtype names or Precisions"),
           kv_precision=_OPT_DTYPE, tp=_DEG, preset=A.text, engine=_ENGINE, kv_window=_KVW)
def serve_sweep(model: Any, hardware: Any, *, batch: Any, context: Any,
                precision: Any = ("bf16",), kv_precision: str | None = None, tp: int = 1,
                preset: str = "default", engine: str = "trtllm",
                kv_window: str = "ring") -> dict[str, np.ndarray]:
    """Decode-step time (TPOT at a context), decode throughput and memory fit over a grid
    hardware × precision × batch × context, vectorised (one engine call per precision).

    Returns arrays shaped [hardware, precision, batch, context]: ``tpot`` (s), ``tokens_per_s``
    (= batch / tpot, per deployment), ``fits`` (weights + KV + workspace ≤ capacity) and
    ``kv_cache_bytes`` (per device; sliding-window layers per ``kv_window``, as in ``serve``),
    plus the axes. Dense models only (MoE graphs are built per batch; use ``serve``).
    """
    kv_window = sp.check_kv_window(kv_window)
    m = resolve_model(model)
    cfg = m.config
    if cfg is None or cfg.arch != "decoder":
        raise SpecError(f"serve_sweep needs a decoder LLM; {m.name} is a {m.family} model")
    if cfg.n_experts:
        raise SpecError(f"serve_sweep prices dense models; {m.name} is a mixture of experts "
                        "(its weight traffic depends on the batch): call serve per batch")
    preset = check_preset(preset)
    if preset == "mlsysim":
        raise SpecError("serve_sweep supports preset 'default' or 'bound'")
    hws = [resolve_hardware(h) for h in (hardware if isinstance(hardware, list | tuple)
                                         else [hardware])]
    precs = [precision] if isinstance(precision, str | Precision) else list(precision)
    Bs = np.asarray(batch, dtype=np.float64).ravel()
    Ss = np.asarray(context, dtype=np.float64).ravel()
    if (Bs < 1).any() or (Ss < 1).any():
        raise SpecError("batch and context values must be >= 1")
    factors = sp.NEUTRAL if preset == "bound" else sp.serving_factors(engine)
    out_t = np.full((len(hws), len(precs), len(Bs), len(Ss)), np.nan)
    fits = np.zeros(out_t.shape, dtype=bool)
    kvb = np.zeros(out_t.shape)
    from ..engine.core import price

    for j, pr in enumerate(precs):
        p = make_precision(pr, kv=kv_precision)
        plan = sp.plan_for(cfg, p, tp=tp, pp=1, fuse=factors.fuse, fused_attention=True)
        c1 = plan.graph("decode", context=1)
        c2 = plan.graph("decode", context=2)
        g = sp.concat([c1.graph, c2.graph])
        ok_hw = [i for i, h in enumerate(hws) if h.has(p.compute)]
        if not ok_hw:
            continue
        hsel = [hws[i] for i in ok_hw]
        effs = [sp.efficiency(h, preset, factors, p.compute) for h in hsel]
        arr = price(g, hsel, effs, Bs, keep_ops=True)  # [h, b, 2u]
        u = len(c1.graph)
        tc, tm = arr["op_t_compute"], arr["op_t_memory"]
        tc1, tm1 = tc[..., u:] - tc[..., :u], tm[..., u:] - tm[..., :u]
        tc0, tm0 = tc[..., :u] - tc1, tm[..., :u] - tm1
        gap = np.array([e.kernel_gap for e in effs]).reshape(-1, 1, 1, 1)
        disp = np.array([e.dispatch for e in effs]).reshape(-1, 1, 1, 1)
        q = arr["op_q"]
        has = ((q[0] + q[1:].sum(0))[..., :u] > 0)  # [b, u]
        dep = (np.abs(tc1) + np.abs(tm1)).max(axis=(0, 1)) > 0  # ops whose time depends on S
        W = np.where(np.isfinite(c1.window), c1.window, np.inf)
        cnt = c1.counts
        S = np.minimum(Ss.reshape(1, 1, -1, 1), W[dep])  # [1, 1, s, ud]
        # S-independent ops: one time per (h, b)
        kin = np.maximum(tc0[..., ~dep], tm0[..., ~dep])  # tc1=tm1=0 there
        tin = np.maximum(kin + gap[..., 0], disp[..., 0])
        tin = np.where(has[None][..., ~dep], tin, 0.0) @ cnt[~dep]  # [h, b]
        kd = np.maximum(tc0[..., dep][:, :, None] + tc1[..., dep][:, :, None] * S,
                        tm0[..., dep][:, :, None] + tm1[..., dep][:, :, None] * S)
        td = np.maximum(kd + gap, disp)
        td = np.where(has[None][..., dep][:, :, None], td, 0.0) @ cnt[dep]  # [h, b, s]
        comm = np.array([[_allreduce(b * cfg.d_model * p.act_bytes, tp, h, factors,
                                     2 * plan.cfg.n_layers + 1) for b in Bs] for h in hsel])
        t = tin[..., None] + td + comm[..., None] + factors.step_overhead + \
            factors.layer_overhead * plan.cfg.n_layers
        out_t[ok_hw, j] = t
        kv = Bs[:, None] * plan.kv_bytes_per_sequence(Ss, kv_window)[None, :]
        kvb[ok_hw, j] = kv
        cap = np.array([h.memory_capacity_bytes - e.workspace for h, e in zip(hsel, effs)])
        fits[ok_hw, j] = (c1.graph.weight_footprint_bytes + kv)[None] <= cap[:, None, None]
    return {"tpot": out_t, "tokens_per_s": Bs.reshape(1, 1, -1, 1) / out_t, "fits": fits,
            "kv_cache_bytes": kvb, "hardware": np.array([h.name for h in hws]),
            "precision": np.array([str(x) for x in precs]), "batch": Bs, "context": Ss}

