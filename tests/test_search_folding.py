"""``best_parallelism(etps=...)`` and ``roofline train --search --etp``: the parallel search over
MoE parallel folding (scenarios/training/search.py, folding.py). The vectorised search prices
every folded candidate as ``rl.train`` prices it, and finds the folded layout a hand
calculation says beats its unfolded twin."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError
from roofline.ops.training_formulas import moe_dispatch_ranks
from roofline.scenarios.training.context import _context

T, D, E, K = 4096, 4096, 128, 8  # Qwen3-235B-A22B: model width, experts, top-k


def test_every_folded_candidate_priced_as_train_prices_it() -> None:
    """Qwen3-30B-A3B on one DGX H100 with etp searched over 1, 2, 4, 8: every row of the
    vectorised search, feasible or not, is the one-split path's step time, memory and MFU."""
    kw = dict(global_batch=64, seq_len=4096)
    t = rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", micro_batches=(1, 2),
                            recomputes=("selective", "full"), zeros=(1, 3), top=None,
                            include_infeasible=True, etps=(1, 2, 4, 8), **kw)
    rows = t.to_dicts()
    folded = [r for r in rows if r["etp"] != r["tp"]]
    assert len(rows) > 500 and len(folded) > 300
    # etp > tp is a layout Megatron-Core allows (etp·ep divides tp·dp): searched too
    assert any(r["etp"] > r["tp"] for r in rows)
    for r in rows:
        assert (r["tp"] * r["dp"]) % (r["etp"] * r["ep"]) == 0  # the folding rule
        x = rl.train("qwen3-30b-a3b", "dgx-h100", tp=r["tp"], pp=r["pp"], dp=r["dp"],
                     ep=r["ep"], etp=r["etp"], micro_batch=r["micro_batch"],
                     interleave=r["interleave"], recompute=r["recompute"], zero=r["zero"], **kw)
        assert x.step_time == pytest.approx(r["step_time"], rel=1e-9)
        assert x.memory_per_device["total"] == pytest.approx(r["memory"], rel=1e-9)
        assert x.mfu == pytest.approx(r["mfu"], rel=1e-9)
        assert x.feasible == r["fits"]


def test_default_search_unchanged_and_etp_equal_tp() -> None:
    """Without ``etps`` the search is the unfolded one (etp = tp on every row, ep dividing dp);
    with ``etps`` listing every tp, its rows include all of the default's at the same prices."""
    kw = dict(global_batch=64, seq_len=4096, micro_batches=(1,), recomputes=("selective",),
              zeros=(1,), top=None, include_infeasible=True)
    a = rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", **kw)
    b = rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", etps=(1, 2, 4, 8), **kw)
    assert all(r["etp"] == r["tp"] and r["dp"] % r["ep"] == 0 for r in a.to_dicts())
    key = ("tp", "pp", "dp", "ep", "etp", "interleave")
    priced = {tuple(r[k] for k in key): r["step_time"] for r in b.to_dicts()}
    for r in a.to_dicts():
        assert priced[tuple(r[k] for k in key)] == pytest.approx(r["step_time"], rel=1e-12)
    assert len(b) > len(a)


def _exchange(links, etp: int, ep: int) -> float:  # type: ignore[no-untyped-def]
    """One dispatch (or combine) of a rank's 1,024 tokens (one 4,096-token sequence over tp 4)
    by hand, for an expert-parallel group of 16 = etp·ep consecutive ranks on two DGX nodes
    (collectives.group_dispatch): forwarded on NVLink to etp × the distinct expert-parallel
    ranks per token (7 hops inside a node, 15/16 of it leaves the rank), and across
    InfiniBand once per other node holding one of its experts (the other of the 2 nodes, half
    the experts each)."""
    tok = T / 4 * D * 2.0
    up = 7 * links.up_alpha + 15 / 16 * tok * etp * moe_dispatch_ranks(E, K, ep) / links.up_bw
    out = links.out_alpha + 1 / 2 * tok * moe_dispatch_ranks(E, K, 2) / links.out_bw
    return max(up, out)


