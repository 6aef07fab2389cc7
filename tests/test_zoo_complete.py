"""The seed zoo is complete and listed: every model and part issue 16 item 5 names solves (fits,
or says why not), ``roofline zoo`` lists every entry, and the docs list them."""

from __future__ import annotations

import contextlib
import io
import math
import re
from pathlib import Path

import pytest

import roofline as rl
from roofline.cli import main

DOCS = Path(__file__).resolve().parents[1] / "docs"
SEED_MODELS = ["alexnet", "yolov8n", "mamba-130m", "mamba-2.8b", "sd15-unet", "dit-xl-2",
               "dlrm-mlperf", "ds-cnn", "mobilenet-v1-0.25", "resnet8", "mlperf-tiny-vww",
               "qwen3-8b", "llama-4-scout", "llama-4-maverick"]
SEED_PARTS = ["cerebras-cs3", "groq-lpu", "gh200", "mi210", "jetson-orin-nx-16gb",
              "coral-edge-tpu", "snapdragon-8-gen-3", "apple-m1", "apple-m2", "apple-m3",
              "apple-m4", "apple-m1-ultra", "apple-m2-ultra", "apple-m3-ultra", "apple-a17-pro",
              "dgx-spark", "rtx-5090", "core-i9-13900k", "esp32-s3", "nrf52840"]


def _zoo(*args: str) -> str:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["zoo", *args]) == 0
    return buf.getvalue()


def test_roofline_zoo_lists_every_entry():
    models, hw = _zoo("models"), _zoo("hardware")
    for k in rl.list_models():
        assert re.search(rf"^{re.escape(k)}\s", models, re.M), k
    for k in rl.list_hardware():
        assert re.search(rf"^{re.escape(k)}\s", hw, re.M), k
    assert set(SEED_MODELS) <= set(rl.list_models())
    assert set(SEED_PARTS) <= set(rl.list_hardware())


def test_the_docs_list_every_part_and_the_new_models():
    text = (DOCS / "hardware-data.md").read_text()
    listing = text[text.index("## What is in the zoo"):]
    for k in rl.list_hardware():
        assert f"`{k}`" in listing, f"{k} missing from docs/hardware-data.md"
    assert f"## What is in the zoo ({len(rl.list_hardware())} devices)" in text
    zoo = (DOCS / "zoo.md").read_text()
    for k in ("yolov8n", "mobilenet-v1-0.25", "ds-cnn", "resnet8", "mlperf-tiny-vww",
              "mamba-130m", "dit-xl-2", "sd15-unet", "dlrm-mlperf", "llama-4-scout"):
        assert f"`{k}`" in zoo, f"{k} missing from docs/zoo.md"


def _native(hw) -> str:
    return next(d for d in ("fp16", "bf16", "int8", "fp32") if hw.has(d))


@pytest.mark.parametrize("part", SEED_PARTS)
def test_every_seed_part_solves_a_small_model(part):
    hw = rl.hardware(part)
    r = rl.solve("ds-cnn", hw, batch=1, precision=_native(hw))
    assert r.feasible and math.isfinite(r.latency) and r.latency > 0


@pytest.mark.parametrize("model", SEED_MODELS)
def test_every_seed_model_solves(model):
    m = rl.model(model)
    big = m.params > 2e10  # Llama 4, DLRM: a B200 (fp8 fits Scout; Maverick does not)
    hw = "b200" if big else "h100-sxm5"
    r = rl.solve(m, hw, batch=1, precision="fp8" if big else "bf16")
    assert math.isfinite(r.latency) and r.latency > 0
    if not r.feasible:  # the honest reason: the bytes against the capacity
        assert "needs" in r.reason and "weights" in r.reason
        assert m.params > 1e11
    else:
        assert r.memory_footprint <= rl.hardware(hw).memory_capacity_bytes
