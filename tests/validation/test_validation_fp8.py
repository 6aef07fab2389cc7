"""The one fp8 matmul factor (docs/validation/fp8.md): applied by solve, serve and train alike,
judged on fp8 training runs it was not fitted on."""

from __future__ import annotations

from pathlib import Path

import pytest

import roofline as rl
from roofline.engine.presets import default_tables
from roofline.validation import fp8

DOC = Path(__file__).parents[2] / "docs" / "validation" / "fp8.md"


def test_factor_scales_the_16bit_model_of_every_scenario() -> None:
    gpu = default_tables()["gpu"]
    # 0.80 (16-bit gemm.max) x 0.6125 = 0.49 of the fp8 peak: the serving fit's fraction
    assert gpu.gemm_for("fp8").max == pytest.approx(0.49)
    assert gpu.gemm_for("bf16").max == pytest.approx(0.80)
    assert gpu.gemm_for("fp8").a == gpu.gemm.a  # only max scales
    # a compute-bound GEMM on GH200 (no tile data): fp8 runs 1979·0.49 / (989.4·0.80) = 1.225x
    # the bf16 rate
    b, f = (rl.solve("llama-3.1-8b", "gh200", phase="prefill", seq_len=4096, batch=8,
                     precision=p) for p in ("bf16", "fp8"))
    assert b.latency / f.latency == pytest.approx(1.225, rel=0.08)
    # on H100 solve prices fp8 matmuls with Hopper's kernel-level fp8 tile set instead
    # (docs/validation/gemm.md): max 0.86 of the fp8 peak against 1.0 of the bf16 one, ~1.7x
    b, f = (rl.solve("llama-3.1-8b", "H100", phase="prefill", seq_len=4096, batch=8,
                     precision=p) for p in ("bf16", "fp8"))
    assert 1.225 * 1.2 < b.latency / f.latency < 2.0


def test_training_fp8_uses_the_factor_on_its_own_fit() -> None:
    kw = dict(nodes=1, global_batch=128, seq_len=4096, micro_batch=1, tp=1, pp=1, dp=8,
              recompute="none")
    b = rl.train("llama-2-7b", "dgx-h100", precision="bf16", **kw)
    f = rl.train("llama-2-7b", "dgx-h100", precision="fp8", **kw)
    # compute-bound: fp8 = 2x the peak x 0.6125 = 1.225x the bf16 throughput (was 2.0x), times
    # the Hopper training table's dtype_scale (data/presets/training.toml [gpu-hopper]), which
    # brings the product to MAMF's H100 fp8/bf16 ratio of achievable fractions:
    # (1402.6 / 1979) / (794.5 / 989) = 0.8823, so 2 x 0.8823 = 1.76x
    from roofline.scenarios.training.factors import training_factors

    scale = training_factors("gpu", "h100-sxm5").dtype_scale
    assert 0.6125 * scale == pytest.approx((1402.6 / 1979) / (794.5 / 989), rel=1e-3)
    assert f.tokens_per_s / b.tokens_per_s == pytest.approx(2 * 0.6125 * scale, rel=0.06)


def test_held_out_fp8_runs_and_the_page_shows_them() -> None:
    """The shipped factors keep every held-out run within 20 % (median |error| <= 10 %); the
    left column (fp8 at the 16-bit training fraction) is fp8_rows(1.0), the runs priced with
    the Hopper table's dtype_scale undone: fp8 matmuls 1 / 0.8823 faster than shipped."""
    after, before = fp8.fp8_rows(), fp8.fp8_rows(1.0)
    assert all(abs(r["error"]) <= 0.20 for r in after)
    assert sorted(abs(r["error"]) for r in after)[len(after) // 2 - 1] <= 0.10
    for a, b in zip(after, before):
        assert b["ours"] > a["ours"]  # the faster matmuls of the left column
        assert b["ours"] / a["ours"] < 1 / 0.8823  # never more than the matmuls' own speed-up
    doc = DOC.read_text(encoding="utf-8")
    assert fp8.fp8_table((before, after)) in doc
    # the prose quotes the same medians and range through inline markers
    figs = fp8.fp8_figures((before, after))
    for k, v in figs.items():
        assert f"<!--v:{k}-->{v}<!--/v-->" in doc, k
    # by hand: seven runs (six NeMo fine-tuning rows, Megatron-Bridge's DeepSeek-V3; the known
    # outlier apart), the median |error| is the 4th smallest
    e = sorted(abs(r["error"]) for r in after)
    assert len(e) == 7
    assert figs["fp8.after_median"] == f"{e[3]:.1%}".replace("%", " %")


def test_a_bad_dtype_factor_is_refused() -> None:
    from roofline.engine.efficiency import read_efficiency
    from roofline.errors import SpecError

    q = {"value": 3.0, "unit": "1", "source": "s"}
    with pytest.raises(SpecError, match="gemm_dtype.fp8"):
        read_efficiency({"gemm_dtype": {"fp8": q}}, sources={"s": "x"}, origin="t", label="t")
    with pytest.raises(SpecError, match="unknown factor gemm_dtype.bf16"):
        read_efficiency({"gemm_dtype": {"bf16": {**q, "value": 0.5}}}, sources={"s": "x"},
                        origin="t", label="t")


def test_nemo_rows_price_the_attention_their_stack_ran() -> None:
    """NeMo 24.07 ran Transformer Engine 1.8 (source te18): cuDNN fused attention on H100, in
    16 bits (fp8_dpa off; no FlashAttention-3 backend in TE v1.8). So its six rows are priced
    with "cudnn", whose Hopper table has no fp8 forward rate, not with "auto" (FA3 on Hopper,
    which would take its fp8 forward rate in these fp8 runs: faster)."""
    from roofline._data import DATA, read_toml
    from roofline.engine.presets import efficiency_for
    from roofline.specs.resolve import hardware
    from roofline.validation.training_runs import cases, predict_run

    nemo = [c for c in cases() if c.source == "nemo2407"]
    assert len(nemo) == 6
    assert all(c.scenario["precision"] == "fp8" for c in nemo)
    assert all(c.scenario.get("attention_kernel") == "cudnn" for c in nemo)
    src = read_toml(DATA / "validation" / "training_runs.toml")["sources"]["te18"]
    assert all(s in src for s in ("1.8.0.dev0", "v1.8", "fp8_dpa", "F16_arbitrary_seqlen"))
    h100 = hardware("h100-sxm5")
    assert efficiency_for(h100, "default", "cudnn").attention.fp8_fwd is None
    assert efficiency_for(h100, "default", "auto").attention.fp8_fwd is not None  # FA3's
    r, _ = predict_run(nemo[0])
    r_fa3, _ = predict_run(nemo[0], "fa3")
    assert r.step_time > r_fa3.step_time
