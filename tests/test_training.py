"""Training: the graph's FLOPs, memory per Korthikanti et al. 2022, the pipeline bubble, ZeRO,
collectives exposure, MFU/HFU, errors, search and CLI — hand calculations in comments."""

from __future__ import annotations

import json

import numpy as np
import pytest

import roofline as rl
from roofline.cli import main
from roofline.errors import SpecError, UnknownNameError
from roofline.graphs.training import GROUPS, training_graph
from roofline.scenarios import training as T
from roofline.specs.dtypes import precision
from roofline.validation.training import gpt_model

GPT3 = rl.model("gpt3-175b")




# -- the training graph ----------------------------------------------------------------------------

def test_backward_matmuls_are_twice_forward() -> None:
    """fwd + bwd = 3 × fwd for every linear (dX and dW each cost the forward's FLOPs)."""
    tg = training_graph(GPT3.config, precision("bf16"), seq_len=2048, tp=8)
    g = tg.graph
    fwd = {n: g.c1[0, i] for i, n in enumerate(g.names) if g.kinds[i] == "linear"
           and not n.endswith(("grad_input", "grad_weight"))}
    for name, f in fwd.items():
        dx = g.c1[0, g.names.index(f"{name}.grad_input")]
        dw = g.c1[0, g.names.index(f"{name}.grad_weight")]
        assert dx == pytest.approx(f) and dw == pytest.approx(f), name
    att = g.c1[0, g.names.index("layers.0.attn.attention")]
    assert g.c1[0, g.names.index("layers.0.attn.attention.grad")] == pytest.approx(2.5 * att)
    assert set(GROUPS) >= {GROUPS[k] for k in tg.group}


def test_tensor_parallel_shard_shapes() -> None:
    """GPT-3 at tp=8: QKV [12288, 3·12288/8]; a layer holds 12·h²/8 (+biases, norms) params."""
    tg = training_graph(GPT3.config, precision("bf16"), seq_len=2048, tp=8)
    i = tg.graph.names.index("layers.0.attn.qkv_proj")
    assert tg.graph.gemm[:, i].tolist() == [2048, 3 * 12288 / 8, 12288]
    # 12·h²/8 = 226,492,416 weights; + biases (3h + h + 4h + h)/8-ish and 4h of norms
    assert tg.layer_params == pytest.approx(12 * 12288**2 / 8, rel=1e-3)


def test_sequence_parallel_shards_norms() -> None:
    a = training_graph(GPT3.config, precision("bf16"), seq_len=2048, tp=8, sequence_parallel=False)
    b = training_graph(GPT3.config, precision("bf16"), seq_len=2048, tp=8, sequence_parallel=True)
    i = a.graph.names.index("layers.0.input_norm")
    # layernorm: 8 FLOPs per element; T·D = 2048·12288 elements, /8 with SP
    assert a.graph.c1[0, i] == pytest.approx(8 * 2048 * 12288)
    assert b.graph.c1[0, i] == pytest.approx(8 * 2048 * 12288 / 8)


def test_bad_tensor_split() -> None:
    with pytest.raises(SpecError, match="heads"):
        training_graph(GPT3.config, precision("bf16"), seq_len=2048, tp=5)


# -- FLOPs: model vs hardware (PaLM / Korthikanti App. A) ------------------------------------------

def test_model_flops_match_korthikanti_eq7() -> None:
    """22B (a=64, h=6144, L=48), s=2048, V=51200: 72·L·s·h²·(1 + s/(6h) + V/(12hL)) per
    sequence = 1.0687e15·1.0664 ≈ 1.1397e15 FLOPs; ours adds only the bias adds."""
    s, h, L, V = 2048, 6144, 48, 51200
    eq7 = 72 * L * s * h**2 * (1 + s / (6 * h) + V / (12 * h * L))
    mf, sel, full = T.model_flops_per_sample(gpt_model(64, 6144, 48), s, precision="fp16")
    assert mf == pytest.approx(eq7, rel=2e-4)
    # selective recompute re-runs QKᵀ and ·V: 2·s²·h + 2·s²·h per layer (App. A, text)
    assert sel == pytest.approx(4 * s**2 * h * L)
    # full recompute re-runs every layer matmul: 24·s·h² + 4·s²·h per layer
    assert full == pytest.approx((24 * s * h**2 + 4 * s**2 * h) * L, rel=2e-4)


