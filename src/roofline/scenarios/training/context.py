"""The split-independent part of a training scenario (model, cluster, precision, efficiency,
links), the per-rank training graphs and their group times per micro-batch (cached)."""

from __future__ import annotations

import os
from abc import get_cache_token
from collections import OrderedDict
from dataclasses import dataclass, fields, replace
from functools import lru_cache, partial
from typing import Any

import numpy as np

from ..._cache import make_room
from ..._text import a_family
from ...engine.core import time_model
from ...engine.presets import Efficiency, check_preset, efficiency_for, registered_epoch
from ...engine.tiles import without_tiles
from ...errors import SpecError, UnsupportedDtypeError
from ...graphs.graph import Graph
from ...graphs.model import Model
from ...graphs.resolve import model as resolve_model
from ...graphs.training import (
    EAGER_OPS,
    GROUPS,
    TrainingGraph,
    lora_target_shapes,
    moe_layer_fraction,
    op_recomputed,
    training_graph,
)
from ...graphs.transformer import TransformerConfig
from ...ops import collectives as coll
from ...ops.training_formulas import MOE_DISPATCHERS
from ...specs.cluster import Cluster
from ...specs.dtypes import Precision, known_precision
from ...specs.dtypes import precision as make_precision
from ...specs.hardware import Hardware, SpecKey, spec_key
from ...specs.keys import frozen_key
from ...specs.resolve import cluster as resolve_cluster
from .factors import _OVERRIDE, cluster_links, training_factors

#: how the memory-bound ops run: one fused kernel each, or PyTorch eager's op chains
ELEMENTWISE = ("fused", "eager")
#: the dtype of the gradient buffer and the Adam states: "fp32" (Megatron's mixed precision:
#: fp32 gradients, m, v and master weights) or "bf16" (Apex DistributedFusedAdam with
#: ``dtype=bf16, grad_sync_dtype=bf16``, as NeMo 24.07's SFT recipe runs it)
OPTIMIZER_DTYPES = ("fp32", "bf16")


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
    links: coll.Links
    peak: float
    grad_bytes: float  #: gradient buffer bytes per parameter
    opt_bytes: float  #: optimizer-state bytes per parameter
    key: SpecKey  #: the content the cached graphs and timings depend on (hash computed once)
    lora_rank: int | None = None  #: LoRA adapter rank (None: every weight trained)
    cp: int = 1  #: context-parallel degree (the graphs hold seq_len / cp tokens)
    moe_fraction: float = 0.0  #: share of the layers that are MoE layers
    moe_routing: str = "random"  #: how tokens spread over experts (training_formulas.MOE_ROUTINGS)
    #: "fused" (the graph's one-kernel counts) | "eager" (PyTorch eager's op chains, eager.toml)
    elementwise: str = "fused"
    #: "fp32" | "bf16": the gradient buffer's and the optimizer states' dtype (OPTIMIZER_DTYPES)
    optimizer_dtype: str = "fp32"
    lora_targets: str = "all"  #: which linears carry the LoRA adapters (graphs.training)
    #: Megatron-Core's MoE token dispatcher, priced in the exchange and the collectives only
    #: (training_formulas.MOE_DISPATCHERS, folding.py); the graphs do not depend on it
    moe_dispatcher: str = "flex"


#: content key -> the context
_CTX: OrderedDict[tuple[Any, ...], _Ctx] = OrderedDict()


def _override_key(kind: str) -> tuple[float, ...] | None:
    """The content of an overriding factor set (a refit's trial), for the cache key: an id()
    is reused by the next trial once the previous one is freed, which returned its stale
    context (every trial of a refit priced with the first trial's factors)."""
    f = _OVERRIDE.get(kind)
    if f is None:
        return None
    return tuple(getattr(f, x.name) for x in fields(f) if x.name != "provenance")


