"""Speed of training any graph (issue 16 target: the ResNet-50 training graph built and priced
≤ 0.5 s). Run by hand:

    python benchmarks/bench_train_any.py

and copy the printed lines into benchmarks/README.md, section "Training any graph".
"""

from __future__ import annotations

import platform
import time

import roofline as rl


def main() -> None:
    m = rl.model("resnet50")
    m.graph(precision="fp16")  # the forward graph, as any solve builds it
    t0 = time.perf_counter()
    rl.train(m, "dgx-a100", global_batch=2048, micro_batch=256, precision="fp16",
             optimizer="sgd")
    first = time.perf_counter() - t0
    best = float("inf")
    for b in (32, 64, 128, 256):  # a new micro-batch: a new training graph each time
        t0 = time.perf_counter()
        rl.train(m, "dgx-a100", global_batch=8 * b, micro_batch=b, precision="fp16",
                 optimizer="sgd")
        best = min(best, time.perf_counter() - t0)
    print(f"machine: {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}")
    print(f"rl.train ResNet-50 on a DGX A100 (backward graph built and priced): first call "
          f"{first * 1e3:.0f} ms, later calls {best * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
