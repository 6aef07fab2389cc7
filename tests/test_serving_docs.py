"""docs/serving.md: each worked example runs and prints exactly what the page shows
(``ROOFLINE_UPDATE_DOCS=1`` rewrites the shown outputs: the ``shown_output`` fixture)."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).parents[1] / "docs" / "serving.md"


def _run(code: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})  # noqa: S102 - our own documentation
    return buf.getvalue()


def _example(text: str, heading: str | None = None, i: int = 0) -> tuple[int, int, str]:
    """(start, end, printed): the span in ``text`` of the output shown after "prints" for the
    ``i``-th python example of the section under ``heading`` (None: the page), and what that
    example prints."""
    lo = 0 if heading is None else text.index(f"\n## {heading}\n")
    hi = text.find("\n## ", lo + 1) if heading is not None else len(text)
    section = text[lo:hi if hi >= 0 else len(text)]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[i]
    shown = list(re.finditer(r"prints\n\n```\n(.*?)```", section, re.S))[i]
    return lo + shown.start(1), lo + shown.end(1), _run(code)


def test_worked_example_output_matches_page(shown_output):
    text = DOC.read_text(encoding="utf-8")
    start, end, got = _example(text, "Worked example")
    for k in ("TTFT", "TPOT", "end to end", "throughput", "KV cache", "req/s", "memory/device"):
        assert k in got, k
    shown_output(DOC, text, [(start, end, got)])


def test_fill_example_output_matches_page(shown_output):
    """The worked example's t_fill: 0 for the result and both passes (the smooth model)."""
    text = DOC.read_text(encoding="utf-8")
    start, end, got = _example(text, "Worked example", 1)
    assert len(got.split()) == 4
    shown_output(DOC, text, [(start, end, got)])


def test_sliding_window_example_output_matches_page(shown_output):
    text = DOC.read_text(encoding="utf-8")
    start, end, got = _example(text, "Sliding-window layers")
    assert len(got.splitlines()) == 2
    shown_output(DOC, text, [(start, end, got)])


def test_client_example_output_matches_page(shown_output):
    text = DOC.read_text(encoding="utf-8")
    start, end, got = _example(text, "End to end, as a client measures it")
    assert len(got.splitlines()) == 2
    shown_output(DOC, text, [(start, end, got)])


def test_client_request_mix_example_output_matches_page(shown_output):
    """simulate_serving(client=True): TTFT + 2.057 ms, TPOT + 6.65 ns, throughput unchanged."""
    text = DOC.read_text(encoding="utf-8")
    start, end, got = _example(text, "End to end, as a client measures it", 1)
    assert len(got.splitlines()) == 2
    shown_output(DOC, text, [(start, end, got)])