def _context(model: Any, cl: Any, nodes: int | None, precision: str | Precision, seq_len: int,
             fused_attention: bool, dropout: bool, preset: str,
             lora_rank: int | None = None, cp: int = 1,
             attention_kernel: str = "auto", moe_routing: str = "random",
             elementwise: str = "fused", optimizer_dtype: str = "fp32",
             lora_targets: str = "all", moe_dispatcher: str | None = None) -> _Ctx:
    """The split-independent part of a training scenario (cached: same inputs, same context;
    a file path is read again every call, since the file may have changed)."""
    mk, ck = _model_key(model), _cluster_key(cl)
    if mk is None or ck is None:  # a path, or content that does not hash
        return _make_context(model, cl, nodes, precision, seq_len, fused_attention, dropout,
                             preset, lora_rank, cp, attention_kernel, moe_routing, elementwise,
                             optimizer_dtype, lora_targets, moe_dispatcher)
    try:
        k = (mk, ck, nodes, precision, seq_len, fused_attention, dropout, preset,
             lora_rank, cp, _overrides() if _OVERRIDE else (),
             registered_epoch(), attention_kernel, moe_routing, elementwise, optimizer_dtype,
             lora_targets, moe_dispatcher)
        hit = _CTX.get(k)
    except TypeError:  # an unhashable argument: no caching
        k, hit = None, None
    if hit is not None and k is not None:
        if hit.m is model or mk[0] == "str":
            return hit
        # another Model of equal content: the context carries the caller's own (its FLOP
        # counts come from its builder, and a Model is mutable: the first one may have changed)
        hit = _CTX[k] = replace(hit, m=model)
        return hit
    ctx = _make_context(model, cl, nodes, precision, seq_len, fused_attention, dropout, preset,
                        lora_rank, cp, attention_kernel, moe_routing, elementwise, optimizer_dtype,
                        lora_targets, moe_dispatcher)
    if k is not None:
        _lru_put(_CTX, k, ctx, 64)
    return ctx


def _overrides() -> tuple[Any, ...]:
    return tuple((t, _override_key(t)) for t in sorted(_OVERRIDE))


def _model_key(model: Any) -> tuple[Any, ...] | None:
    """The context cache's key of a ``model`` argument (None: not cached: a file path, read
    again every call, a module to import, a config that does not hash). A name is its own
    content; a Model keys on what the context reads: its config's content (with the builder
    function and weight format where the builder is a partial on the config,
    ``_model_content``; any other builder's FLOPs are counted on the caller's own object, which
    a hit puts in the context), the key and name the result shows and the MoE flag. Kept in
    the Model's memo, which any field assignment empties (``Model.__setattr__``): a warm call
    reads it back."""
    t = type(model)
    if t is str:  # a directory holding a config.json is a path too (graphs.resolve.model)
        path = _is_path(model) or (os.sep in model and os.path.exists(model))
        return None if path else ("str", model)
    if t is Model or isinstance(model, Model):
        memo = model._memo
        try:
            return memo["train_key"]  # type: ignore[no-any-return]
        except KeyError:
            pass
        k: tuple[Any, ...] | None
        c = _model_content(model)
        if c is None:  # a builder not determined by its config
            cfg = model.config  # None: training refuses it (no transformer config)
            fk = None if cfg is None else frozen_key(cfg)
            c = None if fk is None else ("custom", fk)
        k = None if c is None else (c, model.key, model.name, model.batch_dependent)
        memo["train_key"] = k
        return k
    return None  # a path, or a module an importer reads again (training refuses it)


def _cluster_key(cl: Any) -> tuple[Any, ...] | None:
    """The context cache's key of a ``cluster`` argument (None: not cached: a file path, a
    spec that does not hash): a name is its own content, a Cluster or Hardware (frozen) the
    key of all its fields (``frozen_key``, kept on the spec)."""
    t = type(cl)
    if t is str:
        return None if _is_path(cl) else ("str", cl)
    if t is Cluster or isinstance(cl, Cluster | Hardware):
        k = frozen_key(cl)
        return None if k is None else ("frozen", k)
    return None  # a path, or what the resolver refuses


def _is_path(x: Any) -> bool:
    t = type(x)
    if t is str:  # a plain str is never os.PathLike: no ABC check
        return x.lower().endswith((".toml", ".json", ".onnx", ".pt"))
    pathlike = _pathlike(t) if x.__class__ is t else isinstance(x, os.PathLike)
    return pathlike or (isinstance(x, str) and x.lower().endswith(
        (".toml", ".json", ".onnx", ".pt")))


