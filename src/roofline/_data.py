"""Where the package's data files live, and a TOML reader that imports tomllib on first use
(keeps ``import roofline`` fast)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["DATA", "read_toml"]

#: src/roofline/data: hardware, models, presets, clusters
DATA = Path(__file__).resolve().parent / "data"


def read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)