@pytest.mark.parametrize("a,h,L,gpus,B,t,mfu", [
    (64, 6144, 48, 8, 4, 1.10, 0.415), (96, 12288, 96, 64, 64, 13.75, 0.514),
    (128, 20480, 105, 280, 280, 37.83, 0.560), (160, 25600, 128, 512, 512, 71.49, 0.563)])
def test_mfu_definition_reproduces_table5(a: int, h: int, L: int, gpus: int, B: int,
                                          t: float, mfu: float) -> None:
    """Korthikanti et al. 2022 Table 5: our model FLOPs at the published iteration time on
    A100s (312 TFLOP/s) give the published MFU to within 0.2 points."""
    mf = T.model_flops_per_sample(gpt_model(a, h, L), 2048, precision="fp16")[0]
    assert mf * B / (t * gpus * 312e12) == pytest.approx(mfu, abs=0.002)


def test_flops_grow_with_sequence_length() -> None:
    """Per token, model FLOPs = 6·(matmul params) + attention 12·L·s·h (fwd+bwd, full T×S)."""
    D, L = 12288, 96
    f1 = T.model_flops_per_sample(GPT3, 1024)[0] / 1024
    f2 = T.model_flops_per_sample(GPT3, 2048)[0] / 2048
    # attention per token: 3 × (2·s·h + 2·s·h) × L; doubling s adds 12·L·1024·h
    assert f2 - f1 == pytest.approx(12 * L * 1024 * D, rel=1e-6)
    assert f1 > 6 * 174e9


# -- memory (Korthikanti et al. 2022 Table 2; ZeRO) ------------------------------------------------

def _gpt3_64(recompute: str, sp: bool, **kw: object) -> T.TrainingResult:
    return rl.train(GPT3, rl.cluster("dgx-a100", nodes=8), global_batch=64, seq_len=2048,
                    micro_batch=1, tp=8, pp=8, dp=1, recompute=recompute, zero=0,
                    precision="fp16", sequence_parallel=sp, fused_attention=False, dropout=True,
                    **kw)


@pytest.mark.parametrize("recompute,sp,per_layer", [
    ("none", False, lambda s, b, h, a, t: s * b * h * (10 + 24 / t + 5 * a * s / (h * t))),
    ("none", True, lambda s, b, h, a, t: s * b * h * (34 / t + 5 * a * s / (h * t))),
    ("selective", False, lambda s, b, h, a, t: s * b * h * (10 + 24 / t)),
    ("selective", True, lambda s, b, h, a, t: s * b * h * 34 / t),
])
def test_activation_memory_table2(recompute: str, sp: bool, per_layer: object) -> None:
    """pp=8, m=64 ≥ p: the first stage holds p micro-batches of L/p layers = L layers' worth."""
    r = _gpt3_64(recompute, sp)
    want = per_layer(2048, 1, 12288, 96, 8) * 96  # type: ignore[operator]
    assert r.memory_per_device["activations"] == pytest.approx(want, rel=1e-9)


def test_full_recompute_keeps_layer_inputs() -> None:
    """Full recompute: 2·s·b·h per layer, plus one layer's activations while recomputing it."""
    r = _gpt3_64("full", False)
    s, h, a, t = 2048, 12288, 96, 8
    want = 2 * s * h * 96 + s * h * (10 + 24 / t + 5 * a * s / (h * t))
    assert r.memory_per_device["activations"] == pytest.approx(want)


def test_selective_saves_70_percent_for_gpt3() -> None:
    """Korthikanti §5: for GPT-3, 5as/h = 80 vs 34, so selective recompute saves 70 %."""
    none = _gpt3_64("none", True).memory_per_device["activations"]
    sel = _gpt3_64("selective", True).memory_per_device["activations"]
    assert 1 - sel / none == pytest.approx(80 / 114, abs=1e-9)