#: type -> (abc cache token, isinstance of os.PathLike): the ABC check is a function of the
#: type and the ABC registry, whose token changes with any registration
_PATHLIKE: dict[type, tuple[object, bool]] = {}


def _pathlike(t: type) -> bool:
    token = get_cache_token()
    hit = _PATHLIKE.get(t)
    if hit is not None and hit[0] == token:
        return hit[1]
    v = issubclass(t, os.PathLike)
    if len(_PATHLIKE) > 256:
        _PATHLIKE.clear()
    _PATHLIKE[t] = (token, v)
    return v


def _make_context(model: Any, cl: Any, nodes: int | None, precision: str | Precision,
                  seq_len: int, fused_attention: bool, dropout: bool, preset: str,
                  lora_rank: int | None = None, cp: int = 1,
                  attention_kernel: str = "auto", moe_routing: str = "random",
                  elementwise: str = "fused", optimizer_dtype: str = "fp32",
                  lora_targets: str = "all", moe_dispatcher: str | None = None) -> _Ctx:
    if lora_targets != "all" and lora_rank is None:
        raise SpecError(f"lora_targets={lora_targets!r} places LoRA adapters; it needs lora_rank")
    m = resolve_model(model)
    if m.config is None or m.config.arch != "decoder":
        raise SpecError(f"training is modelled for decoder LMs (transformer configs); {m.name} is "
                        f"{a_family(m.family)} model")
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
    # the training factors were fitted on the smooth matmul model: no waves of tiles here
    base = fp8_training_attention(without_tiles(efficiency_for(hw, preset, attention_kernel)),
                                  p, attention_kernel)
    f = None if preset == "bound" else training_factors(hw.kind, hw.key)
    eff = base if f is None else f.efficiency(base, hw.kind)
    links = cluster_links(c, f)
    grad_b, opt_b = optimizer_state_bytes_per_param(p, optimizer_dtype)
    # the graphs and timings cached under this key depend on the model's shape and on the
    # device's and the factors' values: key on those, never on an id or a name
    if elementwise == "eager" and p.act_bytes != 2:
        raise SpecError(f"elementwise='eager' counts PyTorch eager's op chains for 16-bit "
                        f"activations; {p.activations} activations are {p.act_bytes:g} bytes")
    check_dispatcher_value(moe_dispatcher, m)
    # (the dispatcher prices the exchange and collectives, not the graphs: not in the key)
    key = SpecKey((m.key, m.config, spec_key(hw), eff, p, preset, seq_len, fused_attention,
                   lora_rank, cp, elementwise, optimizer_dtype, lora_targets))
    return _Ctx(m=m, cfg=m.config, cl=c, prec=p, preset=preset, seq_len=seq_len,
                fused=fused_attention, dropout=dropout, eff=eff, links=links,
                peak=hw.peak(p.compute), grad_bytes=grad_b, opt_bytes=opt_b, key=key,
                lora_rank=lora_rank, cp=cp, moe_fraction=moe_layer_fraction(m.config),
                moe_routing=moe_routing, elementwise=elementwise, optimizer_dtype=optimizer_dtype,
                lora_targets=lora_targets, moe_dispatcher=moe_dispatcher or "flex")


def check_dispatcher_value(moe_dispatcher: str | None, m: Any) -> None:
    """``moe_dispatcher`` is None (the default: "flex", the pricing before the knob) or one of
    ``MOE_DISPATCHERS``, and set only for a model with experts."""
    if moe_dispatcher is None:
        return
    if moe_dispatcher not in MOE_DISPATCHERS:
        raise SpecError(f"moe_dispatcher={moe_dispatcher!r}; allowed: "
                        f"{', '.join(MOE_DISPATCHERS)} (or unset: flex)")
    if m.config is None or not m.config.n_experts:
        raise SpecError(f"moe_dispatcher={moe_dispatcher!r} sets how a mixture of experts' tokens "
                        f"are dispatched; {m.name} has no experts (leave it unset)")


