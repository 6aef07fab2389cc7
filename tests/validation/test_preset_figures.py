"""The preset factors the validation pages quote (roofline.validation.preset_figures) are the ones
the engine and the training model load, and each product is the arithmetic it names."""

from __future__ import annotations

from roofline.engine.presets import arch_tables, default_tables
from roofline.scenarios.training.factors import training_factors
from roofline.validation.preset_figures import preset_figures


def test_preset_figures_are_what_the_models_load() -> None:
    f = preset_figures()
    gpu = default_tables()["gpu"]
    cdna3 = arch_tables()["mi300x"][1]
    train, hopper = training_factors("gpu"), training_factors("gpu", "h100-sxm5")
    cdna3_train = training_factors("gpu", "mi300x")
    fp8 = gpu.gemm_dtype.of("fp8")
    assert float(f["preset.gpu.fp8"]) == fp8
    assert float(f["preset.gpu.gemm_max"]) == gpu.gemm.max
    assert float(f["preset.cdna3.gemm_max"]) == cdna3.gemm.max
    assert float(f["preset.train.gemm_max"]) == train.gemm_max
    assert float(f["preset.train.hopper.gemm_max"]) == hopper.gemm_max
    assert float(f["preset.train.hopper.dtype_scale"]) == hopper.dtype_scale
    assert float(f["preset.train.cdna3.gemm_max"]) == cdna3_train.gemm_max
    # the products: today 0.80 × 0.6125 = 0.49; 0.56 × 0.6125 = 0.343; 0.69 × 0.6125 = 0.42;
    # 0.6125 × 1.440 = 0.882 and 0.54 × 0.882 = 0.476
    assert f["preset.gpu.fp8_of_peak"] == f"{gpu.gemm.max * fp8:.2f}"
    assert f["preset.cdna3.fp8_of_peak"] == f"{cdna3.gemm.max * fp8:.3f}"
    assert f["preset.train.fp8_of_peak"] == f"{train.gemm_max * fp8:.2f}"
    assert f["preset.train.hopper.fp8_ratio"] == f"{fp8 * hopper.dtype_scale:.3f}"
    assert f["preset.train.hopper.fp8_of_peak"] == \
        f"{hopper.gemm_max * fp8 * hopper.dtype_scale:.3f}"


def test_pages_quote_the_preset_figures() -> None:
    """Every ``<!--v:preset.KEY-->`` marker on a validation page holds today's value, and each
    such page is one the regenerate command fills (its registry entry has a figures function)."""
    from pathlib import Path

    from roofline.validation import regenerate as R

    f = preset_figures()
    quoting = set()
    for page in sorted((Path(__file__).parents[2] / "docs" / "validation").glob("*.md")):
        quoted, wrong = R.quoted_figures(page.read_text(encoding="utf-8"), f)
        assert not wrong, (page.name, wrong)
        if quoted:
            quoting.add(page.name)
            assert R.PAGES.get(page.name, (None, None))[1] is not None, page.name
    assert quoting >= {"fp8.md", "gemm.md", "serving.md", "training.md", "vendors.md"}


def test_a_factor_gone_from_the_presets_is_an_error_naming_its_marker(monkeypatch) -> None:
    """A preset path no longer there (a factor renamed or removed) stops the regenerate command
    with an error naming the page marker and the path, not a KeyError traceback."""
    import pytest

    from roofline.errors import SpecError
    from roofline.validation import preset_figures as P

    gone = dict(P.PRESET_FIGURES)
    gone["preset.gpu.gemm_max"] = ("default", ("gpu", "gemm", "no_such_factor"), "{:.2f}")
    monkeypatch.setattr(P, "PRESET_FIGURES", gone)
    with pytest.raises(SpecError, match=r"<!--v:preset\.gpu\.gemm_max-->.*gpu\.gemm\.no_such"):
        P.preset_figures()
