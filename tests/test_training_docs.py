"""docs/training.md: each python example's printed output is the text block after it (the
validation page's tables are checked by tests/validation/test_validation_training.py)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def _pairs(text: str) -> list[tuple[str, str]]:
    blocks = re.findall(r"```(python|text)\n(.*?)```", text, flags=re.S)
    out = []
    for (k1, b1), (k2, b2) in zip(blocks, blocks[1:]):
        if k1 == "python" and k2 == "text":
            out.append((b1, b2.rstrip("\n")))
    return out


def test_worked_examples_print_what_the_doc_shows() -> None:
    pairs = _pairs((DOCS / "training.md").read_text(encoding="utf-8"))
    assert len(pairs) == 6  # four worked examples, the unequal-stages and the MoE one
    env: dict[str, object] = {}
    for code, shown in pairs:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(code, env)  # noqa: S102 - our own documentation
        assert buf.getvalue().rstrip("\n") == shown


def test_cli_example(capsys: pytest.CaptureFixture[str]) -> None:
    from roofline.cli import main

    text = (DOCS / "training.md").read_text(encoding="utf-8")
    block = re.search(r"\$ roofline train (.*?)\n(.*?)```", text, flags=re.S)
    assert block
    argv = ["train"] + [a for a in block.group(1).split() if a != "\\"]
    # the command continues on the next line after the backslash
    cont, _, shown = block.group(2).partition("\n")
    argv += cont.split()
    assert main(argv) == 0
    assert capsys.readouterr().out.rstrip("\n") == shown.rstrip("\n")
