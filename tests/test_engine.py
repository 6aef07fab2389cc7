"""Engine: pure roofline per op, the default estimate, results, feasibility, bad input."""

import math
from dataclasses import astuple

import numpy as np
import pytest

import roofline as rl
from roofline.engine.presets import efficiency_for
from roofline.errors import SpecError, UnknownNameError
from roofline.graphs.graph import GraphBuilder
from roofline.graphs.model import Model
from roofline.specs import Hardware, MemoryLevel


def toy_hw(**kw):
    return Hardware(key="toy", name="Toy", kind="gpu", peak_flops_per_s={"fp16": 100e12},
                    memory=(MemoryLevel(name="HBM", capacity_bytes=16e9, bytes_per_s=1e12),),
                    tdp_w=100.0, **kw)


def one_linear_model(tokens=1, d=1024):
    def build(*, precision, **_):
        b = GraphBuilder("lin", "forward", precision)
        b.add("linear", "fc", params=d * d, tokens=tokens, d_in=d, d_out=d)
        return b.build()
    return Model(key="lin", name="lin", family="imported", builder=build)


def test_bound_single_linear_hand_calculation():
    r = rl.solve(one_linear_model(), toy_hw(), batch=1, precision="fp16", preset="bound")
    flops = 2 * 1024 * 1024  # 2,097,152
    byts = 1024 * 1024 * 2 + 1024 * 2 * 2  # weights 2 MiB + x and y 2 KiB each = 2,101,248
    assert r.flops == flops and r.bytes == byts
    assert r.latency == r.latency_bound == pytest.approx(byts / 1e12)  # 2.101 µs, memory-bound
    assert r.bottleneck == "memory"
    assert r.arithmetic_intensity == pytest.approx(flops / byts)  # ≈ 0.998 FLOP/B
    assert r.ridge_point == pytest.approx(100.0)  # 100 TFLOP/s / 1 TB/s
    assert r.mfu == pytest.approx(flops / (byts / 1e12) / 100e12)
    assert r.mbu == pytest.approx(1.0)
    # power model (analysis/power.py): the toy part has no measured idle, so idle = 30 % of its
    # 100 W TDP; activity a = min(1, 1.63 × MFU + 0.49 × MBU) with MBU 1 (memory-bound)
    a = min(1.0, 1.63 * r.mfu + 0.49 * 1.0)
    assert r.energy == pytest.approx((30.0 + 70.0 * a) * byts / 1e12)


def test_bound_compute_bound_gemm():
    r = rl.solve(one_linear_model(tokens=4096, d=4096), toy_hw(), batch=1, preset="bound")
    flops = 2 * 4096**3  # 137.4 GFLOP -> 1.374 ms at 100 TFLOP/s
    assert r.bottleneck == "compute"
    assert r.latency == pytest.approx(flops / 100e12)


def test_default_estimate_hand_calculation():
    hw = toy_hw()
    e = efficiency_for(hw, "default")
    r = rl.solve(one_linear_model(tokens=4096, d=4096), hw, batch=1, preset="default")
    M = N = K = 4096
    eff = e.gemm.max / (1 + e.gemm.a / M + e.gemm.b / N + e.gemm.c / K)
    t_c = 2 * 4096**3 / (100e12 * eff)
    t_m = (3 * 4096 * 4096 * 2) / (1e12 * e.memory.max)
    t_kernel = max(t_c, t_m)
    assert r.latency == pytest.approx(max(t_kernel + e.launch.kernel_gap, e.launch.dispatch))
    assert r.t_overhead == pytest.approx(r.latency - t_kernel)
    assert r.bottleneck == "compute"


def test_tiny_op_is_overhead_bound():
    r = rl.solve(one_linear_model(d=64), toy_hw(), batch=1, preset="default")
    assert r.bottleneck == "overhead" and r.t_overhead > r.t_memory


def test_bound_equals_sum_of_per_op_max_computed_independently():
    m, hw = rl.model("resnet50"), rl.hardware("A100")
    g = m.graph(precision="fp16")
    expected = 0.0
    for i in range(len(g)):
        c = g.op_cost(i, batch=8)
        expected += max(c.flops / 312e12, c.bytes / 2039e9)
    r = rl.solve(m, hw, batch=8, precision="fp16", preset="bound")
    assert r.latency_bound == pytest.approx(expected, rel=1e-12)
    assert r.latency == pytest.approx(expected, rel=1e-12)


