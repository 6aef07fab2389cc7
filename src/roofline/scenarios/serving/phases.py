"""``serve``: a static batch's prefill (TTFT), its decode steps summed in closed form, the
continuous-batching steady state and the per-device memory; speculative decoding."""

from __future__ import annotations

import copy
import math
from dataclasses import replace
from functools import partial
from typing import Any

import numpy as np

from ... import _args as A
from ..._call import records_call
from ..._econ_args import with_economics
from ..._text import a_family
from ...engine.attention import ATTENTION_KERNELS, kernel_note
from ...engine.client import serve_client
from ...engine.memory import memory_fit, resident_weights
from ...engine.presets import check_preset
from ...engine.result import Result
from ...engine.solve import check_batch
from ...engine.tiles import smooth_fill
from ...errors import SpecError
from ...graphs.model import Model, transformer_model
from ...graphs.resolve import model as resolve_model
from ...specs.dtypes import PRECISION_ARG, Precision
from ...specs.dtypes import precision as make_precision
from ...specs.hardware import Hardware
from ...specs.resolve import hardware as resolve_hardware
from . import args as R
from . import plan as sp
from .comm import _allreduce, _link, _p2p, moe_all_to_all
from .mlsysim import _serve_mlsysim
from .result import ServeResult, expected_tokens_per_step


def _pos_int(v: Any, name: str, zero_ok: bool = False) -> int:
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < (0 if zero_ok else 1):
        raise SpecError(f"{name} must be a {'non-negative' if zero_ok else 'positive'} integer, "
                        f"got {v!r}")
    return int(v)


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


def _check_ep(ep: int, cfg: Any, name: str, preset: str) -> None:
    if ep == 1:
        return
    if preset == "mlsysim":
        raise SpecError(f"ep={ep}: preset 'mlsysim' has no expert parallelism; use ep=1")
    if not cfg.n_experts:
        raise SpecError(f"ep={ep}: {name} has no experts (a dense model); expert parallelism "
                        "splits a mixture of experts' routed experts: use ep=1")
    if cfg.n_experts % ep:
        ok = [d for d in range(1, cfg.n_experts + 1) if cfg.n_experts % d == 0]
        raise SpecError(f"ep={ep} must divide the {cfg.n_experts} routed experts of {name}; "
                        f"allowed ep: {', '.join(map(str, ok))}")


def _inputs(model: Any, hardware: Any, batch: Any, prompt_len: Any, output_len: Any,
            precision: Any, kv_precision: Any, weight_precision: Any, group_size: Any, tp: int,
            pp: int, preset: str, engine: str, prefix_cached: Any, decode_hardware: Any,
            kv_window: str, ep: int = 1, kv_link_bytes_per_s: Any = None) -> tuple[Any, ...]:
    """``serve``'s arguments resolved and checked (in the order the errors are raised): the
    model, the prefill and decode hardware, batch, prompt and output lengths, preset, precision,
    cached prefix, engine factors, KV-window rule, and the fields every result carries."""
    kv_window = sp.check_kv_window(kv_window)
    m = resolve_model(model)
    hw = resolve_hardware(hardware)
    B = check_batch(batch)
    P = _pos_int(prompt_len, "prompt_len")
    n = _pos_int(output_len, "output_len")
    preset = check_preset(preset)
    cfg = m.config
    if cfg is None or not cfg.generates:
        raise SpecError(f"serve needs a decoder LLM or an encoder-decoder; {m.name} is "
                        f"{a_family(m.family)} model")
    _check_ep(ep, cfg, m.name, preset)
    p = _precision(precision, kv_precision, weight_precision, group_size)
    pc = _pos_int(prefix_cached, "prefix_cached", zero_ok=True)
    if pc >= P:
        raise SpecError(f"prefix_cached={pc} must be smaller than prompt_len={P}")
    factors = sp.NEUTRAL if preset == "bound" else sp.serving_factors(engine)
    hw_d = hw if decode_hardware is None else resolve_hardware(decode_hardware)
    if decode_hardware is None and kv_link_bytes_per_s is not None:
        raise SpecError("kv_link_bytes_per_s is the prefill-to-decode KV link of disaggregated "
                        "serving: give decode_hardware= (the same part for two pools of it)")
    if hw_d is hw and decode_hardware is not None:  # P/D on the same part: still two pools
        hw_d = copy.copy(hw)  # (disaggregation is read as ``hw_d is not hw`` below)
    base = {"model": m.name, "hardware": hw.name if hw_d is hw else f"{hw.name} → {hw_d.name}",
            "batch": B, "prompt_len": P, "output_len": n, "precision": p.label,
            "preset": preset, "engine": factors.name,
            "kv_window": kv_window if cfg.sliding_window is not None else "",
            "tp": tp, "pp": pp, "ep": ep, "devices": tp * pp * ep * (1 if hw_d is hw else 2),
            "_hw": partial(_same, hw)}
    return m, hw, hw_d, B, P, n, preset, p, pc, factors, kv_window, base


