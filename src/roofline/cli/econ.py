"""``--price-per-hour``, ``--region``, ``--pue`` for solve, serve and train (issue 13).

Any of them adds the cost, energy and carbon lines to the text output (the result prints them);
``--format json`` always has an ``"economics"`` object (nulls and reasons where a price or a
region is missing), and the markdown / HTML cards always show cost, energy and carbon rows.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

__all__ = ["add_econ_args", "econ_kwargs", "econ_data"]


def add_econ_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cost, energy and carbon (docs/economics.md)")
    g.add_argument("--price-per-hour", type=float, default=None, metavar="USD",
                   help="USD per device-hour (default: the median public on-demand quote of "
                        "the part, data/economics/prices.toml)")
    g.add_argument("--region", default=None, metavar="NAME",
                   help="grid region for carbon, e.g. us-east, eu-west-1, france, quebec "
                        "(`roofline tco --regions` lists them)")
    g.add_argument("--pue", type=float, default=None,
                   help="datacentre PUE (default 1.15, the hyperscale type)")


def econ_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    return {"price_per_hour": getattr(args, "price_per_hour", None),
            "region": getattr(args, "region", None), "pue": getattr(args, "pue", None)}


def econ_data(result: Any, args: argparse.Namespace) -> dict[str, Any]:
    """``{"economics": ...}`` for the JSON output: cost, energy and carbon per unit of work with
    the price, PUE and grid used and their sources; a figure that cannot be given is null and
    ``reasons`` says why (no public price, no region)."""
    e = result.economics.to_dict()
    return {"economics": {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                          for k, v in e.items() if k not in _LONG}}


#: the long provenance strings of Economics stay out of the JSON (``result.economics`` has them)
_LONG = ("power_source", "pue_source", "intensity_source", "wue_l_per_j")
