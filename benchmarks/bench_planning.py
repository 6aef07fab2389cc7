"""Speed of the serving simulation and planner (issue 14): run by hand, numbers go to
benchmarks/README.md.

    PYTHONPATH=src python benchmarks/bench_planning.py
    PYTHONPATH=src python benchmarks/bench_planning.py --simulate   # the simulations only

Targets: 10⁵ requests simulated in ≤ 1 s; a full plan for a 70B model on 64 devices (every
layout) in ≤ 5 s. Also timed: a MoE plan (Mixtral-8x7B on 16 H100, expert parallelism searched).
"""

from __future__ import annotations

import os
import time

import roofline as rl
from roofline.analysis.stepcost import step_costs


def _t(f):  # type: ignore[no-untyped-def]
    """(wall s, CPU s of this process, result): on a shared machine the CPU time is the
    fairer measure of the code's speed."""
    t, c = time.perf_counter(), time.process_time()
    out = f()
    return (time.perf_counter() - t, time.process_time() - c), out


def main(simulate_only: bool = False) -> None:
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rl.serve("llama-3.1-8b", "H100")  # imports, zoo
    wl = rl.Workload(prompt=rl.lengths("lognormal", mean=3000, sigma=0.8, max=8192),
                     output=rl.lengths("fixed", 2048), rate=40.0)
    # 10^5 requests: 8 replicas of Llama-3.1-70B tp8 on H200 at 10 req/s, 64 in flight each
    # (stable: ~12 req/s capacity); then the same at 40 req/s (overloaded: the whole backlog)
    tc, costs = _t(lambda: step_costs("llama-3.1-70b", "H200", tp=8, max_tokens=2048 + 64,
                                      ref_prompts=(2178,), ref_output=2048))
    for label, w, kw in (("10 req/s, chunked 2048, dynamic KV", wl.with_rate(10.0), {}),
                         ("10 req/s, whole prompts, reserved KV", wl.with_rate(10.0),
                          {"chunk_size": None, "kv_policy": "reserve"}),
                         ("40 req/s, overloaded", wl, {})):
        ts, s = _t(lambda w=w, kw=kw: rl.simulate_serving(
            "llama-3.1-70b", "H200", tp=8, replicas=8, workload=w, requests=100_000,
            max_concurrency=64, seed=1, costs=costs, **kw))
        print(f"simulate 1e5 requests ({label}): {ts[0]:.2f} s wall, {ts[1]:.2f} s CPU "
              f"({s.iterations:,} engine steps, overloaded={s.overloaded}); step tables once: "
              f"{tc[0]:.2f} s wall, {tc[1]:.2f} s CPU")
    if simulate_only:
        return
    wl20 = wl.with_rate(20.0)
    slo = rl.SLO(ttft_p99=2.0, tpot_p99=0.050)
    tp_cold, p = _t(lambda: rl.plan_serving("llama-3.1-70b", "H200", devices=64, workload=wl20,
                                           slo=slo))
    tp_warm, _ = _t(lambda: rl.plan_serving("llama-3.1-70b", "H200", devices=64, workload=wl20,
                                           slo=slo))
    agg = p.layouts.where(p.layouts["mode"] == "aggregated")
    n_lay = len(set(agg["layout"])) + len(p.infeasible)
    print(f"plan 70B on 64 H200 ({n_lay} replica layouts, {len(p.layouts)} frontier "
          f"points, {len(p.simulated)} simulations): cold {tp_cold[0]:.1f} s wall / "
          f"{tp_cold[1]:.1f} s CPU, warm {tp_warm[0]:.1f} s wall / {tp_warm[1]:.1f} s CPU")
    print(f"  best: {p.best.layout if p.best else None}")
    # a mixture of experts: expert parallelism searched too (MoE step tables take one rl.serve
    # call per batch point: ~50 graph builds per layout)
    wl_m = rl.Workload(prompt=rl.lengths("lognormal", mean=2000, sigma=0.8, max=8192),
                       output=rl.lengths("fixed", 512), rate=20.0)
    tm, pm = _t(lambda: rl.plan_serving("mixtral-8x7b", "H100", devices=16, workload=wl_m,
                                        slo=slo))
    lay = set(pm.layouts["layout"])
    n_m = len({x.split(" (")[0] for x in lay if not x.startswith("P ")}) + len(pm.infeasible)
    print(f"plan Mixtral-8x7B on 16 H100 ({n_m} replica layouts incl. ep 2/4/8, "
          f"{len(pm.layouts)} frontier points, {len(pm.simulated)} simulations): "
          f"{tm[0]:.1f} s wall / {tm[1]:.1f} s CPU; best: {pm.best.layout if pm.best else None}")


if __name__ == "__main__":
    import sys

    main(simulate_only="--simulate" in sys.argv[1:])
