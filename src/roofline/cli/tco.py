"""``roofline tco HARDWARE --devices N``: total cost of ownership, energy, carbon and water.

Also ``--regions`` (the grid regions and their intensities), ``--place`` (rank the regions for
this fleet's energy by carbon and by electricity cost), ``--reliability HOURS`` (failures of a
job on this fleet, with ``--checkpoint-s``), and ``--preset mlsysim`` (mlsysim 0.1.1's
EconomicsModel conventions).
"""

from __future__ import annotations

import argparse
from typing import Any

from .output import add_output_args, emit

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "tco", help="total cost of ownership: capex, energy, maintenance, carbon, water",
        description="Cost of owning a fleet: capex amortised over the years + energy x PUE x "
                    "$/kWh + maintenance, each default sourced (docs/economics.md).")
    p.add_argument("hardware", nargs="?", default=None, help="zoo name or hardware TOML")
    p.add_argument("--devices", type=int, default=1, help="number of devices (default 1)")
    p.add_argument("--years", type=float, default=None,
                   help="period (default: the amortisation period, 3 years)")
    p.add_argument("--days", type=float, default=None, help="period in days instead of years")
    p.add_argument("--utilisation", type=float, default=1.0,
                   help="power activity in (0, 1] (default 1): device power = idle + "
                        "(peak - idle) x it")
    p.add_argument("--region", default=None, help="grid region (carbon, electricity price)")
    p.add_argument("--pue", type=float, default=None, help="datacentre PUE (default 1.15)")
    p.add_argument("--unit-price", type=float, default=None, metavar="USD",
                   help="purchase price per device (default: prices.toml street price)")
    p.add_argument("--electricity-price", type=float, default=None, metavar="USD_PER_KWH")
    p.add_argument("--preset", default="default", choices=("default", "mlsysim"))
    p.add_argument("--regions", action="store_true", help="list the grid regions and exit")
    p.add_argument("--place", action="store_true",
                   help="rank the regions for this fleet's energy by carbon and by cost")
    p.add_argument("--reliability", type=float, default=None, metavar="JOB_HOURS",
                   help="also: failures of a job of this many failure-free hours")
    p.add_argument("--checkpoint-s", type=float, default=60.0,
                   help="seconds to write a checkpoint, for --reliability (default 60)")
    add_output_args(p)
    p.set_defaults(func=run)


def _regions_text() -> tuple[str, list[dict[str, Any]]]:
    from ..analysis.data import regions

    rows = [{"region": r.key, "name": r.name, "gCO2e_per_kWh": round(r.g_per_kwh, 3),
             "year": r.year, "usd_per_kwh": r.usd_per_kwh, "assumed": r.assumed}
            for r in sorted(regions().values(), key=lambda r: r.g_per_kwh)]
    lines = ["region        gCO2e/kWh  year  $/kWh   name"]
    lines += [f"{d['region']:<13} {d['gCO2e_per_kWh']:>9.4g}  {d['year']}  "
              f"{'' if d['usd_per_kwh'] is None else format(d['usd_per_kwh'], '.4f'):<6}  "
              f"{d['name']}{' (stand-in intensity)' if d['assumed'] else ''}" for d in rows]
    return "\n".join(lines), rows


def run(args: argparse.Namespace) -> int:
    from ..analysis.carbon import place
    from ..analysis.reliability import reliability
    from ..analysis.tco import tco
    from ..errors import SpecError

    if args.regions:
        text, rows = _regions_text()
        return emit(args, text=text, data={"regions": rows})
    if args.hardware is None:
        raise SpecError("tco needs a HARDWARE (or --regions)")
    t = tco(args.hardware, devices=args.devices, years=args.years, days=args.days,
            utilisation=args.utilisation, region=args.region, pue=args.pue,
            unit_price=args.unit_price, electricity_price=args.electricity_price,
            preset=args.preset)
    data: dict[str, Any] = t.to_dict()
    parts = [str(t)]
    if args.place:
        for by in ("carbon", "cost"):
            pl = place(t.facility_energy_j, by=by)
            parts.append(str(pl))
            data[f"place_by_{by}"] = [{"region": k, "value": v} for k, v in pl.ranking]
    if args.reliability is not None:
        r = reliability(devices=args.devices, job_hours=args.reliability,
                        checkpoint_s=args.checkpoint_s, preset=args.preset)
        parts.append(str(r))
        data["reliability"] = r.to_dict()
    return emit(args, text="\n".join(parts), data=data, obj=None)
