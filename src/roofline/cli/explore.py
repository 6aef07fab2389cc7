"""``roofline explore space.toml``: a design space from a file, locally or on a Dask cluster.

The file::

    kind = "decode"                       # decode | solve | serve | train (default: inferred)
    model = ["llama-3.1-8b", "llama-3.1-70b"]
    hardware = ["H100", "H200"]           # zoo names or spec files
    objectives = ["tokens_per_s_per_device", "-power_w"]
    constraints = ["tpot <= 0.020", "fits"]

    [[grid]]                              # hypothetical parts (any number of [[grid]] tables)
    base = "H100"
    peak_scale = [0.5, 1, 2]
    bandwidth_scale = [1, 2]

    [scenario]                            # one value or a list per option;
    phase = "decode"                      # {start = 1, stop = 513} is range(1, 513)
    batch = {start = 1, stop = 513}
    context = [2048, 8192]
    precision = ["bf16", "fp8"]
    tp = [1, 2, 4, 8]

The space is validated (unknown keys and fields, empty axes, constraints that are not
comparisons) and its size printed before any point is priced.
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["register", "run", "load_space"]

_TOP = {"kind", "model", "hardware", "objectives", "constraints", "grid", "scenario", "top",
        "hw_per_chunk"}


def register(sub: Any) -> None:
    p = sub.add_parser("explore", help="explore a design space from a TOML file (Pareto front, "
                                       "top-k), locally or on a Dask cluster",
                       description="Price every point of a space (models x hardware x "
                                   "scenario) and keep the Pareto front and the top points.")
    p.add_argument("space", help="the space file (see docs/explore.md)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a Dask scheduler, e.g. tcp://host:8786 (default: this process)")
    p.add_argument("-o", "--output", default=None, metavar="PATH",
                   help="stream every point to this Parquet file")
    p.add_argument("--rows", type=int, default=20, help="rows of the front to print")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress lines (shown only when stderr is a terminal)")
    from .output import add_output_args

    add_output_args(p)
    p.set_defaults(func=run)


def _range(v: Any, key: str) -> Any:
    from ..errors import SpecError

    if isinstance(v, dict):
        if set(v) - {"start", "stop", "step"} or "stop" not in v:
            raise SpecError(f"scenario.{key}: a range table takes start, stop and step, e.g. "
                            "{start = 1, stop = 513}")
        return range(int(v.get("start", 0)), int(v["stop"]), int(v.get("step", 1)))
    return v


def load_space(path: str) -> tuple[Any, dict[str, Any]]:
    """(Space, explore keywords) from a space file."""
    from .._data import load_toml_file
    from ..errors import SpecError
    from ..spaces import Space, hardware_grid

    doc = load_toml_file(path, "space")
    bad = set(doc) - _TOP
    if bad:
        raise SpecError(f"{path}: unknown keys {sorted(bad)}; allowed: {', '.join(sorted(_TOP))}")
    for req in ("model", "hardware", "objectives"):
        if req not in doc and not (req == "hardware" and "grid" in doc):
            raise SpecError(f"{path}: {req!r} is required")
    hw: list[Any] = list(doc.get("hardware", []))
    grids = doc.get("grid", [])
    if not isinstance(grids, list):
        raise SpecError(f"{path}: write hypothetical parts as [[grid]] tables")
    for g in grids:
        if not isinstance(g, dict):
            raise SpecError(f"{path}: each [[grid]] is a table with base and scales")
        hw.append(hardware_grid(**g))
    scen = {k: _range(v, k) for k, v in dict(doc.get("scenario", {})).items()}
    kw: dict[str, Any] = {}
    if "hw_per_chunk" in doc:
        kw["hw_per_chunk"] = doc["hw_per_chunk"]
    space = Space(model=doc["model"], hardware=hw, scenario=scen, kind=doc.get("kind"), **kw)
    return space, {"objectives": doc["objectives"], "constraints": doc.get("constraints"),
                   "top": doc.get("top", ())}


def run(args: argparse.Namespace) -> int:
    import sys

    from ..spaces import explore
    from .output import emit

    space, kw = load_space(args.space)
    print(f"space: {space.size:,} points ({space.kind}, {len(space.model)} models x "
          f"{len(space.hardware)} parts)", file=sys.stderr)
    kw.setdefault("progress", not args.quiet)
    res = explore(space, scheduler=args.scheduler, out=args.output, **kw)
    front = res.pareto
    data = {"size": res.size, "evaluated": res.evaluated, "passed": res.passed,
            "seconds": res.seconds, "failed": res.failed,
            "objectives": [str(o) for o in res.objectives],
            "constraints": [str(c) for c in res.constraints], "pareto": front.to_dicts()}

    def text() -> str:
        cols = [c for c in res._lead() if c in front.columns and c != "model"] \
            if len(front) and not getattr(args, "wide", False) else None
        if cols and len({*front["model"]}) > 1:
            cols = ["model", *cols]
        return res.summary() + "\n" + front.to_string(columns=cols, max_rows=args.rows)

    return emit(args, text=text, data=data, tables=[front], title="Pareto front")
