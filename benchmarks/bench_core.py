#!/usr/bin/env python3
"""Speed of the roofline core, measured beside mlsysim 0.1.1 in the same run.

    python benchmarks/bench_core.py [--quick]

Reports (JSON on stdout, a summary on stderr):
  * import time of `import roofline` in a fresh interpreter (median of 7);
  * one rl.solve, ResNet-50 / A100 / fp16, per preset and batch (median of repeats);
  * mlsysim 0.1.1's Engine.solve on the same case, when a venv with it exists
    ($MLSYSIM_VENV, else /tmp/mlsysim-venv or /work/mlsysim-venv; make one with
    benchmarks/setup_mlsysim_venv.sh), and the speed ratio;
  * a sweep of ResNet-50 over every zoo device x batches 1..1024 x 4 precisions, per-op
    pricing: configurations per second, first (cold: plans built) and second (warm) run.
Targets (issue 2): solve >= 50x faster than mlsysim; sweep >= 1e5 configurations/s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import timeit
from pathlib import Path

HERE = Path(__file__).resolve().parent


def import_time(n: int = 7) -> tuple[float, float]:
    """Median seconds of `import roofline`, and of the import plus a first solve (which loads
    numpy, the engine, the zoo indexes and builds the ResNet-50 graph)."""
    code = ("import time; t = time.perf_counter(); import roofline as rl; "
            "t1 = time.perf_counter(); rl.solve('resnet50', 'A100'); "
            "print(t1 - t, time.perf_counter() - t)")
    runs = [tuple(map(float, subprocess.run([sys.executable, "-c", code], capture_output=True,
                                            text=True, check=True).stdout.split()))
            for _ in range(n)]
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs)


def per_call(fn, number: int, repeat: int) -> float:
    return statistics.median(t / number for t in timeit.repeat(fn, number=number, repeat=repeat))


def mlsysim_timing(quick: bool) -> dict | None:
    cands = [os.environ.get("MLSYSIM_VENV", ""), "/tmp/mlsysim-venv", "/work/mlsysim-venv"]
    for venv in cands:
        py = Path(venv) / "bin" / "python"
        if venv and py.exists():
            args = [str(py), str(HERE / "mlsysim_yardstick.py")] + (["--quick"] if quick else [])
            out = subprocess.run(args, capture_output=True, text=True)
            if out.returncode == 0:
                return json.loads(out.stdout)
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    import roofline as rl

    number, repeat = (500, 5) if a.quick else (3000, 7)
    res: dict = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    res["import_s"], res["import_and_first_solve_s"] = import_time()
    m, hw = rl.model("resnet50"), rl.hardware("A100")
    solve = {}
    for preset in ("default", "bound", "mlsysim"):
        for b in (1, 8, 256):
            rl.solve(m, hw, batch=b, preset=preset)  # build the cached graph and plan once
            solve[f"{preset}/b{b}"] = per_call(
                lambda b=b, preset=preset: rl.solve(m, hw, batch=b, preset=preset),
                number, repeat)
    solve["default/b1/by-name"] = per_call(lambda: rl.solve("resnet50", "A100", batch=1),
                                           number, repeat)
    res["solve_s"] = solve
    y = mlsysim_timing(a.quick)
    if y:
        ms = y["timing"]["Engine.solve/resnet50/A100/fp16/b1"]["median_s"]
        res["mlsysim_engine_solve_s"] = ms
        res["speedup_vs_mlsysim"] = {k: ms / v for k, v in solve.items()}
        seed = y.get("seed", {})
        worst = 0.0
        for hw_name in ("A100", "H100"):
            for b, ref in seed.get(f"resnet50/{hw_name}/fp16", {}).items():
                r = rl.solve("resnet50", hw_name, batch=int(b), preset="mlsysim")
                worst = max(worst, abs(r.latency * 1e3 / ref["latency_ms"] - 1))
        res["mlsysim_preset_max_latency_rel_err"] = worst
    hws = rl.list_hardware()
    batches = list(range(1, 1025))
    precs = ["fp16", "bf16", "fp8", "int8"]
    for label in ("cold", "warm"):
        if label == "cold":
            from roofline.graphs.resolve import _zoo_model

            _zoo_model("resnet50")._cache.clear()  # drop cached graphs and plans
        t = time.perf_counter()
        s = rl.sweep("resnet50", hws, batch=batches, precision=precs)
        dt = time.perf_counter() - t
        res[f"sweep_{label}"] = {"configs": len(s), "seconds": dt, "configs_per_s": len(s) / dt,
                                 "op_configs_per_s": len(s) * 174 / dt}
    print(json.dumps(res, indent=2))
    sp = res.get("speedup_vs_mlsysim", {}).get("default/b1")
    print(f"import {res['import_s'] * 1e3:.1f} ms (with a first solve "
          f"{res['import_and_first_solve_s'] * 1e3:.0f} ms); solve default/b1 "
          f"{solve['default/b1'] * 1e6:.1f} us"
          + (f" = {sp:.0f}x faster than mlsysim ({res['mlsysim_engine_solve_s'] * 1e3:.2f} ms)"
             if sp else " (no mlsysim venv)")
          + f"; sweep {res['sweep_cold']['configs_per_s']:.3g} configs/s cold, "
          f"{res['sweep_warm']['configs_per_s']:.3g} warm", file=sys.stderr)


if __name__ == "__main__":
    main()