def fp8_training_attention(eff: Efficiency, prec: Precision, attention_kernel: str
                           ) -> Efficiency:
    """``eff`` for a training step: with ``attention_kernel`` "auto" in an fp8 step, the
    kernel's forward at its 16-bit rate, not its fp8 one (``Attention.fp8_fwd`` dropped), as
    the fp8 training stacks run it by default: Megatron-Core's ``fp8_dot_product_attention``
    and Transformer Engine's ``fp8_dpa`` are off unless set (docs/validation/fp8.md, session
    31). An explicit kernel keeps its fp8 forward; other precisions are unchanged."""
    att = eff.attention
    if prec.compute != "fp8" or attention_kernel != "auto" or att.fp8_fwd is None:
        return eff
    return replace(eff, attention=replace(att, fp8_fwd=None))


def optimizer_state_bytes_per_param(p: Precision, optimizer_dtype: str) -> tuple[float, float]:
    """(gradient buffer, optimizer state) bytes per trained parameter of mixed-precision Adam.

    "fp32": fp16 weights keep Megatron's fp16 gradients and 16 bytes of state (fp32 master,
    m, v and the loss-scaled copy), others fp32 gradients (4) and fp32 master + m + v (12).
    "bf16" (Apex DistributedFusedAdam with ``dtype=bf16, grad_sync_dtype=bf16``, NeMo 24.07's
    SFT recipe): bf16 gradients (2) and bf16 m and v (2 + 2), plus a bf16 master copy (2)
    when the weights are narrower than bf16 (fp8 parameters: NeMo sets ``store_params`` for
    ``fp8_params``); bf16 weights are their own master (NeMo: optimizer dtype == model dtype
    -> no stored copy). Refused for weights wider than 16 bits or fp16 ones (loss scaling needs
    fp32 state), naming the value."""
    if optimizer_dtype not in OPTIMIZER_DTYPES:
        raise SpecError(f"optimizer_dtype={optimizer_dtype!r}; allowed: "
                        f"{', '.join(OPTIMIZER_DTYPES)}")
    if optimizer_dtype == "fp32":
        if p.compute == "fp16" or p.weights == "fp16":
            return 2.0, 16.0
        return 4.0, 12.0
    if p.weights == "fp16" or p.compute == "fp16" or p.weight_bytes > 2:
        raise SpecError(f"optimizer_dtype='bf16' keeps bf16 gradients and Adam states for bf16 "
                        f"or fp8 weights; {p.label} has {p.weights} weights "
                        f"({p.weight_bytes:g} bytes)")
    return 2.0, 4.0 + (2.0 if p.weight_bytes < 2 else 0.0)


_GRAPHS: OrderedDict[tuple[Any, ...], TrainingGraph] = OrderedDict()
_TIMES: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
_MODEL_FLOPS: dict[tuple[Any, ...], tuple[float, float, float, float]] = {}


def _lru_put(d: OrderedDict[Any, Any], k: Any, v: Any, cap: int = 512) -> None:
    d[k] = v
    if len(d) > cap:
        d.popitem(last=False)


@lru_cache(maxsize=1)
def eager_table() -> dict[str, tuple[float, float]]:
    """{op: (forward, backward) bytes per output element} of PyTorch eager's op chains
    (data/presets/eager.toml; graphs.training.EAGER_OPS)."""
    from ..._data import DATA, read_toml
    from ...specs.sourced import read_quantity

    doc = read_toml(DATA / "presets" / "eager.toml")
    src, origin = doc.get("sources", {}), "data/presets/eager.toml"
    out = {}
    for op, tbl in doc.get("op", {}).items():
        if op not in EAGER_OPS:
            raise SpecError(f"{origin} [op.{op}]: unknown op; allowed: {', '.join(EAGER_OPS)}")
        fb = tuple(read_quantity(tbl[d], field=f"op.{op}.{d}", dimension="bytes", sources=src,
                                 origin=origin)[0] for d in ("fwd", "bwd"))
        out[op] = (float(fb[0]), float(fb[1]))
    return out


