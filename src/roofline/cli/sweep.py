"""``roofline sweep MODEL HW [HW ...] --batch 1..256``: a batch × hardware × precision table."""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from typing import Any

from .solve import add_scenario_args, dump_json, model_arg, parse_batches, scenario_kwargs

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
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true",
                     help="print rows and crossover as JSON")
    out.add_argument("--csv", action="store_true", help="print the table as CSV")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..scenarios.sweep import sweep

    batches = parse_batches(args.batch)
    s = sweep(model_arg(args), args.hardware, batch=batches, precision=args.precision,
              **scenario_kwargs(args))
    if args.json:
        print(dump_json({"model": s.model, "rows": s.to_dicts(), "crossover": s.crossover(),
                         "warnings": list(s.warnings)}))
    elif args.csv:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=s.table.columns, lineterminator="\n")
        w.writeheader()
        for row in s.to_dicts():
            w.writerow({k: "" if isinstance(v, float) and math.isnan(v) else v
                        for k, v in row.items()})
        print(buf.getvalue(), end="")
        for w in s.warnings:  # on stderr: the CSV on stdout stays a table
            print(f"WARNING: {w}", file=sys.stderr)
    else:
        print(s)
    return 0
