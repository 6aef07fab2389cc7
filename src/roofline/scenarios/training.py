"""Distributed training: step time, memory per device, MFU/HFU, and the best parallel split.

``train(model, cluster, global_batch=, seq_len=, micro_batch=, tp=, pp=, dp=, ...)`` prices one
optimizer step of a decoder LM trained with Megatron-style 3D/4D parallelism:

* **Per-op roofline.** One transformer layer on one tensor-parallel rank is a graph of forward
  and backward ops (graphs/training.py) priced op by op by the engine (``max`` of compute and
  memory time per op, the preset's efficiency model; never a flat efficiency).
* **Pipeline (1F1B, interleaved).** With ``m`` micro-batches per data-parallel replica and
  ``t_mb`` the time of one micro-batch's forward+backward through one device's layers, the
  pipeline takes ``(m + (p−1)/v)·t_mb``: the bubble is ``(p−1)/(v·m)`` of the ideal time
  (Narayanan et al. 2021 §2.2). Point-to-point sends of ``b·s·h/t`` bytes per chunk boundary
  (scatter/gather optimisation) are on the critical path.
* **Tensor parallelism (Megatron, with sequence parallelism).** Per layer and micro-batch, two
  all-reduces of ``b·s·h`` in forward and two in backward (with SP: the same bytes as
  all-gather + reduce-scatter); forward ones are exposed, backward ones overlap the
  weight-gradient GEMMs of the column-parallel linears (QKV, MLP up/gate). Full recompute repeats
  the forward ones.
* **Data parallelism and ZeRO.** ZeRO-0: all-reduce of the fp32 gradients; ZeRO-1/2:
  reduce-scatter of gradients + all-gather of the updated bf16 parameters; ZeRO-3 (FSDP):
  two parameter all-gathers and a gradient reduce-scatter per micro-batch, overlapped with its
  compute. Gradient
  reduction is bucketed and overlapped with the last micro-batch's backward (``dp_overlap``);
  what does not fit under it, and at least the last bucket, stays exposed.
* **Expert parallelism (MoE).** Two all-to-alls (dispatch, combine) of ``b·s·k·h`` per MoE layer
  in forward and two in backward, exposed.
* **Optimizer.** Mixed-precision Adam over the local shard: a memory-bound pass of 34 bytes per
  parameter (read fp32 grad twice — norm for clipping, then update —, read and write fp32 master,
  m, v, write the bf16 copy), ~16 FLOPs per parameter.

MFU and HFU follow PaLM (Chowdhery et al. 2022, App. B) as Korthikanti et al. 2022 §6.3 does:
**model FLOPs** are those of one forward and one backward pass (3× the forward matmul FLOPs,
attention counted as the full T×S score matrix, logits included), whatever the implementation;
**hardware FLOPs** add what recomputation re-executes (selective: the attention score and
context matmuls; full: the whole layer's forward matmuls). MFU = model FLOPs per second / (devices
× peak); HFU likewise with hardware FLOPs.

Memory per device (first pipeline stage, the fullest): bf16 weights, fp32 gradient buffers and
Adam states as Megatron's distributed-optimizer table counts them (bf16 params with fp32 grads:
2 + 4 + 12 bytes per parameter; fp16: 2 + 2 + 16), divided by ``dp`` for what ZeRO shards
(1: optimizer, 2: + gradients, 3: + weights); activations per Korthikanti et al. 2022 Table 2 for
each recompute mode and sequence parallelism, for the ``min(m, p)`` micro-batches the first
1F1B stage keeps in flight (× ``1 + (p−1)/(p·v)`` when interleaved).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from .. import _args as A
from .._data import DATA, read_toml
from ..engine.core import price
from ..engine.presets import Efficiency, check_preset, efficiency_for
from ..engine.table import Table
from ..errors import SpecError, UnsupportedDtypeError
from ..graphs.model import Model
from ..graphs.model import model as resolve_model
from ..graphs.training import GROUPS, TrainingGraph, training_graph
from ..graphs.transformer import TransformerConfig
from ..specs.cluster import Cluster
from ..specs.cluster import cluster as resolve_cluster
from ..specs.dtypes import PRECISION_ARG, Precision
from ..specs.dtypes import precision as make_precision
from ..specs.sourced import Provenance, read_quantity
from ..units import fmt_time
from . import _training_comm as comm

__all__ = ["train", "best_parallelism", "TrainingResult", "RECOMPUTE", "training_factors",
           "model_flops_per_sample"]

RECOMPUTE = ("none", "selective", "full")
_GI = {g: i for i, g in enumerate(GROUPS)}
#: Adam step, bytes moved per local parameter (see module docstring)
ADAM_BYTES_PER_PARAM = 34.0
#: Adam step, FLOPs per local parameter (moments, bias correction, sqrt, divide, decay, clip)
ADAM_FLOPS_PER_PARAM = 16.0
#: gradient bucket for DP overlap, bytes (Megatron's default 40 M parameters in fp32)
DP_BUCKET_BYTES = 40e6 * 4


# -- fitted factors --------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingFactors:
    """Fitted factors of the training model for one hardware kind."""

    gemm_max: float  #: achievable fraction of the matmul peak in training kernels
    gemm_half_size: float  #: GEMM M/N size (K: half of it) at which efficiency halves
    scale_up_efficiency: float  #: busbw / link bandwidth on NVLink/ICI
    scale_out_efficiency: float  #: busbw / link bandwidth on the NICs
    provenance: dict[str, Provenance] = field(default_factory=dict)


@lru_cache(maxsize=1)
def _factor_tables() -> dict[str, TrainingFactors]:
    doc = read_toml(DATA / "presets" / "training.toml")
    sources = doc.get("sources", {})
    out = {}
    for kind, tbl in doc.items():
        if kind in ("schema", "sources"):
            continue
        vals, prov = {}, {}
        for k in ("gemm_max", "gemm_half_size", "scale_up_efficiency", "scale_out_efficiency"):
            if k not in tbl:
                raise SpecError(f"data/presets/training.toml [{kind}] lacks {k!r}")
            v, p = read_quantity(tbl[k], field=k, dimension="ratio", sources=sources,
                                 origin=f"data/presets/training.toml [{kind}]")
            if k != "gemm_half_size" and not 0 < v <= 1:
                raise SpecError(f"data/presets/training.toml [{kind}] {k}={v} must be in (0, 1]")
            vals[k], prov[k] = v, p
        out[kind] = TrainingFactors(**vals, provenance=prov)
    return out


_OVERRIDE: dict[str, TrainingFactors] = {}


def training_factors(kind: str = "gpu") -> TrainingFactors:
    """The fitted training factors for a hardware kind (GPU factors for kinds without a fit)."""
    if kind in _OVERRIDE:
        return _OVERRIDE[kind]
    tables = _factor_tables()
    return tables.get(kind, tables["gpu"])


# -- the result ------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingResult:
    """One training configuration priced on a cluster. Times in s, bytes in B, energy in J."""

    model: str
    cluster: str
    device: str
    devices: int
    precision: str
    preset: str
    global_batch: int  #: sequences per optimizer step
    seq_len: int
    micro_batch: int
    microbatches: int  #: m, micro-batches per data-parallel replica per step
    tp: int
    pp: int
    dp: int
    ep: int
    interleave: int  #: v, model chunks per device (1: plain 1F1B)
    recompute: str
    zero: int
    sequence_parallel: bool
    step_time: float  #: seconds per optimizer step
    tokens_per_s: float
    mfu: float  #: model FLOPs / (step_time × devices × peak)
    hfu: float  #: hardware FLOPs (with recompute) / (step_time × devices × peak)
    model_flops_per_step: float
    hardware_flops_per_step: float
    breakdown: dict[str, float]  #: seconds per step: forward, backward, recompute, optimizer,
    #: tp_comm, dp_comm, pp_comm, ep_comm (exposed parts), bubble; they sum to step_time
    memory_per_device: dict[str, float]  #: bytes: weights, gradients, optimizer, activations,
    #: workspace, total
    memory_capacity: float  #: bytes per device
    feasible: bool
    reason: str = ""
    power_w: float = math.nan  #: cluster power while training (devices at TDP + node overhead)

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.step_time

    @property
    def energy_per_step(self) -> float:
        return self.power_w * self.step_time

    def time_to_train(self, tokens: float) -> float:
        """Seconds to train on ``tokens`` tokens."""
        return tokens / self.tokens_per_s

    def gpu_hours(self, tokens: float) -> float:
        """Device-hours to train on ``tokens`` tokens."""
        return self.time_to_train(tokens) * self.devices / 3600.0

    def energy_to_train(self, tokens: float) -> float:
        """Joules to train on ``tokens`` tokens (at the ``power_w`` assumption)."""
        return self.time_to_train(tokens) * self.power_w

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__}
        d["breakdown"] = dict(self.breakdown)
        d["memory_per_device"] = dict(self.memory_per_device)
        d["samples_per_s"] = self.samples_per_s
        d["energy_per_step"] = self.energy_per_step
        return d

    def __str__(self) -> str:
        gib = 2.0**30
        mem = self.memory_per_device
        sp = "on" if self.sequence_parallel else "off"
        lines = [
            f"{self.model} on {self.cluster} ({self.devices} × {self.device}), {self.precision}, "
            f"global batch {self.global_batch} × {self.seq_len} tokens",
            f"  split: tp={self.tp} pp={self.pp} dp={self.dp} ep={self.ep} "
            f"micro-batch={self.micro_batch} (m={self.microbatches}) interleave={self.interleave}"
            f" recompute={self.recompute} zero={self.zero} sp={sp}",
            f"  memory/device: {mem['total'] / gib:.1f} GiB of "
            f"{self.memory_capacity / gib:.0f} GiB "
            f"(weights {mem['weights'] / gib:.1f}, grads {mem['gradients'] / gib:.1f}, "
            f"optimizer {mem['optimizer'] / gib:.1f}, activations {mem['activations'] / gib:.1f}, "
            f"workspace {mem['workspace'] / gib:.1f})",
        ]
        if not self.feasible:
            lines.append(f"  does not run: {self.reason}")
            return "\n".join(lines)
        lines.append(f"  step time {fmt_time(self.step_time)}, {self.tokens_per_s:,.0f} "
                     f"tokens/s, MFU {self.mfu:.1%}, HFU {self.hfu:.1%}")
        parts = ", ".join(f"{k} {fmt_time(v)}" for k, v in self.breakdown.items() if v > 0)
        lines.append(f"  breakdown: {parts}")
        return "\n".join(lines)


# -- context: everything that does not depend on the split ---------------------------------------

@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class _Ctx:
    m: Model
    cfg: TransformerConfig
    cl: Cluster
    prec: Precision
    preset: str
    seq_len: int
    fused: bool
    dropout: bool
    eff: Efficiency
    links: comm.Links
    peak: float
    grad_bytes: float  #: gradient buffer bytes per parameter
    opt_bytes: float  #: optimizer-state bytes per parameter
    key: tuple[Any, ...]


_CTX: OrderedDict[tuple[Any, ...], tuple[Any, Any, _Ctx]] = OrderedDict()


def _context(model: Any, cl: Any, nodes: int | None, precision: str | Precision, seq_len: int,
             fused_attention: bool, dropout: bool, preset: str) -> _Ctx:
    """The split-independent part of a training scenario (cached: same inputs, same context)."""
    try:
        k = (id(model), id(cl), nodes, precision, seq_len, fused_attention, dropout, preset,
             id(_OVERRIDE.get("gpu")), id(_OVERRIDE.get("tpu")))
        hit = _CTX.get(k)
    except TypeError:  # an unhashable argument: no caching
        k, hit = None, None
    if hit is not None and hit[0] is model and hit[1] is cl:
        return hit[2]
    ctx = _make_context(model, cl, nodes, precision, seq_len, fused_attention, dropout, preset)
    if k is not None:
        _lru_put(_CTX, k, (model, cl, ctx), 64)
    return ctx


def _make_context(model: Any, cl: Any, nodes: int | None, precision: str | Precision,
                  seq_len: int, fused_attention: bool, dropout: bool, preset: str) -> _Ctx:
    m = resolve_model(model)
    if m.config is None or m.config.arch != "decoder":
        raise SpecError(f"training is modelled for decoder LMs (transformer configs); {m.name} is "
                        f"a {m.family} model")
    c = resolve_cluster(cl, nodes)
    p = make_precision(precision)
    preset = check_preset(preset)
    if preset == "mlsysim":
        raise SpecError("preset='mlsysim' prices whole inference passes only; for training use "
                        "'default' or 'bound'")
    hw = c.device
    if not hw.has(p.compute):
        raise UnsupportedDtypeError(f"{hw.name} has no {p.compute} peak; it has "
                                    f"{', '.join(hw.dtypes)}")
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise SpecError(f"seq_len must be a positive integer, got {seq_len!r}")
    base = efficiency_for(hw, preset)
    if preset == "bound":
        eff = base
        up_e = out_e = 1.0
    else:
        f = training_factors(hw.kind)
        eff = replace(base, gemm_max=f.gemm_max, gemm_a=f.gemm_half_size,
                      gemm_b=f.gemm_half_size, gemm_c=f.gemm_half_size / 2,
                      label=f"training/{hw.kind}")
        up_e, out_e = f.scale_up_efficiency, f.scale_out_efficiency
    links = comm.Links(domain=c.domain, up_bw=c.scale_up_bytes_per_s * up_e,
                       up_alpha=c.scale_up_latency_s, out_bw=c.scale_out_bytes_per_s * out_e,
                       out_alpha=c.scale_out_latency_s)
    if p.compute == "fp16" or p.weights == "fp16":
        grad_b, opt_b = 2.0, 16.0
    else:
        grad_b, opt_b = 4.0, 12.0
    key = (id(m), m.key, hw.key, p, preset, seq_len, fused_attention, eff.gemm_max, eff.gemm_a)
    return _Ctx(m=m, cfg=m.config, cl=c, prec=p, preset=preset, seq_len=seq_len,
                fused=fused_attention, dropout=dropout, eff=eff, links=links,
                peak=hw.peak(p.compute), grad_bytes=grad_b, opt_bytes=opt_b, key=key)


_GRAPHS: OrderedDict[tuple[Any, ...], TrainingGraph] = OrderedDict()
_TIMES: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
_MODEL_FLOPS: dict[tuple[Any, ...], tuple[float, float, float]] = {}


def _lru_put(d: OrderedDict[Any, Any], k: Any, v: Any, cap: int = 512) -> None:
    d[k] = v
    if len(d) > cap:
        d.popitem(last=False)


def _graph(ctx: _Ctx, tp: int, ep: int, b: int | None, sp: bool = True) -> TrainingGraph:
    moe = bool(ctx.cfg.n_experts)
    k = ctx.key + (tp, ep, b if moe else None, sp, ctx.dropout)
    g = _GRAPHS.get(k)
    if g is None:
        g = training_graph(ctx.cfg, ctx.prec, seq_len=ctx.seq_len, tp=tp, sequence_parallel=sp,
                           fused_attention=ctx.fused, ep=ep, micro_batch=b if moe else None,
                           dropout=ctx.dropout)
        _lru_put(_GRAPHS, k, g)
    return g


def _group_times(ctx: _Ctx, tp: int, ep: int, bs: list[int],
                 sp: bool = True) -> dict[int, np.ndarray]:
    """Seconds per group (GROUPS) for one micro-batch on one rank, for each micro-batch size."""
    out: dict[int, np.ndarray] = {}
    todo = []
    for b in bs:
        t = _TIMES.get(ctx.key + (tp, ep, b, sp, ctx.dropout))
        if t is None:
            todo.append(b)
        else:
            out[b] = t
    if not todo:
        return out
    hw = ctx.cl.device
    onehot = None
    if ctx.cfg.n_experts:
        batches_per_graph = [[b] for b in todo]
    else:
        batches_per_graph = [todo]
    for batches in batches_per_graph:
        tg = _graph(ctx, tp, ep, batches[0], sp)
        arr = price(tg.graph, [hw], [ctx.eff], np.asarray(batches, dtype=np.float64),
                    keep_ops=True)
        op_t = arr["op_time"][0]  # [b, n]
        onehot = np.zeros((len(tg.group), len(GROUPS)))
        onehot[np.arange(len(tg.group)), tg.group] = 1.0
        gt = op_t @ onehot  # [b, G]
        for i, b in enumerate(batches):
            out[b] = gt[i]
            _lru_put(_TIMES, ctx.key + (tp, ep, b, sp, ctx.dropout), gt[i], 4096)
    return out


def model_flops_per_sample(model: Any, seq_len: int, *, micro_batch: int = 1,
                           precision: str | Precision = "bf16") -> tuple[float, float, float]:
    """(model FLOPs, extra FLOPs of selective recompute, extra FLOPs of full recompute) per
    sequence of ``seq_len`` tokens, for one training step (forward + backward).

    Model FLOPs = 3 × the forward matmul-class FLOPs of the unfused graph (attention scores
    counted over the full T×S matrix, logits for every token), as PaLM App. B / Korthikanti et
    al. 2022 App. A count them; recompute adds the re-run forward matmuls (selective: scores
    and context; full: every layer matmul).
    """
    m = resolve_model(model)
    p = make_precision(precision)
    k = (id(m), m.key, seq_len, micro_batch if m.batch_dependent else None, p)
    hit = _MODEL_FLOPS.get(k)
    if hit is not None:
        return hit
    g = m.graph(precision=p, phase="forward", seq_len=seq_len, fused_attention=False,
                batch=micro_batch, logits="all")
    B = g.fixed_batch or 1
    flops = (g.c0[0] + g.c1[0] * B) / B
    mm = g.is_compute
    layer = np.array([n.startswith("layers.") for n in g.names])
    core = np.array([(".attn.scores" in n or ".attn.context" in n) for n in g.names])
    fwd = float(flops[mm].sum())
    out = (3.0 * fwd, float(flops[mm & core].sum()), float(flops[mm & layer].sum()))
    _MODEL_FLOPS[k] = out
    return out


# -- the vectorised step model ---------------------------------------------------------------------

def _evaluate(ctx: _Ctx, global_batch: int, tp: Any, pp: Any, dp: Any, ep: Any, b: Any, v: Any,
              rc: Any, zero: Any, gt: Any, lp: Any, emb_p: Any, head_p: Any,
              dp_overlap: bool, sp: Any = True, xp: Any = np) -> dict[str, Any]:
    """Price many configurations at once. ``gt`` is [n, G] group times per micro-batch;
    ``lp``, ``emb_p``, ``head_p`` the per-rank parameters of a layer, the embedding, the head.
    With ``xp=comm.SCALAR`` every argument is a Python number (``gt`` a [G] sequence): the same
    formulas price one configuration without numpy's per-call overhead."""
    cfg, s, links = ctx.cfg, float(ctx.seq_len), ctx.links
    D, L = float(cfg.d_model), float(cfg.n_layers)
    ab = ctx.prec.act_bytes
    wb = ctx.prec.weight_bytes
    if xp is comm.SCALAR:
        gtl = [float(x) for x in gt]
        f = lambda g: gtl[_GI[g]]  # noqa: E731
    else:
        f = lambda g: gt[:, _GI[g]]  # noqa: E731
    t_lf = f("layer_fwd") + f("layer_fwd_core")
    t_core = f("layer_fwd_core")
    t_lb = f("layer_bwd") + f("layer_bwd_dw") + f("layer_bwd_dw_col")
    t_dwc = f("layer_bwd_dw_col")
    t_hf, t_hb, t_ef, t_eb = f("head_fwd"), f("head_bwd"), f("embed_fwd"), f("embed_bwd")
    n_lps = L / pp
    m = global_batch / (dp * b)
    one = xp.ones_like(tp, dtype=float)

    # -- tensor parallelism
    n_act = b * s * D * ab
    t_ar = comm.all_reduce(n_act, tp, one, links, xp)
    tp_f = 2 * t_ar * (1 + (rc == 2))
    tp_b = xp.maximum(2 * t_ar - t_dwc, 0.0)
    t_rc = xp.where(rc == 1, t_core, xp.where(rc == 2, t_lf, 0.0))
    # -- expert parallelism (MoE layers: every layer of an MoE model here)
    if cfg.n_experts:
        tok = b * s / tp * cfg.top_k * D * ab
        t_a2a = comm.all_to_all(tok, ep, tp, links, xp)
        ep_l = t_a2a * (4 + 2 * (rc == 2))
    else:
        ep_l = xp.zeros_like(one)
    # -- one micro-batch through this device's layers, plus the heavier end of the pipeline
    pp1 = pp == 1
    head = t_hf + t_hb
    emb = t_ef + t_eb
    last_heavier = head >= emb
    ext_f = xp.where(pp1, t_hf + t_ef, xp.where(last_heavier, t_hf, t_ef))
    ext_b = xp.where(pp1, t_hb + t_eb, xp.where(last_heavier, t_hb, t_eb))
    cross = tp * pp * dp > links.domain
    t_p2p = comm.send_recv(b * s * D * ab / tp, cross, links, xp)
    pp_mb = xp.where(pp1, 0.0, 2 * v * t_p2p)
    f_mb = n_lps * t_lf + ext_f
    b_mb = n_lps * t_lb + ext_b
    rc_mb = n_lps * t_rc
    tp_mb = n_lps * (tp_f + tp_b)
    ep_mb = n_lps * ep_l
    t_mb = f_mb + b_mb + rc_mb + tp_mb + ep_mb + pp_mb
    bubble = (pp - 1) / v * t_mb

    # -- parameters on the fullest stage
    tied = ctx.cfg.tied_embeddings
    p_dev = n_lps * lp + xp.where(pp1, emb_p + head_p,
                                  xp.maximum(emb_p, head_p + (emb_p if tied else 0.0)))
    # -- data parallelism (+ ZeRO)
    g_bytes = p_dev * ctx.grad_bytes
    w_bytes = p_dev * wb
    ar = comm.all_reduce(g_bytes, dp, tp, links, xp)
    rs = 0.5 * ar  # reduce-scatter = half a ring all-reduce of the same buffer
    ag = comm.all_gather(w_bytes, dp, tp, links, xp)
    # ZeRO-3 reduce-scatters every micro-batch's gradients (below) instead of once per step
    t_dp = xp.where(zero == 0, ar, xp.where(zero == 3, ag, rs + ag))
    if dp_overlap:
        window = b_mb + rc_mb + xp.where(zero >= 1, f_mb, 0.0)
        last_bucket = t_dp * xp.minimum(1.0, DP_BUCKET_BYTES / xp.maximum(g_bytes, 1.0))
        dp_exp = xp.where(dp > 1, xp.maximum(t_dp - window, last_bucket), 0.0)
    else:
        dp_exp = xp.where(dp > 1, t_dp, 0.0)
    # ZeRO-3: two parameter all-gathers and a gradient reduce-scatter per micro-batch,
    # prefetched/overlapped under its compute
    z3 = xp.where(zero == 3, xp.maximum(2 * ag + rs - (f_mb + b_mb) * dp_overlap, 0.0), 0.0)
    dp_exp = dp_exp + xp.where(dp > 1, m * z3, 0.0)
    # -- optimizer over the local shard
    p_opt = p_dev / xp.where(zero >= 1, dp, 1)
    hw = ctx.cl.device
    vpeak = hw.peak_flops_per_s.get("fp32", ctx.peak)
    t_opt = xp.maximum(p_opt * ADAM_BYTES_PER_PARAM / (hw.memory_bytes_per_s * ctx.eff.memory_max),
                       p_opt * ADAM_FLOPS_PER_PARAM / (vpeak * ctx.eff.vector_max))
    step = m * t_mb + bubble + dp_exp + t_opt

    # -- memory per device (first stage)
    cfg_h = cfg.n_heads
    sp = (tp > 1) & xp.asarray(sp, dtype=bool)
    act_scale = ab / 2.0  # Korthikanti's table counts 2-byte activations
    H, K = float(cfg.head_dim), float(cfg.n_kv_heads)
    F = float(cfg.d_ff) * (cfg.top_k if cfg.n_experts else 1)
    mask = 1.0 if ctx.dropout else 0.0
    # per token, in bytes at 2-byte activations (Korthikanti Table 2 generalised to GQA/gated MLP)
    repl = 4 * D + 2 * D + 2 * D + 2 * mask * D  # two norm inputs, QKV and MLP inputs, masks
    # Q, K and V kept for the attention backward, its output (the o_proj input), MLP inputs of
    # the activation and of the down projection (gated: gate and up outputs and their product)
    shard = 2 * D + 4 * K * H + 2 * D + (6 * F if cfg.gated_mlp else 4 * F)
    # unfused attention keeps the softmax output (and, with dropout, its mask and output)
    scores = 0.0 if ctx.fused else (2 + 3 * mask) * cfg_h * s
    per_tok_none = xp.where(sp, (repl + shard) / tp, repl + shard / tp) + scores / tp
    per_tok_sel = xp.where(sp, (repl + shard) / tp, repl + shard / tp)
    per_layer_tok = xp.where(rc == 0, per_tok_none, xp.where(rc == 1, per_tok_sel, 2 * D))
    tokens_mb = b * s
    inflight = xp.where(pp1, 1.0, xp.minimum(m, pp)) * xp.where(
        v > 1, 1 + (pp - 1) / (pp * v), 1.0)
    act = per_layer_tok * act_scale * tokens_mb * n_lps * inflight
    # full recompute: one layer's activations live while it is recomputed
    act = act + xp.where(rc == 2, per_tok_none * act_scale * tokens_mb, 0.0)
    act = act + xp.where(pp1, tokens_mb * (cfg.vocab / tp) * 4.0, 0.0)  # fp32 logits (last stage)
    weights = w_bytes / xp.where(zero == 3, dp, 1)
    grads = g_bytes / xp.where(zero >= 2, dp, 1)
    opt = p_dev * ctx.opt_bytes / xp.where(zero >= 1, dp, 1)
    total = weights + grads + opt + act + ctx.eff.workspace
    return dict(step=step, t_mb=t_mb, m=m, bubble=bubble, forward=m * f_mb, backward=m * b_mb,
                recompute=m * rc_mb, tp_comm=m * tp_mb, ep_comm=m * ep_mb, pp_comm=m * pp_mb,
                dp_comm=dp_exp, optimizer=t_opt, weights=weights, gradients=grads, opt=opt,
                activations=act, total=total, p_dev=p_dev)


