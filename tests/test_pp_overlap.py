"""Pipeline sends behind compute (``train(pp_overlap=...)``, Megatron's overlap_p2p_comm in the
interleaved 1F1B schedule; training/stages.pp_exposed): the formula by hand, the launcher's
default, the bubble's blocking sends, the refusals and the CLI."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.ops.xp import SCALAR
from roofline.scenarios.training.stages import pp_exposed


def test_exposed_sends_by_hand() -> None:
    # t_p2p 3, forward 4 and backward 8 per micro-batch over v = 2 chunks (2 and 4 per chunk):
    # the forward chunk's send (3) behind a backward chunk (4): hidden; the backward chunk's
    # (3) behind a forward chunk (2): 1 shows. v x (0 + 1) = 2, against 2 v t = 12 blocking
    assert pp_exposed(12.0, 3.0, 4.0, 8.0, 2, True, SCALAR) == 2.0
    assert pp_exposed(12.0, 3.0, 4.0, 8.0, 2, False, SCALAR) == 12.0
    assert pp_exposed(12.0, 3.0, 4.0, 8.0, 2, None, SCALAR) == 2.0  # v > 1: on
    assert pp_exposed(6.0, 3.0, 4.0, 8.0, 1, None, SCALAR) == 6.0  # v = 1: off
    # compute shorter than the sends both ways: 2 x ((3 - 1) + (3 - 0.5)) = 9
    assert pp_exposed(12.0, 3.0, 1.0, 2.0, 2, True, SCALAR) == 9.0
    # the vectorised path (best_parallelism's) gives the same, per split
    got = pp_exposed(np.array([12.0, 6.0]), np.array([3.0, 3.0]), np.array([4.0, 4.0]),
                     np.array([8.0, 8.0]), np.array([2, 1]), None, np)
    assert got.tolist() == [2.0, 6.0]


def _slow_cluster(tmp_path, nodes: int):  # type: ignore[no-untyped-def]
    """DGX H100 nodes joined by a 0.5 GB/s network, so each pipeline send outlasts a chunk."""
    p = tmp_path / "slow.toml"
    p.write_text(
        'key = "slow"\nname = "Slow"\ndevice = "h100-sxm5"\n'
        'devices_per_node = { value = 8, unit = "1", source = "s" }\n'
        '[sources]\ns = "test"\n'
        '[scale_up]\nbandwidth = { value = 450, unit = "GB/s", source = "s" }\n'
        'latency = { value = 2, unit = "us", source = "s" }\n'
        '[scale_out]\nbandwidth = { value = 0.5, unit = "GB/s", source = "s" }\n'
        'latency = { value = 6, unit = "us", source = "s" }\n')
    return rl.cluster(str(p), nodes=nodes)


def test_train_overlaps_the_steady_state_sends_only(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """GPT-2 over 4 stages on 4 nodes, v = 3: every stage boundary crosses the slow network.
    Blocking, each micro-batch pays 2 v t_p2p; overlapped, v (t_p2p − B/v) + v (t_p2p − F/v)
    = 2 v t_p2p − (F + B): the step loses m (F + B) and the bubble is unchanged."""
    cl = _slow_cluster(tmp_path, 4)
    kw = dict(global_batch=64, seq_len=1024, pp=4, dp=8, interleave=3, recompute="none")
    off = rl.train("gpt2", cl, pp_overlap=False, **kw)
    on = rl.train("gpt2", cl, pp_overlap=True, **kw)
    m, v = off.microbatches, 3
    from roofline.scenarios.training.factors import training_factors

    # one send: 6 us + 1024 x 768 x 2 B at 0.5 GB/s x the fitted scale-out link efficiency
    eff = training_factors("gpu", "h100-sxm5").scale_out_efficiency
    t = off.breakdown["pp_comm"] / (2 * v * m)
    assert t == pytest.approx(6e-6 + 1024 * 768 * 2 / (0.5e9 * eff), rel=1e-9)
    f = off.breakdown["forward"] / m
    b = off.breakdown["backward"] / m
    assert t > b / v > f / v  # the sends outlast the chunks: partly hidden
    assert on.breakdown["pp_comm"] == pytest.approx(m * (2 * v * t - (f + b)), rel=1e-9)
    assert on.breakdown["bubble"] == pytest.approx(off.breakdown["bubble"], rel=1e-12)
    assert off.step_time - on.step_time == pytest.approx(m * (f + b), rel=1e-9)
    # the default is the launcher's: on with interleaving, off without
    assert rl.train("gpt2", cl, **kw).step_time == on.step_time
    plain = dict(kw, interleave=1)
    assert rl.train("gpt2", cl, **plain).step_time == \
        rl.train("gpt2", cl, pp_overlap=False, **plain).step_time


def test_search_ranks_with_the_launchers_default() -> None:
    """best_parallelism's vectorised rows price each split with the default (on where v > 1)
    as train() does."""
    t = rl.best_parallelism("llama-3.1-8b", rl.cluster("dgx-h100", nodes=2), global_batch=64,
                            seq_len=4096, top=400)
    rows = [r for r in t.to_dicts() if r["pp"] > 1 and r["interleave"] > 1][:3]
    assert rows
    for r in rows:
        one = rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=2), global_batch=64,
                       seq_len=4096, tp=r["tp"], pp=r["pp"], dp=r["dp"], ep=r["ep"],
                       micro_batch=r["micro_batch"], interleave=r["interleave"],
                       recompute=r["recompute"], zero=r["zero"])
        assert one.step_time == pytest.approx(r["step_time"], rel=1e-9)
        assert r["pp_overlap"] is one.pp_overlap is True  # the row records what was priced
    assert not any(r["pp_overlap"] for r in t.to_dicts() if r["pp"] == 1 or r["interleave"] == 1)


def test_search_takes_pp_overlap() -> None:
    """best_parallelism(pp_overlap=False) prices every split with blocking sends, as
    train(pp_overlap=False); True keeps only the interleaved splits; junk is refused."""
    c = rl.cluster("dgx-h100", nodes=2)
    kw = dict(global_batch=64, seq_len=4096, micro_batches=(1,), zeros=(1,),
              recomputes=("selective",), interleaves=(1, 2), top=None)
    off = rl.best_parallelism("llama-3.1-8b", c, pp_overlap=False, **kw).to_dicts()
    on = rl.best_parallelism("llama-3.1-8b", c, pp_overlap=True, **kw).to_dicts()
    assert on and all(r["pp"] > 1 and r["interleave"] > 1 for r in on)
    r = next(r for r in off if r["pp"] > 1 and r["interleave"] > 1)
    split = dict(tp=r["tp"], pp=r["pp"], dp=r["dp"], micro_batch=1,
                 interleave=r["interleave"], recompute="selective", zero=1)
    one = rl.train("llama-3.1-8b", c, global_batch=64, seq_len=4096, pp_overlap=False, **split)
    assert one.step_time == pytest.approx(r["step_time"], rel=1e-9)
    assert r["pp_overlap"] is one.pp_overlap is False and not any(x["pp_overlap"] for x in off)
    same = next(x for x in on if all(x[k] == r[k] for k in ("tp", "pp", "dp", "interleave")))
    assert same["step_time"] < r["step_time"]  # the steady-state sends partly hidden
    assert all(x["pp_overlap"] is True for x in on)
    with pytest.raises(RooflineError, match="pp_overlap must be True or False, got 1"):
        rl.best_parallelism("llama-3.1-8b", c, pp_overlap=1, **kw)


def test_refusals() -> None:
    c = rl.cluster("dgx-h100", nodes=2)
    kw = dict(global_batch=64, seq_len=1024, pp=4)
    with pytest.raises(SpecError, match=r"pp_overlap=True .* interleave >= 2, got pp=4, "
                                        r"interleave=1"):
        rl.train("llama-3.1-8b", c, pp_overlap=True, **kw)
    with pytest.raises(RooflineError, match="pp_overlap must be True or False, got 'yes'"):
        rl.train("llama-3.1-8b", c, pp_overlap="yes", interleave=2, **kw)
    with pytest.raises(SpecError, match="pp_overlap=False is modelled for decoder LMs only"):
        rl.train("resnet50", rl.cluster("dgx-h100", nodes=1), global_batch=256,
                 pp_overlap=False)


def test_cli_no_pp_overlap(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from roofline.cli import main

    argv = ["train", "llama-3.1-8b", "dgx-h100", "--nodes", "2", "--global-batch", "64",
            "--seq-len", "1024", "--pp", "4", "--interleave", "2", "--json"]
    kw = dict(global_batch=64, seq_len=1024, pp=4, interleave=2)
    c = rl.cluster("dgx-h100", nodes=2)
    assert main(argv + ["--no-pp-overlap"]) == 0
    off = json.loads(capsys.readouterr().out)
    assert off["step_time"] == pytest.approx(
        rl.train("llama-3.1-8b", c, pp_overlap=False, **kw).step_time, rel=1e-12)
    assert off["breakdown"]["pp_comm"] > 0
    assert main(argv) == 0
    on = json.loads(capsys.readouterr().out)
    assert on["step_time"] == pytest.approx(rl.train("llama-3.1-8b", c, **kw).step_time,
                                            rel=1e-12)
    assert on["step_time"] < off["step_time"]


def test_the_result_records_the_overlap(capsys: pytest.CaptureFixture[str]) -> None:
    """r.pp_overlap says whether the sends were overlapped: the launcher's default resolved
    (on with interleaving, off without), False when asked, False at pp = 1 and for a generic
    graph; in to_dict / --json and on the printed split line (pp > 1 only)."""
    import json

    from roofline.cli import main

    c = rl.cluster("dgx-h100", nodes=2)
    kw = dict(global_batch=64, seq_len=1024, pp=4)
    on = rl.train("llama-3.1-8b", c, interleave=2, **kw)
    off = rl.train("llama-3.1-8b", c, interleave=2, pp_overlap=False, **kw)
    plain = rl.train("llama-3.1-8b", c, **kw)  # interleave 1: Megatron's default is off
    assert (on.pp_overlap, off.pp_overlap, plain.pp_overlap) == (True, False, False)
    assert on.to_dict()["pp_overlap"] is True and off.to_dict()["pp_overlap"] is False
    assert "interleave=2 recompute=" in str(on)
    assert " pp_overlap=on" in str(on) and " pp_overlap=off" in str(off)
    assert " pp_overlap=off" in str(plain)
    one = rl.train("llama-3.1-8b", "dgx-h100", global_batch=8, seq_len=1024)
    assert one.pp_overlap is False and "pp_overlap" not in str(one)
    cnn = rl.train("resnet50", rl.cluster("dgx-h100", nodes=1), global_batch=256)
    assert cnn.pp_overlap is False and cnn.to_dict()["pp_overlap"] is False
    argv = ["train", "llama-3.1-8b", "dgx-h100", "--nodes", "2", "--global-batch", "64",
            "--seq-len", "1024", "--pp", "4", "--interleave", "2"]
    assert main(argv + ["--json"]) == 0
    assert json.loads(capsys.readouterr().out)["pp_overlap"] is True
    assert main(argv + ["--json", "--no-pp-overlap"]) == 0
    assert json.loads(capsys.readouterr().out)["pp_overlap"] is False
    assert main(argv) == 0
    assert "pp_overlap=on" in capsys.readouterr().out
