"""``roofline plot MODEL HW --batch N -o chart.png``: save the roofline chart."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .output import add_output_args, emit
from .solve import (
    add_scenario_args,
    model_arg,
    natural_precision,
    parse_batches,
    scenario_kwargs,
)

__all__ = ["FORMATS", "register", "run"]

FORMATS = (".png", ".svg", ".pdf")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "plot", help="save a roofline chart (PNG/SVG/PDF) of a model on hardware",
        description="Draw the hardware's ceilings with the workload's operators (area ∝ time "
                    "share, colour = bound) and the whole-model point. Several batch sizes "
                    "(1..256 or 1,8,64) put one whole-model point per batch on one chart.")
    p.add_argument("model", help="zoo name, config path or .onnx file")
    p.add_argument("hardware", nargs="+",
                   help="one or more zoo names / aliases or .toml paths (several devices share "
                        "one chart, each its own colour)")
    p.add_argument("--batch", "-b", default="1", help="8, 1,8,64 or 1..256 (default 1)")
    add_scenario_args(p)
    p.add_argument("--ops", action=argparse.BooleanOptionalAction, default=None,
                   help="draw each operator (default: only for a single batch)")
    p.add_argument("-o", "--output", required=True, metavar="PATH",
                   help="output file: .png, .svg or .pdf")
    add_output_args(p, wide=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..engine.solve import solve
    from ..viz.roofline import op_points, plot_roofline

    out = Path(args.output)
    if out.suffix.lower() not in FORMATS:
        raise SpecError(f"-o/--output {args.output!r}: the suffix must be one of "
                        f"{', '.join(FORMATS)}")
    if not out.parent.exists():
        raise SpecError(f"-o/--output {args.output!r}: folder {str(out.parent)!r} does not "
                        "exist")
    batches = parse_batches(args.batch)
    kw = scenario_kwargs(args)
    m = model_arg(args)
    results = [solve(m, hw, batch=b, precision=args.precision or natural_precision(hw)[0],
                     **kw)
               for hw in args.hardware for b in batches]
    bad = [r for r in results if not r.feasible and r.latency != r.latency]
    if bad:
        raise SpecError(f"cannot plot: {bad[0].reason}")
    fig = plot_roofline(results, path=out, ops=args.ops)
    show_ops = len(results) == 1 if args.ops is None else args.ops
    n_ops = sum(len(op_points(r)["name"]) for r in results) if show_ops else 0
    size = out.stat().st_size
    del fig
    data = {"path": str(out), "bytes": size, "op_points": n_ops, "model_points": len(results)}
    return emit(args, text=f"wrote {out} ({size / 1e3:,.1f} kB): {n_ops} operator points and "
                           f"{len(results)} whole-model point{'s' if len(results) > 1 else ''}",
                data=data, title="roofline plot")
