"""Docs are product: every worked example's printed output is checked against the code.

In docs/solve.md, sweep.md, plots.md, report.md: a ```python block followed by
``<!-- output -->`` and a ```text block is run (blocks of a page share one namespace) and its
stdout must equal the text block. In docs/cli.md: each ``$ roofline ...`` line of a
```console block is run through ``roofline.cli.main`` and must print the lines below it.
After a deliberate change, rerun with ``ROOFLINE_UPDATE_DOCS=1`` to rewrite the expected
outputs, and review the diff.
"""

import contextlib
import io
import os
import re
import shlex
from pathlib import Path

import pytest

from roofline.cli import main

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
UPDATE = bool(os.environ.get("ROOFLINE_UPDATE_DOCS"))

_PY = re.compile(r"```python\n(.*?)```\n<!-- output -->\n```text\n(.*?)```", re.DOTALL)
_CONSOLE = re.compile(r"```console\n(.*?)```", re.DOTALL)


def _run_python(code: str, ns: dict) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "<doc>", "exec"), ns)  # noqa: S102 - the docs' own examples
    return buf.getvalue()


@pytest.mark.parametrize("page", ["solve.md", "sweep.md", "plots.md", "report.md", "levers.md",
                                  "explore.md", "zoo.md"])
def test_python_examples(page, tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)  # examples that save files write here
    path = DOCS / page
    text = path.read_text(encoding="utf-8")
    blocks = list(_PY.finditer(text))
    assert blocks, f"{page} has no checked example"
    ns: dict = {}
    new, last, failures = [], 0, []
    for m in blocks:
        got = _run_python(m.group(1), ns)
        if got != m.group(2):
            failures.append(f"--- expected\n{m.group(2)}--- got\n{got}")
        new += [text[last:m.start(2)], got]
        last = m.end(2)
    if UPDATE:
        path.write_text("".join(new) + text[last:], encoding="utf-8")
        return
    assert not failures, f"{page}: example output differs:\n" + "\n".join(failures)


def _console_blocks(text: str) -> list[tuple[str, str]]:
    """(command, expected output) pairs from ```console blocks."""
    pairs = []
    for block in _CONSOLE.findall(text):
        cmd, out = None, []
        for line in block.splitlines(keepends=True):
            if line.startswith("$ "):
                if cmd is not None:
                    pairs.append((cmd, "".join(out)))
                cmd, out = line[2:].strip(), []
            else:
                out.append(line)
        if cmd is not None:
            pairs.append((cmd, "".join(out)))
    return pairs


def _run_cli(cmd: str) -> str:
    argv = shlex.split(cmd)
    assert argv[0] == "roofline", cmd
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(argv[1:])
    assert rc == 0, f"{cmd} exited {rc}"
    return buf.getvalue()


def test_cli_examples(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    path = DOCS / "cli.md"
    text = path.read_text(encoding="utf-8")
    pairs = _console_blocks(text)
    assert len(pairs) >= 6
    failures = []
    for cmd, expected in pairs:
        got = _run_cli(cmd)
        if got != expected:
            if UPDATE:
                text = text.replace(f"$ {cmd}\n{expected}", f"$ {cmd}\n{got}", 1)
            else:
                failures.append(f"$ {cmd}\n--- expected\n{expected}--- got\n{got}")
    if UPDATE:
        path.write_text(text, encoding="utf-8")
        return
    assert not failures, "docs/cli.md output differs:\n" + "\n".join(failures)


def test_every_command_is_documented():
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    cmds = set(re.findall(r"^\$ roofline (\w+)", text, flags=re.MULTILINE))
    assert {"zoo", "solve", "sweep", "plot", "tutorial"} <= cmds


def test_committed_example_chart():
    img = DOCS / "img" / "roofline-resnet50-a100.png"
    assert img.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert 10_000 < img.stat().st_size < 200_000
    assert "img/roofline-resnet50-a100.png" in (DOCS / "plots.md").read_text(encoding="utf-8")


def test_documented_errors(capsys):
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    pairs = re.findall(r"^\$ (roofline .+)\n(roofline: error: .+)$", text, flags=re.MULTILINE)
    assert len(pairs) >= 2
    for cmd, expected in pairs:
        rc = main(shlex.split(cmd)[1:])
        err = capsys.readouterr().err
        assert rc == 2, cmd
        assert err.startswith(expected.removesuffix("...")), (cmd, err)
