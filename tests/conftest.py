"""Shared pytest configuration."""

from pathlib import Path

import pytest


# -- hypothesis profiles (issue 11 §5) --------------------------------------------------------
# "ci" (default) keeps every property test within the suite's time; "deep" is run by hand
# (HYPOTHESIS_PROFILE=deep) and its figures go into docs/validation/robustness.md.
def _hypothesis_profiles() -> None:
    import os

    try:
        from hypothesis import HealthCheck, settings
    except ImportError:  # the test extra brings hypothesis; without it those tests skip
        return
    quiet = [HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large]
    settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True,
                              suppress_health_check=quiet, print_blob=True)
    settings.register_profile("deep", max_examples=800, deadline=None,
                              suppress_health_check=quiet, print_blob=True)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


_hypothesis_profiles()


# -- generated tables in the docs ------------------------------------------------------------
@pytest.fixture
def doc_block():
    """``doc_block(path, name)``: the text between ``<!-- name: ... -->`` and
    ``<!-- end name -->`` in a docs page (a table the validation code generates)."""
    import re

    def read(path, name: str) -> str:
        text = Path(path).read_text(encoding="utf-8")
        m = re.search(rf"<!-- {name}: .*? -->\n(.*?)\n<!-- end {name} -->", text, re.S)
        assert m is not None, f"{path}: no <!-- {name}: ... --> block"
        return m.group(1)

    return read


# -- worked examples' printed output in the docs ---------------------------------------------
@pytest.fixture
def shown_output():
    """``check(path, text, outputs)``: every worked example of page ``path`` printed what the
    page shows. ``text`` is the page as read, ``outputs`` a list of ``(start, end, printed)``:
    the span in ``text`` of one shown output and what its example printed. Under
    ``ROOFLINE_UPDATE_DOCS=1`` the shown outputs are rewritten instead (review the diff);
    ``python -m roofline.validation.regenerate`` runs these tests so (its docs step) and,
    with ``--check``, without the switch: a failure is a stale page."""
    import os

    def check(path, text: str, outputs: list[tuple[int, int, str]]) -> None:
        assert outputs, f"{path}: no worked example found"
        if os.environ.get("ROOFLINE_UPDATE_DOCS"):
            new, last = [], 0
            for start, end, printed in sorted(outputs):
                new += [text[last:start], printed]
                last = end
            if "".join(new) + text[last:] != text:
                Path(path).write_text("".join(new) + text[last:], encoding="utf-8")
            return
        for start, end, printed in outputs:
            assert printed == text[start:end], (
                f"{path}: a worked example prints\n{printed}\nwhere the page shows\n"
                f"{text[start:end]}\n(stale page: rerun with ROOFLINE_UPDATE_DOCS=1 or "
                "python -m roofline.validation.regenerate --only docs)")

    return check
