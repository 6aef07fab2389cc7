"""The lever generators: for each call kind and lever family, the rows it yields.

Each generator takes the levers' context (the base call and result, ``ctx.price`` to run one
change) and yields ``Lever`` rows; a lever that does not apply yields one row with
``applies=False`` and the reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import lru_cache
from typing import Any

from ..units import fmt_bytes, fmt_time
from .levers import Change, Lever

Gen = Callable[[Any], Iterator[Lever]]

#: elementwise-activation swaps offered (ops.ELEMENTWISE_FLOPS names)
_ACT_SWAPS = ("relu", "gelu_tanh", "silu")


@lru_cache(maxsize=1)
def accuracy_notes() -> dict[str, str]:
    """Cited accuracy costs (data/levers/accuracy.toml): key -> 'note (source)'."""
    from .._data import DATA, read_toml

    doc = read_toml(DATA / "levers" / "accuracy.toml")
    out = {}
    for k, v in doc.items():
        if not isinstance(v, dict) or not v.get("source") or not v.get("note"):
            raise ValueError(f"data/levers/accuracy.toml: [{k}] needs a note and a source")
        out[k] = f"{v['note']} ({v['source']})"
    return out


def not_for(fn: str, family: str) -> Gen:
    def gen(ctx: Any) -> Iterator[Lever]:
        yield ctx.na(family, "—", f"not a lever of rl.{fn}")
    return gen


def _kw(ctx: Any, name: str, default: Any = None) -> Any:
    return ctx.call.kwargs.get(name, default)


def _model(ctx: Any) -> Any:
    from ..graphs.resolve import model as resolve_model

    return resolve_model(ctx.call.model)


def _hw(ctx: Any) -> Any:
    from ..specs.resolve import hardware as resolve_hardware

    return resolve_hardware(ctx.call.hardware)


def _prec(ctx: Any) -> Any:
    from ..specs.dtypes import precision

    p = _kw(ctx, "precision", "fp16" if ctx.call.fn == "solve" else "bf16")
    return precision(p)


def _pct(a: float, b: float) -> str:
    return f"{(b / a - 1.0) * 100:+.1f} %" if a > 0 else "n/a"


# -- batch ----------------------------------------------------------------------------------------
def _solve_batch(ctx: Any) -> Iterator[Lever]:
    r = ctx.base
    B = r.batch
    for k in (2, 4):
        yield ctx.price("batch", f"batch {B * k} (x{k})", Change({"batch": B * k}),
                        lambda res, k=k: f"latency {fmt_time(r.latency)} -> "
                        f"{fmt_time(res.latency)}; intensity {r.arithmetic_intensity:.0f} -> "
                        f"{res.arithmetic_intensity:.0f} FLOP/B (ridge {r.ridge_point:.0f})")
    ridge = _ridge_batch(ctx)
    if ridge is None:
        yield ctx.na("batch", "to the ridge point", "no batch up to 65,536 turns the model "
                     "compute-bound on this part")
    elif ridge > B:
        yield ctx.price("batch", f"batch {ridge} (ridge point)", Change({"batch": ridge}),
                        lambda res: f"smallest batch whose time is mostly compute: intensity "
                        f"{res.arithmetic_intensity:.0f} FLOP/B vs ridge {r.ridge_point:.0f}")
    else:
        yield ctx.na("batch", "to the ridge point", f"already compute-bound at batch {B}")
    cap = _memory_batch(ctx)
    if cap is not None and cap > B:
        yield ctx.price("batch", f"batch {cap} (memory limit)", Change({"batch": cap}),
                        lambda res: f"largest batch that fits: {fmt_bytes(res.memory_footprint)}"
                        f" of {fmt_bytes(res.memory_capacity)}")
    if ctx.slo is not None:
        best = _largest_under(ctx, "batch", B, cap or 65536, lambda res: res.latency)
        if best is None:
            yield ctx.na("batch", "largest under the SLO", f"batch {B} already misses the "
                         f"{fmt_time(ctx.slo)} SLO ({fmt_time(r.latency)})")
        elif best > B:
            yield ctx.price("batch", f"batch {best} (largest under SLO)", Change({"batch": best}),
                            lambda res: f"latency {fmt_time(res.latency)} <= SLO "
                            f"{fmt_time(ctx.slo)}")


def _ridge_batch(ctx: Any) -> int | None:
    b = ctx.base.batch
    lo, hi = b, None
    n = b
    while n <= 65536:
        res = ctx.call.with_(batch=n).run()
        if res.bottleneck == "compute":
            hi = n
            break
        lo = n
        n *= 2
    if hi is None:
        return None
    if hi == b:
        return b
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ctx.call.with_(batch=mid).run().bottleneck == "compute":
            hi = mid
        else:
            lo = mid
    return hi


def _memory_batch(ctx: Any) -> int | None:
    """Largest batch that fits: the footprint is affine in the batch (two solves)."""
    r1 = ctx.call.with_(batch=1).run()
    r2 = ctx.call.with_(batch=2).run()
    a, c = r1.memory_footprint, r2.memory_footprint - r1.memory_footprint
    cap = r1.memory_capacity
    if not (math.isfinite(a) and math.isfinite(c)) or a > cap:
        return None
    if c <= 0:
        return None
    return max(1, int((cap - a) // c) + 1)


def _largest_under(ctx: Any, arg: str, lo: int, hi: int,
                   lat: Callable[[Any], float]) -> int | None:
    def ok(n: int) -> bool:
        res = ctx.call.with_(**{arg: n}).run()
        return bool(getattr(res, "feasible", True)) and lat(res) <= ctx.slo

    if not ok(lo):
        return None
    if ok(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def _serve_batch(ctx: Any) -> Iterator[Lever]:
    s = ctx.base
    B = s.batch
    for k in (2, 4):
        yield ctx.price("batch", f"batch {B * k} (x{k})", Change({"batch": B * k}),
                        lambda res: f"TPOT {fmt_time(s.tpot)} -> {fmt_time(res.tpot)}: weights "
                        f"read once per step for {res.batch} requests")
    if s.max_batch > B:
        yield ctx.price("batch", f"batch {s.max_batch} (memory limit)",
                        Change({"batch": s.max_batch}),
                        lambda res: f"largest batch whose KV cache fits: TPOT "
                        f"{fmt_time(res.tpot)}")
    if ctx.slo is not None:
        best = _largest_under(ctx, "batch", B, max(B, s.max_batch), lambda res: res.tpot)
        if best is None:
            yield ctx.na("batch", "largest under the SLO", f"batch {B} already misses the "
                         f"TPOT SLO {fmt_time(ctx.slo)} ({fmt_time(s.tpot)})")
        elif best > B:
            yield ctx.price("batch", f"batch {best} (largest under SLO)", Change({"batch": best}),
                            lambda res: f"TPOT {fmt_time(res.tpot)} <= SLO {fmt_time(ctx.slo)}")


# -- precision and quantization -------------------------------------------------------------------
def _precision_rows(ctx: Any, llm: bool, kv: bool) -> Iterator[Lever]:
    hw = _hw(ctx)
    p = _prec(ctx)
    notes = accuracy_notes()
    base = ctx.base

    def bytes_why(res: Any) -> str:
        if ctx.call.fn == "solve":
            return (f"bytes {fmt_bytes(base.bytes)} -> {fmt_bytes(res.bytes)}, time "
                    f"{_pct(ctx.base_time, ctx.metric.time(res))}")
        return f"per-token time {_pct(ctx.base_time, ctx.metric.time(res))}"

    for dt, note in (("fp8", "fp8"), ("int8", "int8")):
        setting = f"{dt} W8A8"
        if p.compute == dt:
            yield ctx.na("precision", setting, f"already computing in {dt}")
        elif not hw.has(dt):
            yield ctx.na("precision", setting, f"{hw.name} has no {dt} peak (it has "
                         f"{', '.join(hw.dtypes)})")
        else:
            yield ctx.price("precision", setting, Change({"precision": dt}),
                            lambda res, dt=dt: f"{dt} peak {hw.peak(dt) / 1e12:,.0f} vs "
                            f"{p.compute} {hw.peak(p.compute) / 1e12:,.0f} TFLOP/s; "
                            + bytes_why(res), note=notes[note])
    if llm:
        for w, g, note in (("int8", None, "int8-weights"), ("int4", 128, "int4-g128")):
            setting = f"{w} weights" + (f", group {g}" if g else "") + f" ({p.compute} compute)"
            if p.weights == w:
                yield ctx.na("precision", setting, f"weights are already {w}")
                continue
            kw: dict[str, Any] = {"weight_precision": w}
            if g:
                kw["group_size"] = g
            wb = {"int8": 1.0, "int4": 0.5}[w] + (2.0 / g if g else 0.0)
            yield ctx.price("precision", setting, Change(kw),
                            lambda res, wb=wb: f"{wb:.4g} B/weight (scales counted) vs "
                            f"{p.weight_bytes:.4g}; " + bytes_why(res), note=notes[note])
    if kv:
        for k in ("fp8", "int8"):
            setting = f"KV cache {k}"
            if p.kv == k:
                yield ctx.na("precision", setting, f"KV cache is already {k}")
                continue
            yield ctx.price("precision", setting, Change({"kv_precision": k}),
                            lambda res: "KV bytes halved; " + bytes_why(res),
                            note=notes[f"kv-{k}"])


def _solve_precision(ctx: Any) -> Iterator[Lever]:
    m = _model(ctx)
    llm = m.config is not None
    phase = _kw(ctx, "phase") or m.default_phase
    yield from _precision_rows(ctx, llm, kv=llm and phase == "decode")


def _serve_precision(ctx: Any) -> Iterator[Lever]:
    yield from _precision_rows(ctx, True, True)


def _train_precision(ctx: Any) -> Iterator[Lever]:
    p = _prec(ctx)
    from ..specs.resolve import cluster as resolve_cluster

    cl = resolve_cluster(ctx.call.hardware)
    dev = cl.device
    if p.compute == "fp8":
        yield ctx.na("precision", "fp8 training", "already fp8")
    elif not dev.has("fp8"):
        yield ctx.na("precision", "fp8 training", f"{dev.name} has no fp8 peak")
    else:
        yield ctx.price("precision", "fp8 training (Transformer Engine style)",
                        Change({"precision": "fp8"}),
                        lambda res: f"fp8 peak {dev.peak('fp8') / 1e12:,.0f} vs "
                        f"{dev.peak(p.compute) / 1e12:,.0f} TFLOP/s; step "
                        f"{fmt_time(ctx.base.step_time)} -> {fmt_time(res.step_time)}",
                        note=accuracy_notes()["fp8"])


# -- fusion, runtime ------------------------------------------------------------------------------
def _solve_fusion(ctx: Any) -> Iterator[Lever]:
    from ..graphs.fusion import EPILOGUE_KINDS, FOLD_KINDS, check_fuse

    m = _model(ctx)
    cur = check_fuse(_kw(ctx, "fuse", False))
    labels = {"bn": "conv+BN fold", "activation": "activation epilogue",
              "residual": "residual-add epilogue", "norm": "add+norm kernel"}
    base = ctx.base

    def why(res: Any) -> str:
        return (f"{len(base.ops)} -> {len(res.ops)} kernels, bytes {fmt_bytes(base.bytes)} -> "
                f"{fmt_bytes(res.bytes)}")

    present_kinds: set[str] = set()
    for k in FOLD_KINDS:
        if k in cur:
            yield ctx.na("fusion", labels[k], "already fused")
            continue
        g0 = m.graph(precision=_prec(ctx), phase=_kw(ctx, "phase"), seq_len=_kw(ctx, "seq_len"),
                     context=_kw(ctx, "context"), fuse=cur or False)
        from ..graphs.fusion import _kind

        present = (any(g0.kinds[i] == "norm" and not g0.fusible[i] for i in range(len(g0)))
                   if k == "norm" else any(_kind(g0, i) == k for i in range(len(g0))))
        if not present:
            yield ctx.na("fusion", labels[k], f"{m.name} has no {labels[k].split()[0]} op "
                         "to fold")
            continue
        present_kinds.add(k)
        yield ctx.price("fusion", labels[k] + " alone", Change({"fuse": cur | {k}}), why)
    if not cur >= set(EPILOGUE_KINDS):
        yield ctx.price("fusion", "every epilogue (fuse=True)",
                        Change({"fuse": cur | set(EPILOGUE_KINDS)}), why)
    everything = cur | present_kinds | set(EPILOGUE_KINDS) | (
        {"qkv"} if m.config is not None and not m.config.fused_qkv else set())
    if not cur >= everything and everything != cur | set(EPILOGUE_KINDS):
        yield ctx.price("fusion", "every fusion (" + ", ".join(sorted(everything)) + ")",
                        Change({"fuse": cur | everything}), why)
    if m.config is not None:
        if _kw(ctx, "fused_attention", True) is False:
            yield ctx.price("fusion", "fused attention (FlashAttention-style)",
                            Change({"fused_attention": True}),
                            lambda res: f"scores never written: bytes {fmt_bytes(base.bytes)} "
                            f"-> {fmt_bytes(res.bytes)}")
        else:
            yield ctx.na("fusion", "fused attention", "already fused (fused_attention=True); "
                         "fused_attention=False prices materialised scores")
        if m.config.fused_qkv or "qkv" in cur:
            yield ctx.na("fusion", "fused QKV projection", "already one QKV matmul")
        else:
            yield ctx.price("fusion", "fused QKV projection", Change({"fuse": cur | {"qkv"}}),
                            why)


def _solve_runtime(ctx: Any) -> Iterator[Lever]:
    rt = _kw(ctx, "runtime", "eager")
    preset = _kw(ctx, "preset", "default")
    if preset != "default":
        yield ctx.na("runtime", "compiled (CUDA graph / XLA)", f"preset {preset!r} has no "
                     "per-kernel host dispatch to remove")
    elif rt == "compiled":
        yield ctx.na("runtime", "compiled (CUDA graph / XLA)", "already compiled")
    else:
        base = ctx.base
        yield ctx.price("runtime", "compiled (CUDA graph / XLA)", Change({"runtime": "compiled"}),
                        lambda res: f"host dispatch off: overhead {fmt_time(base.t_overhead)} -> "
                        f"{fmt_time(res.t_overhead)}")


def _serve_runtime(ctx: Any) -> Iterator[Lever]:
    eng = _kw(ctx, "engine", "trtllm")
    if eng == "trtllm":
        yield ctx.na("runtime", "engine trtllm", "already the fastest engine profile")
        return
    yield ctx.price("runtime", "engine trtllm (CUDA graphs, fused kernels)",
                    Change({"engine": "trtllm"}),
                    lambda res: f"TPOT {fmt_time(ctx.base.tpot)} -> {fmt_time(res.tpot)}")


# -- sparsity -------------------------------------------------------------------------------------
def _solve_sparsity(ctx: Any) -> Iterator[Lever]:
    hw = _hw(ctx)
    notes = accuracy_notes()
    cur = _kw(ctx, "sparsity")
    base = ctx.base
    if cur:
        yield ctx.na("sparsity", "2:4 structured", f"already sparsity={cur!r}")
        return
    if "2:4" not in hw.sparsity:
        yield ctx.na("sparsity", "2:4 structured", f"{hw.name}'s datasheet gives no sparse "
                     "tensor throughput (no [sparsity] in its hardware file)")
    else:
        yield ctx.price("sparsity", "2:4 structured (weights)", Change({"sparsity": "2:4"}),
                        lambda res: f"GEMMs at up to x{hw.sparsity['2:4']:.0f} the dense rate, "
                        f"half the weight values + 2-bit indices: bytes {fmt_bytes(base.bytes)} "
                        f"-> {fmt_bytes(res.bytes)}", note=notes["sparse-2-4"])
    yield ctx.price("sparsity", "unstructured, density 0.5", Change({"sparsity": 0.5}),
                    lambda res: f"compressed weights (values + 16-bit indices), no compute gain "
                    f"on dense units: bytes {fmt_bytes(base.bytes)} -> {fmt_bytes(res.bytes)}",
                    note=notes["unstructured"])


# -- activation, shape ----------------------------------------------------------------------------
def _variant(ctx: Any, lever: str, setting: str, cfg: Any, why: Callable[[Any], str]) -> Lever:
    from ..graphs.knobs import variant_of

    m = _model(ctx)
    try:
        new = variant_of(cfg, key=m.key, name=f"{m.name} ({setting})")
    except Exception as e:  # a config the builder refuses is a row, not a crash
        return ctx.na(lever, setting, f"cannot build: {e}")
    return ctx.price(lever, setting, Change(model=new), why)


def _knob_variant(ctx: Any, lever: str, setting: str, why: Callable[[Any], str],
                  **knobs: Any) -> Lever:
    from ..graphs.knobs import resize

    try:
        new = resize(_model(ctx), **knobs)
    except Exception as e:  # a variant the builder refuses is a row, not a crash
        return ctx.na(lever, setting, f"cannot build: {e}")
    return ctx.price(lever, setting, Change(model=new), why)


def _cnn_knobs(ctx: Any) -> bool:
    from ..graphs.knobs import _RESNETS

    return _model(ctx).key in _RESNETS and isinstance(ctx.call.model, str)


def _solve_activation(ctx: Any) -> Iterator[Lever]:
    from ..ops.formulas import ELEMENTWISE_FLOPS

    m = _model(ctx)
    cfg = m.config
    base = ctx.base
    if cfg is None and _cnn_knobs(ctx):
        for act in ("gelu_tanh", "silu"):
            f1 = ELEMENTWISE_FLOPS[act]
            def why_cnn(res: Any, f1: float = f1, act: str = act) -> str:
                return (f"{act} costs {f1} FLOP/element against ReLU's 1, but the op is "
                        "memory-bound"
                        + (" and fused into the conv epilogue" if _kw(ctx, "fuse") else "")
                        + f": {_pct(base.latency, res.latency)}, intensity "
                        f"{base.arithmetic_intensity:.1f} -> {res.arithmetic_intensity:.1f} "
                        "FLOP/B")

            yield _knob_variant(ctx, "activation", f"relu -> {act}", why_cnn, act=act)
        return
    if cfg is None:
        yield ctx.na("activation", "activation swap", f"{m.name} is built from fixed layers; "
                     "the activation is a knob of the ResNet and transformer zoo models")
        return
    f0 = ELEMENTWISE_FLOPS.get(cfg.act, math.nan)
    for act in _ACT_SWAPS:
        if act == cfg.act:
            continue
        f1 = ELEMENTWISE_FLOPS[act]

        def why(res: Any, f1: float = f1, act: str = act) -> str:
            return (f"{cfg.act} costs {f0} FLOP/element against {act}'s {f1}, but the op is "
                    "memory-bound"
                    + (" and fused into the GEMM epilogue" if _kw(ctx, "fuse") else "")
                    + f": {_pct(base.latency, res.latency)}")

        yield _variant(ctx, "activation", f"{cfg.act} -> {act}", replace(cfg, act=act), why)
    gated = "gated -> plain MLP (same d_ff)" if cfg.gated_mlp else "plain -> gated MLP (same d_ff)"
    yield _variant(ctx, "activation", gated, replace(cfg, gated_mlp=not cfg.gated_mlp),
                   lambda res: f"MLP matrices {3 if cfg.gated_mlp else 2} -> "
                   f"{2 if cfg.gated_mlp else 3}: FLOPs {base.flops / 1e9:,.1f} -> "
                   f"{res.flops / 1e9:,.1f} GFLOP (params change)")


def _round(x: float, mult: int) -> int:
    return max(mult, int(round(x / mult)) * mult)


def _solve_shape(ctx: Any) -> Iterator[Lever]:
    m = _model(ctx)
    cfg = m.config
    base = ctx.base

    def cnn_why(res: Any) -> str:
        return (f"intensity {base.arithmetic_intensity:.0f}"
                f" -> {res.arithmetic_intensity:.0f} FLOP/B (ridge {base.ridge_point:.0f}); "
                f"FLOPs {_pct(base.flops, res.flops)}")

    if cfg is None and _cnn_knobs(ctx):
        for w in (0.5, 2.0):
            yield _knob_variant(ctx, "shape", f"width x{w:g}", cnn_why, width=w)
        for d in (0.5, 2.0):
            yield _knob_variant(ctx, "shape", f"depth x{d:g}", cnn_why, depth=d)
        return
    if cfg is None:
        yield ctx.na("shape", "width / depth", f"{m.name} is built from fixed layers; width "
                     "and depth are knobs of the ResNet and transformer zoo models")
        return
    D, L, H = cfg.d_model, cfg.n_layers, cfg.head_dim

    def why(res: Any) -> str:
        return (f"intensity {base.arithmetic_intensity:.0f} -> {res.arithmetic_intensity:.0f} "
                f"FLOP/B (ridge {base.ridge_point:.0f}); FLOPs {_pct(base.flops, res.flops)}")

    # fewer but wider: 2x width, 1/4 the layers keeps params ~ D^2 L constant
    if L >= 4:
        D2 = _round(D * 2, 128)
        N2 = max(1, D2 // H)
        K2 = cfg.n_kv_heads * N2 // cfg.n_heads if (cfg.n_kv_heads * N2) % cfg.n_heads == 0 \
            else N2
        cfg2 = replace(cfg, d_model=D2, n_heads=N2, n_kv_heads=max(1, K2),
                       d_ff=_round(cfg.d_ff * 2, 128), n_layers=max(1, L // 4))
        yield _variant(ctx, "shape", f"fewer, wider: D {D}->{D2}, L {L}->{cfg2.n_layers}",
                       cfg2, why)
    cfg3 = replace(cfg, n_layers=max(1, L // 2))
    yield _variant(ctx, "shape", f"half the layers: L {L}->{cfg3.n_layers}", cfg3, why)
    if D % 128:
        D4 = _round(D, 128)
        yield _variant(ctx, "shape", f"d_model {D}->{D4} (multiple of 128)",
                       replace(cfg, d_model=D4), why)


def _train_batch(ctx: Any) -> Iterator[Lever]:
    yield ctx.na("batch", "global batch", "the global batch is a convergence hyperparameter, "
                 "not a free lever; the micro-batch is under parallelism")


from ._lever_rules_deploy import (  # noqa: E402 - after the helpers it imports
    _serve_hardware,
    _serve_parallelism,
    _solve_hardware,
    _train_hardware,
    _train_parallelism,
)

GENERATORS: dict[str, dict[str, Gen]] = {
    "solve": {"batch": _solve_batch, "precision": _solve_precision, "fusion": _solve_fusion,
              "runtime": _solve_runtime, "sparsity": _solve_sparsity,
              "activation": _solve_activation, "shape": _solve_shape,
              "hardware": _solve_hardware},
    "serve": {"batch": _serve_batch, "precision": _serve_precision, "runtime": _serve_runtime,
              "parallelism": _serve_parallelism, "hardware": _serve_hardware},
    "train": {"batch": _train_batch, "precision": _train_precision,
              "parallelism": _train_parallelism, "hardware": _train_hardware},
}