def _graph(ctx: _Ctx, tp: int, ep: int, b: int | None, sp: bool = True,
           etp: int | None = None) -> TrainingGraph:
    """The training graph of one rank; ``etp`` the expert tensor-parallel size (None: tp)."""
    moe = bool(ctx.cfg.n_experts)
    etp = tp if etp is None or not moe else etp
    k = (ctx.key, tp, ep, b if moe else None, sp, ctx.dropout, etp)
    g = _GRAPHS.get(k)
    if g is None:
        g = training_graph(ctx.cfg, ctx.prec, seq_len=ctx.seq_len // ctx.cp, tp=tp,
                           sequence_parallel=sp, cp=ctx.cp,
                           fused_attention=ctx.fused, ep=ep, micro_batch=b if moe else None,
                           dropout=ctx.dropout, lora_rank=ctx.lora_rank,
                           eager=eager_table() if ctx.elementwise == "eager" else None,
                           lora_targets=ctx.lora_targets, etp=etp)
        _lru_put(_GRAPHS, k, g)
    return g


def _group_times(ctx: _Ctx, tp: int, ep: int, bs: list[int],
                 sp: bool = True, etp: int | None = None) -> dict[int, np.ndarray]:
    """Seconds per group (GROUPS) for one micro-batch on one rank, for each micro-batch size
    (``etp``: the expert tensor-parallel size, None: tp)."""
    etp = tp if etp is None or not ctx.cfg.n_experts else etp
    out: dict[int, np.ndarray] = {}
    todo = []
    for b in bs:
        t = _TIMES.get((ctx.key, tp, ep, b, sp, ctx.dropout, etp))
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
        tg = _graph(ctx, tp, ep, batches[0], sp, etp)
        op_t = time_model(tg.graph, hw, ctx.eff).ops(
            np.asarray(batches, dtype=np.float64)).time  # [b, n]
        onehot = np.zeros((len(tg.group), len(GROUPS)))
        onehot[np.arange(len(tg.group)), tg.group] = 1.0 if tg.op_weight is None \
            else tg.op_weight  # the average of a dense and an MoE layer (graphs/training.py)
        gt = op_t @ onehot  # [b, G]
        for i, b in enumerate(batches):
            out[b] = gt[i]
            _lru_put(_TIMES, (ctx.key, tp, ep, b, sp, ctx.dropout, etp), gt[i], 4096)
    return out


def model_flops_per_sample(model: Any, seq_len: int, *, micro_batch: int = 1,
                           precision: str | Precision = "bf16",
                           lora_rank: int | None = None,
                           lora_targets: str = "all") -> tuple[float, float, float]:
    """(model FLOPs, extra FLOPs of selective recompute, extra FLOPs of full recompute) per
    sequence of ``seq_len`` tokens, for one training step (forward + backward).

    Model FLOPs = 3 × the forward matmul-class FLOPs of the unfused graph (attention scores
    counted over the full T×S matrix, logits for every token), as PaLM App. B / Korthikanti et
    al. 2022 App. A count them; recompute adds the re-run forward matmuls (selective: scores
    and context; full: every layer matmul).
    """
    return flops_terms(model, seq_len, micro_batch=micro_batch, precision=precision,
                       lora_rank=lora_rank, lora_targets=lora_targets)[:3]


def _model_content(m: Model) -> tuple[Any, ...] | None:
    """What a model's FLOP counts depend on, as a cache key: for a transformer built from its
    config (``graphs.model.transformer_model``: the builder is a partial of a module function on
    the config) the builder function, the config and the stored weight format, so equal models
    share an entry; None for any other model (a builder not determined by a config: a torch or
    ONNX import, a custom builder), whose counts key on the graph itself (``graph_digest``)."""
    memo = m._memo
    try:
        return memo["content"]  # type: ignore[no-any-return]
    except KeyError:
        pass
    out: tuple[Any, ...] | None = None
    b, cfg = m.builder, m.config
    if cfg is not None and isinstance(b, partial) and b.args == (cfg,) and not b.keywords:
        ck = frozen_key(cfg)  # the config's content, its hash kept on the config
        if ck is not None:
            try:
                hash(m.weight_format)
                out = ("config", b.func, ck, m.weight_format)
            except TypeError:  # an unhashable weight format
                pass
    memo["content"] = out
    return out


