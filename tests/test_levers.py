"""Levers, sensitivity and the inverse roofline (issue: "What should I change?")."""

from __future__ import annotations

import math

import pytest

import roofline as rl
from roofline.analysis.levers import LEVER_FAMILIES, levers
from roofline.analysis.requirements import requirements
from roofline.analysis.sensitivity import sensitivity
from roofline.graphs.sparsity import weight_ratio

DECODE = dict(phase="decode", context=1024, batch=1, precision="bf16")


def _single(lv):
    """Usable single-lever rows (no combinations), best first."""
    return [r for r in lv if r.usable and " + " not in r.lever]


# -- the call a result remembers ----------------------------------------------------------------
def test_call_reproduces_every_row():
    r = rl.solve("resnet50", "A100", batch=2, precision="fp16")
    assert str(r._call) == "rl.solve('resnet50', 'A100', batch=2, precision='fp16')"
    lv = r.levers(only=["batch", "runtime", "fusion"], combine=0)
    for row in lv:
        if row.applies and row.call is not None:
            again = row.call.run()
            assert again.latency == pytest.approx(row.latency, rel=1e-12)


def test_rows_for_every_family_and_why_when_not_applicable():
    lv = rl.solve("resnet50", "A100").levers(combine=0)
    fams = {r.lever for r in lv}
    assert fams == set(LEVER_FAMILIES)
    na = [r for r in lv if not r.applies]
    assert na and all(r.why for r in na)
    fp8 = [r for r in lv if r.setting == "fp8 W8A8"][0]
    assert not fp8.applies and "no fp8 peak" in fp8.why  # the A100 has no fp8 tensor cores


# -- hand calculations ---------------------------------------------------------------------------
def test_int4_g128_decode_speedup_is_the_bytes_ratio():
    """Llama-3.1-8B decode, batch 1, A100, pure roofline: every GEMV is memory-bound, so the
    speed-up of int4-g128 weights is the ratio of bytes moved.

    Linear weights per layer: q, o 4096·4096; k, v 4096·1024; gate, up, down 3·4096·14336
      = 2·16,777,216 + 2·4,194,304 + 176,160,768 = 218,103,808; ×32 layers = 6,979,321,856,
      + lm_head 4096·128,256 = 525,336,576 -> W = 7,504,658,432 weights.
    Every weight read is stored in the weight dtype (roofline's convention): also the RMSNorm
    weights (32·2·4096 + 4096 = 266,240) and the one embedding row read (4096) -> 7,504,928,768.
    bf16: 2 B each; int4-g128: 0.5 B + one 2-byte scale per 128 = 0.515625 B each.
    """
    W = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336) + 4096 * 128256
    assert W == 7_504_658_432
    W += 32 * 2 * 4096 + 4096 + 4096
    base = rl.solve("llama-3.1-8b", "A100", preset="bound", **DECODE)
    other = base.bytes - 2.0 * W  # KV cache and activations
    assert 0 < other < 0.02 * base.bytes
    lv = base.levers(only=["precision"], combine=0)
    row = [r for r in lv if r.setting.startswith("int4 weights, group 128")][0]
    expect_bytes = 0.515625 * W + other
    assert row.result.bytes == pytest.approx(expect_bytes, rel=1e-6)
    assert row.speedup == pytest.approx(base.bytes / expect_bytes, rel=1e-3)
    assert 3.7 < row.speedup < 3.9  # 15.2 GB -> 4.0 GB
    assert "Lin et al." in row.note  # the cited accuracy cost


def test_sparsity_bytes_hand_count():
    # 2:4, fp16 weights: half the 2-byte values + a 2-bit index per kept value
    # = (0.5·2 + 0.5·0.25) / 2 = 0.5625 of dense; int8: (0.5 + 0.125) / 1 = 0.625
    assert weight_ratio("2:4", 2.0) == pytest.approx(0.5625)
    assert weight_ratio("2:4", 1.0) == pytest.approx(0.625)
    # unstructured density 0.25, fp16: 0.25·(2 + 2) / 2 = 0.5 (a 16-bit index per value)
    assert weight_ratio(0.25, 2.0) == pytest.approx(0.5)
    base = rl.solve("llama-3.1-8b", "A100", preset="bound", **DECODE)
    sp = rl.solve("llama-3.1-8b", "A100", preset="bound", sparsity="2:4", **DECODE)
    W = 7_504_658_432
    assert base.bytes - sp.bytes == pytest.approx(2.0 * W * (1 - 0.5625), rel=1e-6)


def test_sparsity_only_where_the_hardware_file_says():
    assert rl.hardware("A100").sparsity == {"2:4": 2.0}
    assert rl.hardware("T4").sparsity == {}
    t4 = rl.solve("resnet50", "T4", sparsity="2:4")
    assert not t4.feasible and "2:4" in t4.reason
    rows = rl.solve("resnet50", "T4").levers(only=["sparsity"], combine=0)
    s24 = [r for r in rows if r.setting.startswith("2:4")][0]
    assert not s24.applies and "no sparse" in s24.why
    rows = rl.solve("resnet50", "A100").levers(only=["sparsity"], combine=0)
    assert [r for r in rows if r.setting.startswith("2:4")][0].applies
    with pytest.raises(rl.RooflineError, match="sparsity"):
        rl.solve("resnet50", "A100", sparsity="1:8")


