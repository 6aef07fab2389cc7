"""``roofline validate --hardware my_machine.toml``: predicted vs measured on real workloads."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .output import add_output_args, emit

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "validate", help="run real PyTorch workloads and compare them with predictions",
        description="Run >= 30 single ops and whole models (ResNet-18/50, a GPT-2 stack) in "
                    "PyTorch on this machine and compare each measured median with the "
                    "prediction from a measured spec (default preset) and the pure roofline "
                    "(bound preset). Needs PyTorch: pip install 'roofline[torch]'.")
    p.add_argument("--hardware", help="measured spec (from `roofline measure`); default: "
                                      "measure this machine first, in the same run")
    p.add_argument("--csv", help="write the per-item table as CSV")
    p.add_argument("--plot", help="write the predicted-vs-measured scatter (PNG)")
    p.add_argument("--quick", action="store_true", help="a small fast subset")
    p.add_argument("--no-models", action="store_true", help="single ops only")
    p.add_argument("--threads", type=int, help="compute threads for PyTorch and BLAS during "
                                               "the run (default: as configured)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    add_output_args(p, wide=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..calibrate.validate import validate

    try:
        v = validate(args.hardware, quick=args.quick, models=not args.no_models,
                     csv_path=args.csv, plot_path=args.plot, progress=not args.quiet,
                     threads=args.threads)
    except KeyboardInterrupt:
        print("roofline validate: interrupted", file=sys.stderr)
        return 130
    if args.format != "text":
        from ..engine.table import Table

        rows = v.to_dicts()
        t = Table({k: [r[k] for r in rows] for k in rows[0]} if rows else {"name": []},
                  {"measured_s": "s", "predicted_s": "s", "bound_s": "s"},
                  title=f"predicted vs measured on {v.hardware}")
        return emit(args, text="", data={"hardware": v.hardware, "rows": rows,
                                         "summary": v.summary, "wall_s": v.wall_s},
                    tables=[t], obj=v, title=t.title)
    else:
        print(v.to_string())
        print(f"\n({len(v.rows)} items in {v.wall_s:.0f} s"
              + (f"; CSV: {args.csv}" if args.csv else "")
              + (f"; plot: {args.plot}" if args.plot else "") + ")")
    return 0
