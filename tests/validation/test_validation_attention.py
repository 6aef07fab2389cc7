"""Fused-attention kernels (docs/validation/attention.md): the measured fractions against the
published kernel speeds, the argument in solve / serve / train, the page generated."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

import roofline as rl
from roofline.errors import RooflineError, SpecError
from roofline.validation import attention as v

DOC = Path(__file__).parents[2] / "docs" / "validation" / "attention.md"


@pytest.fixture(scope="module")
def rows():
    return v.attention_rows()


def test_long_sequences_within_5_percent_and_held_out_median(rows) -> None:
    long = [r for r in rows if r["case"].source == "fa3paper" and r["case"]["seq_len"] >= 2048]
    assert long and all(abs(r["error"]) <= 0.05 for r in long)
    held = [r for r in rows if r["case"].source == "torchbench"]
    assert statistics.median(abs(r["error"]) for r in held) <= 0.15


def test_fa3_forward_by_hand() -> None:
    # B = 1, N = 16, T = S = 16384, H = 128: 4·16·16384²·128 = 2.199e12 FLOP at
    # 0.655 · 989.4e12 = 648.1e12 FLOP/s -> 3.393 ms, i.e. 648 TFLOP/s
    c = next(c for c in v.attention_cases() if c.id == "fa3 fwd h128 s16384 (fa3paper)")
    assert v.predict_tflops(c) == pytest.approx(0.655 * 989.4e12, rel=2e-3)


def test_kernel_argument_in_solve_serve_train() -> None:
    kw = dict(phase="prefill", seq_len=16384, precision="bf16")
    lat = {k: rl.solve("llama-3.1-8b", "H100", attention_kernel=k, **kw).latency
           for k in ("auto", "fa3", "fa2", "cudnn", "gemm", "unfused")}
    assert lat["auto"] == lat["fa3"]  # Hopper's default
    assert lat["fa2"] > lat["cudnn"] > lat["fa3"]  # 0.374 < 0.601 < 0.655 of the peak
    assert lat["unfused"] > lat["fa2"]
    # A100: no measured table; auto and fa2 are the matmul model
    a = {k: rl.solve("llama-3.1-8b", "A100", attention_kernel=k, **kw).latency
         for k in ("auto", "gemm", "fa2")}
    assert a["auto"] == a["gemm"] == a["fa2"]
    with pytest.raises(SpecError, match="no measured entry"):
        rl.solve("llama-3.1-8b", "A100", attention_kernel="fa3", **kw)
    with pytest.raises(RooflineError, match="attention_kernel"):
        rl.solve("llama-3.1-8b", "H100", attention_kernel="xformers")
    s2, s3 = (rl.serve("llama-3.1-8b", "H100", prompt_len=8192, output_len=8,
                       attention_kernel=k).ttft for k in ("fa2", "fa3"))
    assert s2 > s3
    t2, t3 = (rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=16384,
                       attention_kernel=k).step_time for k in ("fa2", "fa3"))
    assert t2 > t3


def test_page_shows_what_the_code_computes(rows) -> None:
    assert v.attention_table(rows) in DOC.read_text(encoding="utf-8")
