"""Published LLM-serving measurements that ``rl.serve`` is validated (and its engine factors
fitted) on. The doc docs/validation/serving.md is generated from this table
(``report_table``); tests/test_serving_validation.py asserts the stated tolerance;
``python benchmarks/bench_serving.py --fit`` reruns the one fit of data/presets/serving.toml.

Every case names its source (``SOURCES``), the exact configuration it was measured in, and
what we assume where the source is silent (``note``). Metrics:

* ``tok_s_gpu``  output tokens/s per GPU of a static batch (``tokens_per_s_per_device``)
* ``tok_s``      output tokens/s of the whole deployment (``tokens_per_s``)
* ``ttft``       time to first token at batch 1, s
* ``tpot``       inter-token latency at batch 1, s
* ``e2e``        end-to-end latency of a static batch (prefill + all decode steps), s
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["CASES", "SOURCES", "Case", "FIT_PARAMS", "errors", "fit", "predict",
           "report_table", "summary"]

SOURCES = {
    "trt061": ("NVIDIA TensorRT-LLM docs/source/performance.md (NVIDIA/TensorRT-LLM commit "
               "138f96d45f90b9667426f7c47297d8c06bafac73): 'Peak Throughput' tables (v0.6.1, "
               "gptSessionBenchmark, static batches; H100 FP8 in out tok/s/GPU; A100 FP16 TP=1 "
               "rows only) and 'Low Latency' first-token tables (v0.5, batch 1)"),
    "trt05": ("NVIDIA TensorRT-LLM release/0.5.0 docs/source/performance.md, 'High Throughput', "
              "H100 GPUs (FP8): static batches, 'Throughput (out tok/s)' of the whole "
              "deployment (for the TP=4 rows a per-GPU reading would need 4x the 70B weights "
              "read in less time than H100 memory allows, so the column is the total)"),
    "nim": ("NVIDIA NIM for LLMs benchmarking guide 1.0.0, 'Performance' "
            "(docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance): Llama-3.3-70b-instruct, "
            "NIM 1.8.0, 2 x H100 80G, fp8 TP2, concurrency 1 rows (TTFT, ITL) of the "
            "'5000 Input Tokens / 500 Output Tokens' and '500 Input Tokens / 2000 Output "
            "Tokens' tables (AIPerf client, streaming)"),
    "vllm_ci": ("vLLM performance benchmark, buildkite.com/vllm/performance-benchmark/builds/"
                "9515, 'Latency tests' on H200: input 32 tokens, output 128, batch 8 fixed, "
                "mean end-to-end latency (llama-3.1 8B TP1, llama-3 70B TP4)"),
    "vllm2192": ("vllm-project/vllm pull request #2192 ('Custom all reduce kernels', 2023-12): "
                 "benchmarks/benchmark_latency.py --input-len 256 --output-len 256, Llama 70B "
                 "on A100-80G, TP 4, batch 64: 14.57 s with the custom all-reduce"),
    "oci405": ("Oracle Cloud Infrastructure blog 'Serving Llama 3.1 405B model with AMD MI300X "
               "GPUs' (BM.GPU.MI300X.8, all 8 GPUs, vLLM scripts/benchmark_latency.py, input "
               "128 and output 128 tokens), average latency by batch size"),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One published measurement and the exact configuration it was taken in."""

    name: str
    source: str  #: key of SOURCES
    model: str
    hardware: str
    precision: str  #: compute/weight dtype
    kv: str  #: KV-cache dtype
    activations: str
    batch: int
    tp: int
    prompt: int
    output: int
    metric: str  #: tok_s_gpu | tok_s | ttft | tpot | e2e
    measured: float  #: in the metric's SI unit (tokens/s or s)
    engine: str = "trtllm"
    note: str = ""


