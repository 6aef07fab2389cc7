"""Megatron-Core's pipeline layouts that count the embedding and the loss as layers
(``rl.train(pp_account_embedding=, pp_account_loss=, pp_layout=)``, training/stages.py
``megatron_stages`` / ``layout_stages``), against stage sizes counted by hand from
NVIDIA/Megatron-LM d98e8a64's ``get_num_layers_to_build`` and ``PipelineParallelLayerLayout``."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.graphs.training import GROUPS
from roofline.scenarios.training.context import _context, _group_times
from roofline.scenarios.training.stages import layout_stages, megatron_stages

G = {g: i for i, g in enumerate(GROUPS)}


def test_account_flags_by_hand() -> None:
    # Qwen3-235B-A22B's 94 layers at PP 32, VPP 3 (Megatron-Core's NCCL all-to-all recipe):
    # 94 + 1 + 1 = 96 slots, 3 a stage, 1 a chunk; the first chunk of stage 0 holds only the
    # embedding and the last chunk of stage 31 only the loss: 2, 3 × 30, 2 layers
    assert megatron_stages(94, 32, 3, True, True) == (2,) + (3,) * 30 + (2,)
    # 94 + 2 over PP 8: 12 slots a stage, 11 layers on each end stage (VPP 4: 3 a chunk)
    assert megatron_stages(94, 8, 4, True, True) == (11,) + (12,) * 6 + (11,)
    # the embedding only: 95 slots, 19 a stage over PP 5 -> 18, 19, 19, 19, 19
    assert megatron_stages(94, 5, 1, True, False) == (18, 19, 19, 19, 19)
    # the loss only: 32 + 1 = 33 over PP 3 -> 11, 11, 10
    assert megatron_stages(32, 3, 1, False, True) == (11, 11, 10)
    # one stage: the embedding and the loss take a slot each, every layer is built
    assert megatron_stages(32, 1, 1, True, True) == (32,)


def test_account_flags_refused_as_megatron_refuses() -> None:
    with pytest.raises(SpecError, match=r"pp_account_embedding=True, pp_account_loss=True: "
                       r"the layers \+ embedding \+ loss = 96 pipeline slots must divide "
                       r"evenly over pp=5 stages.*allowed pp: 1, 2, 3, 4, 6, 8, 12, 16"):
        megatron_stages(94, 5, 1, True, True)
    with pytest.raises(SpecError, match=r"the 12 slots of each stage .* must divide into "
                       r"interleave=5 model chunks"):
        megatron_stages(94, 8, 5, True, True)


def test_layout_string_by_hand() -> None:
    # Megatron's own example shape: "Et|(tt|)*46,tL" is 48 virtual stages in layer order
    # (E t | t t | … | t L); over PP 24 each stage holds chunks j and j + 24: stage 0 has
    # "Et" and "tt" (3 layers), stage 23 "tt" and "tL" (3), the others 4
    assert layout_stages("Et|(tt|)*46,tL", 94, 24, 1, True) == (
        (3,) + (4,) * 22 + (3,), 2)
    # the same string over PP 48: one chunk each, 1 layer on the end stages, 2 elsewhere
    assert layout_stages("Et|(tt|)*46,tL", 94, 48, 1, True) == ((1,) + (2,) * 46 + (1,), 1)
    # x*n repeats a letter; a stage of only the embedding is allowed (Megatron allows it)
    assert layout_stages("E|t*47|t*47|L", 94, 4, 1, True) == ((0, 47, 47, 0), 1)
    # the A2A recipe's layout written out: the same stages as the two account flags
    assert layout_stages("E|(t|)*94,L", 94, 32, 3, True) == (
        megatron_stages(94, 32, 3, True, True), 3)


@pytest.mark.parametrize("layout, pp, interleave, match", [
    ("Et|tL", 2, 1, r"pp_layout='Et\|tL' holds 2 transformer layers \(t\); the model has 94"),
    ("tE|(t|)*92,tL", 2, 1, r"the embedding \(E\) must appear once, first"),
    ("E|(t|)*93,tL|L", 2, 1, r"the loss \(L\) must appear once, last"),
    ("Ex|(t|)*94,L", 2, 1, r"'x' is not a layer; allowed: E \(the embedding\)"),
    ("E|(t|)*94,mL", 2, 1, r"multi-token-prediction layers \(m\) are not modelled"),
    ("E|(t|)*94,L", 5, 1, r"96 virtual stages; pp=5 must divide them"),
    ("E|(t|)*94,L", 32, 2, r"96 virtual stages over pp=32 are 3 model chunks per stage, but "
                           r"interleave=2"),
    ("E|(t|)*94,L", 1, 1, r"96 virtual stages and pp=1 \(given or the default\).* give pp, "
                          r"one of \[2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 96\]"),
])
def test_bad_layouts_name_the_argument(layout: str, pp: int, interleave: int,
                                       match: str) -> None:
    with pytest.raises(SpecError, match=match):
        layout_stages(layout, 94, pp, interleave, pp > 1)


def test_train_with_pp_1_and_a_layout_names_both() -> None:
    """rl.train(pp=1, pp_layout=...) of several virtual stages: the message named the layout
    and said 'give pp', though pp=1 may have been given; it now names pp=1 and the pp values
    that divide the layout's stages."""
    with pytest.raises(SpecError, match=r"pp_layout='Et\*16\|t\*16L' has 2 virtual stages and "
                       r"pp=1 .*give pp, one of \[2\]"):
        rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=4096, pp=1,
                 pp_layout="Et*16|t*16L")


