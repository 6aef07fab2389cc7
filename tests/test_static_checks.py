"""The package stays clean under its own linters: ruff (the rules in pyproject.toml) over the
sources and tests, and mypy over the package. Both are pinned in the ``test`` extra; outside CI a
missing tool skips, under CI (``ROOFLINE_CI=1``) it fails, as the browser test does."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        if os.environ.get("ROOFLINE_CI"):
            pytest.fail(f"{module} is not installed (pip install '.[test]' pins it)")
        pytest.skip(f"{module} not installed")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff_finds_nothing() -> None:
    _tool("ruff")
    p = _run("ruff", "check", "--no-cache", "src", "tests", "benchmarks")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]


def test_mypy_finds_nothing(tmp_path: Path) -> None:
    _tool("mypy")
    p = _run("mypy", "--cache-dir", str(tmp_path / "mypy"), "src/roofline")
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