def test_op_table_sums_to_totals():
    r = rl.solve("resnet50", "H100", batch=4, precision="bf16")
    ops = r.ops
    assert len(ops) == len(rl.model("resnet50").graph(precision="bf16"))
    assert ops["flops"].sum() == pytest.approx(r.flops)
    assert ops["bytes"].sum() == pytest.approx(r.bytes)
    assert ops["time"].sum() == pytest.approx(r.latency)
    assert ops["share"].sum() == pytest.approx(1.0)
    assert set(ops["bound"]) <= {"compute", "memory", "-"}
    row = ops[0]
    assert row["name"] == "conv1" and row["kind"] == "conv2d"


def test_batch_moves_bottleneck_from_memory_to_compute():
    kw = dict(seq_len=128, preset="bound", fuse=True)
    small = rl.solve("bert-base-uncased", "A100", batch=1, **kw)
    big = rl.solve("bert-base-uncased", "A100", batch=64, **kw)
    assert small.bottleneck == "memory" and big.bottleneck == "compute"
    assert small.arithmetic_intensity < big.arithmetic_intensity


def test_eager_resnet50_stays_memory_bound_per_op():
    # Per op, activations scale with the batch as FLOPs do, so ResNet-50's eager graph never
    # turns compute-bound in fp16 on A100: batch norm, ReLU and adds move ~2× the bytes of the
    # convolutions. The aggregate view (mlsysim) calls it compute-bound from batch 2.
    big = rl.solve("resnet50", "A100", batch=256, preset="bound")
    assert big.bottleneck == "memory" and big.arithmetic_intensity < big.ridge_point
    convs = big.ops.where(big.ops["class"] == "conv")
    assert (convs["bound"] == "compute").mean() > 0.4


def test_missing_dtype_is_a_result_not_a_crash():
    r = rl.solve("resnet50", "A100", precision="fp8")
    assert not r.feasible and "fp8" in r.reason and "bf16" in r.reason
    assert math.isnan(r.latency)
    assert "cannot run" in str(r)


def test_model_that_does_not_fit():
    r = rl.solve("llama-3.1-70b", "T4", batch=1, precision="fp16", seq_len=128)
    assert not r.feasible
    assert " GB per device" in r.reason and r.memory_breakdown["weights"] > r.memory_capacity


def test_memory_footprint_parts():
    r = rl.solve("resnet50", "A100", batch=32)
    mb = r.memory_breakdown
    assert mb["weights"] == 25_557_032 * 2
    assert r.memory_footprint == pytest.approx(sum(mb.values()))
    assert r.feasible


@pytest.mark.parametrize("bad, err", [
    (dict(batch=0), SpecError), (dict(batch=1.5), SpecError), (dict(batch=True), SpecError),
    (dict(preset="fast"), UnknownNameError), (dict(precision="fp17"), SpecError),
])
def test_bad_arguments(bad, err):
    with pytest.raises(err):
        rl.solve("resnet50", "A100", **bad)


def test_result_to_dict_is_plain_data():
    import json

    d = rl.solve("resnet18", "L4", batch=2).to_dict()
    json.dumps(d)
    for k in ("latency", "latency_bound", "t_compute", "t_memory", "t_overhead", "throughput",
              "bottleneck", "flops", "bytes", "arithmetic_intensity", "ridge_point", "mfu",
              "memory_footprint", "feasible", "reason", "energy"):
        assert k in d


def test_decode_step_reads_kv_cache():
    r1 = rl.solve("llama-3.1-8b", "A100", phase="decode", batch=1, context=1024, preset="bound")
    r2 = rl.solve("llama-3.1-8b", "A100", phase="decode", batch=1, context=2048, preset="bound")
    kv = r1.ops["kv_bytes"].sum()
    # K and V: 32 layers × 8 KV heads × 128 dims × 2 B per token, 1024 tokens read, 1 written
    per_token = 2 * 32 * 8 * 128 * 2
    assert kv == pytest.approx(per_token * (1024 + 1))
    assert r2.bytes - r1.bytes == pytest.approx(per_token * 1024)
    assert r1.bottleneck == "memory" and r1.arithmetic_intensity < 2


