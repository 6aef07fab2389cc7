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
