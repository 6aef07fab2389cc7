"""Context parallelism (train(cp=...)): the per-rank graph, memory, the K/V exchange and the
argument rules, against hand calculations."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.graphs.resolve import model as resolve_model
from roofline.graphs.training import GROUPS, training_graph
from roofline.ops import collectives as coll
from roofline.scenarios.training.context import _context, _group_times
from roofline.specs.dtypes import precision

CFG = resolve_model("llama-3.1-8b").config
BF16 = precision("bf16")
G = {g: i for i, g in enumerate(GROUPS)}


def _flops(g, name):
    i = g.graph.names.index(name)
    return float(g.graph.c0[0, i] + g.graph.c1[0, i])


def test_rank_graph_holds_its_share_of_the_sequence() -> None:
    full = training_graph(CFG, BF16, seq_len=8192)
    part = training_graph(CFG, BF16, seq_len=8192 // 4, cp=4)
    # projections and MLP: a quarter of the tokens, a quarter of the FLOPs
    assert _flops(part, "layers.0.mlp.up_proj") == pytest.approx(
        _flops(full, "layers.0.mlp.up_proj") / 4)
    # attention: 2048 local queries against all 8192 keys (load-balanced causal): a quarter of
    # the full causal attention = 4 x the 2048-token graph's
    alone = training_graph(CFG, BF16, seq_len=2048)
    att = "layers.0.attn.attention"
    assert _flops(part, att) == pytest.approx(4 * _flops(alone, att))
    assert _flops(part, att) == pytest.approx(_flops(full, att) / 4, rel=2e-3)


def _run(cp: int, **kw):
    return rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=8,
                    seq_len=32768, tp=1, cp=cp, micro_batch=1, zero=3, recompute="full", **kw)


def test_memory_and_the_data_parallel_group() -> None:
    a, b = _run(1), _run(4)
    assert (a.dp, b.dp, b.cp) == (8, 2, 4)
    # activations hold the rank's 32768 / 4 tokens
    assert b.memory_per_device["activations"] == pytest.approx(
        a.memory_per_device["activations"] / 4)
    # ZeRO-3 shards over the dp·cp = 8 ranks that hold the same weights: the same shard
    assert b.memory_per_device["weights"] == pytest.approx(a.memory_per_device["weights"])
    assert "cp=4" in str(b)


def test_kv_exchange_by_hand() -> None:
    """A short sequence over 8 ranks: the gathered K/V (2·S·K·H·2 bytes) outlasts the little
    attention core; exposed per layer max(0, t_kv − t_core) + max(0, 2·t_kv − 2.5·t_core)."""
    c = rl.cluster("dgx-h100", nodes=2)
    r = rl.train("llama-3.1-8b", c, global_batch=2, seq_len=2048, tp=1, cp=8, dp=2,
                 micro_batch=1, zero=1, recompute="none")
    ctx = _context("llama-3.1-8b", c, None, "bf16", 2048, True, False, "default", None, 8)
    t_core = _group_times(ctx, 1, 1, [1])[1][G["layer_fwd_core"]]
    kv = 1 * 2048 * 2 * 8 * 128 * 2  # b·S·(K and V)·K heads·H·2 bytes = 8.39 MB
    t_kv = coll.group_all_gather(kv, 8, 1, ctx.links, np)
    per_layer = max(t_kv - t_core, 0.0) + max(2 * t_kv - 2.5 * t_core, 0.0)
    assert per_layer > 0
    assert r.breakdown["cp_comm"] == pytest.approx(1 * 32 * per_layer)  # m = 1, 32 layers
    assert _run(8).breakdown["cp_comm"] == 0.0  # at 32k tokens the core hides the exchange


def test_cp_rules() -> None:
    c = rl.cluster("dgx-h100", nodes=1)
    with pytest.raises(SpecError, match="multiple of 2·cp"):
        rl.train("llama-3.1-8b", c, global_batch=8, seq_len=1000, cp=8, dp=1)
    with pytest.raises(SpecError, match="tp·cp·pp·dp"):
        rl.train("llama-3.1-8b", c, global_batch=8, seq_len=4096, cp=4, dp=4)
    with pytest.raises(SpecError, match="fused attention"):
        rl.train("llama-3.1-8b", c, global_batch=8, seq_len=4096, cp=2,
                 fused_attention=False)
    with pytest.raises(RooflineError, match="cp"):
        rl.train("llama-3.1-8b", c, global_batch=8, seq_len=4096, cp=0)