def _trt061() -> list[Case]:
    thr = [("llama-2-7b", "H100", "fp8", 768, 1, 128, 128, 19694),
           ("llama-2-7b", "H100", "fp8", 112, 1, 128, 2048, 6818),
           ("llama-2-7b", "H100", "fp8", 80, 1, 2048, 128, 2244),
           ("llama-2-7b", "H100", "fp8", 48, 1, 2048, 2048, 2740),
           ("llama-2-70b", "H100", "fp8", 1024, 2, 128, 128, 2657),
           ("llama-2-70b", "H100", "fp8", 480, 4, 128, 2048, 1486),
           ("llama-2-70b", "H100", "fp8", 96, 2, 2048, 128, 306),
           ("llama-2-70b", "H100", "fp8", 64, 2, 2048, 2048, 547),
           ("llama-2-7b", "A100", "fp16", 384, 1, 128, 128, 5586),
           ("llama-2-7b", "A100", "fp16", 60, 1, 128, 2048, 1928),
           ("llama-2-7b", "A100", "fp16", 52, 1, 2048, 128, 591)]
    ttft = [("llama-2-7b", "H100", "fp8", 1, 128, 7e-3),
            ("llama-2-7b", "H100", "fp8", 1, 2048, 36e-3),
            ("llama-2-70b", "H100", "fp8", 4, 128, 26e-3),
            ("llama-2-70b", "H100", "fp8", 4, 2048, 109e-3),
            ("llama-2-7b", "A100", "fp16", 1, 128, 16e-3),
            ("llama-2-7b", "A100", "fp16", 1, 2048, 133e-3),
            ("llama-2-70b", "A100", "fp16", 4, 128, 47e-3),
            ("llama-2-70b", "A100", "fp16", 4, 2048, 377e-3)]
    fp8 = "--enable_fp8 --fp8_kv_cache: fp8 weights/GEMMs and KV cache, fp16 activations"
    out = [Case(name=f"{m} {hw} {dt} B={b} tp={tp} {i}/{o} tok/s/GPU", source="trt061",
                engine="trtllm-legacy",
                model=m, hardware=hw, precision=dt, kv=dt, activations="fp16", batch=b, tp=tp,
                prompt=i, output=o, metric="tok_s_gpu", measured=float(v),
                note=fp8 if dt == "fp8" else "fp16")
           for m, hw, dt, b, tp, i, o, v in thr]
    out += [Case(name=f"{m} {hw} {dt} tp={tp} TTFT {i}", source="trt061",
                 engine="trtllm-legacy", model=m, hardware=hw,
                 precision=dt, kv=dt, activations="fp16", batch=1, tp=tp, prompt=i, output=1,
                 metric="ttft", measured=v, note=fp8 if dt == "fp8" else "fp16")
            for m, hw, dt, tp, i, v in ttft]
    return out


def _trt05() -> list[Case]:
    rows = [("llama-2-7b", 64, 1, 128, 128, 9193), ("llama-2-7b", 64, 1, 128, 2048, 5367),
            ("llama-2-7b", 64, 1, 2048, 128, 2058), ("llama-2-7b", 32, 1, 2048, 2048, 2230),
            ("llama-2-70b", 64, 4, 128, 128, 3317), ("llama-2-70b", 64, 4, 128, 2048, 2616),
            ("llama-2-70b", 64, 4, 2048, 128, 843), ("llama-2-70b", 64, 4, 2048, 2048, 1583)]
    return [Case(name=f"v0.5 {m} H100 fp8 B={b} tp={tp} {i}/{o} tok/s", source="trt05",
                 engine="trtllm-legacy",
                 model=m, hardware="H100", precision="fp8", kv="fp8", activations="fp16",
                 batch=b, tp=tp, prompt=i, output=o, metric="tok_s", measured=float(v),
                 note="assumed as v0.6.1: fp8 weights/GEMMs and KV cache, fp16 activations")
            for m, b, tp, i, o, v in rows]