# -- validation of one split -----------------------------------------------------------------------

def _check_int(name: str, v: Any, lo: int = 1) -> int:
    return A.check_count(name, v, lo)


#: argument rules shared by train and best_parallelism
_DEG = A.count(1, A.MAX_DEVICES)
_OPT_DEG = A.optional(_DEG)
_ZERO = A.choice(0, 1, 2, 3)
_RC = A.choice(*RECOMPUTE)
_COMMON = dict(model=A.anything, cluster=A.anything, global_batch=A.count(),
               seq_len=A.count(1, A.MAX_TOKENS), precision=PRECISION_ARG, nodes=_OPT_DEG,
               fused_attention=A.flag, dropout=A.flag, dp_overlap=A.flag, preset=A.text)


def _validate(ctx: _Ctx, global_batch: int, micro_batch: int, tp: int, pp: int, dp: int, ep: int,
              interleave: int, recompute: str, zero: int) -> None:
    cfg, devices = ctx.cfg, ctx.cl.devices
    if tp * pp * dp != devices:
        raise SpecError(f"tp·pp·dp = {tp}·{pp}·{dp} = {tp * pp * dp} must equal the cluster's "
                        f"{devices} devices ({ctx.cl.nodes} nodes × {ctx.cl.devices_per_node})")
    if cfg.n_layers % pp:
        raise SpecError(f"pp={pp} must divide the {cfg.n_layers} layers of {cfg.name}")
    if (cfg.n_layers // pp) % interleave:
        raise SpecError(f"interleave={interleave} must divide the {cfg.n_layers // pp} layers per "
                        f"pipeline stage")
    if interleave > 1 and pp == 1:
        raise SpecError("interleave > 1 needs pipeline parallelism (pp > 1)")
    if dp % ep:
        raise SpecError(f"ep={ep} must divide dp={dp} (expert-parallel groups are slices of the "
                        "data-parallel group)")
    if global_batch % (dp * micro_batch):
        raise SpecError(f"global_batch={global_batch} must be divisible by dp·micro_batch = "
                        f"{dp}·{micro_batch} = {dp * micro_batch}")
    m = global_batch // (dp * micro_batch)
    if interleave > 1 and m % pp:
        raise SpecError(f"the interleaved schedule needs the {m} micro-batches per replica to be "
                        f"a multiple of pp={pp}")
    if recompute not in RECOMPUTE:
        raise SpecError(f"recompute={recompute!r}; allowed: {', '.join(RECOMPUTE)}")
    if zero not in (0, 1, 2, 3):
        raise SpecError(f"zero={zero!r}; allowed: 0, 1, 2, 3")


@A.checked(**_COMMON, micro_batch=A.count(), tp=_DEG, pp=_DEG, dp=_OPT_DEG, ep=_DEG,
           interleave=A.count(1, 1024), recompute=_RC, zero=_ZERO, sequence_parallel=A.flag)
def train(model: Any, cluster: Any, *, global_batch: int, seq_len: int, micro_batch: int = 1,
          tp: int = 1, pp: int = 1, dp: int | None = None, ep: int = 1, interleave: int = 1,
          recompute: str = "selective", zero: int = 1, precision: str | Precision = "bf16",
          nodes: int | None = None, sequence_parallel: bool = True,
          fused_attention: bool = True, dropout: bool = False, dp_overlap: bool = True,
          preset: str = "default") -> TrainingResult:
    """Price one optimizer step of ``model`` trained on ``cluster`` with a (tp, pp, dp, ep) split.

    ``dp`` defaults to devices / (tp·pp). ``interleave`` is v, model chunks per device
    (interleaved 1F1B). ``recompute``: "none" | "selective" | "full". ``zero``: 0–3.
    ``fused_attention``: FlashAttention-style kernels (False: the unfused QKᵀ/softmax/·V path of
    2021–22 Megatron). ``dropout``: count dropout masks in activation memory. ``dp_overlap``:
    overlap the gradient reduction with backward. A split that does not fit in memory is a
    result with ``feasible=False`` and the reason; an inconsistent split is a SpecError.
    """
    ctx = _context(model, cluster, nodes, precision, seq_len, fused_attention, dropout, preset)
    global_batch = _check_int("global_batch", global_batch)
    micro_batch = _check_int("micro_batch", micro_batch)
    tp, pp, ep = (_check_int(n, x) for n, x in (("tp", tp), ("pp", pp), ("ep", ep)))
    interleave = _check_int("interleave", interleave)
    if dp is None:
        if ctx.cl.devices % (tp * pp):
            raise SpecError(f"tp·pp = {tp * pp} must divide the cluster's {ctx.cl.devices} devices")
        dp = ctx.cl.devices // (tp * pp)
    dp = _check_int("dp", dp)
    zero = _check_int("zero", zero, 0)
    _validate(ctx, global_batch, micro_batch, tp, pp, dp, ep, interleave, recompute, zero)
    sp = bool(sequence_parallel) and tp > 1
    tg = _graph(ctx, tp, ep, micro_batch, sp)  # raises on heads/width not divisible
    gt = _group_times(ctx, tp, ep, [micro_batch], sp)[micro_batch]
    rc = RECOMPUTE.index(recompute)
    r = _evaluate(ctx, global_batch, tp, pp, dp, ep, micro_batch, interleave, rc, zero, gt,
                  tg.layer_params, tg.embed_params, tg.head_params, dp_overlap, sp, comm.SCALAR)
    r = {k: [v] for k, v in r.items()}
    return _result(ctx, r, 0, global_batch, micro_batch, tp, pp, dp, ep, interleave, recompute,
                   zero, sp)


def _result(ctx: _Ctx, r: dict[str, np.ndarray], i: int, global_batch: int, micro_batch: int,
            tp: int, pp: int, dp: int, ep: int, interleave: int, recompute: str,
            zero: int, sp: bool = True) -> TrainingResult:
    step = float(r["step"][i])
    mf, sel, full = model_flops_per_sample(ctx.m, ctx.seq_len, micro_batch=micro_batch,
                                           precision=ctx.prec)
    extra = {"none": 0.0, "selective": sel, "full": full}[recompute]
    model_flops = mf * global_batch
    hw_flops = (mf + extra) * global_batch
    devices = ctx.cl.devices
    cap = ctx.cl.device.memory_capacity_bytes
    mem = {"weights": float(r["weights"][i]), "gradients": float(r["gradients"][i]),
           "optimizer": float(r["opt"][i]), "activations": float(r["activations"][i]),
           "workspace": float(ctx.eff.workspace), "total": float(r["total"][i])}
    feasible = mem["total"] <= cap
    reason = "" if feasible else (
        f"needs {mem['total'] / 2**30:.1f} GiB per device, {ctx.cl.device.name} has "
        f"{cap / 2**30:.0f} GiB (weights {mem['weights'] / 2**30:.1f}, gradients "
        f"{mem['gradients'] / 2**30:.1f}, optimizer {mem['optimizer'] / 2**30:.1f}, activations "
        f"{mem['activations'] / 2**30:.1f} GiB)")
    bd = {k: float(r[k][i]) for k in ("forward", "backward", "recompute", "optimizer", "tp_comm",
                                      "dp_comm", "pp_comm", "ep_comm", "bubble")}
    hw = ctx.cl.device
    power = devices * hw.tdp_w + ctx.cl.nodes * ctx.cl.node_overhead_w
    return TrainingResult(
        model=ctx.m.name, cluster=ctx.cl.name, device=hw.name, devices=devices,
        precision=ctx.prec.label, preset=ctx.preset, global_batch=global_batch,
        seq_len=ctx.seq_len, micro_batch=micro_batch, microbatches=int(round(float(r["m"][i]))),
        tp=tp, pp=pp, dp=dp, ep=ep, interleave=interleave, recompute=recompute, zero=zero,
        sequence_parallel=sp and tp > 1, step_time=step,
        tokens_per_s=global_batch * ctx.seq_len / step,
        mfu=model_flops / (step * devices * ctx.peak), hfu=hw_flops / (step * devices * ctx.peak),
        model_flops_per_step=model_flops, hardware_flops_per_step=hw_flops, breakdown=bd,
        memory_per_device=mem, memory_capacity=cap, feasible=feasible, reason=reason,
        power_w=power)


# -- search ----------------------------------------------------------------------------------------

def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@A.checked(**_COMMON, micro_batches=A.seq(A.count(), what="micro-batch sizes such as (1, 2, 4)"),
           interleaves=A.seq(A.count(1, 1024), what="interleave factors such as (1, 2)"),
           recomputes=A.seq(_RC, what=f"recompute modes ({', '.join(RECOMPUTE)})"),
           zeros=A.seq(_ZERO, what="ZeRO stages (0, 1, 2, 3)"), max_tp=_OPT_DEG,
           top=A.optional(A.count(1, 10**9)), include_infeasible=A.flag)
def best_parallelism(model: Any, cluster: Any, *, global_batch: int, seq_len: int,
                     precision: str | Precision = "bf16", nodes: int | None = None,
                     micro_batches: tuple[int, ...] = (1, 2, 4, 8),
                     interleaves: tuple[int, ...] = (1, 2, 3, 4, 6, 8),
                     recomputes: tuple[str, ...] = RECOMPUTE, zeros: tuple[int, ...] = (0, 1, 2, 3),
                     max_tp: int | None = None, fused_attention: bool = True,
                     dropout: bool = False, dp_overlap: bool = True, preset: str = "default",
                     top: int | None = 20, include_infeasible: bool = False) -> Table:
    """Every valid (tp, pp, dp, ep, micro-batch, interleave, recompute, ZeRO) split of ``model``
    on ``cluster``, priced at once; those that do not fit dropped; ranked by step time.

    ``tp`` ranges over divisors of the device count that divide the heads (and the KV heads or
    vice versa) up to ``max_tp`` (default: the scale-up domain); ``pp`` over divisors of the
    layers; ``ep`` over divisors of the experts (MoE only). Returns a ``Table`` (best first).
    """
    ctx = _context(model, cluster, nodes, precision, seq_len, fused_attention, dropout, preset)
    global_batch = _check_int("global_batch", global_batch)
    cfg, devices = ctx.cfg, ctx.cl.devices
    max_tp = max_tp or ctx.cl.domain
    tps = [t for t in _divisors(devices) if t <= max_tp and cfg.n_heads % t == 0
           and (cfg.n_kv_heads % t == 0 or t % cfg.n_kv_heads == 0) and cfg.d_ff % t == 0]
    rows: dict[str, list[Any]] = {k: [] for k in ("tp", "pp", "dp", "ep", "b", "v", "rc", "zero")}
    for t in tps:
        for p in _divisors(cfg.n_layers):
            if devices % (t * p):
                continue
            d = devices // (t * p)
            eps = [e for e in _divisors(d) if cfg.n_experts % e == 0] if cfg.n_experts else [1]
            for b in micro_batches:
                if global_batch % (d * b):
                    continue
                mcount = global_batch // (d * b)
                vs = [1] if p == 1 else [v for v in interleaves if (cfg.n_layers // p) % v == 0
                                         and (v == 1 or mcount % p == 0)]
                for e in eps:
                    for v in vs:
                        for rc in recomputes:
                            for z in zeros:
                                if d == 1 and z > 0:
                                    continue
                                for k, x in zip(rows, (t, p, d, e, b, v, RECOMPUTE.index(rc), z)):
                                    rows[k].append(x)
    if not rows["tp"]:
        raise SpecError(f"no valid split of {cfg.name} on {devices} devices with global_batch="
                        f"{global_batch} and micro-batches {micro_batches}")
    arr = {k: np.asarray(v, dtype=np.float64) for k, v in rows.items()}
    n = len(arr["tp"])
    gt = np.empty((n, len(GROUPS)))
    lp, emb, head = np.empty(n), np.empty(n), np.empty(n)
    keys = sorted({(int(t), int(e)) for t, e in zip(arr["tp"], arr["ep"])})
    for t, e in keys:
        sel = (arr["tp"] == t) & (arr["ep"] == e)
        bs = sorted({int(x) for x in arr["b"][sel]})
        times = _group_times(ctx, t, e, bs)
        for b in bs:
            s2 = sel & (arr["b"] == b)
            gt[s2] = times[b]
            tg = _graph(ctx, t, e, b)
            lp[s2], emb[s2], head[s2] = tg.layer_params, tg.embed_params, tg.head_params
    r = _evaluate(ctx, global_batch, arr["tp"], arr["pp"], arr["dp"], arr["ep"], arr["b"],
                  arr["v"], arr["rc"], arr["zero"], gt, lp, emb, head, dp_overlap)
    cap = ctx.cl.device.memory_capacity_bytes
    fits = r["total"] <= cap
    mf = np.array([model_flops_per_sample(ctx.m, seq_len, micro_batch=int(b),
                                          precision=ctx.prec)[0] for b in arr["b"]]) \
        if cfg.n_experts else model_flops_per_sample(ctx.m, seq_len, precision=ctx.prec)[0]
    mfu = mf * global_batch / (r["step"] * devices * ctx.peak)
    # fastest first; among equally fast splits, the one needing less memory
    order = np.lexsort((r["total"], np.where(fits, r["step"], np.inf) if not include_infeasible
                        else r["step"]))
    if not include_infeasible:
        order = order[fits[order]]
    if top is not None:
        order = order[:top]
    gib = 2.0**30
    cols = {
        "tp": arr["tp"][order].astype(int), "pp": arr["pp"][order].astype(int),
        "dp": arr["dp"][order].astype(int), "ep": arr["ep"][order].astype(int),
        "micro_batch": arr["b"][order].astype(int), "interleave": arr["v"][order].astype(int),
        "recompute": [RECOMPUTE[int(x)] for x in arr["rc"][order]],
        "zero": arr["zero"][order].astype(int),
        "step_time": r["step"][order], "mfu": mfu[order],
        "tokens_per_s": global_batch * seq_len / r["step"][order],
        "memory": r["total"][order] / gib, "bubble": r["bubble"][order],
        "comm": (r["tp_comm"] + r["dp_comm"] + r["pp_comm"] + r["ep_comm"])[order],
        "fits": fits[order],
    }
    return Table(cols, units={"step_time": "s", "memory": "GiB", "bubble": "s", "comm": "s",
                              "tokens_per_s": "tok/s"},
                 title=f"{cfg.name} on {ctx.cl.name} × {ctx.cl.nodes} nodes ({devices} devices), "
                       f"global batch {global_batch} × {seq_len}: {int(fits.sum())} of {n} splits "
                       f"fit")
