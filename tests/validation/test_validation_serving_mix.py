"""rl.simulate_serving against published serving runs under a request mix
(data/validation/serving_mix.toml; docs/validation/serving.md, "Request mixes"). Nothing is
fitted on these cases: the bands below are the error the model has today, asserted so that a
change that makes it worse fails, and a case that leaves its band is looked at."""

import math

import pytest

from roofline.validation import load_cases
from roofline.validation.serving_mix import predictions, summary


@pytest.fixture(scope="module")
def rows():
    return predictions()


def test_cases_load_with_their_sources():
    vs = load_cases("serving_mix")
    assert set(vs.by_source()) == {"vllm_azure", "trtbench16", "lambda_vllm"}
    assert len(vs.cases) == 41


def test_saturated_trtllm_bench_throughput(rows):
    # TensorRT-LLM 0.16, all requests offered at once: over-predicted throughout (the engine's
    # per-sequence host costs at thousands in flight are not modelled); every case within 2x
    s = summary(rows)["trtbench16"]
    for c, v, _ in rows:
        if c.source == "trtbench16":
            assert abs(math.log(v / c.value_si)) <= math.log(2.0), c.id
            assert v > c.value_si, c.id  # the direction of the error, as documented
    assert s["rms_log"] <= 0.45  # now 0.41


def test_vllm_poisson_runs_with_p99s(rows):
    # vLLM on A100 PCIe at 1 and 4 req/s (ShareGPT): latencies under-predicted; tp 4 rings its
    # all-reduces through PCIe (the cards are bridged in pairs), priced from an NCCL-over-PCIe
    # microbenchmark, not from these cases (RMS 0.63 before that term); every case within 2.2x
    vl = [(c, v, o) for c, v, o in rows if c.source == "vllm_azure"]
    for c, v, over in vl:
        assert abs(math.log(v / c.value_si)) <= math.log(2.2), c.id
        # the simulation says overloaded exactly where the run could not keep up (16 req/s
        # offered, 2.67 req/s served)
        assert over == ("16 req/s" in c.id), c.id
    assert summary(rows)["vllm_azure"]["rms_log"] <= 0.42  # now 0.37
    # the PCIe ring is what separates tp 4 from tp 2 x pp 2 at 1 req/s: tp 4's unloaded TTFT
    # (p50) is now within a third of the run's
    ttft = next(v / c.value_si for c, v, _ in vl if c.id.endswith("tp4 ShareGPT 1 req/s p50 TTFT"))
    assert 0.67 <= ttft <= 1.0
    # all requests at once: the throughput the engine sustains is met within 10 %
    tput = next(v / c.value_si for c, v, _ in vl if c.metric == "tok_s")
    assert tput == pytest.approx(1.0, abs=0.10)


def test_vllm_v0_saturated_runs_carry_host_time_per_sequence(rows):
    # vLLM v0.5.4 / v0.6.0 on H100, 256 sequences in flight: throughput over-predicted in every
    # row (the vllm profile's fixed per-layer cost does not grow with the batch), least with
    # multi-step scheduling (10 steps per host pass), within 4.5x; the median TPOTs within 12x
    # (v0.6.0 single-step without chunking: 196 ms measured, V0's prefill-first scheduling
    # stalls the decodes — not modelled)
    from roofline.validation.serving_mix import host_time_per_sequence

    lam = [(c, v) for c, v, _ in rows if c.source == "lambda_vllm"]
    for c, v in lam:
        band = 4.5 if c.metric == "tok_s" else 12.0
        assert abs(math.log(v / c.value_si)) <= math.log(band), c.id
        if c.metric == "tok_s":
            assert v > c.value_si, c.id
    assert summary(rows)["lambda_vllm"]["rms_log"] <= 1.2  # now 1.12
    for m in ("8B", "70B"):
        ratio = {c.id.split("once ")[1]: v / c.value_si for c, v in lam
                 if f" {m} " in c.id and c.metric == "tok_s"}
        assert ratio["scheduler steps 10 output tok/s"] < ratio["scheduler steps 1 output tok/s"]
        # host work per sequence per step of single-step v0.6.0: 143 µs (8B), 171 µs (70B tp4)
        assert 100e-6 <= host_time_per_sequence(rows, m) <= 250e-6, m


def test_the_page_shows_what_the_code_produces(rows):
    from pathlib import Path

    from roofline.validation.serving_mix import case_table

    page = (Path(__file__).parents[2] / "docs" / "validation" / "serving.md").read_text()
    assert case_table(rows) in page
