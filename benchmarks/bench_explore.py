"""Explore at scale: points/s per core on the local path, one process against a Dask
LocalCluster, the scheduler's overhead per task, and what a 100-node cluster would take.

    PYTHONPATH=src python benchmarks/bench_explore.py [--points 1e8] [--workers 2]

The space is a decode serving space (Llama-3.1-8B; hypothetical H100-derived parts x batch x
context x precision x tp), grown to about ``--points`` points by adding grid parts. Targets
(issue "Explore design spaces"): >= 1e6 points/s per core on the local path.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core per process: points/s per core
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import roofline as rl  # noqa: E402


def space(points: float) -> rl.Space:
    per_part = 512 * 3 * 2 * 4  # batch x context x precision x tp
    parts = max(1, int(round(points / per_part)))
    n_p = max(1, int(round(parts ** 0.5)))
    n_b = max(1, parts // n_p)
    grid = rl.hardware_grid(base="H100", peak_scale=[0.25 + 0.05 * i for i in range(n_p)],
                            bandwidth_scale=[0.25 + 0.05 * i for i in range(n_b)])
    return rl.Space(model="llama-3.1-8b", hardware=grid,
                    scenario=dict(phase="decode", batch=range(1, 513),
                                  context=[2048, 8192, 32768], precision=["bf16", "fp8"],
                                  tp=[1, 2, 4, 8]), hw_per_chunk=64)


KW = dict(objectives=["tokens_per_s_per_device", "-power_w"],
          constraints=["tpot <= 0.020", "fits"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=float, default=1e7)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    warm = space(1e5)
    rl.explore(warm, **KW)  # plans and graphs built once
    t0 = time.perf_counter()
    r = rl.explore(warm, **KW)
    dt = time.perf_counter() - t0
    print(f"local, small space warm: {r.evaluated:,} points, {r.evaluated / dt:,.0f} points/s")
    big = space(a.points)
    t0 = time.perf_counter()
    r = rl.explore(big, **KW)
    t_local = time.perf_counter() - t0
    rate = r.evaluated / t_local
    print(f"local, one process: {r.evaluated:,} points in {t_local:.1f} s = {rate:,.0f} points/s "
          f"(per core); front {len(r.pareto)}")
    from dask.distributed import Client, LocalCluster

    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cl, Client(cl) as c:
        c.run(lambda: rl.explore(warm, **KW) and None)  # warm every worker
        t0 = time.perf_counter()
        d = rl.explore(big, scheduler=c, **KW)
        t_d = time.perf_counter() - t0
        same = d.evaluated == r.evaluated and len(d.pareto) == len(r.pareto)
        print(f"LocalCluster {a.workers} workers: {t_d:.1f} s = {d.evaluated / t_d:,.0f} points/s "
              f"(x{t_local / t_d:.2f} the single process; same front: {same})")
        n = 2000
        t0 = time.perf_counter()
        c.gather(c.map(lambda i: i, range(n), pure=False))
        per_task = (time.perf_counter() - t0) / n
        print(f"scheduler overhead: {per_task * 1e3:.2f} ms per task ({n} trivial tasks)")
    chunk = 64 * 512 * 3 * 2  # points per decode chunk (64 parts x batch x context x precision)
    cores = 100 * 64
    t_chunk = chunk / rate
    eff = t_chunk / (t_chunk + per_task)
    for pts in (1e8, 1e10):
        print(f"on paper, 100 nodes x 64 cores: {pts:.0e} points in "
              f"{pts / (rate * cores * eff):,.1f} s ({rate * cores * eff:,.0f} points/s; task "
              f"overhead {per_task * 1e3:.2f} ms per {t_chunk * 1e3:.0f} ms chunk)")


if __name__ == "__main__":
    main()