def test_search_finds_the_folded_layout_by_hand() -> None:
    """Qwen3-235B-A22B on 256 H100 (32 DGX nodes), tp 4 × pp 2 × dp 32, searched with etp 1
    or 4. Two layouts split the experts 16 ways: unfolded etp 4 × ep 4 and folded etp 1 ×
    ep 16. They hold the same parameters per rank (16 experts' quarters, or 8 whole experts)
    and run the same expert FLOPs (the unfolded one keeps more activations and does not fit);
    both expert groups are 16 consecutive ranks on two nodes.
    By hand (``_exchange``), the flex dispatcher sends each token to etp × the distinct
    expert-parallel ranks: 4 × 3.6 copies unfolded, 6.6 folded, so per step (64 micro-batches,
    47 layers a stage, 4 exchanges a layer, no recompute) the folded exchange is shorter by
    64·47·4·(a₄ − a₁). The search must rank the folded layout above its unfolded twin by at
    least that (the whole experts' wider GEMMs are no slower), and first overall."""
    cl = rl.cluster("dgx-h100", nodes=32)
    t = rl.best_parallelism("qwen3-235b-a22b", cl, global_batch=2048, seq_len=T,
                            micro_batches=(1,), recomputes=("none",), zeros=(1,),
                            interleaves=(1,), max_tp=4, etps=(1, 4), top=None)
    rows = {(r["tp"], r["pp"], r["dp"], r["ep"], r["etp"]): r for r in t.to_dicts()}
    best = t.to_dicts()[0]
    assert (best["tp"], best["pp"], best["dp"], best["ep"], best["etp"]) == (4, 2, 32, 16, 1)
    assert (4, 2, 32, 4, 4) not in rows  # the twin does not fit (below)
    t_all = rl.best_parallelism("qwen3-235b-a22b", cl, global_batch=2048, seq_len=T,
                                micro_batches=(1,), recomputes=("none",), zeros=(1,),
                                interleaves=(1,), max_tp=4, etps=(1, 4), top=None,
                                include_infeasible=True)
    twin = {(r["tp"], r["pp"], r["dp"], r["ep"], r["etp"]): r
            for r in t_all.to_dicts()}[(4, 2, 32, 4, 4)]
    # the same parameters, but at etp 4 a rank's experts run (and keep the D-wide inputs of)
    # all T·k rows of its tp group, at etp 1 a quarter: 3/4 · 8 · 2 · 4,096 bytes more per
    # token and layer, 4,096 tokens, 47 layers, 2 micro-batches in flight on the first stage
    # (session 31; counted equal before)
    extra = 0.75 * K * 2 * D * T * 47 * 2
    assert twin["memory"] - best["memory"] == pytest.approx(extra, rel=1e-9)
    assert not twin["fits"]
    links = _context("qwen3-235b-a22b", cl, None, "bf16", T, True, False, "default").links
    a1, a4 = _exchange(links, 1, 16), _exchange(links, 4, 4)
    assert a4 > 1.5 * a1
    saving = 64 * 47 * 4 * (a4 - a1)
    assert twin["step_time"] - best["step_time"] >= saving
    r = rl.train("qwen3-235b-a22b", cl, global_batch=2048, seq_len=T, tp=4, pp=2, ep=16,
                 etp=1, recompute="none", zero=1)
    assert r.breakdown["ep_comm"] == pytest.approx(64 * 47 * 4 * a1, rel=1e-9)
    # unfolded, the best split keeps ep dividing dp and is slower
    u = rl.best_parallelism("qwen3-235b-a22b", cl, global_batch=2048, seq_len=T,
                            micro_batches=(1,), recomputes=("none",), zeros=(1,),
                            interleaves=(1,), max_tp=4, top=1).to_dicts()[0]
    assert u["step_time"] > best["step_time"] and u["etp"] == u["tp"]
    # the twin does not fit (session 31): ETP 4 × EP 8 (docs/training.md)
    assert (u["tp"], u["pp"], u["dp"], u["ep"]) == (4, 2, 32, 8)


