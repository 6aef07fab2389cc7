"""``roofline tutorial``: the seed tutorial reproduced (see examples/hello_roofline.py)."""

from __future__ import annotations

import argparse
from typing import Any

from .output import add_output_args

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    p = sub.add_parser(
        "tutorial", help="run the 'Hello, roofline' tutorial (mlsysim's seed, then per op)",
        description="Reproduce the seed tutorial under preset mlsysim, answer the same "
                    "questions per operator under the default preset, and list where the two "
                    "differ (docs/tutorials/hello_roofline.md explains each difference).")
    add_output_args(p, wide=False)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..tutorial import run_experiments, tutorial_text
    from .output import emit

    tut = run_experiments()
    keys = ("batch", "latency", "throughput", "bottleneck", "arithmetic_intensity", "mfu",
            "t_compute", "t_memory", "t_overhead", "flops", "bytes")

    def pick(r: Any) -> dict[str, Any]:
        d = r.to_dict()
        return {"model": d["model"], "hardware": d["hardware"], "preset": d["preset"],
                **{k: d[k] for k in keys}}

    data = {
        "mlsysim": {"a100": [pick(r) for r in tut.mlsysim_a100],
                    "h100": [pick(r) for r in tut.mlsysim_h100],
                    "crossover": tut.mlsysim_crossover, "llama": pick(tut.mlsysim_llama)},
        "default": {"a100": [pick(r) for r in tut.default_a100],
                    "h100": [pick(r) for r in tut.default_h100],
                    "crossover": tut.default_crossover, "llama": pick(tut.default_llama)},
    }
    return emit(args, text=lambda: tutorial_text(tut), data=data, title="Hello, roofline")
