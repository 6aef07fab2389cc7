"""rl.train for any graph (CNN, ViT, BERT, imported modules): the generic data-parallel model
(graphs/backward.py + scenarios/training/generic.py). Its validation against published ResNet-50
and BERT-large training throughput: tests/validation/test_validation_training_graphs.py."""

from __future__ import annotations

import re

import pytest

import roofline as rl
from roofline.errors import SpecError


@pytest.mark.parametrize("model,seq", [("resnet50", None), ("vit-b-16", None),
                                       ("bert-base-uncased", 128), ("mobilenet_v2", None)])
def test_any_zoo_model_trains(model: str, seq: int | None) -> None:
    r = rl.train(model, "dgx-a100", global_batch=64, micro_batch=8, seq_len=seq,
                 precision="bf16")
    assert r.feasible and r.dp == 8 and r.microbatches == 1 and r.tp == r.pp == 1
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time, rel=1e-12)
    assert r.breakdown["backward"] > r.breakdown["forward"] > 0
    # MFU: 3 × forward matmul-class FLOPs per sample
    fwd = rl.model(model).graph(precision="bf16", seq_len=seq)
    mm = float((fwd.c1[0] * 8 + fwd.c0[0])[fwd.is_compute].sum()) / 8
    assert r.model_flops_per_step == pytest.approx(3 * mm * 64, rel=1e-9)
    assert ("tokens/s" in str(r)) == (r.seq_len > 1)  # ViT: 197 tokens per image


def test_optimizer_and_all_reduce_by_hand() -> None:
    m = rl.model("resnet50")
    P = m.params
    one = rl.train(m, "dgx-a100", global_batch=256, micro_batch=256, dp=1, precision="bf16",
                   optimizer="momentum", preset="bound")
    # SGD momentum, clipping and L2 decay: read the fp32 gradient twice (norm, update), read and
    # write the fp32 master and momentum, write the bf16 copy: 8 + 8 + 8 + 2 = 26 B per parameter
    # at the A100's 2,039 GB/s (bound preset: no efficiency, no launch cost)
    hw = rl.hardware("a100-sxm4-80gb")
    assert one.breakdown["optimizer"] == pytest.approx(P * 26 / hw.memory_bytes_per_s)
    assert one.breakdown["dp_comm"] == 0.0
    assert one.memory_per_device["optimizer"] == 8 * P  # fp32 master + momentum
    # plain SGD: no momentum buffer, 8 + 8 + 2 = 18 B; state: the fp32 master only
    sgd = rl.train(m, "dgx-a100", global_batch=256, micro_batch=256, dp=1, precision="bf16",
                   optimizer="sgd", preset="bound")
    assert sgd.breakdown["optimizer"] == pytest.approx(P * 18 / hw.memory_bytes_per_s)
    assert sgd.memory_per_device["optimizer"] == 4 * P
    assert one.memory_per_device["gradients"] == 4 * P  # bf16 training: fp32 gradients
    fp16 = rl.train(m, "dgx-a100", global_batch=256, micro_batch=256, dp=1, precision="fp16",
                    optimizer="sgd", preset="bound")
    # fp16 mixed precision (PyTorch AMP): the parameters stay fp32, so do their gradients
    assert fp16.memory_per_device["gradients"] == 4 * P
    assert fp16.breakdown["optimizer"] == pytest.approx(sgd.breakdown["optimizer"])
    adam = rl.train(m, "dgx-a100", global_batch=256, micro_batch=256, dp=1, precision="bf16",
                    optimizer="adam", preset="bound")
    assert adam.breakdown["optimizer"] == pytest.approx(P * 34 / hw.memory_bytes_per_s)
    assert adam.memory_per_device["optimizer"] == 12 * P  # fp32 master + m + v
    # pure fp32 Adam: no master copy; grad 2·4 + m, v 2·2·4 + weights 2·4 = 32 B; state 8 B
    f32 = rl.train(m, "dgx-a100", global_batch=256, micro_batch=256, dp=1, precision="fp32",
                   optimizer="adam", preset="bound")
    assert f32.breakdown["optimizer"] == pytest.approx(P * 32 / hw.memory_bytes_per_s)
    assert f32.memory_per_device["optimizer"] == 8 * P
    # 8-way data parallel, no overlap: a ring all-reduce of 4 B × P over NVLink (300 GB/s,
    # 2 us per step): 2·7·2 us + 2·7/8 · 4P / 300 GB/s
    eight = rl.train(m, "dgx-a100", global_batch=2048, micro_batch=256, dp=8,
                     precision="bf16", optimizer="sgd", preset="bound", dp_overlap=False)
    assert eight.breakdown["dp_comm"] == pytest.approx(2 * 7 * 2e-6 + 2 * 7 / 8 * 4 * P / 300e9)
    # with overlap only the last 160 MB bucket (more than the 102 MB of gradients: all of it)
    # or what the backward does not hide stays exposed
    over = rl.train(m, "dgx-a100", global_batch=2048, micro_batch=256, dp=8,
                    precision="bf16", optimizer="sgd", preset="bound")
    assert over.breakdown["dp_comm"] == pytest.approx(eight.breakdown["dp_comm"])
    # gradient accumulation: 4 micro-batches of 64 take 4 forward+backward passes
    acc = rl.train(m, "dgx-a100", global_batch=256, micro_batch=64, dp=1, precision="bf16",
                   optimizer="sgd", preset="bound")
    assert acc.microbatches == 4


