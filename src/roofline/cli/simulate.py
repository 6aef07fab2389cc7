"""``roofline simulate MODEL HARDWARE``: latency percentiles of a layout under a request mix."""

from __future__ import annotations

import argparse
from typing import Any

from .output import emit
from .plan import add_workload_args, slo_from, workload_from

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "simulate", help="simulate continuous batching: TTFT/TPOT/e2e percentiles, goodput",
        description="Simulate a serving layout (iteration-level continuous batching with KV "
                    "admission, chunked prefill and preemption) under Poisson arrivals.")
    p.add_argument("model", help="zoo name, HF config.json or model TOML")
    p.add_argument("hardware", help="zoo name or hardware TOML")
    add_workload_args(p)
    p.add_argument("--tp", type=int, default=1, help="tensor-parallel degree per replica")
    p.add_argument("--pp", type=int, default=1, help="pipeline-parallel degree per replica")
    p.add_argument("--ep", type=int, default=1,
                   help="MoE: expert-parallel groups per replica (data-parallel attention)")
    p.add_argument("--replicas", type=int, default=1, help="replicas (decode workers)")
    p.add_argument("--max-concurrency", type=int, default=256, help="running requests cap")
    p.add_argument("--chunk", default="2048",
                   help="chunked-prefill budget per step, or 'none' for whole prompts")
    p.add_argument("--precision", default="bf16", help="compute/weight dtype (default bf16)")
    p.add_argument("--kv-precision", default=None, help="KV-cache dtype (e.g. fp8)")
    p.add_argument("--weight-precision", default=None,
                   help="weight-only quantisation (int8, int4) under --precision compute")
    p.add_argument("--prefill-replicas", type=int, default=None,
                   help="disaggregated: prefill workers")
    p.add_argument("--prefill-tp", type=int, default=None, help="TP of a prefill worker")
    p.add_argument("--devices", type=int, default=None, help="devices available (checked)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.simulate import simulate_serving
    from ..errors import SpecError

    chunk: int | None
    if str(args.chunk).lower() in ("none", "whole", "0"):
        chunk = None
    else:
        try:
            chunk = int(args.chunk)
        except ValueError:
            raise SpecError(f"--chunk must be a token count or 'none', got {args.chunk!r}") \
                from None
    s = simulate_serving(args.model, args.hardware, workload=workload_from(args),
                         requests=args.requests or 10_000, tp=args.tp, pp=args.pp, ep=args.ep,
                         replicas=args.replicas, max_concurrency=args.max_concurrency,
                         chunk_size=chunk, precision=args.precision,
                         kv_precision=args.kv_precision,
                         weight_precision=args.weight_precision, engine=args.engine,
                         kv_policy=args.kv_policy, slo=slo_from(args, required=False),
                         seed=args.seed, devices=args.devices,
                         prefill_replicas=args.prefill_replicas, prefill_tp=args.prefill_tp)
    return emit(args, text=str(s), data=s.to_dict(), title=f"Simulated serving: {s.layout}",
                obj=s, path=args.output)
