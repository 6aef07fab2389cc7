"""docs/economics.md: each python example's printed output is the text block after it;
docs/validation/economics.md's failure table is the one the data generates today."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _pairs(text: str) -> list[tuple[str, re.Match[str]]]:
    """(code, the match of the text block after it) for each python block followed by one."""
    blocks = list(re.finditer(r"```(python|text)\n(.*?)```", text, flags=re.S))
    return [(b1.group(2), b2) for b1, b2 in zip(blocks, blocks[1:])
            if b1.group(1) == "python" and b2.group(1) == "text"]


def test_worked_examples_print_what_the_doc_shows(shown_output) -> None:
    """ROOFLINE_UPDATE_DOCS=1 rewrites the shown outputs (the ``shown_output`` fixture)."""
    path = DOCS / "economics.md"
    text = path.read_text(encoding="utf-8")
    pairs = _pairs(text)
    assert len(pairs) == 7
    env: dict[str, object] = {}
    outputs = []
    for code, shown in pairs:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(code, env)  # noqa: S102 - our own documentation
        # the page shows the printed text without its last newline(s)
        end = shown.start(2) + len(shown.group(2).rstrip("\n"))
        outputs.append((shown.start(2), end, buf.getvalue().rstrip("\n")))
    shown_output(path, text, outputs)


def test_validation_table_is_generated_from_the_data(doc_block) -> None:
    """A generated block: python -m roofline.validation.regenerate rewrites it."""
    from roofline.analysis.reliability import validation_markdown

    path = DOCS / "validation" / "economics.md"
    assert doc_block(path, "failure-validation") == validation_markdown()


def test_power_validation_table_is_generated_from_the_data(doc_block) -> None:
    """A generated block: python -m roofline.validation.regenerate rewrites it."""
    from roofline.analysis.power_validation import validation_markdown

    path = DOCS / "validation" / "economics.md"
    assert doc_block(path, "power-validation") == validation_markdown()


def test_price_coverage_table_is_generated_from_the_data() -> None:
    """A part added to the zoo changes this table: ROOFLINE_UPDATE_DOCS=1 rewrites it."""
    import os

    from roofline.analysis.data import price_coverage_markdown

    path = DOCS / "economics.md"
    text = path.read_text(encoding="utf-8")
    table = text.split("<!-- price-coverage -->\n", 1)[1].split("\n\n", 1)[0]
    if os.environ.get("ROOFLINE_UPDATE_DOCS") and table != price_coverage_markdown():
        path.write_text(text.replace(table, price_coverage_markdown(), 1), encoding="utf-8")
        return
    assert table == price_coverage_markdown(), (
        "docs/economics.md's price-coverage table is stale: rerun with ROOFLINE_UPDATE_DOCS=1")


def test_power_coverage_table_is_generated_from_the_data() -> None:
    """A part added to the zoo or a new [parts] reading changes this table:
    ROOFLINE_UPDATE_DOCS=1 rewrites it."""
    import os

    from roofline.analysis.power import power_coverage_markdown

    path = DOCS / "economics.md"
    text = path.read_text(encoding="utf-8")
    table = text.split("<!-- power-coverage -->\n", 1)[1].split("\n\n", 1)[0]
    if os.environ.get("ROOFLINE_UPDATE_DOCS") and table != power_coverage_markdown():
        path.write_text(text.replace(table, power_coverage_markdown(), 1), encoding="utf-8")
        return
    assert table == power_coverage_markdown(), (
        "docs/economics.md's power-coverage table is stale: rerun with ROOFLINE_UPDATE_DOCS=1")


def test_validation_prose_figures_are_the_codes() -> None:
    """docs/validation/economics.md's prose figures are inline markers holding what
    economics_figures computes from the two tables' rows; two by hand."""
    from roofline.analysis import power_validation
    from roofline.validation.economics_figures import economics_figures

    text = (DOCS / "validation" / "economics.md").read_text(encoding="utf-8")
    rows = power_validation.validation_rows()
    figs = economics_figures(power_rows=rows)
    used = [k for k in figs if f"<!--v:{k}-->" in text]
    assert len(used) >= 20
    for k in used:
        assert f"<!--v:{k}-->{figs[k]}<!--/v-->" in text, k
    m7 = next(r for r in rows if r["case"].startswith("Serial Alice: Mistral 7B on H100 SXM, "
                                                       "batch 128"))
    assert figs["econ.pw.m7b128.in"] == f"{m7['predicted'] / m7['measured']:.2f}"
    b1 = next(r for r in rows if r["case"] == "ML.ENERGY v3.0 anchor: H100 SXM5 at batch 1")
    assert figs["econ.pw.b1.prev_w"] == f"{b1['ratio_previous'] * 300:.0f}"  # 300 W measured
