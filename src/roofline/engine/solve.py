"""``solve``: price one model × hardware × scenario and explain it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from .. import _args as A
from .._call import records_call
from .._econ_args import with_economics
from .._frozen import LAZY
from ..errors import SpecError, UnsupportedDtypeError
from ..graphs.graph import Graph
from ..graphs.model import Model
from ..graphs.resolve import model as resolve_model
from ..specs.dtypes import PRECISION_ARG, Precision, known_precision
from ..specs.dtypes import precision as make_precision
from ..specs.hardware import Hardware
from ..specs.resolve import hardware as resolve_hardware
from .attention import ATTENTION_KERNELS
from .core import time_model
from .memory import memory_fit, resident_weights
from .presets import check_preset, check_runtime, efficiency_for, for_runtime
from .result import OpTableSource, Result

__all__ = ["solve", "check_batch"]


def check_batch(batch: Any, field: str = "batch") -> int:
    """``batch`` as a positive int (numpy integers and integral floats accepted)."""
    return A.check_count(field, batch)


def check_phase_lengths(phase: str, seq_len: int | None, context: int | None) -> None:
    """Refuse a length the phase does not use (the table in graphs/transformer.py: forward
    has no KV cache, decode takes one new token per sequence) rather than drop it."""
    if phase == "forward" and context not in (None, 0):
        raise SpecError(f"context={context!r} does not apply to phase 'forward' (no KV cache): "
                        "use phase='prefill' (context = cached prefix) or 'decode' (context = "
                        "tokens in the cache)")
    if phase == "decode" and seq_len not in (None, 1):
        raise SpecError(f"seq_len={seq_len!r} does not apply to phase 'decode' (one new token "
                        "per sequence per step): give context= (tokens in the KV cache)")


def _infeasible(m: Model, hw: Hardware, batch: int, p: Precision, preset: str, phase: str,
                reason: str) -> Result:
    nan = math.nan
    return Result(model=m.name, hardware=hw.name, hardware_key=hw.key, _hardware=hw, batch=batch,
                  precision=p.label, preset=preset, phase=phase, latency=nan, latency_bound=nan,
                  t_compute=nan, t_memory=nan, t_overhead=nan, throughput=0.0, bottleneck="none",
                  flops=nan, bytes=nan, arithmetic_intensity=nan, ridge_point=nan,
                  ridge_point_effective=nan, peak_flops_per_s=nan,
                  bandwidth_bytes_per_s=hw.memory_bytes_per_s, mfu=nan, mbu=nan,
                  memory_footprint=nan, memory_capacity=hw.memory_capacity_bytes,
                  feasible=False, reason=reason)


def FUSE_ARG(name: str, v: Any) -> Any:  # noqa: N802 - a rule, named like the others
    """``fuse``: a bool, or a set of fusion kinds (graphs/fusion.py), as a frozenset."""
    if v is True or v is False:
        return v
    from ..graphs.fusion import check_fuse

    return check_fuse(v)


def SPARSITY_ARG(name: str, v: Any) -> Any:  # noqa: N802
    """``sparsity``: None, "2:4" or a weight density in (0, 1) (graphs/sparsity.py)."""
    from ..graphs.sparsity import check_sparsity

    return check_sparsity(v)


#: the argument rules of ``solve`` (``sweep`` and the CLI share the scenario ones)
PHASE_ARG = A.optional(A.choice("forward", "prefill", "decode"))
ATTENTION_ARG = A.choice(*ATTENTION_KERNELS)
TOKENS_ARG = A.optional(A.count(1, A.MAX_TOKENS))


@records_call("solve")
@with_economics
@A.checked(model=A.anything, hardware=A.anything, batch=A.count(), precision=PRECISION_ARG,
           preset=A.text, phase=PHASE_ARG, seq_len=TOKENS_ARG, context=TOKENS_ARG,
           fused_attention=A.flag, kv_precision=A.optional(A.dtype),
           weight_precision=A.optional(A.dtype), group_size=A.optional(A.count()),
           fuse=FUSE_ARG, runtime=A.text, sparsity=SPARSITY_ARG, client=A.flag,
           attention_kernel=ATTENTION_ARG)
def solve(model: Any, hardware: Any, *, batch: int = 1, precision: str | Precision = "fp16",
          preset: str = "default", phase: str | None = None, seq_len: int | None = None,
          context: int | None = None, fused_attention: bool = True,
          kv_precision: str | None = None, weight_precision: str | None = None,
          group_size: int | None = None, fuse: bool | Any = False,
          runtime: str = "eager", sparsity: str | float | None = None,
          client: bool = False, attention_kernel: str = "auto") -> Result:
    """Predict latency, throughput and the binding resource of one forward pass (or decode step).

    ``model``: zoo name, path or Model; ``hardware``: zoo name, TOML path or Hardware.
    ``preset``: "default" (efficiencies and overheads), "bound" (pure roofline) or "mlsysim".
    Sequence models take ``phase`` ("forward", "prefill", "decode"), ``seq_len`` (T) and
    ``context`` (S, decode). ``fuse=True`` prices the graph a compiler would run, with
    activations, residual adds and batch norm folded into matmul/conv epilogues; the default
    is the eager graph, one kernel per op. ``runtime``: "eager" (every kernel launched from
    the host, each paying the preset's per-op ``dispatch``) or "compiled" (the whole graph
    submitted at once — CUDA graph, XLA program: no per-op host dispatch, the device-side
    kernel gap stays). ``fuse`` also takes a set of kinds ("bn", "activation", "residual",
    "attention", "qkv"; graphs/fusion.py). ``sparsity``: "2:4" (structured; only on parts
    whose hardware file gives sparse tensor throughput) or a weight density in (0, 1)
    (unstructured, compressed weights; graphs/sparsity.py). A configuration that cannot run
    (dtype missing, does not fit) is a Result with ``feasible=False`` and the ``reason``.
    ``price_per_hour`` (USD per device-hour), ``region`` (grid, for carbon) and ``pue`` feed
    ``r.economics`` / ``r.cost_per_sample``. ``client=True``: the latency a client measures end
    to end — the device time plus the inputs and outputs over the host link and through the
    serving stack and a per-request floor (engine/client.py; fitted on Triton runs, off by
    default); ``r.client_time`` holds the added seconds. ``attention_kernel``: the
    fused-attention implementation ("auto": the architecture's — FlashAttention-3 on Hopper,
    cuDNN on Blackwell, the matmul model elsewhere; "fa2", "fa3", "cudnn", "gemm", "unfused";
    engine/attention.py).
    """
    # a Model / Hardware / plain dtype given again skips the resolvers' nested argument rules
    m = model if isinstance(model, Model) else resolve_model(model)
    hw = hardware if isinstance(hardware, Hardware) else resolve_hardware(hardware)
    preset = check_preset(preset)
    runtime = check_runtime(runtime, preset)
    p = known_precision(precision) if kv_precision is None and weight_precision is None \
        and group_size is None else None
    if p is None:
        p = make_precision(precision, kv=kv_precision, weights=weight_precision,
                           group_size=group_size)
    phase = phase or m.default_phase
    if m.default_seq_len is not None:  # (a model without a sequence refuses both lengths)
        check_phase_lengths(phase, seq_len, context)
    if phase == "decode" and context is None and m.default_seq_len is not None:
        context = m.default_seq_len
    sparse = None
    if sparsity is not None:
        from ..graphs.sparsity import check_sparsity

        pattern = check_sparsity(sparsity)
        if pattern == "2:4" and "2:4" not in hw.sparsity:
            return _infeasible(m, hw, batch, p, preset, phase,
                               f"{hw.name} has no 2:4 sparse tensor throughput in its hardware "
                               "file; unstructured sparsity (a density) still compresses weights")
        if pattern is not None:
            sparse = (pattern, hw.sparsity.get("2:4", 1.0) if pattern == "2:4" else 1.0)
    if attention_kernel == "unfused":
        fused_attention = False
    g = m.graph(precision=p, phase=phase, seq_len=seq_len, context=context, batch=batch,
                fused_attention=fused_attention, fuse=fuse, sparsity=sparse)
    if not hw.has(p.compute):
        r = _infeasible(m, hw, batch, p, preset, phase,
                        f"{hw.name} has no {p.compute} peak; it has {', '.join(hw.dtypes)}")
        return replace(r, warnings=tuple(g.meta.get("warnings", ())))
    if preset == "mlsysim":
        return _solve_mlsysim(m, hw, g, batch, p, phase)
    eff = for_runtime(efficiency_for(hw, preset, attention_kernel), runtime)
    tm = time_model(g, hw, eff)
    tot = tm.totals_at(batch)
    ops = OpTableSource(g, None, batch, tot.latency, tm)
    # the fixed per-kernel fill is latency, labelled with launch and dispatch (core.Totals)
    parts = {"compute": tot.t_compute_bound_ops, "memory": tot.t_memory_bound_ops,
             "overhead": tot.t_overhead + tot.t_fill}
    bottleneck = max(parts, key=parts.__getitem__)
    r = _result(m, hw, g, batch, p, preset, phase, latency=tot.latency,
                latency_bound=tot.latency_bound, t_compute=tot.t_compute,
                t_memory=tot.t_memory, t_overhead=tot.t_overhead, bottleneck=bottleneck,
                t_fill=tot.t_fill, flops=tot.flops, byts=tot.bytes, ridge_eff=tm.ridge_effective,
                workspace=eff.workspace, ops=ops, seq_len=seq_len, context=context,
                live=tot.live_activation_bytes)
    return _with_client(r, g, hw, batch) if client else r


def _with_client(r: Result, g: Graph, hw: Hardware, batch: int) -> Result:
    """``r`` as a client measures it: latency + the client terms (engine/client.py), stated."""
    from .client import client_time

    c = client_time(g, hw, batch)
    lat = r.latency + c["total"]
    note = (f"end to end as a client measures it (client=True): + {c['total'] * 1e3:.3g} ms "
            f"(host-link copies {c['copies'] * 1e3:.3g} ms, serving-stack transport "
            f"{c['transport'] * 1e3:.3g} ms, per-request floor {c['floor'] * 1e3:.3g} ms)")
    tok = None if r.tokens_per_s is None else r.tokens_per_s * r.latency / lat
    return replace(r, latency=lat, throughput=batch / lat, tokens_per_s=tok,
                   mfu=r.mfu * r.latency / lat, mbu=r.mbu * r.latency / lat,
                   client_time=c["total"], warnings=r.warnings + (note,))


def _result(m: Model, hw: Hardware, g: Graph, batch: int, p: Precision, preset: str, phase: str,
            *, latency: float, latency_bound: float, t_compute: float, t_memory: float,
            t_overhead: float, bottleneck: str, flops: float, byts: float, ridge_eff: float,
            workspace: float, ops: Any, seq_len: int | None,
            context: int | None, t_fill: float = 0.0, peak: float | None = None,
            bandwidth: float | None = None,
            breakdown: dict[str, float] | None = None, live: float | None = None) -> Result:
    peak = hw.peak(p.compute) if peak is None else peak
    bw = hw.memory_bytes_per_s if bandwidth is None else bandwidth
    held, store_why = resident_weights(g, hw)
    if breakdown is None:
        breakdown = {
            "weights": held,
            "activations": g.live_activation_bytes(batch) if live is None else live,
            "kv_cache": g.state_bytes_per_sample * batch,
            "workspace": workspace,
        }
    cap = hw.memory_capacity_bytes
    feasible, footprint, reason = memory_fit(breakdown, cap, hw.name)
    if feasible and store_why:  # weight streaming: every weight must fit the weight store
        feasible, reason = False, store_why
    bad = [k for k, v in (("latency", latency), ("latency_bound", latency_bound),
                          ("flops", flops), ("bytes", byts), ("memory_footprint", footprint))
           if not math.isfinite(v) or v < 0]
    if feasible and bad:  # a result holding a non-finite number is never feasible
        feasible = False
        reason = non_finite_reason(bad)
    mfu, mbu = flops / (latency * peak), byts / (latency * bw)
    seq = g.meta.get("seq_len")
    tokens_per_s = None
    if seq is not None:
        tokens_per_s = batch * g.tokens_per_sample / latency
    return Result(
        model=m.name, hardware=hw.name, hardware_key=hw.key, _hardware=hw, batch=batch,
        precision=p.label,
        preset=preset, phase=phase, seq_len=seq, context=g.meta.get("kv_len") if phase ==
        "decode" else (context or None),
        latency=latency, latency_bound=latency_bound, t_compute=t_compute, t_memory=t_memory,
        t_overhead=t_overhead, t_fill=t_fill, throughput=batch / latency,
        tokens_per_s=tokens_per_s,
        bottleneck=bottleneck, flops=flops, bytes=byts,
        arithmetic_intensity=flops / byts if byts else math.inf,
        ridge_point=peak / bw, ridge_point_effective=ridge_eff, peak_flops_per_s=peak,
        bandwidth_bytes_per_s=bw, mfu=mfu, mbu=mbu,
        memory_footprint=footprint, memory_breakdown=breakdown, memory_capacity=cap,
        feasible=feasible, reason=reason, _op_table=ops,
        energy=LAZY, _energy_of=(_energy_j, hw, preset, latency, mfu, mbu),  # on first read
        warnings=tuple(g.meta.get("warnings", ())),
    )


def _energy_j(hw: Hardware, preset: str, latency: float, mfu: float, mbu: float) -> float:
    """J of one device over ``latency`` (analysis/power.py: idle + (peak − idle) × activity,
    a = min(1, w_c·MFU + w_m·MBU); mlsysim: TDP·(0.3 + 0.7·MFU))."""
    from ..analysis import power  # a sys.modules hit after the first call

    power_activity, device_power_w = power.power_activity, power.device_power_w
    u = min(1.0, max(0.0, mfu)) if preset == "mlsysim" else power_activity(mfu, mbu)
    return device_power_w(hw, u, preset) * latency


def _solve_mlsysim(m: Model, hw: Hardware, g: Graph, batch: int, p: Precision,
                   phase: str) -> Result:
    from .mlsysim import solve_mlsysim

    try:
        r = solve_mlsysim(m, hw, batch, p)
    except UnsupportedDtypeError as e:
        return _infeasible(m, hw, batch, p, "mlsysim", phase, str(e))
    ops = {"columns": {
        "name": [f"{m.name} (whole model)"], "kind": ["aggregate"], "class": ["aggregate"],
        "flops": np.array([r["flops"]]), "bytes": np.array([r["bytes"]]),
        "intensity": np.array([r["flops"] / r["bytes"]]),
        "bound": np.array([r["bottleneck"]], dtype=object),
        "t_compute": np.array([r["t_compute"]]), "t_memory": np.array([r["t_memory"]]),
        "overhead": np.array([r["t_overhead"]]), "fill": np.array([0.0]),  # no tiles, no fill
        "time": np.array([r["latency"]]), "share": np.array([1.0])},
        "units": {"flops": "FLOP", "bytes": "B", "time": "s"}}
    return _result(m, hw, g, batch, p, "mlsysim", phase, latency=r["latency"],
                   latency_bound=r["latency_bound"], t_compute=r["t_compute"],
                   t_memory=r["t_memory"], t_overhead=r["t_overhead"],
                   bottleneck=r["bottleneck"], flops=r["flops"], byts=r["bytes"],
                   ridge_eff=r["peak"] * r["efficiency"] / r["bandwidth"], workspace=0.0,
                   ops=ops, seq_len=None, context=None, peak=r["peak"], bandwidth=r["bandwidth"],
                   breakdown={"weights": r["weights"], "activations": r["activations"]})


def non_finite_reason(names: Sequence[str]) -> str:
    """Why a result holding a non-finite or negative number is not feasible (solve and sweep)."""
    return (f"{', '.join(names)} not a finite non-negative number (a spec or model value out "
            "of range)")