def flops_terms(model: Any, seq_len: int, *, micro_batch: int = 1,
                precision: str | Precision = "bf16",
                lora_rank: int | None = None,
                lora_targets: str = "all") -> tuple[float, float, float, float]:
    """``model_flops_per_sample``'s three terms and a fourth: the extra FLOPs of op-level
    selective recompute ("selective_op": the layers' every second linear re-run,
    ``graphs.training.op_recomputed``)."""
    m = model if isinstance(model, Model) else resolve_model(model)
    p = known_precision(precision) or make_precision(precision)
    c = _model_content(m)
    g = None
    if c is None:  # the terms are a function of the graph alone: key on its content
        g = m.graph(precision=p, phase="forward", seq_len=seq_len, fused_attention=False,
                    batch=micro_batch, logits="all")
        k: tuple[Any, ...] = ("graph", graph_digest(g), lora_rank, lora_targets)
    else:
        k = (c, seq_len, micro_batch if m.batch_dependent else None, p, lora_rank, lora_targets)
    hit = _MODEL_FLOPS.get(k)
    if hit is not None:
        return hit
    if g is None:
        g = m.graph(precision=p, phase="forward", seq_len=seq_len, fused_attention=False,
                    batch=micro_batch, logits="all")
    B = g.fixed_batch or 1
    flops = (g.c0[0] + g.c1[0] * B) / B
    mm = g.is_compute
    layer = np.array([n.startswith("layers.") for n in g.names])
    core = np.array([(".attn.scores" in n or ".attn.context" in n) for n in g.names])
    fwd = float(flops[mm].sum())
    op_rc = float(flops[mm & op_recomputed(g.names, g.kinds)].sum())
    out = (3.0 * fwd, float(flops[mm & core].sum()), float(flops[mm & layer].sum()), op_rc)
    if lora_rank is not None:
        lin = np.array([k == "linear" for k in g.kinds])
        tokens = g.gemm[0][lin & layer][0] if (lin & layer).any() else 0.0
        ad = sum(2.0 * tokens * lora_rank * (d_in + d_out)
                 for _, d_in, d_out in lora_target_shapes(g, lora_targets))
        w_mm = float(flops[mm & lin].sum())
        out = (3.0 * fwd - w_mm + 3.0 * ad, out[1], out[2] + ad, op_rc)
    make_room(_MODEL_FLOPS, 256)
    _MODEL_FLOPS[k] = out
    return out


def graph_digest(g: Graph) -> bytes:
    """A SHA-256 digest of a graph's content: its name, phase and precision, each op's name,
    kind and class, the cost, GEMM-shape and parameter arrays (dtype, shape and bytes), the
    scalars and the meta data (not its "_" entries: values derived from the rest, and the
    engine's time models cached on the graph), so that two graphs with one digest count the
    same. The key of a model whose builder is not its config's (a torch or ONNX import, a
    custom builder): two modules of one class with other shapes or dtypes give other digests."""
    import hashlib  # here: importing it loads OpenSSL (+18 M instructions on every start)

    h = hashlib.sha256()
    for f in fields(g):
        v = getattr(g, f.name)
        if f.name == "meta":
            v = {a: b for a, b in v.items() if not str(a).startswith("_")}
        h.update(f.name.encode())
        _feed(h, v)
    return h.digest()


#: types whose repr is their exact value (a tuple of them is fed as one repr)
_PLAIN = frozenset({str, int, float, bool, type(None)})


def _feed(h: Any, v: Any) -> None:
    """Feed one value to the digest, tagged by its type (an array by dtype, shape and bytes;
    a mapping in key order; a float by its exact text)."""
    if isinstance(v, np.ndarray):
        a = np.ascontiguousarray(v)
        h.update(f"<nd {a.dtype.str} {a.shape}>".encode())
        h.update(a.tobytes())
    elif isinstance(v, dict):
        h.update(f"<map {len(v)}>".encode())
        for key in sorted(v, key=repr):
            h.update(repr(key).encode())
            _feed(h, v[key])
    elif isinstance(v, list | tuple):
        h.update(f"<{type(v).__name__} {len(v)}>".encode())
        if _PLAIN.issuperset(map(type, v)):  # op names, kinds: one exact repr
            h.update(repr(v).encode())
        else:
            for x in v:
                _feed(h, x)
    else:  # str, numbers, None, Precision and other frozen values: their exact repr
        h.update(f"<{type(v).__name__} {v!r}>".encode())
