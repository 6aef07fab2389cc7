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
        gbs = int(re.search(r"GlobalBatchSize (\d+)", r["where"]).group(1))
        assert gbs == r["micro_batch"] * r["grad_accum"] * 8
        # the table's HFU counts four forwards for a checkpointed row, three otherwise
        ratio = 4 / 3 if r["checkpointing"] else 1.0
        assert r["hfu"] == pytest.approx(r["mfu"] * ratio, abs=0.02)


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
    """The A100 bound: the HFU column times the 312 TFLOP/s peak over MAMF's 271.2."""
    b = v.hfu_bound()
    assert b["peak"] == pytest.approx(312e12) and b["mamf"] == pytest.approx(271.2e12)
    assert b["of_mamf"] == pytest.approx(b["hfu"] * 312 / 271.2)
    assert b["of_mamf"] > b["plain_of_mamf"]


def test_pairs_by_hand() -> None:
    """The pairs block is the code's; a forward's FLOPs per token is about twice the model's
    parameters (MPT-7B: 6.66 B in the table's NumParams column at 2,048 tokens, attention
    a few per cent more at 1,024); the room is the difference of the two published times."""
    ps = v.pair_rows()
    text = DOC.read_text(encoding="utf-8")
    block = re.search(r"<!-- ckpt-pairs: .*? -->\n(.*?)\n<!-- end ckpt-pairs -->", text, re.S)
    assert block is not None and block.group(1) == v.pair_table(ps)
    h7 = next(p for p in ps if p["gpu"] == "H100" and p["model"] == "7B")
    assert h7["fwd_at_peak"] * 989e12 == pytest.approx(2 * 6.66e9, rel=0.08)
    assert h7["t_ck"] == pytest.approx(1 / 10203)
    assert h7["room"] == pytest.approx(h7["t_ck"] - h7["t_plain"])
    # scaled from 2,048 to 1,024 tokens: less attention, so less time per token
    assert h7["t_plain"] < 1 / 10643
