"""``roofline advise MODEL HW``: which change buys the most (levers, sensitivity)."""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["register", "run", "print_levers"]


def register(sub: Any) -> None:
    from ..analysis.levers import LEVER_FAMILIES

    p = sub.add_parser(
        "advise", help="rank the design levers (batch, precision, fusion, runtime, sparsity, "
                       "activation, shape, hardware) by speed-up, with why",
        description="Re-price one model x hardware x scenario with one thing changed at a "
                    "time and rank the changes by speed-up per sample; also the elasticity "
                    "of the time to each ceiling.")
    p.add_argument("model", help="zoo name, config.json/.toml path or .onnx file")
    p.add_argument("hardware", help="zoo name or alias, or a hardware .toml path")
    p.add_argument("--batch", "-b", type=int, default=1, help="batch size (default 1)")
    from .solve import add_scenario_args

    add_scenario_args(p)
    add_advise_args(p, LEVER_FAMILIES)
    p.set_defaults(func=run)


def add_advise_args(p: argparse.ArgumentParser, families: tuple[str, ...]) -> None:
    """The advisor's options (and the output options), shared with nothing else yet."""
    p.add_argument("--latency-slo-ms", type=float, default=None, metavar="X",
                   help="mark rows whose latency (solve) or TPOT (serve) exceeds X ms, and "
                        "add the largest batch that meets it")
    p.add_argument("--only", nargs="+", choices=families, default=None, metavar="LEVER",
                   help=f"only these lever families ({', '.join(families)})")
    p.add_argument("--objective", choices=("throughput", "latency"), default="throughput",
                   help="rank by time per unit of work (throughput, default) or by latency")
    p.add_argument("--rows", type=int, default=25, help="rows to print (default 25)")
    from .output import add_output_args

    add_output_args(p)


def _slo(args: argparse.Namespace) -> float | None:
    from ..errors import SpecError

    v = args.latency_slo_ms
    if v is None:
        return None
    if not math.isfinite(v) or v <= 0:
        raise SpecError(f"--latency-slo-ms must be > 0, got {v}")
    return v / 1e3


def print_levers(result: Any, args: argparse.Namespace, sensitivity: bool = True) -> int:
    """Print the levers of ``result`` (and its elasticities) in the chosen ``--format``."""
    from ..analysis.levers import levers
    from ..engine.table import Table
    from .output import emit

    lv = levers(result=result, latency_slo=_slo(args), only=args.only,
                objective=args.objective)
    sens = None
    if sensitivity and getattr(result, "feasible", True) and \
            getattr(result, "preset", "default") != "mlsysim":
        from ..analysis.sensitivity import sensitivity as elasticity

        sens = elasticity(result)
    rows = lv.to_dicts()
    data: dict[str, Any] = {"call": str(lv.base_call), "unit": lv.unit, "levers": rows}
    if sens is not None:
        data["sensitivity"] = sens.to_dict()
    cols = ("lever", "setting", "latency", "speedup", "bottleneck_before", "bottleneck_after",
            "memory", "fits", "why", "call")
    band = {f"speedup_{e}": [r["uncertainty"].get("speedup", {}).get(e, math.nan) for r in rows]
            for e in ("low", "high")}  # the speed-up's 80 % band (none: NaN)
    table = Table({c: [r[c] for r in rows] for c in cols[:4]} | band
                  | {c: [r[c] for r in rows] for c in cols[4:]},
                  units={"latency": "s", "memory": "B"}, title=f"Levers for {lv.base_call}")

    def text() -> str:
        wide = getattr(args, "wide", False)
        out = lv.to_string(max_rows=None if wide else args.rows, width=None if wide else 100)
        return out + ("\n\n" + str(sens) if sens is not None else "")

    return emit(args, text=text, data=data, tables=[table], title=f"Levers for {lv.base_call}",
                pairs=[("call", str(lv.base_call)), ("ranked by", f"time per {lv.unit}")])


def run(args: argparse.Namespace) -> int:
    from ..engine.solve import solve
    from .solve import model_arg, natural_precision, scenario_kwargs

    precision = args.precision or natural_precision(args.hardware)[0]
    r = solve(model_arg(args), args.hardware, batch=args.batch, precision=precision,
              **scenario_kwargs(args))
    return print_levers(r, args)
