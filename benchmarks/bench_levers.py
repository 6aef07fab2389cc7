"""Speed of the advisor: all levers for a zoo model, sensitivity, requirements.

Targets (issue "What should I change?"): all levers for a zoo model <= 50 ms, sensitivity
<= 1 ms, requirements <= 10 ms. Each figure is the median of repeated warm calls (plans and
graphs already built); the first, cold call is printed beside it.

    PYTHONPATH=src python benchmarks/bench_levers.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import roofline as rl  # noqa: E402


def timed(fn, repeat: int = 5) -> tuple[float, float]:
    t0 = time.perf_counter()
    fn()
    cold = time.perf_counter() - t0
    xs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        xs.append(time.perf_counter() - t0)
    return cold, statistics.median(xs)


def main() -> None:
    cases = {
        "levers resnet50 A100 b1 (solve)":
            lambda: rl.solve("resnet50", "A100", batch=1).levers(),
        "levers llama-3.1-8b A100 decode (solve)":
            lambda: rl.solve("llama-3.1-8b", "A100", phase="decode", context=1024,
                             precision="bf16").levers(),
        "levers llama-3.1-8b A100 (serve)":
            lambda: rl.serve("llama-3.1-8b", "A100", batch=8).levers(),
        "levers llama-3.1-8b dgx-h100 (train)":
            lambda: rl.train("llama-3.1-8b", "dgx-h100", global_batch=256,
                             seq_len=4096).levers(),
        "sensitivity resnet50 A100 b1":
            lambda: rl.sensitivity(rl.solve("resnet50", "A100", batch=1)),
        "sensitivity llama-3.1-70b H100 tp4 (serve)":
            lambda: rl.sensitivity(rl.serve("llama-3.1-70b", "H100", tp=4, batch=16)),
        "requirements llama-3.1-8b decode 5 ms":
            lambda: rl.requirements("llama-3.1-8b", phase="decode", context=4096, batch=1,
                                    precision="bf16", target_latency=5e-3),
    }
    print(f"{'case':<46} {'cold':>10} {'warm (median)':>14}")
    for name, fn in cases.items():
        cold, warm = timed(fn, repeat=3 if "requirements" in name else 5)
        print(f"{name:<46} {cold * 1e3:>8.1f} ms {warm * 1e3:>11.1f} ms")


if __name__ == "__main__":
    main()
