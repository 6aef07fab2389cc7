"""docs/training.md: each python example's printed output is the text block after it (the
validation page's tables are checked by tests/validation/test_validation_training.py)."""

from __future__ import annotations

import contextlib
import io
import os
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


UPDATE = bool(os.environ.get("ROOFLINE_UPDATE_DOCS"))  # rewrite the shown outputs instead


def test_worked_examples_print_what_the_doc_shows() -> None:
    path = DOCS / "training.md"
    text = path.read_text(encoding="utf-8")
    pairs = _pairs(text)
    assert len(pairs) == 12  # four worked examples, t_fill, the unequal-stages, Megatron's stage
    # layouts, the MoE, the MoE parallel folding, its search, the MoE token dispatcher and the
    # LoRA one
    env: dict[str, object] = {}
    for code, shown in pairs:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(code, env)  # noqa: S102 - our own documentation
        got = buf.getvalue().rstrip("\n")
        if UPDATE:  # the text block after this code block
            j = text.index("```text\n", text.index(code)) + len("```text\n")
            assert text[j:j + len(shown)] == shown
            text = text[:j] + got + text[j + len(shown):]
            continue
        assert got == shown
    if UPDATE:
        path.write_text(text, encoding="utf-8")


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
    got = capsys.readouterr().out.rstrip("\n")
    if UPDATE:
        path = DOCS / "training.md"
        path.write_text(text.replace(shown.rstrip("\n"), got, 1), encoding="utf-8")
        return
    assert got == shown.rstrip("\n")
