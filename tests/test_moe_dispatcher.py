"""Megatron-Core's MoE token dispatchers (``rl.train(moe_dispatcher=...)``), counted from
megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM d98e8a64: the alltoall
dispatcher's exchange and its expert-TP collectives against hand counts, the flex default
unchanged, the refusals. Qwen3-30B-A3B (D 2048, 128 experts, top-8, every one of 48 layers
MoE, no shared expert) at one sequence of 4,096 tokens a micro-batch."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.ops import collectives as coll
from roofline.ops.xp import SCALAR
from roofline.scenarios.training.context import _context
from roofline.scenarios.training.folding import fold_terms

T, D, E, K, L = 4096, 2048, 128, 8, 48
# 32 H100 (4 DGX nodes): tp 4, ep 8, dp 8, 4 micro-batches of one sequence, no recompute
KW = dict(global_batch=32, seq_len=T, micro_batch=1, tp=4, ep=8, recompute="none")


def _ctx(dispatcher: str | None, nodes: int = 4):  # type: ignore[no-untyped-def]
    return _context("qwen3-30b-a3b", rl.cluster("dgx-h100", nodes=nodes), None, "bf16", T, True,
                    False, "default", moe_dispatcher=dispatcher)


def _cl():  # type: ignore[no-untyped-def]
    return rl.cluster("dgx-h100", nodes=4)


def test_alltoall_exchange_by_hand() -> None:
    """Alltoall at etp = tp = 4: each rank sends k = 8 copies of its T/tp = 1,024 tokens ×
    2,048 × 2 bytes (one per selected expert) in an all-to-all over its 8 EP ranks spaced 4
    apart: ranks 0, 4, …, 28, two on each of four nodes: 1/8 of the bytes to the peer on its
    node over NVLink (1 latency), 6/8 to the six on other nodes over InfiniBand (6), which
    binds; 4 a layer (dispatch, combine; forward, backward), 48 layers, 4 micro-batches. At
    etp 1 the 8 EP ranks are one node's: NVLink, 7 latencies + 7/8 of the bytes."""
    lk = _ctx("alltoall").links
    n = K * T / 4 * D * 2.0
    a = max(lk.up_alpha + n / 8 / lk.up_bw, 6 * lk.out_alpha + 6 / 8 * n / lk.out_bw)
    assert a == 6 * lk.out_alpha + 6 / 8 * n / lk.out_bw
    r = rl.train("qwen3-30b-a3b", _cl(), moe_dispatcher="alltoall", **KW)
    assert r.breakdown["ep_comm"] == pytest.approx(4 * L * 4 * a, rel=1e-9)
    r1 = rl.train("qwen3-30b-a3b", _cl(), moe_dispatcher="alltoall", etp=1, **KW)
    a1 = 7 * lk.up_alpha + 7 / 8 * n / lk.up_bw
    assert r1.breakdown["ep_comm"] == pytest.approx(4 * L * 4 * a1, rel=1e-9)


def test_alltoall_expert_tp_pair_by_hand() -> None:
    """With expert TP 4 the alltoall dispatcher all-gathers the received copies over the 4
    expert-TP ranks and reduce-scatters the experts' outputs back: the gathered tensor is
    etp/tp × T·k = 32,768 rows × 2,048 × 2 bytes = 128 MiB, per pass (forward, backward). The
    flex dispatcher has no such pair (only the attention's); at etp 1 neither has one."""
    a2a, flex = _ctx("alltoall"), _ctx(None)
    n_act = T * D * 2.0
    pair_a = fold_terms(a2a, n_act, 4, 1.0, 8, None, SCALAR, T * D)[0]
    pair_f = fold_terms(flex, n_act, 4, 1.0, 8, None, SCALAR, T * D)[0]
    n = 4 / 4 * T * K * D * 2.0
    assert n == 128 * 2**20
    assert pair_a - pair_f == pytest.approx(
        coll.group_all_gather(n, 4, 1, a2a.links, SCALAR)
        + coll.group_reduce_scatter(n, 4, 1, a2a.links, SCALAR), rel=1e-12)
    assert pair_a > pair_f
    # etp 2 under tp 4: half the rows, gathered over 2 ranks
    half = fold_terms(a2a, n_act, 4, 1.0, 8, 2, SCALAR, T * D)[0]
    assert half - pair_f == pytest.approx(
        coll.group_all_gather(n / 2, 2, 1, a2a.links, SCALAR)
        + coll.group_reduce_scatter(n / 2, 2, 1, a2a.links, SCALAR), rel=1e-12)
    assert fold_terms(a2a, n_act, 4, 1.0, 8, 1, SCALAR, T * D)[0] == pytest.approx(pair_f)