def test_imported_module_trains_and_keeps_warnings() -> None:
    torch = pytest.importorskip("torch")
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.fc = nn.Linear(8, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.conv(x))
            return self.fc(torch.cumprod(y, 1).mean(dim=(2, 3)))

    m = rl.model(Net(), example_inputs=(torch.empty(2, 3, 16, 16),))
    r = rl.train(m, "dgx-a100", global_batch=16, micro_batch=2, precision="bf16")
    assert r.feasible and r.step_time > 0
    (w,) = r.warnings
    assert w.startswith("1 ops unpriced (") and f"WARNING: {w}" in " ".join(str(r).split())


def test_bad_options() -> None:
    with pytest.raises(SpecError, match="tp=2"):
        rl.train("resnet50", "dgx-a100", global_batch=64, micro_batch=8, tp=2)
    with pytest.raises(SpecError, match="seq_len does not apply"):
        rl.train("resnet50", "dgx-a100", global_batch=64, micro_batch=8, seq_len=128)
    with pytest.raises(SpecError, match="pass seq_len"):
        rl.train("bert-base-uncased", "dgx-a100", global_batch=64, micro_batch=8)
    with pytest.raises(SpecError, match="multiple of dp"):
        rl.train("resnet50", "dgx-a100", global_batch=60, micro_batch=8)
    with pytest.raises(SpecError, match="optimizer"):
        rl.train("resnet50", "dgx-a100", global_batch=64, micro_batch=8, optimizer="lion")
    with pytest.raises(SpecError, match="optimizer"):
        rl.train("llama-3.2-1b", "dgx-a100", global_batch=64, seq_len=128, optimizer="sgd")
    with pytest.raises(SpecError, match="seq_len"):
        rl.train("llama-3.2-1b", "dgx-a100", global_batch=64)



def test_optimizer_step_is_an_op_of_the_time_model_by_hand() -> None:
    """The optimizer step goes through the engine's time model: the formula's bytes at the
    main-memory rate, its FLOPs at the fp32 vector rate, the larger, then one launch (an
    asynchronous GPU: max(kernel + gap, dispatch))."""
    from roofline.engine.presets import efficiency_for
    from roofline.ops import cost

    m = rl.model("resnet50")
    P = m.params
    hw = rl.hardware("a100-sxm4-80gb")
    eff = efficiency_for(hw, "default")
    r = rl.train(m, "dgx-a100", global_batch=256, micro_batch=256, dp=1, precision="bf16",
                 optimizer="momentum")
    c = cost("optimizer_step", params=P, optimizer="momentum")
    assert (c.flops, c.bytes) == (9 * P, 26 * P)
    t_mem = c.bytes / (hw.memory_bytes_per_s * eff.memory.main_read_fraction)
    t_flops = c.flops / (hw.peak_flops_per_s["fp32"] * eff.vector.max)
    kernel = max(t_mem, t_flops)
    assert not eff.launch.synchronous
    want = max(kernel + eff.launch.kernel_gap, eff.launch.dispatch)
    assert r.breakdown["optimizer"] == pytest.approx(want, rel=1e-12)
    assert eff.launch.dispatch > 0 or eff.launch.kernel_gap > 0  # the launch is counted


