"""docs/planning.md: the worked example runs and prints exactly what the page shows
(``ROOFLINE_UPDATE_DOCS=1`` rewrites the shown output: the ``shown_output`` fixture)."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).parents[1] / "docs" / "planning.md"


def test_worked_example_output_matches_page(shown_output):
    text = DOC.read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"prints\n\n```\n(.*?)```", text, re.S)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})  # noqa: S102 - our own documentation
    shown_output(DOC, text, [(shown.start(1), shown.end(1), buf.getvalue())])
