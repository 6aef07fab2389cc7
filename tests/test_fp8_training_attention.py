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