@pytest.mark.parametrize("opt", ["sgd", "momentum", "adam", "adamw"])
def test_every_optimizer_of_the_one_table_is_priced_by_its_formula(opt: str) -> None:
    from roofline.ops import cost
    from roofline.ops.training_formulas import OPTIMIZERS, optimizer_state_bytes

    assert opt in OPTIMIZERS
    m = rl.model("resnet50")
    P = m.params
    hw = rl.hardware("a100-sxm4-80gb")
    r = rl.train(m, "dgx-a100", global_batch=256, micro_batch=256, dp=1, precision="bf16",
                 optimizer=opt, preset="bound")
    c = cost("optimizer_step", params=P, optimizer=opt)
    assert r.breakdown["optimizer"] == pytest.approx(c.bytes / hw.memory_bytes_per_s, rel=1e-12)
    assert r.memory_per_device["optimizer"] == optimizer_state_bytes(opt) * P
    assert r.optimizer == opt
    # the gradient is read twice (clipping's norm pass, then the update) for every optimizer
    no_clip = cost("optimizer_step", params=P, optimizer=opt, grad_clip=False)
    assert c.weight_bytes_read - no_clip.weight_bytes_read == 4 * P


def test_decoder_optimizer_names_and_result() -> None:
    r = rl.train("gpt2-xl", "dgx-a100", global_batch=64, seq_len=1024, micro_batch=4,
                 optimizer="adamw")
    assert r.optimizer == "adamw"
    with pytest.raises(SpecError, match="allowed: adam, adamw"):
        rl.train("gpt2-xl", "dgx-a100", global_batch=64, seq_len=1024, micro_batch=4,
                 optimizer="momentum")


