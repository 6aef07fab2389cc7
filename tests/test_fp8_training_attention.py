"""The default attention of an fp8 training step (docs/validation/fp8.md, session 31): with
attention_kernel="auto" the kernel's forward runs at its 16-bit rate, as Megatron-Core and
Transformer Engine run it unless fp8_dot_product_attention / fp8_dpa is set (default off);
an explicit kernel keeps its fp8 forward rate; bf16 steps and serving are untouched."""

from __future__ import annotations

from dataclasses import replace

import roofline as rl
from roofline.engine.efficiency import Attention, Efficiency
from roofline.scenarios.training.context import fp8_training_attention
from roofline.specs.dtypes import precision

KW = dict(nodes=1, global_batch=64, seq_len=8192, micro_batch=1, tp=1, pp=1, dp=8)


def _eff(fp8_fwd: float | None) -> Efficiency:
    return replace(Efficiency(), attention=Attention(kernel="fa3", fwd=0.6, bwd=0.4,
                                                    fp8_fwd=fp8_fwd))


def test_auto_drops_the_fp8_forward_only_in_an_fp8_step() -> None:
    e = _eff(0.59)
    assert fp8_training_attention(e, precision("fp8"), "auto").attention.fp8_fwd is None
    kept = fp8_training_attention(e, precision("fp8"), "auto").attention
    assert (kept.fwd, kept.bwd, kept.kernel) == (0.6, 0.4, "fa3")
    assert fp8_training_attention(e, precision("fp8"), "fa3") is e
    assert fp8_training_attention(e, precision("bf16"), "auto") is e
    e16 = _eff(None)
    assert fp8_training_attention(e16, precision("fp8"), "auto") is e16


def test_hopper_fp8_step_auto_is_slower_than_fa3_with_its_fp8_forward() -> None:
    # auto is FlashAttention-3 on Hopper: in fp8 its forward at the 16-bit rate (0.637 of
    # 989 TFLOP/s), slower than the explicit kernel's fp8 forward (0.594 of 1979)
    auto = rl.train("llama-3.1-8b", "dgx-h100", precision="fp8", **KW)
    fa3 = rl.train("llama-3.1-8b", "dgx-h100", precision="fp8", attention_kernel="fa3", **KW)
    assert auto.step_time > fa3.step_time
    b_auto = rl.train("llama-3.1-8b", "dgx-h100", precision="bf16", **KW)
    b_fa3 = rl.train("llama-3.1-8b", "dgx-h100", precision="bf16", attention_kernel="fa3",
                     **KW)
    assert b_auto.step_time == b_fa3.step_time


def test_solve_and_serve_keep_the_fp8_forward_under_auto() -> None:
    # the default changed for training only: rl.solve in fp8 with "auto" is FA3 with its fp8
    # forward on Hopper (auto == fa3), and rl.serve's engine kernel is untouched likewise
    kw = dict(phase="prefill", seq_len=8192, precision="fp8")
    auto = rl.solve("llama-3.1-8b", "h100", **kw).latency
    assert auto == rl.solve("llama-3.1-8b", "h100", attention_kernel="fa3", **kw).latency
    skw = dict(precision="fp8", batch=8, prompt_len=8192, output_len=16, engine="vllm")
    assert (rl.serve("llama-3.1-8b", "h100", **skw).ttft
            == rl.serve("llama-3.1-8b", "h100", attention_kernel="fa3", **skw).ttft)
    # (and the kernel matters there: FA2's rate gives another prefill)
    assert auto != rl.solve("llama-3.1-8b", "h100", attention_kernel="fa2", **kw).latency


def test_search_prices_the_fp8_default_as_train_does() -> None:
    # best_parallelism shares train's context: its row for the split train is given prices
    # the 16-bit forward too (and differs from fa3's fp8 forward)
    kw = dict(global_batch=64, seq_len=8192, precision="fp8")
    rows = rl.best_parallelism("llama-3.1-8b", "dgx-h100", top=50, **kw).to_dicts()
    row = rows[0]
    split = {k: row[k] for k in ("tp", "pp", "dp", "micro_batch", "recompute", "zero")}
    t = rl.train("llama-3.1-8b", "dgx-h100", nodes=1, **kw, **split)
    fa3 = rl.train("llama-3.1-8b", "dgx-h100", nodes=1, attention_kernel="fa3", **kw, **split)
    assert abs(row["step_time"] / t.step_time - 1) < 1e-9
    assert fa3.step_time < t.step_time


def test_cli_help_says_the_fp8_training_default() -> None:
    import argparse

    from roofline.cli.solve import add_attention_arg
    p = argparse.ArgumentParser()
    add_attention_arg(p)
    text = " ".join(p.format_help().split())
    assert "fp8 train step its forward at the 16-bit rate" in text
    assert "keeps its fp8 forward" in text


def test_train_docstring_says_the_fp8_default() -> None:
    from roofline.scenarios.training.step import train
    assert "in fp8 its forward at the 16-bit rate" in " ".join((train.__doc__ or "").split())
