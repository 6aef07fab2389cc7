"""docs/measure.md: the worked example runs and prints exactly what the page shows."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "measure.md"


def test_worked_example_output_matches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOC.read_text(encoding="utf-8")
    part = text.split("## Worked example", 1)[1]
    code = re.search(r"```python\n(.*?)```", part, re.S)
    shown = re.search(r"```text\n(.*?)```", part, re.S)
    assert code and shown
    monkeypatch.chdir(tmp_path)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code.group(1), str(DOC), "exec"), {})
    assert buf.getvalue() == shown.group(1)
    assert os.path.exists(tmp_path / "example_machine.toml")
    # the key numbers, spelled out in the page's prose
    assert "265.3 GFLOP/s" in text and "fp32 0.2653 T" in shown.group(1)
