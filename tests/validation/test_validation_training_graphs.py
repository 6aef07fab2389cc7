"""rl.train on non-decoder models (the generic data-parallel model) against NVIDIA's published
ResNet-50 and BERT-large DGX A100 training throughput (data/validation/training_graphs.toml,
docs/validation/training.md "Any graph"). Nothing is fitted to these cases."""

from __future__ import annotations

from pathlib import Path

from roofline.validation import load_cases
from roofline.validation.training_graphs import cases, report_table, rows, summary

DOC = Path(__file__).parents[2] / "docs" / "validation" / "training.md"


def test_cases_come_from_the_one_loader_with_their_rows() -> None:
    doc = load_cases("training_graphs")
    assert [c["published"] for c in cases()] == [c.value_si for c in doc.cases]
    for c in doc.cases:
        assert c.source in ("rn50", "bert") and "row" in c.where, c.id
        assert f"{c.measured:g}" in c.where, c.id  # the row quotes the published number


def test_validation_against_published_throughput() -> None:
    """docs/validation/training.md: median |error| ≤ 30 %, every case within 65 %."""
    rs = rows()
    s = summary(rs)
    assert s["median_abs_error"] <= 0.30
    assert all(abs(r["error"]) <= 0.65 for r in rs)
    assert report_table() in DOC.read_text(encoding="utf-8")