def test_fusion_by_kind():
    unf = rl.solve("resnet50", "A100", batch=8, preset="bound")
    bn = rl.solve("resnet50", "A100", batch=8, preset="bound", fuse={"bn"})
    full = rl.solve("resnet50", "A100", batch=8, preset="bound", fuse=True)
    same = rl.solve("resnet50", "A100", batch=8, preset="bound",
                    fuse={"bn", "activation", "residual"})
    assert full.latency == pytest.approx(same.latency, rel=1e-12)
    assert full.latency < bn.latency < unf.latency
    # 53 batch norms fold into their convolutions: 174 -> 121 kernels
    assert len(unf.ops) - len(bn.ops) == 53
    with pytest.raises(rl.RooflineError, match="unknown fusion kind"):
        rl.solve("resnet50", "A100", fuse={"bogus"})
    with pytest.raises(rl.RooflineError, match="qkv"):
        rl.solve("resnet50", "A100", fuse={"qkv"})


# -- the top lever on canonical cases ------------------------------------------------------------
def test_memory_bound_decode_top_lever_is_a_bytes_lever():
    r = rl.solve("llama-3.1-8b", "A100", **DECODE)
    assert r.bottleneck == "memory"
    top = _single(r.levers(combine=0))[0]
    assert top.lever in ("batch", "precision"), top


def test_resnet50_b1_eager_top_lever_removes_overhead():
    r = rl.solve("resnet50", "A100", batch=1)
    assert r.bottleneck == "overhead"
    top = _single(r.levers(combine=0))[0]
    assert top.lever in ("runtime", "batch")
    lat = _single(r.levers(combine=0, objective="latency", only=["runtime", "batch",
                                                                  "precision", "hardware"]))[0]
    assert lat.lever == "runtime"


def test_compute_bound_gemm_top_lever_is_precision_or_hardware_never_fusion():
    r = rl.solve("llama-3.1-8b", "H100", phase="prefill", seq_len=4096, batch=4,
                 precision="bf16")
    assert r.bottleneck == "compute"
    rows = _single(r.levers(combine=0, only=["precision", "fusion", "runtime", "hardware",
                                              "sparsity"]))
    assert rows[0].lever in ("precision", "hardware")
    assert all(x.speedup < 1.1 for x in rows if x.lever == "fusion")


def test_combinations_multiply_at_most():
    lv = rl.solve("resnet50", "A100", batch=1).levers(only=["runtime", "fusion"], combine=2)
    combo = [r for r in lv if " + " in r.lever]
    assert combo
    for c in combo:
        singles = [r for r in lv if r.lever in c.lever.split(" + ") and " + " not in r.lever
                   and r.setting in c.setting]
        assert c.speedup <= math.prod(s.speedup for s in singles) * (1 + 1e-9)


def test_serve_and_train_levers():
    s = rl.serve("llama-3.1-8b", "A100", batch=1, prompt_len=256, output_len=64)
    lv = s.levers(latency_slo=0.03, combine=0)
    under = [r for r in lv if r.setting.endswith("(largest under SLO)")][0]
    assert under.latency <= 0.03 and under.meets_slo
    over = rl.serve("llama-3.1-8b", "A100", batch=under.result.batch + 1, prompt_len=256,
                    output_len=64)
    assert over.tpot > 0.03
    t = rl.train("llama-3.1-8b", "dgx-h100", global_batch=256, seq_len=4096)
    tl = t.levers(combine=0)
    best = [r for r in tl if r.setting.startswith("best split")][0]
    assert best.result.step_time <= t.step_time * (1 + 1e-12)


def test_bad_input():
    r = rl.solve("resnet50", "A100")
    with pytest.raises(rl.RooflineError, match="unknown lever"):
        levers(result=r, only=["batchh"])
    with pytest.raises(rl.RooflineError, match="latency_slo"):
        levers(result=r, latency_slo=-1)
    with pytest.raises(rl.RooflineError, match="width"):
        rl.model("resnet50", width=0)
    with pytest.raises(rl.RooflineError, match="size knobs"):
        rl.model("vgg16", width=0.5)
    with pytest.raises(rl.RooflineError, match="carries no call"):
        levers(result=object())


# -- sensitivity ---------------------------------------------------------------------------------
def test_bound_preset_elasticities_sum_to_minus_one():
    for m, kw in (("resnet50", dict(batch=8)), ("llama-3.1-8b", DECODE)):
        r = rl.solve(m, "A100", preset="bound", **kw)
        s = sensitivity(r)
        ceil = [e for c, e in zip(s.ceilings, s.elasticity["latency"]) if c != "fixed costs"]
        assert sum(ceil) == pytest.approx(-1.0, abs=1e-3)
        assert s["fixed costs"] == pytest.approx(0.0, abs=1e-3)


