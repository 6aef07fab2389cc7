"""MoE training (issue 18): the MoE layers of a mixed model are priced, expert weights under
ZeRO, MoE activation memory, DeepEP-style dispatch volume, each against a hand calculation."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.ops import collectives as coll
from roofline.ops.training_formulas import moe_dispatch_ranks, moe_mlp_activation_bytes
from roofline.scenarios.training.context import _context, _graph
from roofline.scenarios.training.step import _trainable_params


def test_dispatch_ranks_by_hand() -> None:
    # AutoModel's fake gate: token i -> experts 8i..8i+7; 16 experts per rank, windows aligned
    assert moe_dispatch_ranks(128, 8, 8, "contiguous") == 1.0
    # 4 experts per rank: every 8-wide window spans exactly 2 ranks
    assert moe_dispatch_ranks(256, 8, 64, "contiguous") == 2.0
    # E=8, k=3, 2 experts per rank: windows start 0,3,6,1,4,7,2,5; each spans 2 ranks
    assert moe_dispatch_ranks(8, 3, 4, "contiguous") == 2.0
    # random: E=4, k=2, 2 ranks of 2: a rank is missed with C(2,2)/C(4,2) = 1/6 -> 2·5/6
    assert moe_dispatch_ranks(4, 2, 2) == pytest.approx(5 / 3)
    assert moe_dispatch_ranks(128, 8, 1) == 1.0
    with pytest.raises(RooflineError, match="moe_routing"):
        moe_dispatch_ranks(8, 2, 2, "greedy")


def test_moe_activation_bytes_by_hand() -> None:
    # Qwen3-30B-A3B: D 2048, experts 768 wide, top-8 of 128, gated, no shared expert:
    # 8·2·2048 (input copies) + 8·6·768 (gate, up, SwiGLU out) + 4·128 (router probs)
    b = moe_mlp_activation_bytes(d_model=2048, expert_d_ff=768, top_k=8, n_shared=0,
                                 n_experts=128, gated_mlp=True)
    assert float(b) == pytest.approx(8 * 2 * 2048 + 8 * 6 * 768 + 4 * 128)
    # TP 2 without SP: the copies replicated, the expert widths split
    b2 = moe_mlp_activation_bytes(d_model=2048, expert_d_ff=768, top_k=8, n_shared=1,
                                  n_experts=128, gated_mlp=True, tp=2)
    assert float(b2) == pytest.approx(8 * 2 * 2048 + (8 * 6 * 768 + 6 * 768 + 4 * 128) / 2)


def test_group_dispatch_by_hand() -> None:
    links = coll.Links(domain=8, up_bw=100e9, up_alpha=1e-6, out_bw=10e9, out_alpha=5e-6)
    # inside one domain: the all-to-all of the rank bytes
    assert coll.group_dispatch(8e6, 1e6, 8, 1, links) == pytest.approx(
        coll.group_all_to_all(8e6, 8, 1, links))
    # 16 ranks on 2 domains: scale-up 7·1 µs + 15/16·8 MB/100 GB/s = 82 µs; scale-out
    # 1·5 µs + 1/2·4 MB/10 GB/s = 205 µs: the slower binds
    assert coll.group_dispatch(8e6, 4e6, 16, 1, links) == pytest.approx(205e-6)
    assert coll.group_dispatch(8e6, 4e6, 1, 1, links) == 0.0


def test_mixed_model_prices_its_moe_layers() -> None:
    """DeepSeek-V3: 3 dense layers, then 58 MoE layers. The per-rank graph is the average of a
    dense and an MoE layer; its parameters × 61 + embedding + head are the model's."""
    ctx = _context("deepseek-v3", "dgx-h100", 1, "bf16", 4096, True, False, "default")
    g = _graph(ctx, 1, 1, 1)
    assert any(".moe.experts." in n for n in g.graph.names)
    assert g.moe_fraction == pytest.approx(58 / 61)
    assert _trainable_params(ctx, 1) == pytest.approx(rl.model("deepseek-v3").params, rel=1e-9)
    # with EP 64 each rank holds a 64th of the routed experts
    ge = _graph(ctx, 1, 64, 1)
    assert g.layer_params - ge.layer_params == pytest.approx(
        g.layer_expert_params * (1 - 1 / 64), rel=1e-9)