def test_default_is_flex_unchanged() -> None:
    """Unset, the knob prices the flex dispatcher (session 30's pricing): the same result as
    ``moe_dispatcher="flex"`` to the byte; alltoall differs (k copies against DeepEP's one per
    rank reached, and the expert-TP pair)."""
    r = rl.train("qwen3-30b-a3b", _cl(), **KW)
    f = rl.train("qwen3-30b-a3b", _cl(), moe_dispatcher="flex", **KW)
    a = rl.train("qwen3-30b-a3b", _cl(), moe_dispatcher="alltoall", **KW)
    assert repr(r.to_dict()) == repr(f.to_dict())
    assert a.breakdown["ep_comm"] > r.breakdown["ep_comm"]
    assert a.breakdown["tp_comm"] > r.breakdown["tp_comm"]
    # the graphs are the dispatcher's neither: compute is the same
    assert a.breakdown["forward"] == r.breakdown["forward"]


def test_dispatcher_argument_checked() -> None:
    """A bad value names the argument and the choices; flex asked for where its expert-TP × EP
    group is one rank is refused (Megatron-Core asserts it), unset it is not; a dense model
    refuses the knob."""
    one = dict(global_batch=8, seq_len=T, micro_batch=1)
    with pytest.raises(RooflineError, match="moe_dispatcher='deepep'"):
        rl.train("qwen3-30b-a3b", "dgx-h100", ep=8, moe_dispatcher="deepep", **one)
    with pytest.raises(SpecError, match=r"moe_dispatcher='flex' with etp·ep = 1·1 = 1"):
        rl.train("qwen3-30b-a3b", "dgx-h100", moe_dispatcher="flex", **one)
    rl.train("qwen3-30b-a3b", "dgx-h100", **one)  # unset: priced (nothing to exchange)
    rl.train("qwen3-30b-a3b", "dgx-h100", moe_dispatcher="alltoall", **one)
    with pytest.raises(SpecError, match="llama-3.1-8b|Llama"):
        rl.train("llama-3.1-8b", "dgx-h100", moe_dispatcher="alltoall", **one)
    with pytest.raises(SpecError, match="has no experts"):
        rl.best_parallelism("llama-3.1-8b", "dgx-h100", moe_dispatcher="flex", global_batch=8,
                            seq_len=T)


def test_search_takes_the_dispatcher() -> None:
    """``best_parallelism(moe_dispatcher=)``: flex leaves out the splits whose expert-TP × EP
    group is one rank; alltoall prices the same splits as the default, each at least as slow
    here (k copies against the ranks reached)."""
    kw = dict(global_batch=64, seq_len=T, micro_batches=(1,), recomputes=("full",), zeros=(1,),
              interleaves=(1,), include_infeasible=True)
    base = rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", **kw)
    flex = rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", moe_dispatcher="flex", **kw)
    a2a = rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", moe_dispatcher="alltoall", **kw)

    def rows(t):  # type: ignore[no-untyped-def]
        return {(r["tp"], r["pp"], r["ep"]): r["step_time"] for r in t.to_dicts()}

    b, f, a = rows(base), rows(flex), rows(a2a)
    assert set(f) == {k for k in b if k[0] * k[2] > 1} and len(f) < len(b)
    assert all(f[k] == b[k] for k in f)
    assert set(a) == set(b) and all(a[k] >= b[k] for k in b)
    assert any(a[k] > b[k] for k in b)


def test_cli_moe_dispatcher(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    argv = ["train", "qwen3-30b-a3b", "dgx-h100", "--global-batch", "8", "--seq-len", "4096",
            "--ep", "8", "--zero", "3", "--recompute", "full", "--json"]
    assert main(argv) == 0
    default = capsys.readouterr().out
    assert main(argv + ["--moe-dispatcher", "flex"]) == 0
    assert capsys.readouterr().out == default
    assert main(argv + ["--moe-dispatcher", "alltoall"]) == 0
    assert capsys.readouterr().out != default
    with pytest.raises(SystemExit):
        main(argv + ["--moe-dispatcher", "deepep"])


def test_alltoall_expert_tp_pair_exposed_in_backward() -> None:
    """The alltoall dispatcher's expert-TP pair is its own autograd nodes around the experts:
    in the backward the combine's reduce-scatter becomes an all-gather the experts' first
    backward GEMM waits for, and the dispatch's all-gather a reduce-scatter that runs after the
    experts' backward (dgrad and wgrad) has returned, feeding the return all-to-all
    (``gather_from_sequence_parallel_region`` / ``reduce_scatter_to_sequence_parallel_region``,
    token_dispatcher.py at d98e8a64). No weight-gradient GEMM runs beside it, so it is exposed
    in both passes, not hidden behind the column-parallel weight gradients as the attention's
    pair is. By hand: alltoall's tp_comm exceeds flex's (no expert pair) by the pair twice a
    layer (forward, backward), 48 layers, 4 micro-batches, no recompute."""
    a2a = _ctx("alltoall")
    n = T * K * D * 2.0  # etp/tp × T·k rows × D × 2 bytes, etp = tp = 4
    pair = coll.group_all_gather(n, 4, 1, a2a.links, SCALAR) \
        + coll.group_reduce_scatter(n, 4, 1, a2a.links, SCALAR)
    f = rl.train("qwen3-30b-a3b", _cl(), **KW)
    a = rl.train("qwen3-30b-a3b", _cl(), moe_dispatcher="alltoall", **KW)
    assert a.breakdown["tp_comm"] - f.breakdown["tp_comm"] == pytest.approx(
        2 * L * 4 * pair, rel=1e-9)
