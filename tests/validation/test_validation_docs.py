"""docs/validation/README.md: the worked example prints what the page shows."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "validation" / "README.md"


def test_worked_example_prints_what_the_page_shows():
    text = DOC.read_text(encoding="utf-8")
    pairs = re.findall(r"```python\n(.*?)```\n<!-- output -->\n```text\n(.*?)```", text, re.S)
    assert len(pairs) == 1
    code, shown = pairs[0]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})  # noqa: S102 - our own documentation
    assert buf.getvalue() == shown