def _nim() -> list[Case]:
    note = ("Llama-3.3-70B has Llama-3.1-70B's architecture (zoo llama-3.1-70b); assumed fp8 "
            "KV cache (ModelOpt fp8 checkpoint) and bf16 activations; TensorRT-LLM engine")
    out = []
    for i, o, ttft, itl in ((5000, 500, 406.77e-3, 18.58e-3), (500, 2000, 47.77e-3, 18.91e-3)):
        for metric, v in (("ttft", ttft), ("tpot", itl)):
            out.append(Case(name=f"NIM llama-3.3-70b H100 fp8 tp=2 {i}/{o} c=1 "
                            f"{metric.upper()}", source="nim", model="llama-3.1-70b",
                            hardware="H100", precision="fp8", kv="fp8", activations="bf16",
                            batch=1, tp=2, prompt=i, output=o, metric=metric, measured=v,
                            note=note))
    return out


def _vllm() -> list[Case]:
    bf = "bf16 weights, activations and KV (vLLM defaults for these checkpoints)"
    out = [Case(name="vLLM llama-3.1-8b H200 bf16 B=8 tp=1 32/128 e2e", source="vllm_ci",
                model="llama-3.1-8b", hardware="H200", precision="bf16", kv="bf16",
                activations="bf16", batch=8, tp=1, prompt=32, output=128, metric="e2e",
                measured=833.421e-3, engine="vllm", note=bf),
           Case(name="vLLM llama-3-70b H200 bf16 B=8 tp=4 32/128 e2e", source="vllm_ci",
                model="llama-3.1-70b", hardware="H200", precision="bf16", kv="bf16",
                activations="bf16", batch=8, tp=4, prompt=32, output=128, metric="e2e",
                measured=2077.53e-3, engine="vllm",
                note=bf + "; Llama-3-70B has Llama-3.1-70B's shapes (zoo llama-3.1-70b)"),
           Case(name="vLLM llama-2-70b A100 fp16 B=64 tp=4 256/256 e2e", source="vllm2192",
                model="llama-2-70b", hardware="A100", precision="fp16", kv="fp16",
                activations="fp16", batch=64, tp=4, prompt=256, output=256, metric="e2e",
                measured=14.57, engine="vllm",
                note="'Llama 70B' read as Llama-2-70B in fp16 (the PR's own test script loads "
                     "TheBloke/Llama-2-70B-fp16)")]
    for b, v in ((1, 3.530), (8, 3.974), (64, 6.919)):
        out.append(Case(name=f"vLLM llama-3.1-405b MI300X fp8 B={b} tp=8 128/128 e2e",
                        source="oci405", model="llama-3.1-405b", hardware="MI300X",
                        precision="fp8", kv="fp8", activations="bf16", batch=b, tp=8,
                        prompt=128, output=128, metric="e2e", measured=v, engine="vllm",
                        note="assumed fp8 weights/GEMMs and fp8 KV (AMD's FP8-KV checkpoint), "
                             "bf16 activations"))
    return out


CASES: tuple[Case, ...] = tuple(_trt061() + _trt05() + _nim() + _vllm())

#: the factors the one fit adjusts, per engine (comm factors are NOT fitted: they come from
#: all-reduce microbenchmarks, see data/presets/serving.toml)
FIT_PARAMS: dict[str, tuple[str, ...]] = {
    "trtllm": ("layer_overhead", "request_overhead", "gemm_max_fp8"),
    "trtllm-legacy": ("step_overhead", "layer_overhead", "request_overhead"),
    "vllm": ("step_overhead", "layer_overhead", "request_overhead"),
}


def predict(case: Case, engine: Any = None) -> float:
    """Our number for ``case`` (engine: a ServingFactors to try, default the case's engine)."""
    from ..specs.dtypes import precision as make_precision
    from .serving import serve

    p = make_precision(case.precision, activations=case.activations, kv=case.kv)
    s = serve(case.model, case.hardware, batch=case.batch, prompt_len=case.prompt,
              output_len=case.output, precision=p, tp=case.tp,
              engine=engine if engine is not None else case.engine)
    if not s.feasible:
        raise AssertionError(f"{case.name}: does not fit: {s.reason}")
    return {"tok_s_gpu": s.tokens_per_s_per_device, "tok_s": s.tokens_per_s, "ttft": s.ttft,
            "tpot": s.tpot, "e2e": s.e2e_latency}[case.metric]


