"""Speed of rl.serve and serve_sweep (issue 5 targets: one serve <= 100 us warm; a sweep of
10^6 batch x context x hardware x precision configurations <= 2 s). Run by hand:

    python benchmarks/bench_serving.py
    python benchmarks/bench_serving.py --fit   # rerun the one fit of data/presets/serving.toml
"""

from __future__ import annotations

import statistics
import time

import numpy as np

import roofline as rl
from roofline.scenarios.serving import serve_sweep


def per_call(fn, n: int = 2000, reps: int = 5) -> float:
    fn()  # warm caches (graphs, plans)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        ts.append((time.perf_counter() - t) / n)
    return statistics.median(ts)


def main() -> None:
    m, hw = rl.model("llama-3.1-8b"), rl.hardware("H100")
    t1 = per_call(lambda: rl.serve(m, hw, batch=8, prompt_len=2048, output_len=256,
                                   precision="bf16", kv_precision="fp8"))
    print(f"rl.serve (warm, same scenario):            {t1 * 1e6:8.1f} us")
    outs = iter(range(10**9))
    t2 = per_call(lambda: rl.serve(m, hw, batch=8, prompt_len=2048,
                                   output_len=1 + next(outs) % 30000, precision="bf16"))
    print(f"rl.serve (warm graphs, new output_len):     {t2 * 1e6:8.1f} us")
    t3 = per_call(lambda: rl.serve(m, hw, batch=8, prompt_len=1024, output_len=32768), n=500)
    print(f"rl.serve (32k-token generation):            {t3 * 1e6:8.1f} us")
    hws = ["H100", "A100", "H200", "B200", "L40S", "MI300X", "A10G", "L4", "TPU-v5e", "Gaudi3"]
    precs = ["bf16", "fp8", "fp16", "int8"]
    B = np.arange(1, 251)
    S = np.linspace(128, 32768, 100).round()
    n = len(hws) * len(precs) * len(B) * len(S)
    serve_sweep(m, hws, batch=B[:2], context=S[:2], precision=precs)  # warm graphs
    t = time.perf_counter()
    out = serve_sweep(m, hws, batch=B, context=S, precision=precs)
    dt = time.perf_counter() - t
    print(f"serve_sweep of {n:,} configurations:       {dt:8.3f} s "
          f"({np.isfinite(out['tpot']).sum():,} priced, the rest lack the dtype)")


def refit() -> None:
    """The one fit of the engine factors (roofline.validation.serving.fit_serving, started from
    the shipped values): prints the errors before, the fitted values (copy them into
    data/presets/serving.toml with their derivations) and the per-case table after. The
    leave-one-source-out report is roofline.validation.serving.serving_holdout_table()."""
    from roofline.validation import serving as v

    print("before:", v.serving_summary(v.serving_errors()))
    r = v.fit_serving(start=v.shipped_serving_values())
    for k, x in r.values.items():
        print(f"  {k:32s} {x:.6g}")
    errs = v.serving_errors(r.values)
    print("after: ", v.serving_summary(errs))
    print(v.serving_case_table(errs))


if __name__ == "__main__":
    import sys

    refit() if "--fit" in sys.argv[1:] else main()
