"""The deployment levers: the parallel split and another chip (the rows ``_lever_rules``
registers for the ``parallelism`` and ``hardware`` families)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..units import fmt_bytes, fmt_time
from ._lever_rules import _hw, _prec
from .levers import Change, Lever


# -- parallelism ----------------------------------------------------------------------------------
def _serve_parallelism(ctx: Any) -> Iterator[Lever]:
    s = ctx.base
    for arg, cur in (("tp", s.tp), ("pp", s.pp)):
        n = cur * 2
        yield ctx.price("parallelism", f"{arg} {cur} -> {n}", Change({arg: n}),
                        lambda res, arg=arg: f"{res.devices} devices: TPOT "
                        f"{fmt_time(s.tpot)} -> {fmt_time(res.tpot)}, per device "
                        f"{s.tokens_per_s_per_device:,.0f} -> "
                        f"{res.tokens_per_s_per_device:,.0f} tokens/s")
    if s.tp > 1:
        yield ctx.price("parallelism", f"tp {s.tp} -> {s.tp // 2}", Change({"tp": s.tp // 2}),
                        lambda res: f"fewer all-reduces: per device "
                        f"{res.tokens_per_s_per_device:,.0f} tokens/s")


def _train_parallelism(ctx: Any) -> Iterator[Lever]:
    t = ctx.base
    kw = ctx.call.kwargs
    from ..scenarios.training import best_parallelism

    search_kw = {k: kw[k] for k in ("global_batch", "seq_len", "precision", "nodes",
                                    "fused_attention", "dropout", "dp_overlap", "preset")
                 if k in kw}
    tbl = best_parallelism(ctx.call.model, ctx.call.hardware, top=1, **search_kw)
    if len(tbl):
        row = tbl[0]
        ch = {k: row[k] for k in ("tp", "pp", "dp", "ep", "micro_batch", "interleave",
                                  "recompute", "zero") if k in row}
        setting = ", ".join(f"{k} {v}" for k, v in ch.items())
        yield ctx.price("parallelism", f"best split: {setting}", Change(ch),
                        lambda res: f"step {fmt_time(t.step_time)} -> {fmt_time(res.step_time)}"
                        f", MFU {t.mfu * 100:.1f} -> {res.mfu * 100:.1f} %")
    for rc in ("none", "selective", "full"):
        if rc != t.recompute:
            yield ctx.price("parallelism", f"recompute {rc}", Change({"recompute": rc}),
                            lambda res: f"memory {fmt_bytes(t.memory_per_device['total'])} -> "
                            f"{fmt_bytes(res.memory_per_device['total'])}")
    for z in (0, 1, 2, 3):
        if z != t.zero:
            yield ctx.price("parallelism", f"ZeRO {z}", Change({"zero": z}),
                            lambda res: f"memory {fmt_bytes(t.memory_per_device['total'])} -> "
                            f"{fmt_bytes(res.memory_per_device['total'])}")
    yield ctx.price("parallelism", f"micro-batch {t.micro_batch * 2}",
                    Change({"micro_batch": t.micro_batch * 2}),
                    lambda res: f"bubble {fmt_time(t.breakdown.get('bubble', 0))} -> "
                    f"{fmt_time(res.breakdown.get('bubble', 0))}")


# -- hardware -------------------------------------------------------------------------------------
def _hardware_rows(ctx: Any, dtype: str) -> Iterator[Lever]:
    from ..specs.resolve import hardware as resolve_hardware
    from ..specs.resolve import list_hardware

    cur = _hw(ctx)
    bound = ctx.base_bound
    for key in list_hardware():
        hw = resolve_hardware(key)
        if hw.key == cur.key:
            continue
        if not hw.has(dtype):
            yield ctx.na("hardware", hw.name, f"no {dtype} peak")
            continue
        bw = hw.memory_bytes_per_s / cur.memory_bytes_per_s
        pk = hw.peak(dtype) / cur.peak(dtype)

        def why(res: Any, bw: float = bw, pk: float = pk) -> str:
            if bound == "memory":
                return f"memory-bound: bandwidth x{bw:.2f}"
            if bound == "compute":
                return f"compute-bound: {dtype} peak x{pk:.2f}"
            return (f"overhead-bound: neither bandwidth (x{bw:.2f}) nor peak (x{pk:.2f}) "
                    "moves a fixed launch cost much")

        yield ctx.price("hardware", hw.name, Change(hardware=key), why)


def _solve_hardware(ctx: Any) -> Iterator[Lever]:
    yield from _hardware_rows(ctx, _prec(ctx).compute)


def _serve_hardware(ctx: Any) -> Iterator[Lever]:
    yield from _hardware_rows(ctx, _prec(ctx).compute)


def _train_hardware(ctx: Any) -> Iterator[Lever]:
    """Every zoo cluster, sized to the same number of devices where its node size allows."""
    from ..specs.resolve import cluster as resolve_cluster
    from ..specs.resolve import list_clusters

    cur = resolve_cluster(ctx.call.hardware)
    devices = ctx.base.devices
    for key in list_clusters():
        cl = resolve_cluster(key)
        if cl.key == cur.key:
            continue
        if devices % cl.devices_per_node:
            yield ctx.na("hardware", cl.name, f"{devices} devices is not a whole number of "
                         f"{cl.devices_per_node}-device nodes")
            continue
        nodes = devices // cl.devices_per_node
        if cl.max_nodes is not None and nodes > cl.max_nodes:
            yield ctx.na("hardware", cl.name, f"{nodes} nodes exceeds its largest published "
                         f"configuration ({cl.max_nodes})")
            continue
        yield ctx.price("hardware", f"{cl.name} x{nodes} nodes",
                        Change({"nodes": nodes}, hardware=key),
                        lambda res, cl=cl: f"{cl.device.name}: step "
                        f"{fmt_time(ctx.base.step_time)} -> {fmt_time(res.step_time)}")