def errors(factors: dict[str, Any] | None = None) -> list[tuple[Case, float, float]]:
    """(case, ours, log(ours / measured)) for every case."""
    out = []
    for c in CASES:
        f = None if factors is None else factors.get(c.engine)
        ours = predict(c, f)
        out.append((c, ours, math.log(ours / c.measured)))
    return out


def summary(errs: list[tuple[Case, float, float]]) -> dict[str, float]:
    e = sorted(abs(x) for _, _, x in errs)
    n = len(e)
    med = e[n // 2] if n % 2 else (e[n // 2 - 1] + e[n // 2]) / 2
    return {"n": n, "rms_log": math.sqrt(sum(x * x for x in e) / n),
            "median_abs_log": med, "max_abs_log": e[-1]}


def fit(rounds: int = 4) -> tuple[dict[str, Any], dict[str, float], dict[str, float]]:
    """The one fit: coordinate descent (golden-section search per factor, a few rounds) of the
    RMS of log(ours / measured) over ALL cases, the factors of FIT_PARAMS of both engines at
    once. Returns (factor sets, fitted values, summary)."""
    from ._serving_plan import serving_factors

    cur = {e: serving_factors(e) for e in FIT_PARAMS}
    bounds = {"step_overhead": (0.0, 5e-3), "layer_overhead": (0.0, 150e-6),
              "request_overhead": (0.0, 20e-3), "gemm_max_fp8": (0.3, 0.9)}

    def score(fs: dict[str, Any]) -> float:
        return summary(errors(fs))["rms_log"]

    best = score(cur)
    for _ in range(rounds):
        for eng, names in FIT_PARAMS.items():
            for nm in names:
                lo, hi = bounds[nm]

                def f(v: float, eng: str = eng, nm: str = nm,
                      cur: dict[str, Any] = cur) -> float:
                    trial = dict(cur)
                    one: dict[str, Any] = {nm: v}
                    trial[eng] = replace(cur[eng], **one)
                    if nm == "gemm_max_fp8":  # shared by all engines (same fp8 GEMMs)
                        trial = {k: replace(x, gemm_max_fp8=v)
                                 for k, x in trial.items()}
                    return score(trial)

                a, b = lo, hi
                g = (math.sqrt(5) - 1) / 2
                x1, x2 = b - g * (b - a), a + g * (b - a)
                f1, f2 = f(x1), f(x2)
                for _ in range(18):
                    if f1 < f2:
                        b, x2, f2 = x2, x1, f1
                        x1 = b - g * (b - a)
                        f1 = f(x1)
                    else:
                        a, x1, f1 = x1, x2, f2
                        x2 = a + g * (b - a)
                        f2 = f(x2)
                xv, fv = (x1, f1) if f1 < f2 else (x2, f2)
                if fv < best:
                    best = fv
                    upd: dict[str, Any] = {nm: xv}
                    cur[eng] = replace(cur[eng], **upd)
                    if nm == "gemm_max_fp8":
                        cur = {k: replace(x, gemm_max_fp8=xv) for k, x in cur.items()}
    vals = {f"{e}.{n}": getattr(cur[e], n) for e, ns in FIT_PARAMS.items() for n in ns}
    return cur, vals, summary(errors(cur))


def report_table(errs: list[tuple[Case, float, float]] | None = None) -> str:
    """The markdown case table of docs/validation/serving.md."""
    errs = errors() if errs is None else errs
    unit = {"tok_s_gpu": ("tok/s/GPU", 1.0), "tok_s": ("tok/s", 1.0), "ttft": ("ms", 1e3),
            "tpot": ("ms", 1e3), "e2e": ("s", 1.0)}
    lines = ["| case | source | engine | ours | measured | unit | error |",
             "|---|---|---|---:|---:|---|---:|"]
    for c, ours, e in errs:
        u, k = unit[c.metric]
        lines.append(f"| {c.name} | {c.source} | {c.engine} | {ours * k:,.4g} | "
                     f"{c.measured * k:,.4g} | {u} | {math.exp(e) - 1:+.1%} |")
    return "\n".join(lines)
