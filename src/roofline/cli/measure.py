"""``roofline measure -o my_machine.toml``: measure this machine into a hardware spec."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .output import add_output_args, emit

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "measure", help="measure this machine's ceilings and fit the efficiency model",
        description="Measure peak FLOP/s per dtype, bandwidth per memory level (STREAM), the "
                    "per-op framework cost and a small efficiency model, and write them as a "
                    "hardware TOML that every other command accepts (~1-2 min; progress on "
                    "stderr).")
    p.add_argument("-o", "--output", help="write the spec here (atomically); default: print it")
    p.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"),
                   help="what to measure (auto: CUDA when PyTorch sees one, else CPU)")
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, few repetitions (seconds; a smoke test, not for predictions)")
    p.add_argument("--key", help="spec key (default: measured-<hostname>)")
    p.add_argument("--name", help="human name of the spec")
    p.add_argument("--threads", type=int, help="compute threads for PyTorch and BLAS during "
                                               "the run (default: as configured)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_output_args(p, wide=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..calibrate.measure import measure

    try:
        hw = measure(args.output, device=args.device, quick=args.quick,
                     progress=not args.quiet, key=args.key, name=args.name,
                     threads=args.threads)
    except KeyboardInterrupt:
        print("roofline measure: interrupted; nothing was written", file=sys.stderr)
        return 130
    if args.format != "text":
        return emit(args, text="", title=f"measured spec {hw.key}", data={
            "key": hw.key, "name": hw.name, "kind": hw.kind, "output": args.output,
            "peak_flops_per_s": dict(hw.peak_flops_per_s),
            "memory": [{"name": m.name, "capacity_bytes": m.capacity_bytes,
                        "bytes_per_s": m.bytes_per_s} for m in hw.memory],
            "efficiency": {k: (v.get("value"), v.get("unit")) for k, v in
                           (hw.efficiency_table or {}).items()},
        })
    if args.output is None:
        from ..calibrate.measure import last_text

        sys.stdout.write(last_text())
    else:
        print(hw)
    return 0