def test_generic_zero_stages_and_full_recompute() -> None:
    """ZeRO (Rajbhandari et al. 2020) and √n checkpointing (Chen et al. 2016) for a CNN."""
    from roofline.ops import collectives as coll
    from roofline.ops.xp import SCALAR
    from roofline.scenarios.training.context import cluster_links
    from roofline.scenarios.training.factors import training_factors
    from roofline.specs.resolve import cluster as resolve_cluster

    kw = dict(global_batch=512, micro_batch=32, precision="bf16", optimizer="sgd",
              dp_overlap=False)
    r = {z: rl.train("resnet50", "dgx-a100", zero=z, **kw) for z in (0, 1, 2, 3)}
    m0 = r[0].memory_per_device
    assert r[0].zero == 0 and r[3].zero == 3
    # stage 1 shards the optimizer state over the 8 ranks, 2 the gradients, 3 the weights
    assert r[1].memory_per_device["optimizer"] == pytest.approx(m0["optimizer"] / 8)
    assert r[1].memory_per_device["gradients"] == m0["gradients"]
    assert r[2].memory_per_device["gradients"] == pytest.approx(m0["gradients"] / 8)
    assert r[2].memory_per_device["weights"] == m0["weights"]
    assert r[3].memory_per_device["weights"] == pytest.approx(m0["weights"] / 8)
    # stage 0 all-reduces the fp32 gradients; stage 1 reduce-scatters them and all-gathers
    # the bf16 weights: RS(4P) + AG(2P), each the ring NCCL's tuner prices (no overlap here)
    c = resolve_cluster("dgx-a100", None)
    links = cluster_links(c, training_factors(c.device.kind))
    P = 25_557_032

    def ar(n: float) -> float:
        return float(coll.group_all_reduce(n, 8, 1, links, SCALAR))

    assert r[0].breakdown["dp_comm"] == pytest.approx(ar(4 * P))
    rs = float(coll.group_reduce_scatter(4 * P, 8, 1, links, SCALAR))
    ag = float(coll.group_all_gather(2 * P, 8, 1, links, SCALAR))
    assert r[1].breakdown["dp_comm"] == pytest.approx(rs + ag)
    # by hand: NCCL's ring Simple, 8.4 + 7 x 3.4 us, 7/8 of the bytes at 0.70 x 300 GB/s
    bw = 300e9 * training_factors("gpu").scale_up_efficiency
    assert rs == pytest.approx((8.4 + 7 * 3.4) * 1e-6 + 0.875 * 4 * P / bw)
    assert ag == pytest.approx((8.4 + 7 * 3.4) * 1e-6 + 0.875 * 2 * P / bw)
    assert r[3].breakdown["dp_comm"] > r[1].breakdown["dp_comm"]  # weights gathered per pass
    # full recompute: the forward once more per micro-batch, HFU = 4/3 MFU, activations
    # from √n-op segments: 2·saved/√n
    f = rl.train("resnet50", "dgx-a100", recompute="full", **kw)
    assert f.breakdown["recompute"] == pytest.approx(f.breakdown["forward"])
    assert f.step_time == pytest.approx(r[0].step_time + f.breakdown["recompute"])
    assert f.hfu == pytest.approx(f.mfu * 4 / 3)
    n = len(rl.model("resnet50").graph(precision="bf16"))
    assert f.memory_per_device["activations"] == pytest.approx(
        2 * m0["activations"] / n ** 0.5)
    with pytest.raises(SpecError, match="selective.*'none' or 'full'"):
        rl.train("resnet50", "dgx-a100", recompute="selective", **kw)
    with pytest.raises(SpecError, match="pp=2 does not apply"):
        rl.train("resnet50", "dgx-a100", pp=2, **kw)
    # decoder-only options given away from their defaults are refused, not silently ignored
    # (each was accepted and dropped on a generic graph before); at their defaults, no change
    for bad in (dict(cp=2), dict(pp_stages=(1, 1)), dict(attention_kernel="fa3"),
                dict(fused_attention=False), dict(dropout=True), dict(elementwise="eager")):
        (name, val), = bad.items()
        msg = re.escape(f"{name}={val!r} is modelled for decoder LMs only")
        with pytest.raises(SpecError, match=msg):
            rl.train("resnet50", "dgx-a100", **bad, **kw)
    same = rl.train("resnet50", "dgx-a100", cp=1, attention_kernel="auto", elementwise="fused",
                    fused_attention=True, dropout=False, **kw)
    assert same.step_time == r[0].step_time


def test_train_on_one_device_spec() -> None:
    """A hardware spec (a measured CPU, one GPU) trains as a one-device cluster."""
    from pathlib import Path

    spec = Path(__file__).parents[1] / "docs" / "validation" / "cpu-run" / "measured.toml"
    kw = dict(global_batch=8, micro_batch=8, precision="fp32", optimizer="sgd")
    a = rl.train("resnet18", str(spec), **kw)
    b = rl.train("resnet18", rl.hardware(str(spec)), **kw)
    assert a.devices == 1 and a.step_time == b.step_time > 0
    assert a.breakdown["dp_comm"] == 0.0
    one = rl.train("resnet18", rl.hardware("A100"), global_batch=64, micro_batch=64,
                   precision="bf16", optimizer="sgd")
    eight = rl.train("resnet18", "dgx-a100", global_batch=512, micro_batch=64,
                     precision="bf16", optimizer="sgd", dp_overlap=False)
    # the same per-device work; the 8-GPU step adds only its gradient all-reduce
    assert eight.step_time == pytest.approx(one.step_time + eight.breakdown["dp_comm"],
                                            rel=1e-9)
    with pytest.raises(SpecError, match="is one device"):
        rl.train("resnet18", rl.hardware("A100"), nodes=2, **kw)
