"""``roofline requirements MODEL --target-latency-ms X``: the hardware a target takes."""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "requirements", help="the least peak, bandwidth, capacity and link that meet a "
                             "latency or throughput target, and the zoo parts that do",
        description="The inverse roofline: each ceiling's least value meeting the target "
                    "with the others held at a reference part; the (peak, bandwidth) frontier; "
                    "zoo parts that meet it.")
    p.add_argument("model", help="zoo name, config.json/.toml path or .onnx file")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--target-latency-ms", type=float, metavar="X", help="latency target, ms")
    g.add_argument("--target-throughput", type=float, metavar="X",
                   help="throughput target, samples/s")
    p.add_argument("--reference", default="H100", help="part whose other ceilings are held "
                                                       "(default H100)")
    p.add_argument("--batch", "-b", type=int, default=1, help="batch size (default 1)")
    from .solve import add_scenario_args

    add_scenario_args(p)
    from .output import add_output_args

    add_output_args(p, wide=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.requirements import requirements
    from ..errors import SpecError
    from .output import emit
    from .solve import model_arg, natural_precision, scenario_kwargs

    kw: dict[str, Any] = {}
    if args.target_latency_ms is not None:
        if not math.isfinite(args.target_latency_ms) or args.target_latency_ms <= 0:
            raise SpecError(f"--target-latency-ms must be > 0, got {args.target_latency_ms}")
        kw["target_latency"] = args.target_latency_ms / 1e3
    else:
        kw["target_throughput"] = args.target_throughput
    sc = {k: v for k, v in scenario_kwargs(args).items() if v is not None}
    precision = args.precision or natural_precision(args.reference)[0]
    q = requirements(model_arg(args), reference=args.reference, batch=args.batch,
                     precision=precision, **kw, **sc)
    data = {"target": q.target, "reference": q.reference, "reference_time_s": q.reference_time,
            "floor_s": q.floor, "reachable": q.reachable, "reason": q.reason,
            "peak_flops_per_s": q.peak_flops_per_s,
            "bandwidth_bytes_per_s": q.bandwidth_bytes_per_s,
            "capacity_bytes": q.capacity_bytes, "link_bytes_per_s": q.link_bytes_per_s,
            "frontier": [list(x) for x in q.frontier],
            "parts": [{"name": n, "time_s": t, "meets": ok} for n, t, ok in q.parts]}
    return emit(args, text=str(q), data=data, title=f"Requirements: {q.target}",
                pairs=[("target", q.target), ("reference", q.reference),
                       ("reachable", "yes" if q.reachable else f"no: {q.reason}")])
