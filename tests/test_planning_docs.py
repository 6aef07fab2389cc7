"""docs/planning.md: the worked example runs and prints what the page shows."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).parents[1] / "docs" / "planning.md"


def test_worked_example_output_matches_page():
    text = DOC.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"prints\n\n```\n(.*?)```", text, re.S).group(1)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})
    assert buf.getvalue() == shown
