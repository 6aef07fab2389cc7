"""``roofline sweep MODEL HW [HW ...] --batch 1..256``: a batch × hardware × precision table."""

from __future__ import annotations

import argparse
from typing import Any

from .output import add_output_args, emit, limits
from .solve import (
    add_scenario_args,
    model_arg,
    natural_precision,
    parse_batches,
    scenario_kwargs,
)

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep", help="sweep batch sizes, hardware and precisions; find the crossover",
        description="Price every (hardware, precision, batch) and report the smallest batch at "
                    "which each hardware turns compute-bound.")
    p.add_argument("model", help="zoo name, config path or .onnx file")
    p.add_argument("hardware", nargs="+", help="one or more zoo names / .toml paths")
    p.add_argument("--batch", "-b", default="1..256",
                   help="8, a list 1,2,4 or a range 1..256 (powers of two from 1 to 256; "
                        "default 1..256)")
    add_scenario_args(p, many_precisions=True)
    add_output_args(p)
    p.add_argument("--csv", dest="format", action="store_const", const="csv",
                   help="the same as --format csv")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress lines (shown only when stderr is a terminal)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..scenarios.sweep import sweep

    batches = parse_batches(args.batch)
    precision = args.precision or natural_precision(args.hardware)
    s = sweep(model_arg(args), args.hardware, batch=batches, precision=precision,
              progress=not args.quiet, **scenario_kwargs(args))
    data = {"model": s.model, "rows": s.to_dicts(), "crossover": s.crossover(),
            "warnings": list(s.warnings)}
    return emit(args, text=lambda: s.to_string(**limits(args)), data=data, tables=[s.table],
                obj=s, title=f"{s.model} sweep (preset {s.preset})")
