"""What one ``python -m roofline.validation.regenerate`` run computes once and shares between its
steps (``roofline.validation.regenerate``): ``once(key, make)`` memoizes a report for the run,
``shared_reports()`` makes the hold-out reports the residuals step and the pages step both need
(the serving hold-out takes minutes) computed once per run. ``regenerate.run`` empties the memo
before and after, so nothing outlives the run: a later run (after a change) recomputes all."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["MEMO", "once", "shared_reports", "SHARED"]

#: key -> the report computed in this run
MEMO: dict[str, Any] = {}

#: (module of roofline.validation, function): the argument-free hold-out reports that
#: data/validation/residuals.toml and the validation pages are both made from
SHARED = (("serving", "serving_holdout"), ("training", "training_holdout"),
          ("training_runs", "hopper_holdout"), ("training_runs", "rows"),
          ("training_graphs", "rows"), ("llamacpp", "llamacpp_holdout"),
          ("tpu_training", "tpu_holdout"))


def once(key: str, make: Callable[[], Any]) -> Any:
    """``make()``, computed at most once per run under ``key``."""
    if key not in MEMO:
        MEMO[key] = make()
    return MEMO[key]


@contextmanager
def shared_reports() -> Iterator[None]:
    """While the block runs, each ``SHARED`` function called without arguments returns the
    run's one report (called with arguments, e.g. other cases, it computes as usual); the
    functions are restored after. Callers that look the function up on its module when they
    call it (the residuals step, the page generators) share it."""
    saved = []
    for mod, name in SHARED:
        m = importlib.import_module(f"{__package__}.{mod}")
        orig = getattr(m, name)

        def shared(*a: Any, _orig: Any = orig, _key: str = f"{mod}.{name}", **kw: Any) -> Any:
            return _orig(*a, **kw) if a or kw else once(_key, _orig)

        setattr(m, name, shared)
        saved.append((m, name, orig))
    try:
        yield
    finally:
        for m, name, orig in saved:
            setattr(m, name, orig)