def test_expert_weights_sharded_once() -> None:
    """Qwen3-30B-A3B on 8 GPUs, EP 8, FSDP 8: the experts split 8 ways by EP, the rest 8 ways by
    ZeRO-3 (the experts are not sharded again over dp/ep = 1): bf16 weights = params·2/8."""
    r = rl.train("qwen3-30b-a3b", "dgx-h100", global_batch=64, seq_len=4096, micro_batch=1,
                 ep=8, zero=3, recompute="full")
    p = rl.model("qwen3-30b-a3b").params
    assert r.memory_per_device["weights"] == pytest.approx(p * 2 / 8, rel=1e-6)
    assert r.memory_per_device["optimizer"] == pytest.approx(p * 12 / 8, rel=1e-6)


def test_routing_sets_the_dispatch() -> None:
    kw = dict(global_batch=64, seq_len=4096, micro_batch=1, ep=8, zero=3, recompute="full")
    rnd = rl.train("qwen3-30b-a3b", "dgx-h100", **kw)
    con = rl.train("qwen3-30b-a3b", "dgx-h100", moe_routing="contiguous", **kw)
    # by hand: 6 exchanges (dispatch, combine; forward, backward, recompute) per layer and
    # micro-batch, 48 layers, 64/8 = 8 micro-batches; each moves 4096 tokens × 2048 × 2 bytes
    # to each destination rank per token, all inside one NVLink domain
    links = _context("qwen3-30b-a3b", "dgx-h100", 1, "bf16", 4096, True, False,
                     "default").links
    tok = 4096 * 2048 * 2.0
    for r, routing in ((rnd, "random"), (con, "contiguous")):
        d = moe_dispatch_ranks(128, 8, 8, routing)
        t = coll.group_dispatch(tok * d, tok, 8, 1, links)
        assert r.breakdown["ep_comm"] == pytest.approx(6 * 48 * 8 * t, rel=1e-9)
    with pytest.raises(RooflineError, match="moe_routing"):
        rl.train("qwen3-30b-a3b", "dgx-h100", moe_routing="greedy", **kw)


def test_best_parallelism_honours_the_attention_kernel() -> None:
    kw = dict(global_batch=64, seq_len=4096, micro_batches=(1,), recomputes=("selective",),
              zeros=(1,), top=1)
    auto = rl.best_parallelism("llama-3.1-8b", "dgx-h100", **kw)
    fa2 = rl.best_parallelism("llama-3.1-8b", "dgx-h100", attention_kernel="fa2", **kw)
    a, f = auto.to_dicts()[0], fa2.to_dicts()[0]
    assert f["step_time"] > a["step_time"]  # FA2 on Hopper is slower than FA3 ("auto")
    same = rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=4096,
                    tp=f["tp"], pp=f["pp"], dp=f["dp"], micro_batch=f["micro_batch"],
                    interleave=f.get("interleave", 1), recompute="selective", zero=1,
                    attention_kernel="fa2")
    assert same.step_time == pytest.approx(f["step_time"], rel=1e-9)
    assert np.isfinite(a["step_time"])