def test_zero_stages_shard_states() -> None:
    """bf16 with fp32 grads: 2 + 4 + 12 bytes per parameter; ZeRO-1 shards the 12, ZeRO-2 the
    4, ZeRO-3 the 2 over dp."""
    c = rl.cluster("dgx-h100", nodes=16)  # 128 GPUs: tp 8 × pp 4 × dp 4
    res = [rl.train(GPT3, c, global_batch=64, seq_len=2048, tp=8, pp=4, dp=4, zero=z)
           for z in range(4)]
    w, g, o = (res[0].memory_per_device[k] for k in ("weights", "gradients", "optimizer"))
    assert g == pytest.approx(2 * w) and o == pytest.approx(6 * w)
    assert res[1].memory_per_device["optimizer"] == pytest.approx(o / 4)
    assert res[1].memory_per_device["gradients"] == pytest.approx(g)
    assert res[2].memory_per_device["gradients"] == pytest.approx(g / 4)
    assert res[3].memory_per_device["weights"] == pytest.approx(w / 4)
    # a stage: 96/4 = 24 layers of 12·h²/8 params (+ the embedding on the first), 2 B each
    assert w == pytest.approx(2 * (24 * 12 * 12288**2 / 8 + 50257 * 12288 / 8 + 2048 * 12288),
                              rel=2e-3)


def test_does_not_fit_is_a_result() -> None:
    r = rl.train(GPT3, rl.cluster("dgx-a100"), global_batch=8, seq_len=2048, tp=8)
    assert not r.feasible and " GB per device" in r.reason and "optimizer" in r.reason
    assert r.memory_per_device["total"] > r.memory_capacity


# -- time: bubble, collectives, ZeRO comm, overlap -------------------------------------------------

def test_pipeline_bubble_fraction() -> None:
    """bubble = (p − 1)/(v·m) of the ideal m·t_mb (Narayanan et al. 2021 §2.2), with blocking
    pipeline sends; overlapping them (pp_overlap, the default with v > 1) shortens the steady
    state only: the fill and drain keep their blocking sends, the same bubble."""
    for v in (1, 2, 3):
        r = _gpt3_64("selective", True, interleave=v, dp_overlap=False, pp_overlap=False)
        bd = r.breakdown
        ideal = r.step_time - bd["bubble"] - bd["dp_comm"] - bd["optimizer"]
        assert bd["bubble"] / ideal == pytest.approx((8 - 1) / (v * 64))
        ov = _gpt3_64("selective", True, interleave=v, dp_overlap=False)
        assert ov.breakdown["bubble"] == pytest.approx(bd["bubble"], rel=1e-12)
        assert (ov.breakdown["pp_comm"] < bd["pp_comm"]) == (v > 1)


def test_no_zero_means_no_parameter_all_gather() -> None:
    """ZeRO-0 charges one gradient all-reduce; with dp spread one per node it is a ring over
    the NICs: 2·(dp−1)/dp·G/(bw·eff) + NCCL's ring Simple latency (baseLat 8.4 us + 2(dp−1)
    network steps, at 14 us each with one rank per node: the tuner's tree network latency),
    times the ring plateau 1.4 (tuning.cc: a multi-node Simple ring all-reduce of at least 64
    bytes per channel and rank on sm80+), nothing else."""
    c = rl.cluster("dgx-a100", nodes=8)
    r = rl.train(GPT3, c, global_batch=64, seq_len=2048, tp=8, pp=4, dp=2, zero=0,
                 dp_overlap=False)
    f = T.training_factors("gpu")
    p_dev = r.memory_per_device["weights"] / 2
    G = 4 * p_dev  # fp32 gradients
    want = 2 * (2 - 1) / 2 * G / (25e9 * f.scale_out_efficiency) + (8.4 + 2 * 1 * 14) * 1.4e-6
    assert r.breakdown["dp_comm"] == pytest.approx(want)
    z1 = rl.train(GPT3, c, global_batch=64, seq_len=2048, tp=8, pp=4, dp=2, zero=1,
                  dp_overlap=False)
    # ZeRO-1: reduce-scatter of fp32 grads + all-gather of bf16 params = (4 + 2)/(2·4) of it
    assert z1.breakdown["dp_comm"] == pytest.approx(want * 0.75, rel=1e-2)


def test_dp_overlap_hides_gradient_reduction() -> None:
    c = rl.cluster("dgx-h100", nodes=128)
    kw = dict(global_batch=1536, seq_len=2048, tp=8, pp=16, dp=8)
    on = rl.train(GPT3, c, dp_overlap=True, **kw)
    off = rl.train(GPT3, c, dp_overlap=False, **kw)
    assert 0 < on.breakdown["dp_comm"] < off.breakdown["dp_comm"]
    assert off.step_time - on.step_time == pytest.approx(
        off.breakdown["dp_comm"] - on.breakdown["dp_comm"])


