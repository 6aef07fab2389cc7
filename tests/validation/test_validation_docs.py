"""docs/validation/README.md: the worked example prints what the page shows
(``ROOFLINE_UPDATE_DOCS=1`` rewrites the shown output: the ``shown_output`` fixture)."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).parents[2] / "docs" / "validation" / "README.md"


def test_worked_example_prints_what_the_page_shows(shown_output):
    text = DOC.read_text(encoding="utf-8")
    pairs = list(re.finditer(r"```python\n(.*?)```\n<!-- output -->\n```text\n(.*?)```", text,
                             re.S))
    assert len(pairs) == 1
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(pairs[0].group(1), {})  # noqa: S102 - our own documentation
    shown_output(DOC, text, [(pairs[0].start(2), pairs[0].end(2), buf.getvalue())])
