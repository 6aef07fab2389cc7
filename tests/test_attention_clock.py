"""A measured attention kernel's rate (engine/attention.py ``attention_rates``) is scaled by the
part's clock ratio (``Efficiency.clock``) as the matmul models' rates are: both run on the same
tensor cores at the same clock. Today no part has both a clock ratio and a measured kernel (the
clocks are CDNA 3's), so the test sets a ratio on an H100's FlashAttention-3 efficiency."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import roofline as rl
from roofline.engine.attention import attention_rates
from roofline.engine.presets import efficiency_for


def _prefill_graph(dtype: str) -> object:
    m = rl.model("llama-3.1-8b")
    return m.graph(precision=dtype, phase="prefill", seq_len=4096, batch=1)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_attention_rate_follows_the_clock(dtype: str) -> None:
    hw = rl.hardware("h100-sxm5")
    eff = efficiency_for(hw, "default")
    assert eff.attention.kernel == "fa3" and eff.attention.measured and eff.clock == ()
    slow = replace(eff, clock=(("bf16", 0.9), ("fp8", 0.8)))
    g = _prefill_graph(dtype)
    att = np.array([c == "attention" for c in g.classes])
    assert att.any()
    peak = hw.peak(dtype)
    base = attention_rates(g, hw, eff, dtype, peak, peak, 0.0, 0.0, 0.0)[0]
    got = attention_rates(g, hw, slow, dtype, peak, peak, 0.0, 0.0, 0.0)[0]
    # bf16: fa3 forward 0.637 x 989.4e12 x length factor, x 0.9 at the slower clock; the fp8
    # forward runs at fp8_fwd of the fp8 peak, x the fp8 ratio 0.8
    ratio = 0.9 if dtype == "bf16" else 0.8
    assert np.allclose(np.asarray(got)[att] / np.asarray(base)[att], ratio, rtol=1e-12)
    assert np.all(np.asarray(got)[~att] == peak)  # other ops: the matmul model's rate as given


def test_attention_fraction_times_clock_stays_within_the_peak() -> None:
    """The clock ratio scales a measured kernel's fractions as it scales the matmul model's max,
    so each product must stay within the peak, as ``max x clock`` must: fwd / bwd against the
    16-bit ratios, fp8_fwd against fp8's."""
    from roofline.engine.efficiency import Attention, Efficiency, Gemm
    from roofline.errors import SpecError

    att = Attention(kernel="k", fwd=0.8, bwd=0.6, fp8_fwd=0.7)
    # 0.8 x 1.25 = 1 and 0.7 x 1.4 = 0.98: allowed (the gemm max 0.5 is far inside)
    Efficiency(gemm=Gemm(max=0.5), attention=att, clock=(("bf16", 1.25), ("fp8", 1.4)),
               label="ok")
    with pytest.raises(SpecError, match=r"clock\.bf16=1\.3 .*attention\.fwd at 0\.8 x 1\.3"):
        Efficiency(gemm=Gemm(max=0.5), attention=att, clock=(("bf16", 1.3),), label="t")
    with pytest.raises(SpecError, match=r"clock\.fp16=1\.7 .*attention\.bwd at 0\.6 x 1\.7"):
        Efficiency(gemm=Gemm(max=0.5), attention=replace(att, fwd=0.5), clock=(("fp16", 1.7),),
                   label="t")
    with pytest.raises(SpecError, match=r"clock\.fp8=1\.5 .*attention\.fp8_fwd at 0\.7 x 1\.5"):
        Efficiency(gemm=Gemm(max=0.5), attention=att, clock=(("fp8", 1.5),), label="t")
    # a dtype's ratio does not reach the other dtype's fractions: fp8 at 1.3 leaves fwd 0.8 alone
    Efficiency(gemm=Gemm(max=0.5), attention=replace(att, fp8_fwd=None), clock=(("fp8", 1.3),),
               label="ok")