def test_etps_refused_where_they_cannot_apply() -> None:
    with pytest.raises(RooflineError, match=r"etps=\[2\].*no experts"):
        rl.best_parallelism("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=1024, etps=(2,))
    with pytest.raises(RooflineError, match=r"etps=\[5\]: etp=5 must divide the expert width"):
        rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", global_batch=8, seq_len=1024,
                            etps=(5,))
    with pytest.raises(RooflineError, match="etps"):
        rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", global_batch=8, seq_len=1024,
                            etps=(0,))
    # one size of several that cannot split the experts is refused too, not dropped (a search
    # over (1, 5) returned etp-1 rows only, as if 5 had been searched)
    with pytest.raises(RooflineError, match=r"etps=\[1, 5\]: etp=5 must divide the expert width "
                       r"768 .*allowed etp: 1, 2, 3, 4"):
        rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", global_batch=8, seq_len=1024,
                            etps=(1, 5))


def test_etps_with_no_split_on_the_cluster_named() -> None:
    """etps that split the experts but no tp·dp of the cluster (etp·ep must divide a stage's
    ranks): the refusal names them, the rule and the sizes that can (it said only 'no valid
    split ... micro-batches'); a batch that stops every split names the etps too."""
    with pytest.raises(RooflineError, match=r"etps=\[16\]: no split of Mixtral.* on 8 devices "
                       r"with tp up to max_tp=8 .*etp·ep must divide .*allowed etps here: "
                       r"\[1, 2, 4, 8\]"):
        rl.best_parallelism("mixtral-8x7b", "dgx-h100", global_batch=64, seq_len=4096,
                            etps=(16,))
    with pytest.raises(RooflineError, match=r"global_batch=1 .* and etps=\[2\]"):
        rl.best_parallelism("mixtral-8x7b", "dgx-h100", global_batch=1, seq_len=4096,
                            etps=(2,), micro_batches=(2,))


def test_cli_search_etp(capsys: pytest.CaptureFixture[str]) -> None:
    """``--search --etp 1,2``: the sizes searched (one value fixes it), an etp column; a list
    without --search is refused (one split has one etp)."""
    from roofline.cli import main

    argv = ["train", "qwen3-30b-a3b", "dgx-h100", "--global-batch", "64", "--seq-len", "4096",
            "--top", "5"]
    assert main(argv + ["--search", "--etp", "1,2", "--format", "json"]) == 0
    import json

    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and {r["etp"] for r in rows} <= {1, 2}
    t = rl.best_parallelism("qwen3-30b-a3b", "dgx-h100", global_batch=64, seq_len=4096, top=5,
                            etps=(1, 2))
    assert np.allclose([r["step_time"] for r in rows], list(t["step_time"]), rtol=1e-12)
    assert main(argv + ["--search", "--etp", "1", "--format", "json"]) == 0
    assert {r["etp"] for r in json.loads(capsys.readouterr().out)["rows"]} == {1}
    with pytest.raises(SystemExit, match="a list is searched with --search"):
        main(argv + ["--etp", "1,2"])


def test_folded_candidates_across_nodes_with_alltoall_priced_as_train_prices_them() -> None:
    """The same agreement on two DGX H100 nodes (expert groups crossing the InfiniBand) with the
    alltoall dispatcher, whose expert-TP pair the vectorised path prices on the etp column
    (folding.expert_pair): every row's step time, memory and feasibility are rl.train's."""
    kw = dict(global_batch=64, seq_len=4096, moe_dispatcher="alltoall")
    cl = rl.cluster("dgx-h100", nodes=2)
    t = rl.best_parallelism("qwen3-30b-a3b", cl, micro_batches=(1,), recomputes=("selective",),
                            zeros=(1,), top=None, include_infeasible=True, etps=(1, 2, 4, 8),
                            **kw)
    rows = t.to_dicts()
    assert any(r["etp"] * r["ep"] > 8 for r in rows)  # an expert group over both nodes
    assert any(1 < r["etp"] != r["tp"] for r in rows)  # the expert-TP pair on a folded row
    assert len({r["fits"] for r in rows}) == 2
    for r in rows:
        x = rl.train("qwen3-30b-a3b", cl, tp=r["tp"], pp=r["pp"], dp=r["dp"], ep=r["ep"],
                     etp=r["etp"], micro_batch=r["micro_batch"], interleave=r["interleave"],
                     recompute=r["recompute"], zero=r["zero"], **kw)
        assert x.step_time == pytest.approx(r["step_time"], rel=1e-9)
        assert x.memory_per_device["total"] == pytest.approx(r["memory"], rel=1e-9)
        assert x.feasible == r["fits"]
