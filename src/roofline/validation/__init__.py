"""Published measurements as data, and how well the model and its fitted profiles meet them.

* ``load_cases(domain)``: the one loader of data/validation/<domain>.toml (``inference``,
  ``serving``, ``training``); it refuses a case without a source and its table / page.
* ``leave_one_source_out``: a fitted profile's error in-sample and with each source left out of
  its fit (``roofline.validation.serving.serving_holdout``,
  ``roofline.validation.training.training_holdout``).

Not imported by ``import roofline``: ``import roofline.validation``.
"""

from .cases import DOMAINS, Case, ValidationSet, load_cases, parse_cases
from .holdout import (
    ErrorSummary,
    FitReport,
    Refit,
    SourceHoldout,
    error_summary,
    holdout_tables,
    leave_one_source_out,
)

__all__ = ["DOMAINS", "Case", "ValidationSet", "load_cases", "parse_cases", "ErrorSummary",
           "FitReport", "Refit", "SourceHoldout", "error_summary", "holdout_tables",
           "leave_one_source_out"]
