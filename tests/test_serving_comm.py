"""Tensor/pipeline-parallel communication of rl.serve: one latency per all-reduce CALL (not per
ring step), one-shot vs two-shot selection, checks against published all-reduce microbenchmarks,
and the TP sanity behaviour real engines show on NVLink/NVSwitch machines."""

import math

import pytest

import roofline as rl
from roofline.ops.collectives import one_shot_all_reduce, two_shot_all_reduce
from roofline.scenarios.serving import allreduce_time
from roofline.scenarios.serving import plan as sp

H100 = rl.hardware("H100")


def test_one_and_two_shot_formulas_by_hand():
    # one-shot: α + (p−1)·n/bw' = 4e-6 + 7·1e6/(450e9·0.75) = 4e-6 + 20.74e-6
    assert one_shot_all_reduce(1e6, 8, 450e9, 4e-6, link_efficiency=0.75) == pytest.approx(
        4e-6 + 7e6 / 337.5e9)
    # two-shot: 2α + 2(p−1)/p·n/bw' = 8e-6 + 1.75·1e6/337.5e9 = 8e-6 + 5.185e-6
    assert two_shot_all_reduce(1e6, 8, 450e9, 4e-6, link_efficiency=0.75) == pytest.approx(
        8e-6 + 1.75e6 / 337.5e9)
    assert one_shot_all_reduce(1e6, 1, 450e9, 4e-6) == 0.0
    assert two_shot_all_reduce(0, 8, 450e9, 4e-6) == 0.0


def test_latency_is_per_call_with_weak_rank_dependence():
    f = sp.serving_factors("trtllm")
    # a decode-sized message (batch 1 × 8192 × 2 B = 16 KiB): α(p) = 3.7 + 0.37·(p−2) µs plus
    # (p−1)·16384 B / 337.5 GB/s
    for p in (2, 4, 8):
        alpha = 3.7e-6 + 0.37e-6 * (p - 2)
        assert allreduce_time(16384, p, H100, f) == pytest.approx(
            alpha + (p - 1) * 16384 / 337.5e9, rel=1e-9)
    t2, t8 = allreduce_time(16384, 2, H100, f), allreduce_time(16384, 8, H100, f)
    assert t8 < 2.5 * t2  # not 2(p−1) ring steps: 14 steps at p = 8 vs 2 at p = 2
    assert t8 < 10e-6  # ~5-15 µs per all-reduce on 8 GPUs at decode sizes


def test_large_messages_take_the_bandwidth_optimal_two_shot():
    f = sp.serving_factors("trtllm")
    n = 64 * 2**20  # a prefill-sized message: 64 MiB
    t = allreduce_time(n, 8, H100, f)
    alpha = 3.7e-6 + 0.37e-6 * 6
    assert t == pytest.approx(2 * alpha + 1.75 * n / 337.5e9)
    assert t < one_shot_all_reduce(n, 8, 450e9, alpha, link_efficiency=0.75)


def test_against_published_h100_allreduce_microbenchmarks():
    """vllm-project/vllm PR #24111 (H100, bf16, hidden 8192, ms per call, the faster of its
    1-stage and 2-stage custom all-reduce): 0.50 MB -> 0.007 (TP2), 0.010 (TP4, 2-stage 0.017),
    0.013 (TP6, 2-stage 0.015); 4.00 MB -> 0.038 (TP4, 2-stage 0.043), 0.037 (TP6: 2-stage;
    1-stage 0.070). sgl-project/sglang PR #2904 (H100, TensorRT-LLM-derived custom all-reduce,
    smallest size): 3.7 / 4.8 / 5.9 µs at tp 2 / 4 / 8. NCCL on 8x H100 at 128 B: 19.19 µs
    (ByteDance-Seed/Triton-distributed issue #57). Ours within 35 %."""
    vl, tr, ea = (sp.serving_factors(e) for e in ("vllm", "trtllm", "eager"))
    mb = 32 * 8192 * 2
    for p, n, meas in ((2, mb, 7e-6), (4, mb, 10e-6), (6, mb, 13e-6), (4, 8 * mb, 38e-6),
                       (6, 8 * mb, 37e-6)):
        assert allreduce_time(n, p, H100, vl) == pytest.approx(meas, rel=0.35), (p, n)
    for p, meas in ((2, 3.7e-6), (4, 4.8e-6), (8, 5.9e-6)):
        assert allreduce_time(512, p, H100, tr) == pytest.approx(meas, rel=0.35), p
    assert allreduce_time(128, 8, H100, ea) == pytest.approx(19.19e-6, rel=0.35)


