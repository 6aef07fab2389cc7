"""``roofline report MODEL HW [scenario options] -o report.html``: one self-contained HTML file.

``roofline report serve|train|plan|simulate ARGS`` writes the report of that scenario: it is
``roofline serve|train|plan|simulate ARGS --format html`` (same options, same checks), so every
scenario flag is the one its own command documents.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ..errors import SpecError
from .solve import add_scenario_args, model_arg, natural_precision, scenario_kwargs

__all__ = ["register", "run", "rewrite", "SCENARIOS"]

#: scenarios whose report ``roofline report SCENARIO ...`` writes (their own command's options)
SCENARIOS = ("serve", "train", "plan", "simulate")


def rewrite(argv: list[str]) -> list[str]:
    """``report SCENARIO ARGS`` -> a new list ``SCENARIO ARGS --format html``; any other argv is
    returned as it is (the same object)."""
    if len(argv) >= 2 and argv[0] == "report" and argv[1] in SCENARIOS:
        rest = argv[2:]
        if any(a in ("--json", "--format") or a.startswith("--format=") for a in rest):
            raise SpecError("roofline report writes HTML: leave out --format/--json")
        return [argv[1], *rest, "--format", "html"]
    return argv


def register(sub: Any) -> None:
    p = sub.add_parser(
        "report", help="write a self-contained HTML report (chart, per-op table, sweeps)",
        description="Solve one model x hardware x scenario and write one HTML file with no "
                    "network requests: the summary, an interactive roofline (hover an operator "
                    "to see its row), where the time and memory go, batch and precision "
                    "sweeps, the per-operator table, and the conventions and sources. "
                    "'roofline report serve|train|plan|simulate ARGS -o FILE' writes the "
                    "report of that scenario instead (ARGS: the options of 'roofline serve' "
                    "etc.; see 'roofline serve --help').")
    p.add_argument("model", help="zoo name, config path or .onnx file")
    p.add_argument("hardware", help="zoo name / alias or .toml path")
    p.add_argument("--batch", "-b", type=int, default=1, help="batch size (default 1)")
    add_scenario_args(p)
    p.add_argument("--no-sweeps", action="store_true",
                   help="leave out the batch/precision sweep (faster for big models)")
    p.add_argument("-o", "--output", metavar="PATH", default=None,
                   help="the .html file to write (default: print the HTML to stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..engine.solve import solve
    from ..report.page import result_page, write_page

    out = Path(args.output) if args.output else None
    if out is not None and out.suffix.lower() not in (".html", ".htm"):
        raise SpecError(f"-o/--output {args.output!r}: a report is an .html file")
    kw = scenario_kwargs(args)
    m = model_arg(args)
    scenario = dict(batch=args.batch,
                    precision=args.precision or natural_precision(args.hardware)[0], **kw)
    r = solve(m, args.hardware, **scenario)
    text = result_page(r, model=m, sweeps=not args.no_sweeps, scenario=scenario)
    if out is None:
        sys.stdout.write(text)
        return 0
    write_page(out, text)
    print(f"wrote {out}: {r.model} on {r.hardware}, batch {r.batch}, {r.precision}, "
          f"{len(r.ops)} operators (one self-contained file: no network requests)")
    return 0
