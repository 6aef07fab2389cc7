"""The refit of the GPU factors on the GPU inference cases (roofline.validation.inference_refit):
the in-sample and leave-one-source-out choice by hand on a small grid, and the page's generated
``refit`` block and the medians its prose quotes (docs/validation/inference.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roofline.validation.inference_refit import (
    PRESET,
    RefitGrid,
    best_set,
    loso_ratios,
    refit_figures,
    refit_grid,
    refit_table,
)

DOC = Path(__file__).parents[2] / "docs" / "validation" / "inference.md"

# three cases from two sources under three factor sets (r = ours / measured):
#   set 0 fits source a (1.0, 1.0), misses b by x2; set 1 fits b, misses a by x2;
#   set 2 is x1.2 everywhere
TOY = RefitGrid(cases=("a1", "a2", "b1"), sources=("a", "a", "b"),
                sets=({"k": 0.0}, {"k": 1.0}, {"k": 2.0}),
                ratios=((1.0, 1.0, 2.0), (2.0, 2.0, 1.0), (1.2, 1.2, 1.2)),
                preset=(1.0, 1.0, 1.0))


def test_best_set_and_leave_one_source_out_by_hand() -> None:
    # in-sample over all three: RMS log = sqrt(ln(2)^2 / 3) = 0.400 for set 0,
    # sqrt(2 ln(2)^2 / 3) = 0.566 for set 1, ln(1.2) = 0.182 for set 2 -> set 2
    assert best_set(TOY.ratios, [0, 1, 2]) == 2
    # fitted on a's cases only: set 0 (0 error); on b's only: set 1
    assert best_set(TOY.ratios, [0, 1]) == 0 and best_set(TOY.ratios, [2]) == 1
    held, chosen = loso_ratios(TOY)
    # a held out -> the set fitted on b (1) -> a's cases at r = 2; b held out -> set 0 -> 2
    assert chosen == {"a": 1, "b": 0}
    assert held == [2.0, 2.0, 2.0]


def test_the_preset_row_is_the_preset() -> None:
    # the default preset's [gpu] values, read from data/presets/default.toml (a change there
    # must show on the page's preset row)
    from roofline._data import DATA, read_toml
    from roofline.units import UNIT_SCALE

    gpu = read_toml(DATA / "presets" / "default.toml")["gpu"]

    def si(q: dict) -> float:
        return q["value"] * UNIT_SCALE[q["unit"]]

    assert PRESET == pytest.approx({
        "gemm_max": si(gpu["gemm"]["max"]), "memory_max": si(gpu["memory"]["max"]),
        "gemm_a": si(gpu["gemm"]["a"]), "kernel_gap": si(gpu["launch"]["kernel_gap"]),
        "dispatch": si(gpu["launch"]["dispatch"])})


@pytest.fixture(scope="module")
def grid() -> RefitGrid:
    return refit_grid()  # about a minute on two loaded cores


def test_doc_carries_the_refit_table(doc_block, grid: RefitGrid) -> None:
    assert doc_block(DOC, "refit") == refit_table(grid), "regenerate with " \
        "`python -m roofline.validation.regenerate --only pages:inference.md`"
    text = DOC.read_text(encoding="utf-8")
    figs = refit_figures(grid)
    for k, v in figs.items():
        assert f"<!--v:{k}-->{v}<!--/v-->" in text, k
    # what the page's reading rests on: held out, the refit is no better than the preset
    assert float(figs["refit.loso"]) >= float(figs["refit.preset"])
    # every case priced under every set
    assert len(grid.ratios) == len(grid.sets) and all(len(r) == len(grid.cases)
                                                       for r in grid.ratios)