def test_pipeline_send_pays_its_latency():
    f = sp.serving_factors("trtllm")
    from roofline.scenarios.serving.comm import _p2p

    # 3 sends of 8192·2 B: 3·(4 µs + 16384 / 337.5 GB/s)
    assert _p2p(16384, 4, H100, f) == pytest.approx(3 * (4e-6 + 16384 / 337.5e9))


@pytest.mark.parametrize("model", ["llama-3.1-8b", "llama-3.1-70b"])
@pytest.mark.parametrize("batch", [1, 8])
def test_tp_speeds_up_memory_bound_decode_and_long_prefill(model, batch):
    """On NVLink H100s decode splits the weights, so TPOT falls with TP; the all-reduce share
    grows with TP but stays a minority for the 70B model at TP <= 8; TTFT of a long prompt
    falls with TP."""
    res = {tp: rl.serve(model, "H100", batch=batch, prompt_len=4096, output_len=128,
                        precision="bf16", tp=tp) for tp in (1, 2, 4, 8)}
    for tp in (2, 4, 8):
        assert res[tp].tpot < res[1].tpot, tp
        assert res[tp].ttft < res[1].ttft, tp
    assert res[2].tpot > res[4].tpot > res[8].tpot
    share = {tp: r.shares["tp_comm"] for tp, r in res.items()}
    assert share[1] == 0 < share[2] < share[4] < share[8]
    if model == "llama-3.1-70b":
        assert share[8] < 0.5
    # the 8B TP=8 step is far from the 2x-slower-than-TP=1 of a per-ring-step latency model
    assert res[8].tpot < 0.7 * res[1].tpot


def test_comm_share_is_reported_and_sums():
    s = rl.serve("llama-3.1-70b", "H100", batch=8, prompt_len=1024, output_len=64, tp=8)
    assert sum(s.phase_seconds.values()) == pytest.approx(s.e2e_latency, rel=1e-9)
    assert 0 < s.shares["tp_comm"] < 0.5
    # the shares are the seconds over the end-to-end latency, and sum to 1
    assert sum(s.shares.values()) == pytest.approx(1.0, rel=1e-12)
    for k, v in s.phase_seconds.items():
        assert s.shares[k] == pytest.approx(v / s.e2e_latency, rel=1e-9)
    assert math.isfinite(s.tpot)


def test_pipeline_stages_each_pay_their_tp_all_reduces():
    """A token crosses every pp stage in turn, and each stage runs its layers' two TP
    all-reduces per layer: Llama-3.1-70B (80 layers) at tp 2 × pp 2 meets 2·40·2 + 1 = 161
    all-reduces per decode step, as at tp 2 × pp 1 (2·80 + 1), not one stage's 2·40 + 1 = 81."""
    f = sp.serving_factors("trtllm")
    from roofline.scenarios.serving.comm import _p2p

    kw = dict(batch=1, prompt_len=512, output_len=65, tp=2)
    one, two = rl.serve("llama-3.1-70b", "H100", **kw), rl.serve("llama-3.1-70b", "H100", pp=2,
                                                                 **kw)
    row = 8192 * 2  # one token's activations: d_model × 2 B
    ar_dec = allreduce_time(row, 2, H100, f)  # 3.7 µs + 16384 B / 337.5 GB/s = 3.749 µs
    ar_pre = allreduce_time(512 * row, 2, H100, f)
    hand = 161 * ar_pre + 64 * 161 * ar_dec  # prefill + 64 decode steps
    assert two.phase_seconds["tp_comm"] == pytest.approx(hand, rel=1e-9)
    assert one.phase_seconds["tp_comm"] == pytest.approx(hand, rel=1e-9)
    # plus one stage-to-stage send per token (pp − 1 = 1), in the prefill and every step
    assert two.phase_seconds["pp_comm"] == pytest.approx(
        _p2p(512 * row, 2, H100, f) + 64 * _p2p(row, 2, H100, f), rel=1e-9)
    # per-token latency: both stages' compute (each priced as the stage with the embedding and
    # LM head, so no less than one device's 80 layers), all 161 all-reduces and the send
    assert two.tpot - one.tpot >= _p2p(row, 2, H100, f) * (1 - 1e-9)


