"""MoE layers under tensor parallelism, counted from Megatron-Core's code (NVIDIA/Megatron-LM
d98e8a64): sequence parallelism required in training (``MoELayer.forward``), the router on
the rank's b·s/tp tokens, ``moe.combine`` on the routed experts' rows, the shared experts' pair.
Hand counts on Qwen3-30B-A3B (D 2048, 128 experts, top-8, no shared expert, all 48 layers
MoE) at one sequence of 4,096 tokens, TP 4."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.graph import Q
from roofline.ops import collectives as coll
from roofline.ops.xp import SCALAR
from roofline.scenarios.training.context import _context, _graph
from roofline.scenarios.training.folding import tp_pair

T, D, E, K = 4096, 2048, 128, 8
KW = dict(global_batch=8, seq_len=T, micro_batch=1, recompute="full")


def _q(g, name: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    i = g.graph.names.index(name)
    q = g.graph.c0[:, i] + g.graph.c1[:, i]  # at the graph's batch (one sequence)
    return {"flops": q[Q["flops"]], "w": q[Q["weight_bytes_read"]],
            "in": q[Q["act_bytes_read"]], "m": g.graph.gemm[0, i]}


def test_moe_with_tp_and_no_sequence_parallelism_refused() -> None:
    """Megatron-Core raises in training when an MoE layer's tensor-parallel group is > 1 and
    sequence parallelism is off; a dense model and tp 1 price as before."""
    with pytest.raises(SpecError, match=r"tp=4 with sequence_parallel=False: .*mixture of "
                                        r"experts.*allowed: sequence_parallel=True .*tp=1"):
        rl.train("qwen3-30b-a3b", "dgx-h100", tp=4, sequence_parallel=False, **KW)
    assert rl.train("qwen3-30b-a3b", "dgx-h100", tp=1, sequence_parallel=False,
                    **KW).step_time > 0
    assert rl.train("llama-3.1-8b", "dgx-h100", tp=4, sequence_parallel=False,
                    **KW).step_time > 0


def test_cli_no_sp_on_moe_refused(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    argv = ["train", "qwen3-30b-a3b", "dgx-h100", "--global-batch", "8", "--seq-len", "4096",
            "--tp", "4", "--no-sp"]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "tp=4 with sequence_parallel=False" in err and "drop --no-sp" in err


def test_router_on_the_ranks_tokens_under_sp() -> None:
    """With SP the MoE layer's input is the rank's T/tp = 1,024 tokens: the router's GEMM
    2·(T/tp)·D·E FLOPs on m = T/tp rows, its D·E weight read whole (fp32 in the graph as
    built: the same bytes with and without SP), its softmax a quarter of what the graph without
    SP (every rank all T tokens) counts."""
    ctx = _context("qwen3-30b-a3b", rl.cluster("dgx-h100"), None, "bf16", T, True, False,
                   "default")
    sp, nosp = _graph(ctx, 4, 1, 1, True), _graph(ctx, 4, 1, 1, False)
    r, r0 = _q(sp, "layers.0.moe.router"), _q(nosp, "layers.0.moe.router")
    assert r["flops"] == pytest.approx(2 * T / 4 * D * E, rel=1e-9)
    assert r0["flops"] == pytest.approx(2 * T * D * E, rel=1e-9)
    assert r["w"] == r0["w"] > 0
    assert (r["m"], r0["m"]) == (T / 4, T)
    a, b = _q(sp, "layers.0.moe.router_softmax"), _q(nosp, "layers.0.moe.router_softmax")
    assert a["in"] == pytest.approx(b["in"] / 4, rel=1e-12) and a["in"] > 0


def test_combine_on_the_ranks_expert_rows() -> None:
    """``moe.combine`` (k D-wide expert-output rows per token, 16-bit) is counted on the rows
    the rank's routed experts run: etp/tp × T·k. At etp = tp = 4 (the flex dispatcher sends
    each token to all 4 tp ranks of its experts) every rank holds all T·k rows, SP or not:
    T·k·D·2 bytes read; at etp = 1 a quarter of that. Session 30's first fix split it by tp at
    any etp (T/4·k·D·2 at etp 4), fewer rows than its own experts ran."""
    ctx = _context("qwen3-30b-a3b", rl.cluster("dgx-h100"), None, "bf16", T, True, False,
                   "default")
    full = T * K * D * 2.0
    assert _q(_graph(ctx, 4, 1, 1, True), "layers.0.moe.combine")["in"] == \
        pytest.approx(full, rel=1e-12)
    assert _q(_graph(ctx, 4, 1, 1, True, 1), "layers.0.moe.combine")["in"] == \
        pytest.approx(full / 4, rel=1e-12)
    assert _q(_graph(ctx, 1, 1, 1, False), "layers.0.moe.combine")["in"] == \
        pytest.approx(full, rel=1e-12)


def test_shared_experts_keep_their_tp_pair() -> None:
    """A model with shared experts (DeepSeek-V3: the first 3 of 61 layers dense) keeps a tp
    all-reduce around every MLP block: 2·t_ar per layer; without them (Qwen3) only the
    attention's."""
    ctx = _context("deepseek-v3", rl.cluster("dgx-h100", nodes=4), None, "bf16", T, True, False,
                   "default")
    t_ar = coll.group_all_reduce(T * 7168 * 2.0, 4, 1.0, ctx.links, SCALAR)
    assert tp_pair(ctx, t_ar) == pytest.approx(2 * t_ar, rel=1e-12)
