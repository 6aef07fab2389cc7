"""docs/measure.md: the worked example runs and prints exactly what the page shows
(``ROOFLINE_UPDATE_DOCS=1`` rewrites the shown output: the ``shown_output`` fixture; the
figure its prose derives by hand is checked, not rewritten)."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "measure.md"


def test_worked_example_output_matches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       shown_output) -> None:
    text = DOC.read_text(encoding="utf-8")
    at = text.index("## Worked example")
    code = re.search(r"```python\n(.*?)```", text[at:], re.S)
    shown = re.search(r"```text\n(.*?)```", text[at:], re.S)
    assert code and shown
    monkeypatch.chdir(tmp_path)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code.group(1), str(DOC), "exec"), {})
    got = buf.getvalue()
    assert os.path.exists(tmp_path / "example_machine.toml")
    # the key numbers, spelled out in the page's prose (0.9 / (1 + 36/2048) of 300 GFLOP/s)
    assert "265.3 GFLOP/s" in text and "fp32 0.2653 T" in got
    shown_output(DOC, text, [(at + shown.start(1), at + shown.end(1), got)])
