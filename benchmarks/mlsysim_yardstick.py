#!/usr/bin/env python3
"""Yardstick numbers from mlsysim 0.1.1, printed as JSON.

Run this with the python of a venv that has mlsysim==0.1.1 installed
(benchmarks/setup_mlsysim_venv.sh makes one); roofline is not imported here,
and mlsysim is never a dependency of roofline.

It reports:
  * timing  - median (and best) seconds per ``Engine.solve`` call for
              ResNet-50 / A100 / fp16 at a few batch sizes, plus one
              ``ServingModel.solve`` call (Llama-3.1-8B / H100 / 2048 tokens);
  * seed    - the reference numbers the "mlsysim" preset must reproduce
              (full float precision, so callers can choose their tolerance).

    python benchmarks/mlsysim_yardstick.py [--number N] [--repeat R] [--quick]
"""
import argparse
import json
import platform
import statistics
import sys
import timeit
import warnings


def _profile(p):
    """Flatten an mlsysim PerformanceProfile into plain floats (ms, 1/s, flop/byte)."""
    return {
        "latency_ms": p.latency.m_as("ms"),
        "t_compute_ms": p.latency_compute.m_as("ms"),
        "t_memory_ms": p.latency_memory.m_as("ms"),
        "overhead_ms": p.latency_overhead.m_as("ms"),
        "throughput_per_s": p.throughput.m_as("1/s"),
        "bottleneck": p.bottleneck,
        "arithmetic_intensity": p.arithmetic_intensity.m_as("flop/byte"),
        "mfu": p.mfu,
        "feasible": p.feasible,
    }


def _time(fn, number, repeat):
    """Median and best seconds per call over `repeat` rounds of `number` calls."""
    fn()  # warm-up (first call pays pint's unit-parsing caches)
    rounds = timeit.repeat(fn, number=number, repeat=repeat)
    return {"median_s": statistics.median(rounds) / number,
            "best_s": min(rounds) / number,
            "number": number, "repeat": repeat}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--number", type=int, default=200, help="calls per timing round")
    ap.add_argument("--repeat", type=int, default=15, help="timing rounds")
    ap.add_argument("--quick", action="store_true", help="short timing (number=20, repeat=5)")
    args = ap.parse_args()
    if args.quick:
        args.number, args.repeat = 20, 5

    try:
        import mlsysim
        from mlsysim import Engine, Hardware, Models
        from mlsysim.core.solver import ServingModel
    except ImportError as exc:
        sys.exit(f"mlsysim is not importable here ({exc}); run benchmarks/setup_mlsysim_venv.sh "
                 "and use that venv's python.")
    warnings.simplefilter("ignore")  # mlsysim warns on dtype fallback; not relevant here

    batches = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    resnet, llama8b = Models.ResNet50, Models.Llama3_8B

    # Seed numbers: ResNet-50 on A100 and H100 over batches, Llama-3.1-8B on A100 at batch 1,
    # all fp16 with mlsysim's default efficiency of 0.5.
    seed = {}
    for hw_name in ("A100", "H100"):
        hw = getattr(Hardware, hw_name)
        seed[f"resnet50/{hw_name}/fp16"] = {
            str(b): _profile(Engine.solve(resnet, hw, batch_size=b, precision="fp16"))
            for b in batches}
    seed["llama3.1-8b/A100/fp16/b1"] = _profile(
        Engine.solve(llama8b, Hardware.A100, batch_size=1, precision="fp16"))

    # Serving golden case: Llama-3.1-8B on H100, 2048-token context, batch 1, fp16.
    serve = ServingModel()
    r = serve.solve(llama8b, Hardware.H100, seq_len=2048, batch_size=1, precision="fp16")
    seed["serving/llama3.1-8b/H100/s2048/b1/fp16"] = {
        "ttft_ms": r.ttft.m_as("ms"),
        "itl_ms": r.itl.m_as("ms"),
        "kv_cache_GB": r.kv_cache_size.m_as("GB"),  # decimal GB (1e9 bytes)
        "feasible": r.feasible,
    }

    # Speed of the yardstick itself.
    timing = {}
    for b in (1, 8, 64, 256):
        timing[f"Engine.solve/resnet50/A100/fp16/b{b}"] = _time(
            lambda b=b: Engine.solve(resnet, Hardware.A100, batch_size=b, precision="fp16"),
            args.number, args.repeat)
    timing["ServingModel.solve/llama3.1-8b/H100/s2048/b1"] = _time(
        lambda: serve.solve(llama8b, Hardware.H100, seq_len=2048, batch_size=1, precision="fp16"),
        args.number, args.repeat)

    print(json.dumps({
        "mlsysim_version": mlsysim.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "timing": timing,
        "seed": seed,
    }, indent=2))


if __name__ == "__main__":
    main()
