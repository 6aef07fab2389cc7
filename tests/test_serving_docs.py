"""docs/serving.md: the worked example runs and prints what the page shows."""

import contextlib
import io
import re
from pathlib import Path

DOC = Path(__file__).parents[1] / "docs" / "serving.md"


def test_worked_example_output_matches_page():
    text = DOC.read_text()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    shown = re.search(r"prints\n\n```\n(.*?)```", text, re.S).group(1).splitlines()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})
    got = buf.getvalue().splitlines()
    keys = ("TTFT", "TPOT", "end to end", "throughput", "KV cache", "req/s", "memory/device")
    checked = 0
    for line in shown:
        if any(k in line for k in keys):
            assert line in got, line
            checked += 1
    assert checked >= len(keys)


def _section_example(heading: str, i: int = 0) -> tuple[list[str], list[str]]:
    """(printed lines, lines the page shows after "prints") of the ``i``-th python example in
    the docs/serving.md section under ``heading``."""
    text = DOC.read_text().split(f"## {heading}", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", text, re.S)[i]
    shown = re.findall(r"prints\n\n```\n(.*?)```", text, re.S)[i].splitlines()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(code, {})
    return buf.getvalue().splitlines(), shown


def test_sliding_window_example_output_matches_page():
    got, shown = _section_example("Sliding-window layers")
    assert got == shown
    assert len(shown) == 2


def test_client_example_output_matches_page():
    got, shown = _section_example("End to end, as a client measures it")
    assert got == shown
    assert len(shown) == 2


def test_client_request_mix_example_output_matches_page():
    """simulate_serving(client=True): TTFT + 2.057 ms, TPOT + 6.65 ns, throughput unchanged."""
    got, shown = _section_example("End to end, as a client measures it", 1)
    assert got == shown
    assert len(shown) == 2
