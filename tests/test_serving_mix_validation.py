"""rl.simulate_serving against measured saturated serving runs (docs/validation/serving.md,
"Request mixes").

Source (not used elsewhere in the project): shaamil101-etched/trtllm-benchmarks, commit
cc0f8eb02303de15aea03248e30e9dee403de4e5, llama-8b-results/analysis/performance_analysis.md,
"Top 10 Configurations by Token Throughput": `trtllm-bench throughput`, TensorRT-LLM 0.16.0,
Llama-3.1-8B-Instruct FP8 (weights and KV cache), one H100 80GB HBM3, TP 1, max_seq_len 8192,
synthetic fixed-length requests all offered at once; "Token Throughput" in output tokens/s.

Assumptions (the source is silent): max_batch_size 2048 (trtllm-bench's engine default is not
stated), whole-prompt prefill (chunked context off, TensorRT-LLM 0.16's default) with up to
8192 tokens per step, the GUARANTEED_NO_EVICT scheduler (KV reserved for prompt + output).
"""

import math

import pytest

import roofline as rl

#: (prompt tokens, output tokens, requests, measured output tokens/s)
CASES = [(128, 1024, 7500, 19787.63), (128, 512, 15000, 19327.08), (256, 1024, 6000, 18340.11),
         (128, 256, 20000, 17602.06), (128, 2048, 3000, 16901.88), (256, 512, 10000, 16891.91),
         (256, 2048, 2500, 15457.63), (512, 1024, 5000, 15348.79), (512, 2048, 2000, 14769.91),
         (128, 128, 30000, 14389.80)]


def predict(isl: int, osl: int, n: int) -> float:
    wl = rl.Workload(trace=[(isl, osl, 0.0)] * n)
    s = rl.simulate_serving("llama-3.1-8b", "H100", workload=wl, requests=None,
                            precision="fp8", kv_precision="fp8", max_concurrency=2048,
                            chunk_size=None, max_batched_tokens=8192, kv_policy="reserve",
                            engine="trtllm")
    assert s.mean_in_system == pytest.approx(s.littles_rhs, rel=0.02)
    return s.throughput_tokens_per_s


def test_saturated_trtllm_bench_throughput():
    logs = []
    for isl, osl, n, measured in CASES:
        err = math.log(predict(isl, osl, n) / measured)
        logs.append(err)
        # the band this estimate earns today (docs/validation/serving.md): within 2x
        assert abs(err) <= math.log(2.0), (isl, osl, err)
    rms = math.sqrt(sum(e * e for e in logs) / len(logs))
    assert rms <= 0.45  # now 0.41: over-predicted throughout (see the page)
