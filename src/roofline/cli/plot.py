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
    p.add_argument("--kind", choices=("roofline", "sweep", "layers"), default="roofline",
                   help="roofline (default); sweep: throughput and latency vs batch per device "
                        "(--batch default 1..256), crossover ringed; layers: time per layer "
                        "(one device, one batch)")
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
    kw = scenario_kwargs(args)
    m = model_arg(args)
    if args.kind != "roofline":
        return _other(args, out, m, kw)
    batches = parse_batches(args.batch)
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


def _other(args: argparse.Namespace, out: Path, m: Any, kw: dict[str, Any]) -> int:
    """``--kind sweep`` and ``--kind layers``."""
    from ..engine.solve import solve
    from ..scenarios.sweep import sweep
    from ..viz.charts import layer_times, plot_layers, plot_sweep

    if args.kind == "sweep":
        batches = parse_batches("1..256" if args.batch == "1" else args.batch)
        s = sweep(m, args.hardware, batch=batches,
                  precision=args.precision or natural_precision(args.hardware), **kw)
        plot_sweep(s, path=out)
        data: dict[str, Any] = {"path": str(out), "bytes": out.stat().st_size, "lines": len(
            {(h, p) for h, p in zip(s["hardware"], s["precision"])}), "crossover":
            s.crossover()}
        text = f"wrote {out}: {data['lines']} lines over batches {batches[0]}–{batches[-1]}"
    else:
        if len(args.hardware) > 1 or "," in args.batch or ".." in args.batch:
            raise SpecError("--kind layers draws one device at one batch")
        hw = args.hardware[0]
        r = solve(m, hw, batch=parse_batches(args.batch)[0],
                  precision=args.precision or natural_precision(hw)[0], **kw)
        plot_layers(r, path=out)
        n = len(layer_times(r))
        data = {"path": str(out), "bytes": out.stat().st_size, "layers": n}
        text = f"wrote {out}: time of {n} layers"
    return emit(args, text=text, data=data, title="roofline plot")
