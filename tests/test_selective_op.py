"""recompute="selective_op" (torchtitan's op-level selective activation checkpointing) and
cp_overlap=False (Llama 3's exposed all-gather context parallelism), against hand
calculations."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.engine.core import time_model
from roofline.errors import SpecError
from roofline.graphs.resolve import model as resolve_model
from roofline.graphs.training import GROUPS, op_recomputed, training_graph
from roofline.ops import collectives as coll
from roofline.ops.training_formulas import layer_activation_terms, op_sac_activation_bytes
from roofline.scenarios.training.context import _context, _graph, _group_times, flops_terms
from roofline.specs.dtypes import precision
from roofline.validation.training import gpt_model

BF16 = precision("bf16")
G = {g: i for i, g in enumerate(GROUPS)}
LLAMA = resolve_model("llama-3.1-8b").config


def _recomputed(cfg) -> set[str]:
    g = training_graph(cfg, BF16, seq_len=1024).graph
    n_f = sum(1 for n in g.names if not n.endswith((".grad", ".grad_input", ".grad_weight")))
    names, kinds = g.names[:n_f], g.kinds[:n_f]
    return {n.split(".", 2)[2] for n, r in zip(names, op_recomputed(names, kinds)) if r}


def test_every_second_matmul_and_the_cheap_ops_are_recomputed() -> None:
    # Llama block, matmuls in forward order q, k, v, o, gate, up, down: the 2nd, 4th, 6th
    # (k, o, up) are re-run, with every op that is neither a matmul nor the attention core
    assert _recomputed(LLAMA) == {"attn.k_proj", "attn.o_proj", "mlp.up_proj", "input_norm",
                                  "post_attn_norm", "attn.rope", "attn.residual", "mlp.act_mul",
                                  "mlp.residual"}
    # a GPT block (fused QKV): qkv, o, up, down -> o and down re-run
    gpt = gpt_model(16, 2048, 24, 50368, 2048).config
    assert {n for n in _recomputed(gpt) if "proj" in n} == {"attn.o_proj", "mlp.down_proj"}


def _titan(**kw):
    kw = {"recompute": "selective_op", **kw}
    return rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=16,
                    micro_batch=2, seq_len=8192, zero=3, **kw)


def test_recompute_time_and_flops_by_hand() -> None:
    r = _titan()
    c = rl.cluster("dgx-h100", nodes=1)
    ctx = _context("llama-3.1-8b", c, None, "bf16", 8192, True, False, "default")
    tg = _graph(ctx, 1, 1, 2)
    t = time_model(tg.graph, c.device, ctx.eff).ops(np.array([2.0])).time[0]
    fwd = np.array([not n.endswith((".grad", ".grad_input", ".grad_weight"))
                    for n in tg.graph.names])
    rc = op_recomputed(tg.graph.names, tg.graph.kinds) & fwd
    per_layer = float(t[rc].sum())  # the op group is exactly these ops
    assert _group_times(ctx, 1, 1, [2])[2][G["layer_fwd_op"]] == pytest.approx(per_layer)
    assert r.microbatches == 1
    assert r.breakdown["recompute"] == pytest.approx(1 * 32 * per_layer)
    # the forward is unchanged: the op group is part of it
    assert r.breakdown["forward"] == pytest.approx(_titan(recompute="none").breakdown["forward"])
    # extra hardware FLOPs per sequence: k (D x K·H), o (D x D), up (D x F), 2 FLOPs each
    D, KH, F, L, s = 4096, 8 * 128, 14336, 32, 8192
    extra = 2 * D * (KH + D + F) * L * s
    assert flops_terms("llama-3.1-8b", s)[3] == pytest.approx(extra)
    assert r.hardware_flops_per_step - r.model_flops_per_step == pytest.approx(16 * extra)
    # slower than selective (attention only), faster than full
    sel, full = _titan(recompute="selective"), _titan(recompute="full")
    assert sel.step_time < r.step_time < full.step_time


def test_saved_activations_by_hand() -> None:
    D, N, K, H, F = 4096, 32, 8, 128, 14336
    # Llama: the layer input, q, v, gate, down outputs, the attention output and its fp32 LSE
    want = 2 * D + 2 * (N * H + K * H + F + D) + 2 * N * H + 4 * N
    got = op_sac_activation_bytes(d_model=D, n_heads=N, n_kv_heads=K, head_dim=H, d_ff=F,
                                  gated_mlp=True, fused_qkv=False)
    assert float(got) == pytest.approx(want) == 63616
    # GPT (fused QKV, ungated): qkv and up outputs saved
    got = op_sac_activation_bytes(d_model=2048, n_heads=16, n_kv_heads=16, head_dim=128,
                                  d_ff=8192, gated_mlp=False, fused_qkv=True)
    assert float(got) == pytest.approx(2 * 2048 + 2 * (3 * 2048 + 8192) + 2 * 2048 + 4 * 16)
    # the step's activations: 32 layers x 16384 tokens x the saved set, one layer's full set
    # live while it is recomputed, the fp32 logits
    none, _ = layer_activation_terms(d_model=D, n_heads=N, n_kv_heads=K, head_dim=H, d_ff=F,
                                     gated_mlp=True, seq_len=8192, tp=1,
                                     sequence_parallel=False, fused_attention=True,
                                     dropout=False)
    tok = 2 * 8192
    act = 63616 * 32 * tok + float(none) * tok + tok * 128256 * 4
    assert _titan().memory_per_device["activations"] == pytest.approx(act)


def test_selective_op_rules_and_the_search() -> None:
    c = rl.cluster("dgx-h100", nodes=1)
    with pytest.raises(SpecError, match="selective_op"):
        rl.train("qwen3-30b-a3b", c, global_batch=8, seq_len=4096, ep=8,
                 recompute="selective_op")
    with pytest.raises(SpecError, match="'none', 'full'"):
        rl.train("resnet50", c, global_batch=256, recompute="selective_op")
    t = rl.best_parallelism("llama-3.1-8b", c, global_batch=16, seq_len=8192, top=None)
    assert "selective_op" not in set(t["recompute"])  # Megatron's modes by default
    t = rl.best_parallelism("llama-3.1-8b", c, global_batch=16, seq_len=8192, top=None,
                            recomputes=("selective_op",), zeros=(3,), micro_batches=(2,),
                            max_tp=1)
    r = _titan()
    assert set(t["recompute"]) == {"selective_op"}
    i = [k for k in range(len(t["pp"])) if t["pp"][k] == 1][0]  # the 1·1·8 split
    assert float(t["step_time"][i]) == pytest.approx(r.step_time, rel=1e-9)
    assert float(t["memory"][i]) == pytest.approx(r.memory_per_device["total"], rel=1e-9)


def test_exposed_all_gather_context_parallelism_by_hand() -> None:
    """cp_overlap=False: per layer the forward all-gather of K, V and the backward
    reduce-scatter of dK, dV (2·t_kv) wait in front of the attention, however long it is."""
    c = rl.cluster("dgx-h100", nodes=1)
    kw = dict(global_batch=2, seq_len=32768, tp=1, cp=8, dp=1, micro_batch=1, zero=1,
              recompute="none")
    hid = rl.train("llama-3.1-8b", c, **kw)
    r = rl.train("llama-3.1-8b", c, cp_overlap=False, **kw)
    ctx = _context("llama-3.1-8b", c, None, "bf16", 32768, True, False, "default", None, 8)
    kv = 1 * 32768 * 2 * 8 * 128 * 2  # b·S·(K and V)·K heads·H·2 bytes
    t_kv = coll.group_all_gather(kv, 8, 1, ctx.links, np)
    assert hid.breakdown["cp_comm"] == 0.0  # hidden behind 32k tokens of attention
    assert r.breakdown["cp_comm"] == pytest.approx(2 * 32 * 2 * t_kv)  # m = 2, 32 layers
    assert r.step_time == pytest.approx(hid.step_time + r.breakdown["cp_comm"])
    with pytest.raises(SpecError, match="cp > 1"):
        rl.train("llama-3.1-8b", c, global_batch=8, seq_len=4096, cp_overlap=False)


def test_command_line_equals_the_api(capsys) -> None:
    import json

    from roofline.cli import main

    def step(*extra):
        assert main(["train", "llama-3.1-8b", "dgx-h100", "--global-batch", "2", "--seq-len",
                     "32768", "--dp", "1", "--zero", "1", "--format", "json", *extra]) == 0
        return json.loads(capsys.readouterr().out)["step_time"]

    api = rl.train("llama-3.1-8b", "dgx-h100", global_batch=2, seq_len=32768, cp=8, dp=1,
                   zero=1, recompute="selective_op", cp_overlap=False).step_time
    assert step("--cp", "8", "--cp-exposed", "--recompute", "selective_op") == pytest.approx(
        api, rel=1e-12)