def test_breakdown_sums_to_step_and_hfu_mfu() -> None:
    r = rl.train(GPT3, rl.cluster("dgx-h100", nodes=128), global_batch=1536, seq_len=2048,
                 micro_batch=1, tp=8, pp=16, dp=8, recompute="selective", zero=1,
                 precision="bf16")
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time)
    assert r.feasible and 0.3 < r.mfu < 0.7 and r.hfu > r.mfu
    assert r.tokens_per_s == pytest.approx(1536 * 2048 / r.step_time)
    assert r.gpu_hours(300e9) == pytest.approx(300e9 / r.tokens_per_s * 1024 / 3600)
    # power model (analysis/power.py): H100 measured idle 142.5 W, peak = TDP 700 W, activity
    # min(1, 1.63 × MFU) (training: no MBU): 1024 × (142.5 + 557.5 × a) W + 128 nodes × 4600 W
    a = min(1.0, 1.63 * r.mfu)
    assert r.power_w == pytest.approx(1024 * (142.5 + 557.5 * a) + 128 * 4600)
    # facility energy: IT power × time × PUE 1.15 (hyperscale default, datacenters.toml)
    assert r.energy_to_train(1e9) == pytest.approx(1e9 / r.tokens_per_s * r.power_w * 1.15)
    none = rl.train(GPT3, rl.cluster("dgx-h100", nodes=128), global_batch=1536, seq_len=2048,
                    tp=8, pp=16, dp=8, recompute="none")
    assert none.hfu == pytest.approx(none.mfu)
    d = r.to_dict()
    assert d["breakdown"]["bubble"] == r.breakdown["bubble"] and "hfu" in d


def test_bound_preset_is_faster() -> None:
    kw = dict(global_batch=1536, seq_len=2048, tp=8, pp=16, dp=8)
    c = rl.cluster("dgx-h100", nodes=128)
    assert rl.train(GPT3, c, preset="bound", **kw).step_time < rl.train(GPT3, c, **kw).step_time


def test_moe_expert_parallel() -> None:
    c = rl.cluster("dgx-h100", nodes=8)
    m = rl.model("mixtral-8x7b")
    r = rl.train(m, c, global_batch=256, seq_len=4096, tp=2, pp=4, dp=8, ep=8)
    assert r.breakdown["ep_comm"] > 0
    r1 = rl.train(m, c, global_batch=256, seq_len=4096, tp=2, pp=4, dp=8, ep=1)
    # ep 1, tp 2: the flex dispatcher still sends each token to both tp ranks of its experts
    # (its group is tp x ep), on NVLink; ep 8 spreads that group over nodes
    assert 0 < r1.breakdown["ep_comm"] < r.breakdown["ep_comm"]
    r0 = rl.train(m, c, global_batch=256, seq_len=4096, tp=1, pp=4, dp=16, ep=1)
    assert r0.breakdown["ep_comm"] == 0  # one rank holds every expert whole: nothing sent
    assert r.memory_per_device["weights"] < r1.memory_per_device["weights"]
    with pytest.raises(SpecError, match="ep=3"):
        rl.train(m, c, global_batch=256, seq_len=4096, tp=2, pp=4, dp=8, ep=3)
    with pytest.raises(SpecError, match="dense"):
        rl.train(GPT3, rl.cluster("dgx-h100", nodes=128), global_batch=1536, seq_len=2048,
                 tp=8, pp=16, dp=8, ep=2)


# -- bad input -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kw,match", [
    (dict(tp=8, pp=16, dp=4), "must equal"),
    (dict(tp=8, pp=128, dp=1), "has 96"),  # more stages than layers (pp need not divide them)
    (dict(tp=64, pp=16, dp=1), "heads"),
    (dict(tp=8, pp=16, dp=8, global_batch=1004), "divisible"),
    (dict(tp=8, pp=16, dp=8, recompute="some"), "recompute"),
    (dict(tp=8, pp=16, dp=8, zero=4), "zero"),
    (dict(tp=8, pp=1, dp=128, interleave=2), "interleave"),
    (dict(tp=8, pp=16, dp=8, interleave=5), "interleave"),
    (dict(tp=8, pp=16, dp=8, micro_batch=0), "micro_batch"),
])
def test_invalid_splits(kw: dict[str, object], match: str) -> None:
    args: dict[str, object] = dict(global_batch=1536, seq_len=2048) | kw
    with pytest.raises(SpecError, match=match):
        rl.train(GPT3, rl.cluster("dgx-h100", nodes=128), **args)  # type: ignore[arg-type]


