"""docs/validation/training-runs.md, "Full recompute in llm-foundry's runs": llm-foundry's own
rows of one model with and without full checkpointing, priced as run and without recompute
(roofline.validation.foundry_ckpt). Nothing is fitted to them; the tests hold the generated
table and figures to the code, the share to its definition, and the rows to their sources."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from roofline.validation import foundry_ckpt as v
from roofline.validation.regenerate import quoted_figures

DOC = Path(__file__).parents[2] / "docs" / "validation" / "training-runs.md"


@pytest.fixture(scope="module")
def rows():
    return v.ckpt_rows()


def test_rows_cite_their_table_and_batches_add_up() -> None:
    d = v._data()
    assert d["row"] and set(d["sources"]) == {r["source"] for r in d["row"]}
    for r in d["row"]:
        # the row's 'where' quotes the columns the row carries
        assert f"MicroBatchSize {r['micro_batch']}," in r["where"]
        assert f"GradAccum {r['grad_accum']}," in r["where"]
        assert f": {r['tok_s_gpu']} T/s/GPU" in r["where"]
        assert f"Checkpointing {r['checkpointing']}," in r["where"]
        assert f", {r['gpus']} GPUs," in r["where"]
        gbs = int(re.search(r"GlobalBatchSize (\d+)", r["where"]).group(1))
        assert gbs == r["micro_batch"] * r["grad_accum"] * r["gpus"]
        # the table's HFU counts four forwards for a checkpointed row, three otherwise
        ratio = 4 / 3 if r["checkpointing"] else 1.0
        assert r["hfu"] == pytest.approx(r["mfu"] * ratio, abs=0.02)


# Every MPT-7B / MPT-13B row on 8 GPUs at up to 8,192 tokens in the two tables
# (llm-foundry scripts/train/benchmarking/README.md at b2a43a147, read by hand): (GPU,
# model, tokens, Activation Checkpointing). The data file holds all of them, not a pick.
_SOURCE_ROWS = {
    ("dgx-h100", "13b", 4096, True), ("dgx-h100", "13b", 2048, False),
    ("dgx-h100", "13b", 1024, True), ("dgx-h100", "7b", 8192, True),
    ("dgx-h100", "7b", 4096, True), ("dgx-h100", "7b", 2048, False),
    ("dgx-h100", "7b", 1024, True),
    ("dgx-a100", "13b", 8192, True), ("dgx-a100", "13b", 4096, True),
    ("dgx-a100", "13b", 2048, False), ("dgx-a100", "13b", 1024, True),
    ("dgx-a100", "7b", 8192, True), ("dgx-a100", "7b", 4096, True),
    ("dgx-a100", "7b", 2048, False), ("dgx-a100", "7b", 1024, True)}


def test_rows_are_every_row_of_the_selection() -> None:
    got = [(r["cluster"], r["model"], r["seq_len"], r["checkpointing"]) for r in v._data()["row"]]
    assert len(got) == len(set(got)) and set(got) == _SOURCE_ROWS


def test_bad_data_is_refused_by_name() -> None:
    import copy

    good = v._data()
    for key, bad in (("cluster", "dgx-b200"), ("model", "30b"), ("source", "nowhere"),
                     ("gpus", 12), ("gpus", 0), ("gpus", 8.0)):
        d = copy.deepcopy(good)
        d["row"][0][key] = bad
        with pytest.raises(ValueError, match=re.escape(f"{key}={bad!r}; allowed: ")):
            v._checked(d)
    d = copy.deepcopy(good)  # a second run without checkpointing for H100 MPT-7B
    d["row"][1]["checkpointing"] = False
    with pytest.raises(ValueError, match="dgx-h100 7b has 2 rows without checkpointing"):
        v._checked(d)
    d = copy.deepcopy(good)  # no checkpointed run left for H100 MPT-13B
    d["row"] = [r for r in d["row"] if (r["cluster"], r["model"], r["checkpointing"])
                != ("dgx-h100", "13b", True)]
    with pytest.raises(ValueError, match="dgx-h100 13b has 1 rows without .* and 0 with it"):
        v._checked(d)
    assert v._checked(copy.deepcopy(good)) == good


def test_share_by_gpu_and_length(rows) -> None:
    """The page's per-GPU and A100 by-length share figures are spans of the table's shares."""
    f = v.ckpt_figures(rows)
    for g in ("H100", "A100"):
        s = [r["share"] for r in rows if r["gpu"] == g and r["checkpointing"]]
        assert f[f"trc.share.{g.lower()}.range"] == f"{min(s):.2f} to {max(s):.2f}"
    a = [r for r in rows if r["gpu"] == "A100" and r["checkpointing"]]
    s8 = [r["share"] for r in a if r["seq_len"] == 8192]
    assert len(s8) == 2 and f["trc.share.a100.long"] == f"{min(s8):.2f} to {max(s8):.2f}"
    assert f["trc.share.a100.long_len"] == "8,192 tokens"


def test_share_is_its_definition(rows) -> None:
    """share = 1 at our full-recompute price, 0 at our no-recompute price; recompute costs time."""
    full = [r for r in rows if r["checkpointing"]]
    assert full and all(r["share"] is None for r in rows if not r["checkpointing"])
    for r in full:
        assert r["ours"] < r["ours_none"]
        t, t0, t1 = 1 / r["published"], 1 / r["ours_none"], 1 / r["ours"]
        assert r["share"] == pytest.approx((t - t0) / (t1 - t0))
        assert t0 + r["share"] * (t1 - t0) == pytest.approx(t)


def test_page_block_and_figures_are_the_codes(rows) -> None:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- ckpt: .*? -->\n(.*?)\n<!-- end ckpt -->", text, re.S)
    assert block is not None and block.group(1) == v.ckpt_table(rows)
    quoted, stale = quoted_figures(text, v.ckpt_figures(rows))
    assert len(quoted) >= 10 and not stale, stale


def test_hfu_bound_by_hand() -> None:
    """The A100 bound: the HFU column times the 312 TFLOP/s peak; the work done, the published
    2,330 tokens/s/GPU times the hardware FLOPs per token counted by hand (the blocks' forward
    twice, the LM head's once), over MAMF's 271.2 TFLOP/s."""
    b = v.hfu_bound()
    assert (b["model"], b["seq_len"], b["tok_s_gpu"]) == ("13b", 1024, 2330)
    assert b["hfu"] == pytest.approx(0.793)
    assert b["peak"] == pytest.approx(312e12) and b["mamf"] == pytest.approx(271.2e12)
    assert b["rate"] == pytest.approx(0.793 * 312e12)
    # MPT-13B forward per token (as test_pairs_by_hand: L 40, d 5120, V 50368, s 1,024):
    # layers' matmuls 2·12·L·d², bias adds 9·L·d, attention core 4·L·d·s; LM head 2·V·d
    L, d, V, s = 40, 5120, 50368, 1024
    blocks = 2 * 12 * L * d * d + 9 * L * d + 4 * L * d * s
    head = 2 * V * d
    hw = 4 * blocks + 3 * head  # forward + backward (3 forwards) + the blocks' second forward
    assert b["hw_per_token"] == pytest.approx(hw, rel=1e-9)
    assert b["of_mamf"] == pytest.approx(2330 * hw / 271.2e12)  # 0.907
    # below the HFU column's figure, which counts the head four times (0.912)
    assert b["of_mamf"] < b["rate"] / b["mamf"]
    assert b["of_mamf"] > b["plain_of_mamf"]


def test_pairs_by_hand() -> None:
    """The pairs block is the code's; a peak-rate forward is the forward's FLOPs per token,
    counted by hand, at the H100's 989 TFLOP/s; the room is the checkpointed run's published
    time less the other's scaled one."""
    ps = v.pair_rows()
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- ckpt-pairs: .*? -->\n(.*?)\n<!-- end ckpt-pairs -->", text, re.S)
    assert block is not None and block.group(1) == v.pair_table(ps)
    h7 = next(p for p in ps if p["gpu"] == "H100" and p["model"] == "7B")
    # the forward per token counted by hand for the GPT shape (L 32, d 4096, V 50368, s 1,024):
    # 2·12·L·d² in the layers' matmuls, 9·L·d bias adds (qkv 3d, out d, up 4d, down d), the LM
    # head 2·V·d, the attention core 4·L·d·s (unmasked)
    L, d, V, s = 32, 4096, 50368, 1024
    hand = 2 * 12 * L * d * d + 9 * L * d + 2 * V * d + 4 * L * d * s
    assert h7["fwd_at_peak"] * 989e12 == pytest.approx(hand, rel=1e-9)
    assert h7["t_ck"] == pytest.approx(1 / 10203)
    assert h7["room"] == pytest.approx(h7["t_ck"] - h7["t_plain"])
    # scaled from 2,048 to 1,024 tokens: less attention, so less time per token
    assert h7["t_plain"] < 1 / 10643
    # FLOPs-only scaling by hand: the forward's FLOPs per token differ by the attention term
    # alone, 4·L·d·Δs (unmasked) = 4·32·4096·1,024, so the room is the checkpointed run's
    # time less the other's times that FLOP ratio
    fwd_ck = h7["fwd_at_peak"] * 989e12
    fwd_plain = fwd_ck + 4 * 32 * 4096 * 1024
    assert h7["room_flops"] == pytest.approx(1 / 10203 - fwd_ck / fwd_plain / 10643)
    # our time ratio also prices the micro-batch (6 against 64) and the step (98,304 against
    # 1,048,576 tokens): it is not the FLOP ratio, as the page says
    assert abs(h7["t_plain"] * 10643 - fwd_ck / fwd_plain) > 0.01
