"""Edge devices against published measurements (data/validation/edge.toml): the Coral Edge
TPU's MobileNet latencies and llama.cpp decode rates on Apple M-series. Nothing was fitted on
these cases; the table in docs/validation/edge.md is checked against the predictions here."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from roofline.validation import load_cases
from roofline.validation.edge import edge_figures, predict_edge

DOC = Path(__file__).resolve().parents[2] / "docs" / "validation" / "edge.md"
CASES = load_cases("edge").cases


def predict(c) -> float:
    """Our number for case ``c``, in the case's unit (ms or tokens/s): the module's own."""
    return predict_edge(c)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_edge_case_within_the_edge_band(case):
    ours = predict(case)
    ratio = ours / case.measured
    # the edge target of docs/validation/edge.md: within x1.5 either way
    assert 1 / 1.5 < ratio < 1.5, (case.id, ours, case.measured)


def test_the_doc_table_shows_these_numbers():
    text = DOC.read_text()
    for c in CASES:
        row = next((ln for ln in text.splitlines() if ln.startswith(f"| {c.id} ")), None)
        assert row is not None, f"{c.id} missing from docs/validation/edge.md"
        cells = [x.strip() for x in row.strip("|").split("|")]
        ours = predict(c)
        assert float(cells[-3]) == pytest.approx(c.measured)
        assert float(cells[-2]) == pytest.approx(ours, rel=0.006), (c.id, cells, ours)
        assert re.fullmatch(r"[+-]\d+\.\d %", cells[-1])
        assert float(cells[-1][:-2]) == pytest.approx(100 * (ours / c.measured - 1), abs=0.06)


def test_the_readme_quotes_these_errors():
    """README.md's edge row: each case's error, an inline marker filled by the regenerate
    command's readme step from edge_figures; by hand from predict_edge."""
    readme = (DOC.parents[2] / "README.md").read_text(encoding="utf-8")
    figs = edge_figures()
    for c in CASES:
        v = f"{(predict(c) / c.measured - 1) * 100:+.1f} %".replace("-", "−")
        assert figs[f"readme.edge.{c.id}"] == v
        assert f"<!--v:readme.edge.{c.id}-->{v}<!--/v-->" in readme, c.id