def test_unknown_names() -> None:
    with pytest.raises(UnknownNameError):
        rl.train(GPT3, "dgx-z100", global_batch=8, seq_len=2048)
    # a CNN trains through the generic data-parallel model (tests/test_train_any.py), which
    # has no sequence
    with pytest.raises(SpecError, match="seq_len does not apply"):
        rl.train(rl.model("resnet50"), "dgx-h100", global_batch=8, seq_len=2048)


# -- search ----------------------------------------------------------------------------------------

def test_best_parallelism_ranks_and_agrees_with_train() -> None:
    c = rl.cluster("dgx-h100", nodes=16)
    t = rl.best_parallelism(GPT3, c, global_batch=256, seq_len=2048, top=None)
    st = np.asarray(t["step_time"], dtype=float)
    assert len(t) > 10 and np.all(np.diff(st) >= 0) and all(t["fits"])
    for i in (0, len(t) // 2, len(t) - 1):  # the vectorised path = the one-split path
        row = t[i]
        r = rl.train(GPT3, c, global_batch=256, seq_len=2048, tp=row["tp"], pp=row["pp"],
                     dp=row["dp"], micro_batch=row["micro_batch"], interleave=row["interleave"],
                     recompute=row["recompute"], zero=row["zero"])
        assert r.step_time == pytest.approx(row["step_time"], rel=1e-9)
        assert r.memory_per_device["total"] == pytest.approx(row["memory"], rel=1e-9)
        assert r.mfu == pytest.approx(row["mfu"], rel=1e-9)


def test_search_drops_what_does_not_fit() -> None:
    c = rl.cluster("dgx-a100", nodes=2)
    every = rl.best_parallelism(GPT3, c, global_batch=32, seq_len=2048, top=None,
                                include_infeasible=True)
    fits = rl.best_parallelism(GPT3, c, global_batch=32, seq_len=2048, top=None)
    assert len(fits) < len(every) and all(fits["fits"]) and not all(every["fits"])


# -- CLI -------------------------------------------------------------------------------------------

def test_cli_train(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["train", "gpt3-175b", "dgx-a100", "--nodes", "128", "--tp", "8", "--pp", "16",
            "--dp", "8", "--micro-batch", "1", "--global-batch", "1536", "--seq-len", "2048",
            "--recompute", "selective", "--zero", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "step time" in out and "MFU" in out and "bubble" in out
    assert main(argv + ["--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["tp"] == 8 and d["feasible"] and d["step_time"] > 0
    assert main(["train", "gpt3-175b", "dgx-a100", "--nodes", "16", "--global-batch", "256",
                 "--seq-len", "2048", "--search", "--top", "3"]) == 0
    assert "splits fit" in capsys.readouterr().out
    assert main(argv[:7] + ["--pp", "7", "--global-batch", "1536", "--seq-len", "2048"]) == 2
    assert "error" in capsys.readouterr().err


def test_model_flops_cache_keys_on_content() -> None:
    """The per-model FLOP cache keys on what the counts depend on, not on the object: two equal
    models (built from one config) share an entry and give equal terms; a model with another
    config gets its own; a model whose builder is not a partial on its config (here a lambda
    that scales the graph's FLOPs) keys on the object and is priced from its own graph."""
    from dataclasses import replace as _replace

    from roofline.graphs.model import transformer_model
    from roofline.scenarios.training import context as C

    cfg = gpt_model(32, 2048, 4).config
    a, b = transformer_model(cfg, key="a"), transformer_model(cfg, key="b")
    assert a is not b and C._model_content(a) == C._model_content(b)
    ta = C.flops_terms(a, 512, precision="bf16")
    n = len(C._MODEL_FLOPS)
    assert C.flops_terms(b, 512, precision="bf16") == ta and len(C._MODEL_FLOPS) == n  # shared
    c = transformer_model(_replace(cfg, n_layers=8), key="a")
    assert C._model_content(c) != C._model_content(a)
    tc = C.flops_terms(c, 512, precision="bf16")
    assert tc[2] == pytest.approx(2 * ta[2])  # twice the layers: twice the layer FLOPs

    def doubled(**kw):  # type: ignore[no-untyped-def]
        g = a.builder(**kw)
        return _replace(g, c0=2 * g.c0, c1=2 * g.c1)

    d = _replace(a, builder=doubled)
    assert C._model_content(d) is None  # keyed on its graph's content (graph_digest)
    assert C.flops_terms(d, 512, precision="bf16")[0] == pytest.approx(2 * ta[0])