def test_memory_bound_decode_elasticities():
    s = sensitivity(rl.solve("llama-3.1-8b", "A100", preset="bound", **DECODE))
    assert s["memory.HBM2e"] == pytest.approx(-1.0, abs=1e-3)
    assert s["peak.bf16"] == pytest.approx(0.0, abs=1e-3)


def test_sensitivity_honours_an_edited_part_and_refuses_mlsysim():
    r = rl.solve("resnet50", "A100", batch=64)
    s = sensitivity(r)
    assert s["peak.fp16"] < -0.05  # batch 64 spends real time in compute
    with pytest.raises(rl.RooflineError, match="mlsysim"):
        sensitivity(rl.solve("resnet50", "A100", preset="mlsysim"))


def test_train_sensitivity_sees_the_scaled_device():
    t = rl.train("llama-3.1-8b", "dgx-h100", global_batch=256, seq_len=4096)
    s = sensitivity(t)
    assert s["peak.bf16"] < -0.5  # training is compute-bound


# -- requirements ---------------------------------------------------------------------------------
def test_requirements_round_trip():
    q = requirements("llama-3.1-8b", target_latency=5e-3, **DECODE)
    assert q.reachable
    h = q.hardware()
    r = rl.solve("llama-3.1-8b", h, **DECODE)
    assert r.latency == pytest.approx(5e-3, rel=1e-2) and r.latency <= 5e-3 * 1.001
    for pk, bw in q.frontier[:3]:
        t = rl.solve("llama-3.1-8b", q.hardware(pk, bw), **DECODE).latency
        assert t == pytest.approx(5e-3, rel=1e-2)
    meets = {n for n, t, ok in q.parts if ok}
    for _n, t, ok in q.parts:
        assert ok == (t <= 5e-3 * (1 + 1e-12))
    assert "NVIDIA A100 SXM4 80GB" not in meets


def test_requirements_below_floor_says_so():
    q = requirements("resnet50", target_latency=1e-5)
    assert not q.reachable and "floor" in q.reason
    with pytest.raises(rl.RooflineError):
        q.hardware()
    with pytest.raises(rl.RooflineError, match="exactly one"):
        requirements("resnet50")
    with pytest.raises(rl.RooflineError, match="target_latency"):
        requirements("resnet50", target_latency=-1.0)


def test_add_norm_fusion_hand_count():
    """fuse={'norm'}: each residual add + the RMSNorm after it is one kernel. Llama-3.1-8B has
    two per layer (attention residual -> post-attention norm, MLP residual -> next input norm;
    the last one feeds the final norm): 32·2 = 64 kernels fewer, and the norm no longer re-reads
    the sum: 64 · T·D·2 B = 64 · 128·4096·2 = 67,108,864 B at T = 128, bf16."""
    kw = dict(phase="prefill", seq_len=128, precision="bf16", preset="bound")
    a = rl.solve("llama-3.1-8b", "A100", **kw)
    b = rl.solve("llama-3.1-8b", "A100", fuse={"norm"}, **kw)
    assert len(a.ops) - len(b.ops) == 64
    assert a.bytes - b.bytes == pytest.approx(64 * 128 * 4096 * 2, rel=1e-9)
    assert a.flops == pytest.approx(b.flops, rel=1e-12)
    # an add already folded into its GEMM (residual epilogue) is not taken again
    c = rl.solve("llama-3.1-8b", "A100", fuse={"residual", "norm"}, **kw)
    d = rl.solve("llama-3.1-8b", "A100", fuse={"residual"}, **kw)
    assert len(c.ops) == len(d.ops)


def test_scaled_time_equals_a_resolve_on_the_scaled_part():
    """The fast path differentiates a solve on its own time model; it must give what
    re-solving on the scaled part gives, on GPUs, a part with on-chip SRAM and a CPU."""
    from roofline.analysis.sensitivity import scaled_hardware, scaled_time

    cases = [("resnet50", "A100", dict(batch=64)),
             ("llama-3.1-8b", "gaudi3", dict(phase="decode", context=4096, precision="bf16")),
             ("resnet50", "mi300x", dict(batch=32)),
             ("resnet50", "h100-sxm5", dict(batch=32)),  # its matmul priced in waves of tiles
             ("llama-3.1-8b", "xeon-platinum-8480plus",
              dict(phase="decode", context=512, precision="bf16"))]
    for m, h, kw in cases:
        r = rl.solve(m, h, **kw)
        hw = rl.hardware(h)
        scales = [(1.3, {}), (1.0, {0: 0.7}), (0.5, {0: 2.0})]
        if len(hw.memory) > 1:
            scales.append((1.0, {1: 1.5}))
        for pk, mem in scales:
            fast = scaled_time(r._op_table.model, r.batch, peak=pk, memory=mem)
            slow = rl.solve(m, scaled_hardware(hw, peak=pk, memory=mem, tag=f"t{pk}{mem}"),
                            **kw).latency
            assert fast == pytest.approx(slow, rel=1e-12), (m, h, pk, mem)