def test_group_beyond_the_bridge_rings_over_pcie_by_hand():
    # A100 PCIe cards are NVLink-bridged in pairs ([links.scale_up] domain = 2): tp 2 stays on
    # the 300 GB/s bridge with vLLM's custom one-shot kernel, tp 4 rings through PCIe Gen4
    # (32 GB/s per direction) with NCCL: α 20.6 µs + 2·3/4·n / (32 GB/s · 0.56)
    hw = rl.hardware("A100-PCIe-80GB")
    assert hw.scale_up_link.domain == 2
    f = sp.serving_factors("vllm")
    n = 213 * 8192 * 2  # one 213-token prefill of Llama-3.1-70B in bf16: 3.49 MB
    assert allreduce_time(n, 4, hw, f) == pytest.approx(20.6e-6 + 1.5 * n / 17.92e9, rel=1e-9)
    assert allreduce_time(n, 2, hw, f) == pytest.approx(5.3e-6 + n / 225e9, rel=1e-9)
    # the vectorised path (serve_sweep) takes the same route
    from roofline.scenarios.serving.comm import allreduce_times
    assert float(allreduce_times([n], 4, hw, f)[0]) == pytest.approx(
        allreduce_time(n, 4, hw, f), rel=1e-9)
    # an NVSwitch part has no domain: tp 8 on H100 SXM stays on NVLink
    assert H100.scale_up_link.domain == 0
    assert allreduce_time(n, 8, H100, f) < 40e-6


def test_link_domain_is_checked():
    from roofline.errors import SpecError
    from roofline.specs.hardware import parse_hardware

    doc = {"schema": 1, "key": "x", "name": "X", "sources": {"s": "a test"},
           "peak": {"fp16": {"value": 100, "unit": "TFLOP/s", "source": "s"}},
           "memory": [{"name": "HBM", "capacity": {"value": 16, "unit": "GiB", "source": "s"},
                       "bandwidth": {"value": 1000, "unit": "GB/s", "source": "s"}}],
           "links": {"scale_up": {"name": "bridge",
                                  "bandwidth": {"value": 100, "unit": "GB/s", "source": "s"},
                                  "domain": {"value": 1.5, "unit": "1", "source": "s"}}}}
    with pytest.raises(SpecError, match="domain"):
        parse_hardware(doc, origin="test")


def test_sends_and_all_to_alls_beyond_the_bridge_go_over_pcie_by_hand():
    """Four A100 PCIe cards bridged in pairs: tp 2 × pp 2 puts the stages on different pairs,
    so the one stage send crosses PCIe (NCCL over the host link: α ≥ 20.6 µs, 0.56 of 32 GB/s);
    tp 1 × pp 4 has boundaries at devices 1|2 (across pairs) and 0|1, 2|3 (on the bridges)."""
    from roofline.scenarios.serving.comm import _p2p, moe_all_to_all, stage_crossings

    hw = rl.hardware("A100-PCIe-80GB")
    f = sp.serving_factors("vllm")
    n = 8192 * 2 * 64
    bridge = max(hw.scale_up_link.latency_s if math.isfinite(hw.scale_up_link.latency_s)
                 else 0.0, f.p2p_latency) + n / (300e9 * f.allreduce_efficiency)
    pcie = 20.6e-6 + n / (32e9 * 0.56)
    assert stage_crossings(2, 2, 2) == 1 and stage_crossings(4, 1, 2) == 1
    assert stage_crossings(4, 2, 8) == 0 and stage_crossings(3, 8, 8) == 2
    assert stage_crossings(4, 1, 0) == 0
    assert _p2p(n, 2, hw, f, tp=2) == pytest.approx(pcie, rel=1e-9)
    assert _p2p(n, 4, hw, f, tp=1) == pytest.approx(2 * bridge + pcie, rel=1e-9)
    assert _p2p(n, 2, hw, f, tp=1) == pytest.approx(bridge, rel=1e-9)  # one pair
    # an NVSwitch part keeps every send on NVLink
    assert _p2p(n, 2, H100, f, tp=4) == pytest.approx(_p2p(n, 2, H100, f), rel=1e-12)

    class Cfg:  # one MoE layer, top-2 of the experts, hidden 4096
        n_layers, first_dense_layers, top_k, d_model = 1, 0, 2, 4096

    tok = 256
    a2a = tok * 2 * 4096 * 2 / 1  # bytes a rank holds at tp 1
    # ep 2 on one bridged pair: the engine's α at 2 ranks on the bridge; ep 4: across PCIe
    on_bridge = 2 * (max(f.allreduce_alpha, 0.0) + 0.5 * a2a / (300e9 * f.allreduce_efficiency))
    assert moe_all_to_all(tok, 2, 1, Cfg, 2, hw, f) == pytest.approx(on_bridge, rel=1e-6)
    assert moe_all_to_all(tok, 4, 1, Cfg, 2, hw, f) == pytest.approx(
        2 * (20.6e-6 + 0.75 * a2a / (32e9 * 0.56)), rel=1e-9)