ROW = dict(global_batch=2048, seq_len=4096, tp=2, pp=32, ep=8, etp=1, recompute="none")


def test_train_prices_the_layout() -> None:
    """rl.train with the two flags and with the layout string prices the same split; without
    them Qwen3-235B's 94 layers over 32 stages default to (2, 3 × 30, 2) too but cannot run
    interleaved (2 layers cannot make 3 chunks): the layout is what makes VPP 3 expressible."""
    cl = rl.cluster("dgx-h100", nodes=32)
    a = rl.train("qwen3-235b-a22b", cl, interleave=3, pp_account_embedding=True,
                 pp_account_loss=True, **ROW)
    b = rl.train("qwen3-235b-a22b", cl, pp_layout="E|(t|)*94,L", **ROW)
    assert a.pp_stages == b.pp_stages == (2,) + (3,) * 30 + (2,)
    assert b.interleave == 3 and a.step_time == b.step_time
    with pytest.raises(SpecError, match="interleave=3 model chunks need at least 3 layers"):
        rl.train("qwen3-235b-a22b", cl, interleave=3, **ROW)
    # the pace: the last stage, 2 layers + the 151,936-wide LM head (more than a layer of work),
    # over a middle stage's 3 layers; m = 2048 / dp 4 = 512 micro-batches
    ctx = _context("qwen3-235b-a22b", cl, None, "bf16", 4096, True, False, "default")
    gt = _group_times(ctx, 2, 8, [1], True, 1)[1]
    t_lf = gt[G["layer_fwd"]] + gt[G["layer_fwd_core"]] + gt[G["layer_fwd_op"]]
    assert gt[G["head_fwd"]] > t_lf
    assert a.breakdown["forward"] == pytest.approx(512 * (2 * t_lf + gt[G["head_fwd"]]),
                                                   rel=1e-9)
    with pytest.raises(RooflineError, match="pp_stages and pp_account_embedding"):
        rl.train("qwen3-235b-a22b", cl, pp_stages=(47, 47), pp_account_loss=True,
                 **dict(ROW, pp=2))
    with pytest.raises(RooflineError, match="pp_account_embedding/pp_account_loss and "
                       "pp_layout"):
        rl.train("qwen3-235b-a22b", cl, pp_layout="E|(t|)*94,L", pp_account_loss=True, **ROW)
    with pytest.raises(RooflineError, match="pp_layout"):
        rl.train("resnet-50", "dgx-h100", global_batch=256, pp_layout="E|t|L")


def test_cli_layout(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    argv = ["train", "qwen3-235b-a22b", "dgx-h100", "--nodes", "32", "--global-batch", "2048",
            "--seq-len", "4096", "--tp", "2", "--pp", "32", "--ep", "8", "--etp", "1",
            "--recompute", "none", "--format", "json"]
    assert main(argv + ["--pp-layout", "E|(t|)*94,L"]) == 0
    import json

    d = json.loads(capsys.readouterr().out)
    r = rl.train("qwen3-235b-a22b", rl.cluster("dgx-h100", nodes=32), interleave=3,
                 pp_account_embedding=True, pp_account_loss=True, **ROW)
    assert d["step_time"] == pytest.approx(r.step_time, rel=1e-12)
    assert main(argv + ["--interleave", "3", "--pp-account-embedding",
                        "--pp-account-loss"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time"] == pytest.approx(r.step_time)
    with pytest.raises(SystemExit, match="--search prices equal stages"):
        main(argv[:9] + ["--search", "--pp-account-loss"])


@pytest.mark.parametrize("layout", ["Et*10000000000|L", "E(t*100000)*100000|L",
                                    "E(t*100000|)*100000L"])
def test_huge_repetition_refused_before_unrolling(layout: str) -> None:
    """A repetition count that would unroll to billions of letters is a SpecError naming
    pp_layout and the limit, found before the string is built (it was built: gigabytes of
    memory, or a MemoryError, before the layer count was checked)."""
    with pytest.raises(SpecError, match=r"pp_layout=.*unrolls to more than 1,000,000"):
        layout_stages(layout, 94, 2, 1, True)