@records_call("serve")
@with_economics
@A.checked(model=A.anything, hardware=A.anything, batch=A.count(), prompt_len=R.TOKENS,
           output_len=R.TOKENS, precision=PRECISION_ARG, kv_precision=R.OPT_DTYPE,
           weight_precision=R.OPT_DTYPE, group_size=A.optional(A.count()), tp=R.DEGREE,
           pp=R.DEGREE, ep=R.DEGREE, preset=A.text, engine=R.ENGINE, fused_attention=A.flag,
           prefix_cached=A.count(0, A.MAX_TOKENS), chunk_size=A.optional(R.TOKENS),
           draft=A.anything, draft_len=A.optional(A.count(1, 1024)),
           acceptance=A.optional(A.real(0, 1, lo_open=False)),
           decode_hardware=A.anything,
           kv_link_bytes_per_s=A.optional(A.real(0, 1e15, unit="B/s")), kv_window=R.KV_WINDOW,
           attention_kernel=A.choice(*ATTENTION_KERNELS), client=A.flag)
def serve(model: Any, hardware: Any, *, batch: int = 1, prompt_len: int = 1024,
          output_len: int = 128, precision: str | Precision = "bf16",
          kv_precision: str | None = None, weight_precision: str | None = None,
          group_size: int | None = None, tp: int = 1, pp: int = 1, ep: int = 1,
          preset: str = "default",
          engine: str = "trtllm", fused_attention: bool = True, prefix_cached: int = 0,
          chunk_size: int | None = None, draft: Any = None, draft_len: int | None = None,
          acceptance: float | None = None, decode_hardware: Any = None,
          kv_link_bytes_per_s: float | None = None, kv_window: str = "ring",
          attention_kernel: str = "auto", client: bool = False) -> ServeResult:
    """Predict TTFT, TPOT, end-to-end latency and throughput of serving an LLM.

    ``precision`` sets the compute dtype (its tensor-core peak) and, by default, weights and
    activations; ``weight_precision`` ("int8", "int4", "fp8") and ``group_size`` quantise the
    weights (a 2-byte scale per group), ``kv_precision`` the KV cache. ``tp``/``pp``: tensor
    and pipeline parallel degrees; ``ep`` (MoE): ep data-parallel attention groups of tp × pp
    devices sharing the routed experts, two all-to-alls per MoE layer (docs/serving.md).
    ``engine``: serving-engine factors from
    data/presets/serving.toml ("trtllm", "trtllm-legacy", "vllm", "vllm-legacy", "vllm-rocm",
    "vllm-v0", "vllm-v0-multistep", "vllm-v1", "eager").
    ``prefix_cached``: prompt tokens whose KV is already cached. ``chunk_size``: chunked prefill.
    ``draft``: a draft model for speculative decoding (``draft_len`` tokens, default 4, and
    ``acceptance`` rate, default 0.7: refused without ``draft``). ``decode_hardware``: decode
    on a pool of its own (disaggregated; naming ``hardware`` again is a second pool of it), the
    prompt's KV cache sent over ``kv_link_bytes_per_s`` (default: the prefill scale-up link).
    ``kv_window``: how the KV cache stores sliding-window layers (Mistral, Gemma 2's local
    layers): ``"ring"`` (default) keeps at most the window per such layer, as TensorRT-LLM,
    vLLM V1's hybrid KV-cache manager and Hugging Face's HybridCache do; ``"full"`` keeps
    every token in every layer, as vLLM with the hybrid manager disabled does (docs/serving.md,
    "Sliding-window layers"). Attention reads only the window either way.
    ``attention_kernel``: the fused-attention implementation ("auto": the engine's on the
    part's architecture — on Hopper FlashAttention-2's rate for vllm-v0 / vllm-v0-multistep,
    llamacpp and eager, FlashAttention-3 for the others; cuDNN on Blackwell, FA2's rate there for
    llamacpp — and the matmul model on parts with no
    measured table; the kernel used is stated in ``notes``; "fa2", "fa3",
    "cudnn", "gemm", "unfused"; engine/attention.py, docs/validation/attention.md).
    ``client=True``: as a client times each request — a per-request floor and the prompt and
    output through the serving stack and host link (engine/client.py; off by default).
    ``price_per_hour`` (USD per device-hour; default: the part's public price), ``region``
    (grid, for carbon) and ``pue`` feed the cost, energy and carbon per output token.
    """
    m, hw, hw_d, B, P, n, preset, p, pc, factors, kv_window, base = _inputs(
        model, hardware, batch, prompt_len, output_len, precision, kv_precision,
        weight_precision, group_size, tp, pp, preset, engine, prefix_cached, decode_hardware,
        kv_window, ep, kv_link_bytes_per_s)
    draft_len, acceptance = _draft_knobs(draft, draft_len, acceptance)
    if attention_kernel == "unfused":
        fused_attention = False
    elif attention_kernel != "auto":
        factors = replace(factors, attention_kernel=attention_kernel)
    cfg = m.config
    Bg = -(-B // ep)  # sequences per expert-parallel group (all of them for ep = 1)
    _check_seq2seq(m, pc, chunk_size, draft, preset)
    S_end = P + n - 1  # context of the last decode step
    why = _unservable(m, hw, hw_d, p, P, n)
    if why:
        return _infeasible(base, why)
    if preset == "mlsysim":  # mlsysim's convention: every layer holds every token
        r = _serve_mlsysim(m, hw, {**base, "kv_window": "full" if base["kv_window"] else ""},
                           B, P, n, p)
        return serve_client(r, hw) if client else r
    plan = sp.device_plan(cfg, p, tp=tp, pp=pp, fuse=factors.fuse,
                          fused_attention=fused_attention, weight_format=m.weight_format, ep=ep,
                          kv_per_query_head=factors.kv_per_query_head)
    eff = sp.efficiency(hw, preset, factors, p.compute)
    eff_d = eff if hw_d is hw else sp.efficiency(hw_d, preset, factors, p.compute)
    D, ab = cfg.d_model, p.link_bytes  # bytes of an activation on a link (Precision)
    L_dev = plan.cfg.n_layers
    n_ar = _n_allreduce(cfg, L_dev, pp)

    # -- prefill (each group's Bg sequences, all stages in turn for pp > 1)
    Bm = -(-Bg // pp)  # micro-batch per stage
    T_new = P - pc
    pre_parts, pre_comm, pre_flops = _prefill(plan, hw, eff, factors, Bg, T_new, pc, chunk_size,
                                              tp, pp, D * ab, n_ar)
    ep_pre, ep_step = _ep_comm(cfg, ep, tp, ab, hw, hw_d, factors, Bg, T_new, chunk_size, Bm, draft)
    pre_comm += ep_pre + _encoder_comm(plan, Bg, D * ab, tp, pp, hw, factors)
    kv_transfer = 0.0 if hw_d is hw else _kv_transfer(plan, hw, Bg, P, kv_window,
                                                      kv_link_bytes_per_s)
    req_fixed = sp.host_prefill(factors, L_dev * pp, Bg)
    ttft = pre_parts[2] + pre_comm + req_fixed + kv_transfer

    # -- decode steps S = P+1 … P+n−1 (closed form)
    steps = n - 1
    S_mean = P + n / 2.0
    decode_time, dec, dec_comm, dec_over, notes = _decode_phase(
        plan, cfg, p, hw_d, eff_d, factors, Bm, P, S_end, steps, tp, pp, Bm * D * ab, n_ar, L_dev,
        draft, draft_len, acceptance, fused_attention, Bg)
    dec_comm, decode_time = dec_comm + steps * ep_step, decode_time + steps * ep_step
    tpot = decode_time / steps if steps else 0.0
    e2e = ttft + decode_time
    devices = base["devices"]
    tokens_per_s = B * n / e2e

    # -- continuous batching steady state at concurrency B
    steady_tpot, steady_tps = _steady(plan, hw, eff, pre_parts, B, Bg, T_new, pc, pp, tpot, steps,
                                      n, sp.host_prefill(factors, L_dev * pp, 1), hw_d is not hw)

    # -- memory (per device)
    breakdown, cap, max_batch, feasible, reason = _memory(plan, hw, hw_d, eff, Bg, P + n,
                                                          T_new, pc, chunk_size, kv_window)
    kv_total = _kv_total(cfg, p, B, P + n, kv_window)

    mbu, mfu = _utilisation(dec, steps, hw_d, p, pre_flops, e2e, pp)

    phase_s = _phase_seconds(pre_parts, dec, dec_over + req_fixed, pre_comm, dec_comm,
                             kv_transfer, tp, pp, Bg * T_new * D * ab, steps, Bm * D * ab,
                             hw, hw_d, factors, ep_pre + steps * ep_step)
    notes += _setup_notes(cfg, tp, factors, hw, fused_attention and preset == "default")

    _pre, _dec = _lazy_phases(m, plan, hw, hw_d, eff, eff_d, preset, Bg, Bm, T_new, pc,
                              round(S_mean))
    r = ServeResult(
        **base, ttft=ttft, tpot=tpot, e2e_latency=e2e, tokens_per_s=tokens_per_s,
        tokens_per_s_per_device=tokens_per_s / devices, steady_tpot=steady_tpot,
        steady_tokens_per_s=steady_tps, mbu=mbu, mfu=mfu, kv_cache_bytes=kv_total,
        memory_breakdown=breakdown, memory_capacity=cap, max_batch=max_batch,
        feasible=feasible, reason=reason, phase_seconds=phase_s, notes=tuple(notes),
        t_fill=smooth_fill(eff, eff_d), _prefill=_pre, _decode=_dec)
    return serve_client(r, hw_d) if client else r


#: what the llama.cpp prompt-processing comparison says (docs/validation/llamacpp.md)
LLAMACPP_PP_NOTE = (
    "llama.cpp TTFT (prompt processing) is priced with the default GPU GEMM efficiency and has "
    "no uncertainty band: it is within 30 % of published pp512 rates on Apple GPUs and an RTX "
    "4090, but 1.8-2.9x faster than those published on A100, H100 PCIe and L40S "
    "(docs/validation/llamacpp.md, 'Prompt processing')")


def _setup_notes(cfg: Any, tp: int, factors: sp.ServingFactors, hw: Hardware,
                 kernel_priced: bool = False) -> list[str]:
    """What the layout and the engine leave a reader to know (KV heads replicated over tp;
    llama.cpp's unvalidated prompt processing on NVIDIA GPUs; with ``kernel_priced`` (fused
    attention, default preset) the measured kernel "auto" priced attention as, and why)."""
    out = []
    if factors.name == "llamacpp" and hw.kind == "gpu" and hw.vendor.lower() == "nvidia":
        out.append(LLAMACPP_PP_NOTE)
    att = kernel_note(hw, factors.attention_kernel, factors.name) if kernel_priced else None
    if att is not None:
        out.append(att)
    if tp > cfg.n_kv_heads and not cfg.mla:
        out.append(f"tp={tp} > {cfg.n_kv_heads} KV heads: each KV head is replicated on "
                   f"{tp // cfg.n_kv_heads} devices")
    return out


def _steady(plan: sp.Plan, hw: Hardware, eff: Any, pre_parts: tuple[float, float, float],
            B: int, Bg: int, T_new: int, pc: int, pp: int, tpot: float, steps: int, n: int,
            req_fixed: float, disagg: bool = False) -> tuple[float, float]:
    """Continuous batching's steady state at concurrency B: (TPOT with one prompt's prefill
    spread over each sequence's n tokens, output tokens/s); ``req_fixed``: the host time of
    one prompt's prefill. ``disagg`` (a decode pool of its own): decode never stops for a
    prompt, TPOT is the decode step's, and the tokens/s are capped by what the prefill pool
    (the same layout, a prompt at a time, B/Bg groups) supplies: n tokens per prompt."""
    single = pre_parts[2] if Bg == 1 or pre_parts[2] != pre_parts[2] else \
        plan.prefill_times(hw, eff, 1, T_new, pc).total * pp
    if disagg and steps:
        return tpot, min(B / tpot, (B / Bg) * n / (single + req_fixed))
    steady_tpot = (tpot if steps else 0.0) + (Bg / n) * (single + req_fixed)
    return steady_tpot, (B / steady_tpot if steady_tpot > 0 else math.nan)


def _utilisation(dec: dict[str, float], steps: int, hw_d: Hardware, p: Precision,
                 pre_flops: float, e2e: float, pp: int) -> tuple[float, float]:
    """(MBU of the decode steps, MFU of the whole generation)."""
    dec_dev_time = dec["total"] if dec["total"] else math.nan
    mbu = dec["bytes"] / (dec_dev_time * hw_d.memory_bytes_per_s) if steps else math.nan
    mfu = (pre_flops + dec["flops"]) / (e2e * hw_d.peak(p.compute) * pp) if e2e > 0 else math.nan
    return mbu, mfu


def _lazy_phases(m: Model, plan: sp.Plan, hw: Hardware, hw_d: Hardware, eff: Any, eff_d: Any,
                 preset: str, Bg: int, Bm: int, T_new: int, pc: int,
                 S_mean: int) -> tuple[Any, Any]:
    """The calls that build the per-op Results of prefill and of a mean decode step when
    ``r.prefill`` / ``r.decode`` are read (partials of a module function, not closures, so
    that a ServeResult pickles: multiprocessing and Dask ship results between processes)."""
    return (partial(_phase_result, m, plan, hw, eff, preset, "prefill", Bg, T_new, pc),
            partial(_phase_result, m, plan, hw_d, eff_d, preset, "decode", Bm, 1, S_mean))


def _same(x: Any) -> Any:
    """``partial(_same, x)``: a call returning ``x`` that pickles (a lambda does not)."""
    return x


def _unservable(m: Model, hw: Hardware, hw_d: Hardware, p: Precision, P: int,
                n: int) -> str:
    """Why this generation cannot be served at all ("" when it can)."""
    cfg = m.config
    if cfg is not None and cfg.max_positions and P + n > cfg.max_positions + 1:
        return (f"prompt_len + output_len = {P + n} tokens exceed "
                f"max_position_embeddings={cfg.max_positions} of {m.name}")
    for h in {hw.key: hw, hw_d.key: hw_d}.values():
        if not h.has(p.compute):
            return f"{h.name} has no {p.compute} peak; it has {', '.join(h.dtypes)}"
    return ""


def _kv_total(cfg: Any, p: Precision, B: int, tokens: int, kv_window: str) -> float:
    """The batch's KV cache over all devices at ``tokens`` per sequence (windowed layers: the
    window with ``kv_window="ring"``; encoder-decoders: the cross-attention KV too)."""
    return B * float(cfg.kv_bytes_per_sequence(tokens, p.kv_bytes) if kv_window == "ring"
                     else tokens * cfg.kv_bytes_per_token(p.kv_bytes)
                     + cfg.cross_kv_bytes(p.kv_bytes))


def _n_allreduce(cfg: Any, L_dev: int, pp: int) -> int:
    """TP all-reduces a token meets: two per layer (after attention and the MLP; an
    encoder-decoder's decoder layers add one after cross-attention) on every one of the pp
    stages it crosses (the stages run in turn for one token) and one for the
    vocabulary-parallel embedding."""
    return (3 if cfg.arch == "seq2seq" else 2) * L_dev * pp + 1


def _encoder_comm(plan: sp.Plan, B: int, row_bytes: float, tp: int, pp: int, hw: Hardware,
                  factors: sp.ServingFactors) -> float:
    """An encoder-decoder's prefill: 2 TP all-reduces per encoder layer over its source_len
    tokens (0 for other models)."""
    if plan.full.arch != "seq2seq":
        return 0.0
    return _allreduce(B * plan.full.source_len * row_bytes, tp, hw, factors,
                      2 * plan.cfg.encoder_layers * pp)


def _draft_knobs(draft: Any, draft_len: int | None,
                 acceptance: float | None) -> tuple[int, float]:
    """Speculative decoding's (draft_len, acceptance), defaults 4 and 0.7; either given
    without a ``draft`` is refused (it was ignored: the result priced plain decoding)."""
    for name, v in (("draft_len", draft_len), ("acceptance", acceptance)):
        if draft is None and v is not None:
            raise SpecError(f"{name}={v!r} sets speculative decoding, which needs draft= (the "
                            f"draft model): give draft=, or leave {name} out")
    return (4 if draft_len is None else draft_len, 0.7 if acceptance is None else acceptance)


def _check_seq2seq(m: Any, pc: int, chunk_size: int | None, draft: Any, preset: str) -> None:
    """What serving an encoder-decoder does not model (each would re-run or skip the
    encoder): a SpecError naming the argument."""
    if m.config.arch != "seq2seq":
        return
    name = m.name
    for arg, bad in (("prefix_cached", pc != 0), ("chunk_size", chunk_size is not None),
                     ("draft", draft is not None), ("preset='mlsysim'", preset == "mlsysim")):
        if bad:
            raise SpecError(f"{arg}: not modelled for the encoder-decoder {name} (its prefill "
                            "is the encoder over source_len tokens plus the decoder prompt); "
                            "leave it at its default")


def _kv_transfer(plan: sp.Plan, hw: Hardware, B: int, P: int, kv_window: str,
                 kv_link_bytes_per_s: float | None) -> float:
    """Disaggregated serving: seconds to send the batch's prompt KV cache, as the prefill
    device holds it (windowed layers: the window only), over the link."""
    bw = kv_link_bytes_per_s or _link(hw)[0]
    if not (bw and math.isfinite(bw) and bw > 0):
        raise SpecError("disaggregated serving needs kv_link_bytes_per_s (no scale-up link "
                        f"on {hw.name})")
    return B * float(plan.kv_bytes_per_sequence(P, kv_window)) / bw


def _decode_phase(plan: sp.Plan, cfg: Any, p: Precision, hw_d: Hardware, eff_d: Any,
                  factors: sp.ServingFactors, Bm: int, P: int, S_end: int, steps: int, tp: int,
                  pp: int, row_bytes: float, n_ar: int, L_dev: int, draft: Any, draft_len: int,
                  acceptance: float, fused_attention: bool, seqs: int
                  ) -> tuple[float, dict[str, float], float, float, list[str]]:
    """The decode steps S = P+1 … P+n−1 in closed form (or speculative, with a draft): the
    decode time, the per-device sums (total, kernel, bound, flops, bytes), the TP/PP
    communication, the fixed per-step costs and the notes. ``row_bytes``: one micro-batch's
    activations per token (Bm × D × bytes); ``seqs``: the sequences decoding (every
    micro-batch's), for the engine's host time per sequence."""
    lines = plan.lines(hw_d, eff_d, Bm)
    dec_comm_step = (_allreduce(row_bytes, tp, hw_d, factors, n_ar) +
                     _p2p(row_bytes, pp, hw_d, factors, tp))
    notes: list[str] = []
    if steps > 0:
        dec = {k: v * pp for k, v in lines.total(P + 1, S_end).items()}
    else:
        dec = {"total": 0.0, "kernel": 0.0, "bound": 0.0, "flops": 0.0, "bytes": 0.0}
    dec_comm = steps * dec_comm_step
    step_fixed = sp.host_step(factors, L_dev * pp, seqs, pp)
    dec_over = steps * step_fixed
    decode_time = dec["total"] + dec_comm + dec_over
    spec_note = None
    if draft is not None and steps > 0:
        decode_time, dec, spec_note = _speculative(
            draft, cfg, plan, p, hw_d, eff_d, factors, Bm, P, S_end, steps, draft_len,
            acceptance, pp, tp, dec_comm_step, fused_attention, seqs)
        dec_comm = dec.pop("comm")
        dec_over = dec.pop("overhead")
        notes.append(spec_note)
    return decode_time, dec, dec_comm, dec_over, notes


def _ep_comm(cfg: Any, ep: int, tp: int, ab: float, hw: Hardware, hw_d: Hardware,
             factors: sp.ServingFactors, Bg: int, T_new: int, chunk_size: int | None, Bm: int,
             draft: Any) -> tuple[float, float]:
    """Expert parallelism's all-to-alls: (the prefill's, one decode step's) seconds. The
    prefill moves the Bg·T_new tokens of a group, one pass per chunk; a decode step the Bm
    tokens of a micro-batch."""
    if ep == 1:
        return 0.0, 0.0
    if draft is not None:
        raise SpecError(f"ep={ep} with a draft model: speculative decoding under expert "
                        "parallelism is not modelled; use ep=1")
    c = chunk_size if chunk_size is not None and chunk_size < T_new else T_new
    k_full, rest = divmod(T_new, c)
    pre = k_full * moe_all_to_all(Bg * c, ep, tp, cfg, ab, hw, factors) + \
        moe_all_to_all(Bg * rest, ep, tp, cfg, ab, hw, factors)
    return pre, moe_all_to_all(Bm, ep, tp, cfg, ab, hw_d, factors)


def _prefill(plan: sp.Plan, hw: Hardware, eff: Any, factors: sp.ServingFactors, B: int,
             T_new: int, pc: int, chunk_size: int | None, tp: int, pp: int, row_bytes: float,
             n_ar: int) -> tuple[tuple[float, float, float], float, float]:
    """Prefill of the batch (all pp stages in turn): (bound, kernel, total) seconds, the TP/PP
    communication, the FLOPs; whole or in chunks of ``chunk_size`` tokens (chunk i has a
    cached prefix of pc + i·c tokens). ``row_bytes``: one token's activations (D × bytes)."""
    if chunk_size is None or chunk_size >= T_new:
        pre = plan.prefill_times(hw, eff, B, T_new, pc)
        pre_comm = _allreduce(B * T_new * row_bytes, tp, hw, factors, n_ar) + \
            _p2p(B * T_new * row_bytes, pp, hw, factors, tp)
        pre_parts = (pre.bound * pp, pre.kernel * pp, pre.total * pp)
        pre_flops = pre.flops * pp
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
        pre_comm = n_chunks * (_allreduce(B * c * row_bytes, tp, hw, factors, n_ar) +
                               _p2p(B * c * row_bytes, pp, hw, factors, tp))
        pre_parts = (tot["bound"] * pp, tot["kernel"] * pp, tot["total"] * pp)
        pre_flops = tot["flops"] * pp
    return pre_parts, pre_comm, pre_flops


def _memory(plan: sp.Plan, hw: Hardware, hw_d: Hardware, eff: Any, B: int, tokens: int,
            T_new: int, pc: int, chunk_size: int | None, kv_window: str
            ) -> tuple[dict[str, float], float, int, bool, str]:
    """Per-device memory of a generation of ``tokens`` (prompt + output) per sequence:
    (breakdown, capacity, largest batch that fits, fits, reason)."""
    cg = plan.graph("prefill", seq_len=min(T_new, chunk_size or T_new), context=pc, batch=B)
    weights, store_why = resident_weights(cg.graph, hw)  # weight streaming holds one op's
    act = plan.live_activations(B, min(T_new, chunk_size or T_new), pc)
    kv_seq_dev = float(plan.kv_bytes_per_sequence(tokens, kv_window))  # one sequence, 1 device
    # every stage keeps its layers' KV for all B sequences (each micro-batch passes every stage)
    kv_dev = B * kv_seq_dev
    ws = eff.workspace
    breakdown = {"weights": weights, "kv_cache": kv_dev, "activations": act, "workspace": ws}
    cap = hw.memory_capacity_bytes
    if hw_d is not hw:
        cap = min(cap, hw_d.memory_capacity_bytes)
    per_seq = kv_seq_dev + (act / B if B else 0.0)
    max_batch = int(max(0.0, (cap - weights - ws) // per_seq)) if per_seq > 0 else 0
    feasible, footprint, reason = memory_fit(
        breakdown, cap, hw.name, tail=f"; the largest batch that fits is {max_batch}")
    if feasible and store_why:
        feasible, reason, max_batch = False, store_why, 0
    return breakdown, cap, max_batch, feasible, reason


def _phase_seconds(pre_parts: tuple[float, float, float], dec: dict[str, float], overhead: float,
            pre_comm: float, dec_comm: float, kv_transfer: float, tp: int, pp: int,
            pre_bytes: float, steps: int, dec_bytes: float, hw: Hardware, hw_d: Hardware,
            factors: sp.ServingFactors, ep_comm: float = 0.0) -> dict[str, float]:
    """Where the end-to-end time goes (seconds per cause); the communication split into its
    TP, PP and (MoE with ep > 1: ``ep_comm``, the all-to-alls) EP parts.
    ``pre_bytes``/``dec_bytes``: the activations a stage sends."""
    shares = {
        "roofline": pre_parts[0] + dec["bound"],
        "efficiency": (pre_parts[1] - pre_parts[0]) + (dec["kernel"] - dec["bound"]),
        "launch": (pre_parts[2] - pre_parts[1]) + (dec["total"] - dec["kernel"]),
        "step_overhead": overhead,
        "tp_comm": (pre_comm + dec_comm - ep_comm) if tp > 1 else 0.0,
        "pp_comm": 0.0,
        "kv_transfer": kv_transfer,
    }
    if pp > 1:  # split the comm into its TP and PP parts
        ppc = (_p2p(pre_bytes, pp, hw, factors, tp) +
               steps * _p2p(dec_bytes, pp, hw_d, factors, tp))
        shares["pp_comm"] = ppc
        shares["tp_comm"] = pre_comm + dec_comm - ppc - ep_comm
    if ep_comm:
        shares["ep_comm"] = ep_comm
    return shares


def _phase_result(m: Model, plan: sp.Plan, hw: Hardware, eff: Any, preset: str, phase: str,
                  B: int, T: int, context: int) -> Result:
    """The per-op Result of one phase on one device: the engine's pricing of the full graph
    (as ``solve`` does it, with the serving engine's launch model)."""
    from ...engine.core import time_model
    from ...engine.result import OpTableSource
    from ...engine.solve import _result

    g = plan.graph(phase, seq_len=T, context=context, batch=B, compressed=False)
    tm = time_model(g, hw, eff)
    ot = tm.evaluate(B)
    tot = ot.totals()
    parts = {"compute": tot.t_compute_bound_ops, "memory": tot.t_memory_bound_ops,
             "overhead": tot.t_overhead + tot.t_fill}
    dev_model = m if plan.cfg is plan.full else transformer_model(
        plan.cfg, key=m.key, name=f"{m.name} (one of tp={plan.tp} × pp={plan.pp} devices)")
    return _result(dev_model, hw, g, B, plan.precision, preset, phase, latency=tot.latency,
                   latency_bound=tot.latency_bound, t_compute=tot.t_compute,
                   t_memory=tot.t_memory, t_overhead=tot.t_overhead, t_fill=tot.t_fill,
                   bottleneck=max(parts, key=parts.__getitem__), flops=tot.flops,
                   byts=tot.bytes, ridge_eff=tm.ridge_effective, workspace=eff.workspace,
                   ops=OpTableSource(g, ot, B, tot.latency, tm), seq_len=T,
                   context=context if phase == "decode" else (context or None),
                   live=tot.live_activation_bytes)


def _speculative(draft: Any, cfg: Any, plan: sp.Plan, p: Precision, hw: Hardware, eff: Any,
                 factors: sp.ServingFactors, Bm: int, P: int, S_end: int, steps: int, k: int,
                 alpha: float, pp: int, tp: int, comm_step: float,
                 fused_attention: bool, seqs: int) -> tuple[float, dict[str, float], str]:
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
    dplan = sp.device_plan(dm.config, p, tp=1, pp=1, fuse=plan.fuse,
                           fused_attention=fused_attention, weight_format=dm.weight_format,
                           kv_per_query_head=plan.kv_per_query_head)
    lo, hi = P + 1, S_end
    dd = dplan.lines(hw, eff, Bm).total(lo, hi)
    vv = plan.lines(hw, eff, Bm, phase="prefill", seq_len=k + 1, logits="all").total(lo, hi)
    iters = steps / E
    # means over the contexts, times the number of iterations
    per = {q: (k * float(dd[q]) + float(vv[q]) * pp) / steps for q in dd}
    dec = {q: per[q] * iters for q in per}
    D, ab = cfg.d_model, p.link_bytes
    n_ar = 2 * plan.cfg.n_layers * pp + 1  # every stage's all-reduces, as in serve
    comm = iters * (_allreduce(Bm * (k + 1) * D * ab, tp, hw, factors, n_ar) +
                    _p2p(Bm * (k + 1) * D * ab, pp, hw, factors, tp))
    # host costs per iteration: k draft steps (the draft's layers) + one verification (the
    # target's layers on each of the pp stages), each a step of the ``seqs`` sequences as in
    # serve
    over = iters * (k * sp.host_step(factors, dm.config.n_layers, seqs) +
                    sp.host_step(factors, plan.cfg.n_layers * pp, seqs, pp))
    dec["comm"] = comm
    dec["overhead"] = over
    note = (f"speculative decoding with {dm.name}: k={k}, acceptance {alpha:g} -> "
            f"{E:.3f} tokens per target step")
    return dec["total"] + comm + over, dec, note
