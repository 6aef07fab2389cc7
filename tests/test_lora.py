"""LoRA fine-tuning in the training model (graphs/training.py, training/step.py): the adapter
count, the frozen weights' missing weight gradients, memory and model FLOPs by hand."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.graphs.resolve import model as resolve_model
from roofline.graphs.training import training_graph
from roofline.scenarios.training.context import model_flops_per_sample
from roofline.specs.dtypes import precision

CFG = resolve_model("llama-3.1-8b").config
BF16 = precision("bf16")


def _flops(g, sel):
    return float((g.c0[0] + g.c1[0])[sel].sum())  # FLOPs at micro-batch 1


def test_adapter_count_by_hand() -> None:
    # Llama 3.1 8B, r = 16 on q, k, v, o, gate, up, down: r·(D_in + D_out) each,
    # q 4096+4096, k and v 4096+1024, o 4096+4096, gate and up 4096+14336, down 14336+4096:
    # 16·(8192 + 2·5120 + 8192 + 3·18432) = 16·81,920 = 1,310,720 per layer; × 32 = 41,943,040
    # (the count Hugging Face PEFT prints for this model and rank: 0.52 % of 8.03 B)
    r = rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=64,
                 seq_len=2048, micro_batch=2, lora_rank=16)
    assert r.trainable_params == 41_943_040
    assert r.lora_rank == 16 and "LoRA r=16" in " ".join(str(r).split())  # prose wraps at 100
    full = rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=64,
                    seq_len=2048, micro_batch=2)
    assert full.trainable_params == pytest.approx(8.03e9, rel=0.01)


def test_frozen_weights_have_no_weight_gradient() -> None:
    g0 = training_graph(CFG, BF16, seq_len=1024)
    g = training_graph(CFG, BF16, seq_len=1024, lora_rank=8)
    n0, n = g0.graph.names, g.graph.names
    assert "layers.0.mlp.up_proj.grad_weight" in n0
    assert "layers.0.mlp.up_proj.grad_weight" not in n
    assert "layers.0.mlp.up_proj.grad_input" in n  # dX still flows to the layers below
    assert "lm_head.grad_weight" not in n and "lm_head.grad_input" in n
    assert not any(x.startswith("embed") and x.endswith(".grad") for x in n)
    assert "layers.0.mlp.up_proj.lora_a.grad_weight" in n
    assert "layers.0.mlp.up_proj.lora_b.grad_input" in n
    # backward FLOPs: full training's less the frozen dW GEMMs (each = its forward linear's
    # FLOPs) less the embedding scatter-add, plus the adapters' dX and dW (2 × their forward)
    nm0, nm = np.array(n0), np.array(n)
    dw = np.char.endswith(nm0, ".grad_weight")
    emb_b = np.char.startswith(nm0, "embed") & np.char.endswith(nm0, ".grad")
    bwd0 = np.char.find(nm0, ".grad") >= 0
    ad_f = (np.char.find(nm, ".lora_") >= 0) & (np.char.find(nm, ".grad") < 0)
    bwd = np.char.find(nm, ".grad") >= 0
    want = _flops(g0.graph, bwd0) - _flops(g0.graph, dw) - _flops(g0.graph, emb_b) \
        + 2 * _flops(g.graph, ad_f)
    assert _flops(g.graph, bwd) == pytest.approx(want, rel=1e-12)
    # one adapter forward by hand: up_proj r = 8, T = 1024: 2·1024·(4096·8 + 8·14336)
    a = n.index("layers.0.mlp.up_proj.lora_a")
    b = n.index("layers.0.mlp.up_proj.lora_b")
    assert _flops(g.graph, [a, b]) == 2 * 1024 * (4096 * 8 + 8 * 14336)
    # trainable per rank: the adapters only
    assert g.layer_trainable == 8 * 81_920 and g.embed_trainable == 0 == g.head_trainable


def test_memory_and_data_parallel_traffic_for_adapters_only() -> None:
    c = rl.cluster("dgx-h100", nodes=1)
    kw = dict(global_batch=64, seq_len=2048, micro_batch=2, zero=1)
    lo = rl.train("llama-3.1-8b", c, lora_rank=16, **kw)
    full = rl.train("llama-3.1-8b", c, **kw)
    mem = lo.memory_per_device
    # fp32 gradient buffers of the adapters (4 B each, ZeRO 1 keeps them whole) and Adam's
    # 12 B per adapter parameter sharded over dp = 8
    assert mem["gradients"] == pytest.approx(41_943_040 * 4)
    assert mem["optimizer"] == pytest.approx(41_943_040 * 12 / 8)
    # every weight still sits in bf16 on the device, adapters included
    assert mem["weights"] == pytest.approx(full.memory_per_device["weights"]
                                           + 41_943_040 * 2)
    assert mem["activations"] == full.memory_per_device["activations"]
    assert lo.breakdown["optimizer"] < full.breakdown["optimizer"] / 100
    assert lo.breakdown["backward"] < 0.75 * full.breakdown["backward"]
    assert lo.step_time < full.step_time


def test_model_flops_of_a_lora_step() -> None:
    # 3 × forward, less one forward of the weight matmuls (frozen dW), plus 3 × the adapters
    full, _, _ = model_flops_per_sample("llama-3.1-8b", 1024)
    lo, _, _ = model_flops_per_sample("llama-3.1-8b", 1024, lora_rank=16)
    m = resolve_model("llama-3.1-8b")
    g = m.graph(precision=BF16, phase="forward", seq_len=1024, fused_attention=False, batch=1,
                logits="all")
    lin = np.array([k == "linear" for k in g.kinds])
    w = float((g.c0[0] + g.c1[0])[lin].sum())
    ad = 2 * 1024 * 16 * 81_920 * 32  # 2·T·(adapter params per layer)·layers
    assert lo == pytest.approx(full - w + 3 * ad, rel=1e-12)


def test_lora_rules() -> None:
    c = rl.cluster("dgx-h100", nodes=1)
    with pytest.raises(RooflineError, match="lora_rank"):
        rl.train("llama-3.1-8b", c, global_batch=8, seq_len=128, lora_rank=0)
    with pytest.raises(SpecError, match="mixture-of-experts"):
        rl.train("mixtral-8x7b", rl.cluster("dgx-h100", nodes=4), global_batch=32,
                 seq_len=128, tp=8, lora_rank=8)
    with pytest.raises(SpecError, match="decoder LMs"):
        rl.train("resnet50", c, global_batch=256, lora_rank=8)


def test_qkv_placement_by_hand() -> None:
    """lora_targets="qkv" (NeMo's default): one A·B pair per layer on the fused q / k / v
    projection. Llama 3.1 8B, r = 16: A 4096 × 16, B 16 × (4096 + 1024 + 1024) = 16 × 6144:
    16·(4096 + 6144) = 163,840 per layer; × 32 = 5,242,880."""
    c = rl.cluster("dgx-h100", nodes=1)
    kw = dict(global_batch=64, seq_len=2048, micro_batch=2, lora_rank=16)
    q = rl.train("llama-3.1-8b", c, lora_targets="qkv", **kw)
    a = rl.train("llama-3.1-8b", c, **kw)
    assert q.trainable_params == 16 * (4096 + 6144) * 32 == 5_242_880
    assert q.step_time < a.step_time
    assert rl.train("llama-3.1-8b", c, lora_targets="all", **kw).step_time == a.step_time
    g = training_graph(CFG, BF16, seq_len=1024, lora_rank=8, lora_targets="qkv")
    n = g.graph.names
    ad = [x for x in n if ".lora_" in x and ".grad" not in x]
    assert ad == ["layers.0.attn.qkv.lora_a", "layers.0.attn.qkv.lora_b"]
    i, j = n.index(ad[0]), n.index(ad[1])
    assert _flops(g.graph, [i, j]) == 2 * 1024 * (4096 * 8 + 8 * 6144)
    assert "layers.0.mlp.up_proj.grad_weight" not in n  # still frozen
    # model FLOPs: 3 × forward, less one forward of the weight matmuls, plus 3 × the one adapter
    full, _, _ = model_flops_per_sample("llama-3.1-8b", 1024)
    lo, _, _ = model_flops_per_sample("llama-3.1-8b", 1024, lora_rank=16, lora_targets="qkv")
    m = resolve_model("llama-3.1-8b")
    gf = m.graph(precision=BF16, phase="forward", seq_len=1024, fused_attention=False, batch=1,
                 logits="all")
    lin = np.array([k == "linear" for k in gf.kinds])
    w = float((gf.c0[0] + gf.c1[0])[lin].sum())
    assert lo == pytest.approx(full - w + 3 * 2 * 1024 * 16 * (4096 + 6144) * 32, rel=1e-12)


def test_lora_targets_rules() -> None:
    c = rl.cluster("dgx-h100", nodes=1)
    with pytest.raises(RooflineError, match="lora_targets"):
        rl.train("llama-3.1-8b", c, global_batch=8, seq_len=128, lora_rank=8,
                 lora_targets="mlp")
    with pytest.raises(SpecError, match="needs lora_rank"):
        rl.train("llama-3.1-8b", c, global_batch=8, seq_len=128, lora_targets="qkv")
    with pytest.raises(SpecError, match="decoder LMs"):
        rl.train("resnet50", c, global_batch=256, lora_targets="qkv")


def test_qkv_placement_on_an_already_fused_projection() -> None:
    """GPT-2 has one fused c_attn ([D, 3D], TransformerConfig.fused_qkv), no q / k / v linears:
    "qkv" adapts that one. r = 8: A 768 × 8, B 8 × 2304: 8·(768 + 2304) = 24,576 per layer;
    × 12 = 294,912 (all: 8·(768 + 2304 + 768 + 768 + 768 + 3072 + 3072 + 768) × 12)."""
    c = rl.cluster("dgx-h100", nodes=1)
    kw = dict(global_batch=64, seq_len=1024, lora_rank=8)
    assert rl.train("gpt2", c, lora_targets="qkv", **kw).trainable_params == 294_912
    assert rl.train("gpt2", c, **kw).trainable_params == 8 * 12288 * 12 == 1_179_648


def test_lora_targets_on_the_result_and_in_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    """The result records the placement (field, to_dict, the printed split line); the CLI's
    --lora-rank / --lora-targets give the API's result; --search and a junk value refuse."""
    import json

    from roofline.cli import main

    kw = dict(global_batch=8, seq_len=1024, lora_rank=16)
    q = rl.train("llama-3.1-8b", "dgx-h100", lora_targets="qkv", **kw)
    a = rl.train("llama-3.1-8b", "dgx-h100", **kw)
    assert (q.lora_targets, a.lora_targets) == ("qkv", "all")
    assert q.to_dict()["lora_targets"] == "qkv" and q.to_dict()["lora_rank"] == 16
    assert "LoRA r=16 on qkv (5.2 M trained)" in " ".join(str(q).split())
    assert rl.train("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=1024).lora_targets \
        == "all"
    argv = ["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "8", "--seq-len", "1024",
            "--lora-rank", "16"]
    assert main(argv + ["--lora-targets", "qkv", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["lora_targets"] == "qkv" and d["lora_rank"] == 16
    assert d["trainable_params"] == q.trainable_params == 5_242_880
    assert d["step_time"] == pytest.approx(q.step_time, rel=1e-12)
    assert main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time"] == pytest.approx(a.step_time,
                                                                            rel=1e-12)
    with pytest.raises(SystemExit, match="--search"):
        main(argv + ["--search"])
    with pytest.raises(SystemExit):
        main(argv + ["--lora-targets", "mlp"])
    assert "invalid choice: 'mlp'" in capsys.readouterr().err
