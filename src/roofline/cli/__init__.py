"""The command line: a thin shell over the library (``roofline --help``).

Each subcommand lives in its own module here and exposes ``register(subparsers)``, which adds
its parser and sets ``func`` to a ``run(args) -> int``. Library errors become one-line
messages and exit status 2, never tracebacks.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import RooflineError

__all__ = ["main", "COMMANDS"]

#: subcommand modules, in help order; a module that does not exist yet is skipped
COMMANDS = ("zoo", "solve", "sweep", "plot", "report", "tutorial", "serve", "train", "tco",
            "measure", "validate", "advise", "requirements", "explore", "plan", "simulate")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="roofline",
        description="Predict how fast an ML workload runs on given hardware, and why "
                    "(FLOPs count 2 per multiply-add).")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"roofline {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        try:
            mod = importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as e:
            if e.name == f"{__name__}.{name}":
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from .report import rewrite

    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    try:
        argv = rewrite(given)
    except RooflineError as e:
        print(f"roofline: error: {e}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        rc = int(args.func(args) or 0)
        if argv is not given and getattr(args, "output", None):  # roofline report SCENARIO
            print(f"wrote {args.output}: the {argv[0]} report (one self-contained file: no "
                  "network requests)")
        return rc
    except RooflineError as e:
        print(f"roofline: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
