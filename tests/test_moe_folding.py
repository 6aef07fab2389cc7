"""MoE parallel folding (``rl.train(etp=...)``, scenarios/training/folding.py): the expert
graph, the group rules, the exchange's placement and the expert shards, each against a hand
calculation on Qwen3-235B-A22B (D 4096, experts 1536 wide, top-8 of 128, no shared expert,
every layer MoE) at one sequence of 4,096 tokens."""

from __future__ import annotations

import math

import pytest

import roofline as rl
from roofline.errors import RooflineError
from roofline.graphs.graph import Q
from roofline.ops import collectives as coll
from roofline.ops.xp import SCALAR
from roofline.scenarios.training.context import _context, _graph
from roofline.scenarios.training.folding import tp_pair

T, D, F, E, K = 4096, 4096, 1536, 128, 8
ROW = dict(global_batch=2048, seq_len=T, micro_batch=1, tp=4, pp=8, interleave=4, ep=8,
           zero=1, recompute="none")  # the mcoremoe TP 4 row's split (256 H100)


def _ctx(nodes: int = 32):  # type: ignore[no-untyped-def]
    return _context("qwen3-235b-a22b", rl.cluster("dgx-h100", nodes=nodes), None, "bf16", T,
                    True, False, "default")


def _op(g, name: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    i = g.graph.names.index(name)
    q = g.graph.c0[:, i] + g.graph.c1[:, i]  # at the graph's batch (one sequence)
    return {"flops": q[Q["flops"]], "w": q[Q["weight_bytes_read"]],
            "in": q[Q["act_bytes_read"]], "out": q[Q["act_bytes_written"]],
            "params": g.graph.params[i], "m": g.graph.gemm[0, i], "n": g.graph.gemm[1, i]}


def test_expert_graph_by_hand() -> None:
    """TP 4, EP 8: each rank holds E/ep = 16 experts. ETP 4 (the default): each expert a
    quarter wide (384), all T·k = 32,768 rows of the tp group; ETP 1: whole experts (1536),
    the rank's own T·k/tp = 8,192 rows. The FLOPs are the same, 2·T·k·D·F/tp."""
    ctx = _ctx()
    split, whole = _graph(ctx, 4, 8, 1, True), _graph(ctx, 4, 8, 1, True, 1)
    a, b = _op(split, "layers.0.moe.experts.up_proj"), _op(whole, "layers.0.moe.experts.up_proj")
    assert a["flops"] == b["flops"] == 2 * T * K * D * F / 4
    assert (a["params"], b["params"]) == (16 * D * F / 4, 16 * D * F)
    assert (a["in"], b["in"]) == (T * K * D * 2, T * K / 4 * D * 2)  # bf16 inputs
    assert a["out"] == b["out"] == T * K / 4 * F * 2  # rows × width, the same product
    assert (a["n"], b["n"]) == (F / 4, F)
    # the GEMM rows per expert: T·k/E tokens of each of the ep ranks (all 128 experts touched)
    assert a["m"] == pytest.approx(T * K / E * 8, rel=1e-6)
    assert b["m"] == pytest.approx(T * K / E * 8 / 4, rel=1e-6)
    assert b["w"] == pytest.approx(2 * 16 * D * F, rel=1e-6)  # the 16 experts read once
    # the routed experts of a layer (gate, up, down), split etp·ep ways
    assert whole.layer_expert_params == 3 * 16 * D * F
    assert split.layer_expert_params == 3 * 16 * D * F / 4
    # the attention is the tp rank's either way
    o = "layers.0.attn.o_proj"
    assert _op(split, o)["flops"] == _op(whole, o)["flops"]


def test_default_is_etp_equal_tp() -> None:
    """No number moves unless etp is given: etp = tp is the model before folding."""
    r0 = rl.train("qwen3-235b-a22b", rl.cluster("dgx-h100", nodes=32), **ROW)
    r1 = rl.train("qwen3-235b-a22b", rl.cluster("dgx-h100", nodes=32), etp=4, **ROW)
    assert r0.step_time == r1.step_time and r0.breakdown == r1.breakdown
    assert r0.memory_per_device == r1.memory_per_device
    assert r0.etp == 4 and "etp" not in str(r0).split("micro-batch")[0]


def test_group_rules() -> None:
    cl = rl.cluster("dgx-h100", nodes=32)
    kw = dict(ROW, tp=2, ep=32)  # the table's cross-node row: EP 32 over TP 2 × DP 16
    with pytest.raises(RooflineError, match=r"ep=32, etp=2: etp·ep = 2·32 = 64 must divide "
                       r"the tp·dp = 2·16 = 32 ranks.*with etp=2, ep one of 1, 2, 4, 8, 16"):
        rl.train("qwen3-235b-a22b", cl, **kw)
    r = rl.train("qwen3-235b-a22b", cl, etp=1, **kw)  # folded: ep need not divide dp = 16
    assert (r.ep, r.etp, r.dp) == (32, 1, 16) and "etp=1" in str(r)
    with pytest.raises(RooflineError, match="etp=3 .*expert tensor parallelism.*no experts"):
        rl.train("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=1024, etp=3)
    with pytest.raises(RooflineError, match="etp"):
        rl.train("qwen3-235b-a22b", cl, etp=0, **ROW)


def test_tensor_parallel_collectives_by_hand() -> None:
    """Around the attention one tp all-reduce; around the routed experts none at any etp (the
    flex dispatcher pays their split in the exchange, ``ep_exposed``); Qwen3-235B has no shared
    experts, every layer MoE."""
    ctx = _ctx()
    n = 1 * T * D * 2.0  # one sequence, 16-bit, the all-reduce-equivalent of the SP pair
    t_ar = coll.group_all_reduce(n, 4, 1.0, ctx.links, SCALAR)
    assert tp_pair(ctx, t_ar) == t_ar


def test_expert_exchange_placed_by_folding() -> None:
    """EP 8 at ETP 1 is ranks 0-7, one DGX node: the dispatch and combine stay on NVLink.
    By hand: each rank sends its b·s/tp = 1,024 tokens × 4,096 × 2 bytes to the expected
    5.3 ranks holding one of its 8 experts; an all-to-all inside one domain moves 7/8 of it at
    the scale-up bandwidth after 7 latencies; 4 per layer (no recompute), 11 layers on the
    slowest stage (the last: 11 layers and the 151,936-wide LM head outweigh a middle stage's
    12), 256 micro-batches."""
    cl = rl.cluster("dgx-h100", nodes=32)
    r = rl.train("qwen3-235b-a22b", cl, etp=1, **ROW)
    L = _ctx().links
    tok = T / 4 * D * 2.0

    def hit(n: int) -> float:
        # expected groups, of n holding E/n experts each, among a token's K experts drawn
        # uniformly without repetition: n · (1 − C(E − E/n, K) / C(E, K))
        return n * (1 - math.comb(E - E // n, K) / math.comb(E, K))

    r8, r4_ = hit(8), hit(4)
    assert r8 == pytest.approx(5.34, abs=0.005)  # the "5.3 ranks" above
    a = 7 * L.up_alpha + 7 / 8 * tok * r8 / L.up_bw
    assert r.breakdown["ep_comm"] == pytest.approx(256 * 11 * 4 * a, rel=1e-9)
    # at etp = tp the flex dispatcher's group is the tp x ep = 32 ranks 0-31, four nodes: a
    # token crosses InfiniBand once per remote node holding one of its experts and NVLink to
    # each of the 4 tp ranks of every expert-parallel rank holding one. Counted by hand: it
    # goes to 4·r8 ranks, one of them the sender itself when the sender's expert-parallel
    # rank is hit (probability r8/8, by symmetry), so 4·r8 − r8/8 leave the rank; of the
    # r4 nodes hit, the sender's own (probability r4/4) takes no InfiniBand hop
    r4 = rl.train("qwen3-235b-a22b", cl, **ROW)
    up = 7 * L.up_alpha + tok * (4 * r8 - r8 / 8) / L.up_bw
    out = 3 * L.out_alpha + tok * (r4_ - r4_ / 4) / L.out_bw
    assert r4.breakdown["ep_comm"] == pytest.approx(256 * 11 * 4 * max(up, out), rel=1e-9)
    assert r4.breakdown["ep_comm"] > 3 * r.breakdown["ep_comm"]


def test_expert_shards_by_hand() -> None:
    """Qwen3-235B on 16 H100, TP 2, DP 8, EP 16, ETP 1 (refused before folding: 16 does not
    divide dp = 8): every expert-parallel rank holds 8 whole experts, edp = 2·8/16 = 1, so
    ZeRO-1 shards the experts' Adam state over nothing and the rest over the 8 dp ranks."""
    cl = rl.cluster("dgx-h100", nodes=2)
    kw = dict(global_batch=16, seq_len=T, micro_batch=1, tp=2, ep=16, zero=1,
              recompute="full")
    r = rl.train("qwen3-235b-a22b", cl, etp=1, **kw)
    ctx = _context("qwen3-235b-a22b", cl, None, "bf16", T, True, False, "default")
    g = _graph(ctx, 2, 16, 1, True, 1)
    lp_e = 3 * (E // 16) * D * F
    assert g.layer_expert_params == lp_e
    p_all = 94 * g.layer_params + g.embed_params + g.head_params
    p_e = 94 * lp_e
    assert r.memory_per_device["optimizer"] == pytest.approx(
        ((p_all - p_e) / 8 + p_e / 1) * ctx.opt_bytes, rel=1e-12)
    with pytest.raises(RooflineError, match="etp·ep = 2·16 = 32 must divide"):
        rl.train("qwen3-235b-a22b", cl, **kw)


def test_cli_etp(capsys: pytest.CaptureFixture[str]) -> None:
    """``roofline train --etp`` prices the folded split (and says so on the split line); with
    --search it is the sizes searched (tests/test_search_folding.py)."""
    from roofline.cli import main

    argv = ["train", "qwen3-235b-a22b", "dgx-h100", "--nodes", "32", "--global-batch", "2048",
            "--seq-len", "4096", "--tp", "4", "--pp", "8", "--interleave", "4", "--ep", "8",
            "--recompute", "none"]
    assert main(argv + ["--etp", "1"]) == 0
    out = capsys.readouterr().out
    assert "ep=8 etp=1 micro-batch=1" in out
    r = rl.train("qwen3-235b-a22b", rl.cluster("dgx-h100", nodes=32), etp=1, **ROW)
    assert f"step time {r.step_time:.2f} s" in out  # the API's figure


def _widened(key: str, **cfg_changes: int):  # type: ignore[no-untyped-def]
    """A zoo MoE model with its expert width changed (a config no zoo entry has)."""
    from dataclasses import replace

    m = rl.model(key)
    assert m.config is not None
    return replace(m, key=f"{key}-w", name=f"{m.name}-w",
                   config=replace(m.config, name=f"{m.name}-w", **cfg_changes))


def test_tp_need_not_divide_the_expert_width_when_etp_splits_it() -> None:
    """With etp set, the routed experts are split etp ways, not tp ways: tp must divide the
    attention heads and the dense / shared-expert widths, etp the routed experts' width.
    Qwen3-30B-A3B (32 heads, 4 KV heads, dense width 6144, all 48 layers MoE, no shared
    expert) with experts 772 wide: tp 8 does not divide 772 (= 4·193), etp 1, 2, 4 do. On
    one DGX (tp 8, dp 1; etp·ep = 8) at etp 1, ep 8 each rank holds E/ep = 16 whole experts
    of 2048 × 772."""
    m = _widened("qwen3-30b-a3b", moe_d_ff=772)
    kw = dict(global_batch=8, seq_len=T, tp=8, recompute="full")
    for etp, ep in ((1, 8), (2, 4), (4, 2)):
        r = rl.train(m, "dgx-h100", etp=etp, ep=ep, **kw)
        assert (r.etp, r.ep) == (etp, ep) and r.step_time > 0
    ctx = _context(m, rl.cluster("dgx-h100"), None, "bf16", T, True, False, "default")
    g = _graph(ctx, 8, 8, 1, True, 1)
    assert g.layer_expert_params == 3 * (128 // 8) * 2048 * 772
    # the experts split by tp (etp unset, or etp = tp) are still refused, naming tp
    with pytest.raises(RooflineError, match="tp=8 must divide moe_intermediate_size=772"):
        rl.train(m, "dgx-h100", **kw)
    with pytest.raises(RooflineError, match="tp=8 must divide moe_intermediate_size=772"):
        rl.train(m, "dgx-h100", etp=8, **kw)
    # an etp that does not divide the width names etp, the width and the etps allowed
    with pytest.raises(RooflineError, match=r"etp=8 must divide the expert width 772 .*"
                                            r"allowed etp: 1, 2, 4"):
        rl.train(m, "dgx-h100", **dict(kw, tp=4, ep=1), etp=8)


def test_expert_width_from_d_ff_split_by_etp() -> None:
    """Mixtral-style experts (no moe_intermediate_size: the experts are d_ff wide, every layer
    MoE, no shared expert): d_ff 14340 (= 4·3585) with tp 8, etp 4 prices; tp 8 alone is
    refused on intermediate_size."""
    m = _widened("mixtral-8x7b", d_ff=14340)
    kw = dict(global_batch=8, seq_len=T, tp=8, recompute="full")
    r = rl.train(m, "dgx-h100", etp=4, ep=2, **kw)
    assert (r.tp, r.etp, r.ep) == (8, 4, 2)
    with pytest.raises(RooflineError, match="tp=8 must divide intermediate_size=14340"):
        rl.train(m, "dgx-h100", **kw)


def test_shared_experts_keep_tp_dividing_the_width() -> None:
    """The shared experts (n_shared × moe_intermediate_size wide) stay split by tp, so with
    one tp must divide the width whatever etp is: DeepSeek-V3 (one shared expert) with
    experts 2052 (= 4·513) wide refuses tp 8 at etp 1 and prices tp 4 at etp 1."""
    from roofline.graphs.shard import shard_config, tp_problem

    cfg = _widened("deepseek-v3", moe_d_ff=2052).config
    assert tp_problem(cfg, 8, 1) == f"tp=8 must divide moe_intermediate_size=2052 of {cfg.name}"
    with pytest.raises(RooflineError, match="tp=8 must divide moe_intermediate_size=2052"):
        shard_config(cfg, 8, etp=1)
    assert shard_config(cfg, 4, etp=1).moe_d_ff == 2052 // 4


def test_trainable_params_model_wide_under_expert_parallelism() -> None:
    """``TrainingResult.trainable_params`` is model-wide (result.py): Qwen3-235B-A22B's
    235.09 B parameters whatever ep or etp split the experts (it read 36.4 B at ep 8: the
    graph it counted kept E/ep experts per layer)."""
    cl = rl.cluster("dgx-h100", nodes=32)
    want = rl.model("qwen3-235b-a22b").params
    for kw in ({}, {"etp": 1}):
        r = rl.train("qwen3-235b-a22b", cl, **ROW, **kw)
        assert r.trainable_params == pytest.approx(want, rel=1e-9)
    assert rl.train("qwen3-235b-a22b", cl, **dict(ROW, ep=1)).trainable_params == \
        pytest.approx(want, rel=1e-9)
