"""README.md's "How close to reality" figures are inline markers the regenerate command's
``readme`` step fills from the validation code (roofline.validation.readme_figures)."""

from __future__ import annotations

import statistics
from pathlib import Path

from roofline.validation import training
from roofline.validation.readme_figures import readme_figures

README = Path(__file__).parents[2] / "README.md"


def test_readme_figures_are_the_codes() -> None:
    text = README.read_text(encoding="utf-8")
    errs = training.training_errors()
    figs = readme_figures({"training-errors": errs})
    for k, v in figs.items():
        assert f"<!--v:{k}-->{v}<!--/v-->" in text, k
    # by hand: the training row's in-sample median and worst are the case table's
    e = sorted(abs(x) for _, _, x, _ in errs)
    assert figs["readme.training.median"] == f"{statistics.median(e):.1%}".replace("%", " %")
    assert figs["readme.training.worst"] == f"{e[-1]:.1%}".replace("%", " %")
    assert figs["readme.training.n"] == "19"
