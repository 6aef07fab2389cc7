"""Unequal pipeline stages (training/stages.py): the default split, the argument rules, and the
step and memory of the slowest / fullest stage, against hand calculations."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.graphs.training import GROUPS
from roofline.scenarios.training.context import _context, _group_times
from roofline.scenarios.training.stages import StageLayout, default_stages, pipeline_stages

G = {g: i for i, g in enumerate(GROUPS)}


def test_default_split_puts_the_lighter_stages_at_the_ends() -> None:
    # 126 = 14·8 + 2·7 (Llama 3 405B over 16 stages: one layer fewer on the first and last)
    assert default_stages(126, 16) == (7,) + (8,) * 14 + (7,)
    # 70 = 10·6 + 2·5
    assert default_stages(70, 12) == (5,) + (6,) * 10 + (5,)
    # 9 = 2 + 2 + 3 + 2: three light stages: first, last, then the second
    assert default_stages(9, 4) == (2, 2, 3, 2)
    assert default_stages(96, 16) == (6,) * 16
    with pytest.raises(SpecError, match="at least 17 layers"):
        default_stages(16, 17)


def test_stage_rules() -> None:
    assert pipeline_stages(32, 4, (7, 9, 9, 7)) == (7, 9, 9, 7)
    with pytest.raises(SpecError, match="holds 31 layers"):
        pipeline_stages(32, 4, (7, 9, 8, 7))
    with pytest.raises(SpecError, match="4 stages but pp=2"):
        pipeline_stages(32, 2, (7, 9, 9, 7))
    with pytest.raises(SpecError, match="must divide the 8 layers"):
        pipeline_stages(32, 4, None, interleave=3)
    with pytest.raises(SpecError, match="at least 3 layers"):
        pipeline_stages(32, 4, (2, 10, 10, 10), interleave=3)
    assert pipeline_stages(32, 4, (6, 10, 10, 6), interleave=3) == (6, 10, 10, 6)


def test_layout_of_the_fullest_stage() -> None:
    # m = 8 micro-batches, 4 stages: stage i holds min(8, 4 − i) = 4, 3, 2, 1 in flight;
    # (6, 10, 8, 8): max(6·4, 10·3, 8·2, 8·1) = 30 layer-micro-batches = 7.5 × the first's 4
    lay = StageLayout.of((6, 10, 8, 8), 8)
    assert (lay.first, lay.last, lay.middle) == (6.0, 8.0, 10.0)
    assert lay.act_layers == pytest.approx(30 / 4)


def test_argument_rule_names_the_argument() -> None:
    with pytest.raises(RooflineError, match="pp_stages"):
        rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=8, seq_len=1024,
                 pp_stages=(8, 0, 24), dp=1, tp=2)


def _run(**kw):  # llama-3.1-8b (32 layers) on one DGX H100: tp 2, pp 4, dp 1, m = 8
    return rl.train("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), global_batch=8,
                    seq_len=1024, tp=2, dp=1, recompute="none", **kw)


def test_step_runs_at_the_slowest_stage() -> None:
    r = _run(pp_stages=(7, 9, 9, 7))
    assert r.pp == 4 and r.pp_stages == (7, 9, 9, 7)
    ctx = _context("llama-3.1-8b", rl.cluster("dgx-h100", nodes=1), None, "bf16", 1024, True,
                   False, "default")
    gt = _group_times(ctx, 2, 1, [1])[1]
    t_lf = gt[G["layer_fwd"]] + gt[G["layer_fwd_core"]] + gt[G["layer_fwd_op"]]
    t_lb = gt[G["layer_bwd"]] + gt[G["layer_bwd_dw"]] + gt[G["layer_bwd_dw_col"]]
    # per layer (no recompute): t_lf + t_lb (+ its TP comm, the same on every stage, left out
    # of the comparison); the three candidate stages
    t_layer = t_lf + t_lb
    first = 7 * t_layer + gt[G["embed_fwd"]] + gt[G["embed_bwd"]]
    last = 7 * t_layer + gt[G["head_fwd"]] + gt[G["head_bwd"]]
    middle = 9 * t_layer
    # Llama 3.1 8B's LM head (128,256 × 4,096) is ~2.4 layers of work: the last stage is slowest
    assert last > middle > first
    n_slow = 7
    assert r.breakdown["forward"] == pytest.approx(8 * (n_slow * t_lf + gt[G["head_fwd"]]))
    assert r.breakdown["backward"] == pytest.approx(8 * (n_slow * t_lb + gt[G["head_bwd"]]))
    # bubble = (pp − 1)/v × one micro-batch of the slowest stage
    t_mb = (r.breakdown["forward"] + r.breakdown["backward"] + r.breakdown["tp_comm"]
            + r.breakdown["pp_comm"]) / 8
    assert r.breakdown["bubble"] == pytest.approx(3 * t_mb)
    # a layout whose middle stages are heavier makes the middle the pace: 4 + 12 + 12 + 4
    r2 = _run(pp_stages=(4, 12, 12, 4))
    assert r2.breakdown["forward"] == pytest.approx(8 * 12 * t_lf)
    assert r2.step_time > r.step_time


def test_memory_of_the_fullest_stage() -> None:
    # activations ∝ max_i n_i · min(m, pp − i): (8, 8, 8, 8) → 8·4 = 32; (7, 9, 9, 7) →
    # max(28, 27, 18, 7) = 28; (6, 10, 8, 8) → max(24, 30, 16, 8) = 30
    eq, a, b = _run(pp=4), _run(pp_stages=(7, 9, 9, 7)), _run(pp_stages=(6, 10, 8, 8))
    assert eq.pp_stages == (8, 8, 8, 8)
    ae = eq.memory_per_device["activations"]
    assert a.memory_per_device["activations"] == pytest.approx(ae * 28 / 32)
    assert b.memory_per_device["activations"] == pytest.approx(ae * 30 / 32)


def test_pp_need_not_divide_the_layers() -> None:
    r = rl.train("llama-3.1-405b", rl.cluster("dgx-h100", nodes=1024), global_batch=2048,
                 seq_len=8192, tp=8, pp=16, dp=64, zero=2)
    assert r.pp_stages == (7,) + (8,) * 14 + (7,)
    assert "stages=[7, 8, 8" in str(r)
    # equal stages where pp divides: the former model, unchanged
    assert _run(pp=4).pp_stages == (8,) * 4
