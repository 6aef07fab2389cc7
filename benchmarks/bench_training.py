"""Speed of the training model (issue 6 targets: one rl.train ≤ 100 µs; best_parallelism for
GPT-3 175B on 1024 GPUs over all splits ≤ 1 s). Run by hand:

    python benchmarks/bench_training.py

and copy the printed lines into benchmarks/README.md, section "Training".
"""

from __future__ import annotations

import platform
import time

import roofline as rl


def _best(fn, repeat: int) -> float:  # type: ignore[no-untyped-def]
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        best = min(best, (time.perf_counter() - t0) / repeat)
    return best


def main() -> None:
    c = rl.cluster("dgx-h100", nodes=128)
    m = rl.model("gpt3-175b")
    kw = dict(global_batch=1536, seq_len=2048, micro_batch=1, tp=8, pp=16, dp=8,
              recompute="selective", zero=1, precision="bf16")
    t0 = time.perf_counter()
    rl.train(m, c, **kw)
    cold = time.perf_counter() - t0
    warm = _best(lambda: rl.train(m, c, **kw), 2000)
    other = _best(lambda: rl.train(m, c, **{**kw, "pp": 8, "dp": 16, "interleave": 2}), 2000)
    t0 = time.perf_counter()
    tab = rl.best_parallelism(m, c, global_batch=1536, seq_len=2048, top=None,
                              include_infeasible=True)
    search_cold = time.perf_counter() - t0
    search_warm = _best(lambda: rl.best_parallelism(m, c, global_batch=1536, seq_len=2048), 3)
    print(f"machine: {platform.processor() or platform.machine()}, Python "
          f"{platform.python_version()}")
    print(f"rl.train GPT-3 175B, 1024 H100: first call (graph build + pricing) "
          f"{cold * 1e3:.1f} ms; warm {warm * 1e6:.0f} µs; another split of the same model "
          f"{other * 1e6:.0f} µs")
    print(f"best_parallelism GPT-3 175B, 1024 H100, {len(tab)} splits: first call "
          f"{search_cold * 1e3:.0f} ms, warm {search_warm * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