def test_tokens_per_s_for_prefill():
    r = rl.solve("gpt2", "A100", phase="forward", seq_len=256, batch=4)
    assert r.tokens_per_s == pytest.approx(4 * 256 / r.latency)


def test_vectorised_price_matches_scalar_loop():
    from roofline.engine.core import price

    g = rl.model("mobilenet_v2").graph(precision="bf16")
    hws = [rl.hardware(h) for h in ("A100", "L4", "xeon-platinum-8480plus")]
    effs = [efficiency_for(h, "default") for h in hws]
    arr = price(g, hws, effs, np.array([1.0, 16.0]))
    for hi, hw in enumerate(hws):
        for bi, b in enumerate((1, 16)):
            r = rl.solve("mobilenet_v2", hw, batch=b, precision="bf16")
            assert arr["latency"][hi, bi] == pytest.approx(r.latency, rel=1e-12)


@pytest.mark.parametrize("model", ["resnet50", "bert-base-uncased", "mobilenet_v2"])
@pytest.mark.parametrize("preset", ["default", "bound"])
def test_closed_form_equals_direct_evaluation_with_on_chip_level(model, preset):
    from dataclasses import replace

    from roofline.engine.core import TimeModel

    # A100 with a (hypothetical) 8 TB/s L2: activations that fit half of it are read from L2,
    # so each op's memory line changes with the batch; the closed form must follow exactly.
    a100 = rl.hardware("A100")
    l2 = MemoryLevel(name="L2", capacity_bytes=40 * 2**20, bytes_per_s=8e12)
    hw = replace(a100, key="a100-l2", memory=(a100.memory[0], l2))
    g = rl.model(model).graph(precision="fp16", **({"seq_len": 128} if "bert" in model else {}))
    plan = TimeModel(g, hw, efficiency_for(hw, preset))
    assert plan.envelope_ok
    for b in (1, 2, 3, 5, 8, 13, 21, 64, 100, 256, 1000):
        closed = astuple(plan.totals_at(b))
        direct = astuple(plan.evaluate(b).totals())
        assert closed == pytest.approx(direct, rel=1e-9), b
    many = plan.totals_many(np.array([1.0, 7.0, 300.0]))
    for i, b in enumerate((1, 7, 300)):
        assert many[:, i] == pytest.approx(astuple(plan.evaluate(b).totals()), rel=1e-9)


def test_per_class_dispatch_from_a_table():
    from roofline.engine.core import TimeModel, price
    from roofline.engine.efficiency import read_efficiency

    src = {"m": "measured here"}
    base = {"dispatch": {"value": 2, "unit": "us", "source": "m"}}
    plain = read_efficiency(base, sources=src, origin="t", synchronous=True, label="a")
    norm5 = read_efficiency(base | {"dispatch_norm": {"value": 7, "unit": "us",
                                                      "source": "m"}},
                            sources=src, origin="t", synchronous=True, label="b")
    assert norm5.launch.by_class == (("norm", 7e-6),)
    grouped = read_efficiency({"launch": {"dispatch": base["dispatch"],
                                          "dispatch_norm": {"value": 7, "unit": "us",
                                                            "source": "m"}}},
                              sources=src, origin="t", synchronous=True, label="b")
    assert grouped == norm5  # the grouped and the flat spelling of one table
    g = rl.model("resnet18").graph(precision="fp32")
    hw = rl.hardware("xeon-platinum-8480plus")
    n_norm = sum(c == "norm" for c in g.classes)
    t_plain = TimeModel(g, hw, plain).evaluate(1).totals().latency
    p5 = TimeModel(g, hw, norm5)
    t_norm = p5.evaluate(1).totals().latency
    assert t_norm - t_plain == pytest.approx(n_norm * 5e-6)  # 20 batch norms × 5 µs more
    assert p5.totals_at(1).latency == pytest.approx(t_norm)
    assert price(g, [hw], [norm5], np.array([1.0]))["latency"][0, 0] == pytest.approx(t_norm)
    with pytest.raises(SpecError, match="dispatch_<op class>"):
        read_efficiency({"dispatch_foo": base["dispatch"]}, sources=src, origin="t",
                        synchronous=True, label="c")
