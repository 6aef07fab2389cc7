"""``roofline plan MODEL HARDWARE``: the layout that serves a request mix within p99 SLOs."""

from __future__ import annotations

import argparse
from typing import Any

from .output import add_output_args, emit

__all__ = ["register", "run", "add_workload_args", "workload_from", "slo_from"]


def add_workload_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rate", type=float, required=True, help="requests/s (Poisson arrivals)")
    p.add_argument("--prompt", default="1024",
                   help="prompt lengths: N, uniform:MIN,MAX, lognormal:MEAN,SIGMA[,MAX] (MEAN "
                        "before the cap), lognormal:drawn_mean=M,sigma=S[,max=N] (M after "
                        "it), empirical:FILE (default 1024)")
    p.add_argument("--output-len", default="256", metavar="LENGTHS",
                   help="output tokens per request, same forms (default 256)")
    p.add_argument("--ttft-p99", type=float, default=None, help="p99 TTFT target, s")
    p.add_argument("--tpot-p99", type=float, default=None, help="p99 TPOT target, s")
    p.add_argument("--e2e-p99", type=float, default=None, help="p99 end-to-end target, s")
    from ..scenarios.serving.plan import ENGINES

    p.add_argument("--engine", default="trtllm", choices=ENGINES, metavar="ENGINE",
                   help="serving-engine profile from data/presets/serving.toml (as serve's "
                        "--engine): " + ", ".join(ENGINES) + " (default trtllm)")
    p.add_argument("--requests", type=int, default=None, help="requests per simulation")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--kv-policy", default="dynamic", choices=("dynamic", "reserve"),
                   help="dynamic (vLLM: allocate, preempt) or reserve (TensorRT-LLM)")
    p.add_argument("-o", "--output", default=None, metavar="PATH",
                   help="write the output (in --format) to this file instead of stdout")
    add_output_args(p)


def workload_from(args: argparse.Namespace) -> Any:
    from ..analysis.workload import Workload, parse_lengths

    return Workload(prompt=parse_lengths(args.prompt, "--prompt"),
                    output=parse_lengths(args.output_len, "--output-len"), rate=args.rate)


def slo_from(args: argparse.Namespace, required: bool = True) -> Any:
    from ..analysis.workload import SLO

    if not required and args.ttft_p99 is None and args.tpot_p99 is None and args.e2e_p99 is None:
        return None
    return SLO(ttft_p99=args.ttft_p99, tpot_p99=args.tpot_p99, e2e_p99=args.e2e_p99)


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "plan", help="LLM deployment plan: layout, replicas, frontier under p99 SLOs",
        description="Search tensor/pipeline parallelism, precision, concurrency, aggregated vs "
                    "disaggregated serving and replica count for a request mix and rate "
                    "within p99 TTFT/TPOT targets; sized by simulation.")
    p.add_argument("model", help="zoo name, HF config.json or model TOML")
    p.add_argument("hardware", help="zoo name or hardware TOML")
    p.add_argument("--devices", type=int, required=True, help="devices available")
    add_workload_args(p)
    p.add_argument("--no-disagg", action="store_true", help="aggregated layouts only")
    p.add_argument("--max-tp", type=int, default=8, help="largest TP degree (default 8)")
    p.add_argument("--pareto", action="store_true", help="also print the Pareto table")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="no progress lines (shown only when stderr is a terminal)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..analysis.plan import plan_serving

    p = plan_serving(args.model, args.hardware, devices=args.devices, workload=workload_from(args),
                     slo=slo_from(args), disaggregated=not args.no_disagg, engine=args.engine,
                     kv_policy=args.kv_policy, requests=args.requests or 2000, seed=args.seed,
                     max_tp=args.max_tp, progress=not args.quiet)
    text = str(p)
    if args.pareto:
        text += "\n\n" + str(p.pareto)
    if len(p.infeasible):
        text += "\n\n" + str(p.infeasible)
    emit(args, text=text, data=p.to_dict(), tables=[p.pareto, p.simulated, p.infeasible],
         title=f"Serving plan: {p.model} on {p.hardware}", obj=p, path=args.output)
    return 0 if p.best is not None else 1