def test_ep_overlap_by_hand() -> None:
    """Combined 1F1B: a micro-batch's four exchanges hide behind the adjacent micro-batch's
    layer compute (here ~30 ms per layer against ~1 ms of exchange), except the micro-batches
    without a partner: min(1, pp/m) = 1/16 of them (m = 512 / (8·4) = 16, pp = 1)."""
    kw = dict(global_batch=512, seq_len=4096, micro_batch=4, ep=8, zero=3, recompute="none")
    exp = rl.train("qwen3-30b-a3b", "dgx-h100", **kw)
    ovl = rl.train("qwen3-30b-a3b", "dgx-h100", ep_overlap=True, **kw)
    assert ovl.breakdown["ep_comm"] == pytest.approx(exp.breakdown["ep_comm"] / 16, rel=1e-9)
    assert exp.step_time - ovl.step_time == pytest.approx(
        exp.breakdown["ep_comm"] * 15 / 16, rel=1e-9)
    # the schedule's rules: no full recompute, interleaving with pp > 1, an MoE model
    with pytest.raises(RooflineError, match="recompute='full'"):
        rl.train("qwen3-30b-a3b", "dgx-h100", ep_overlap=True, **{**kw, "recompute": "full"})
    with pytest.raises(RooflineError, match="interleave"):
        rl.train("qwen3-30b-a3b", "dgx-h100", ep_overlap=True, pp=2, dp=4,
                 **{**kw, "ep": 4, "global_batch": 64})
    with pytest.raises(RooflineError, match="ep > 1"):
        rl.train("qwen3-30b-a3b", "dgx-h100", ep_overlap=True, **{**kw, "ep": 1})
    with pytest.raises(RooflineError, match="no experts"):
        rl.train("llama-3.2-1b", "dgx-h100", global_batch=64, seq_len=1024, ep_overlap=True)
    t = rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", global_batch=64, seq_len=4096,
                            micro_batches=(1,), zeros=(3,), ep_overlap=True, top=None)
    rows = t.to_dicts()
    assert rows and all(r["ep"] > 1 and r["recompute"] != "full" for r in rows)


def test_moe_copies_follow_the_expert_split() -> None:
    """A rank's routed experts run etp/tp × b·s·k rows (both dispatchers; the graph's
    ``_fold_experts``), each keeping its D-wide input: per token of the micro-batch
    etp/tp × k·2·D bytes, the experts' own tensors k·6·F_e/tp whatever etp. Qwen3-30B-A3B
    at TP 4 with SP: etp 4 keeps all 8 copies (session 31; before, 8/4 of them), etp 1 a
    quarter, etp 2 half."""
    kw = dict(d_model=2048, expert_d_ff=768, top_k=8, n_shared=0, n_experts=128,
              gated_mlp=True, tp=4, sequence_parallel=True)
    rest = (8 * 6 * 768 + 4 * 128) / 4
    for etp, share in ((4, 1.0), (2, 0.5), (1, 0.25)):
        got = moe_mlp_activation_bytes(etp=etp, **kw)
        assert float(got) == pytest.approx(share * 8 * 2 * 2048 + rest, rel=1e-12)
    # unset etp is etp = tp
    assert float(moe_mlp_activation_bytes(**kw)) == pytest.approx(8 * 2 * 2048 + rest)
    # through rl.train: TP 4, EP 8 on 32 H100, one stage, no recompute, one 4,096-token
    # sequence a micro-batch: etp 4 keeps 3/4 · 8 · 2 · 2,048 bytes more per token and layer
    # than etp 1, over 4,096 tokens and 48 layers
    cl = rl.cluster("dgx-h100", nodes=4)
    run = dict(global_batch=32, seq_len=4096, micro_batch=1, tp=4, ep=8, recompute="none")
    a4 = rl.train("qwen3-30b-a3b", cl, **run).memory_per_device["activations"]
    a1 = rl.train("qwen3-30b-a3b", cl, etp=1, **run).memory_per_device["activations"]
    assert a4 - a1 == pytest.approx(0.75 * 8 * 2 * 2048 * 4096 * 48, rel=1e-9)


def test_moe_copies_refuse_a_bad_etp() -> None:
    """``moe_mlp_activation_bytes(etp=)`` is public: an expert split below one rank (0, or a
    column holding one) is a SpecError naming etp, not 0 or negative copies."""
    kw = dict(d_model=2048, expert_d_ff=768, top_k=8, n_shared=0, n_experts=128,
              gated_mlp=True, tp=4, sequence_parallel=True)
    for bad in (0, -2, np.array([4, 0])):
        with pytest.raises(SpecError, match="etp="):
            moe_mlp_activation_bytes(etp=bad, **kw)
    assert moe_mlp_activation_bytes(etp=np.array([1, 4]), **kw).shape == (2,)
