"""``price_per_hour=``, ``region=``, ``pue=`` on solve/serve/train (issue 13).

``with_economics`` adds the three keyword arguments to a scenario function without touching its
body: they are validated before the call (a negative price, a PUE below 1 or an unknown region
raise, naming the argument) and stored on the result, whose ``cost_*``, ``energy_*`` and
``carbon_*`` properties (roofline.analysis.economics) read them. Stdlib only; the validation
is imported on first use.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["with_economics", "ECON_KW"]

F = TypeVar("F", bound=Callable[..., Any])
ECON_KW = ("price_per_hour", "region", "pue")


def with_economics(fn: F) -> F:
    """Decorate ``fn`` (returning a frozen result dataclass with the three fields)."""
    sig = inspect.signature(fn)
    extra = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation="float | None" if k != "region" else "str | None")
             for k in ECON_KW if k not in sig.parameters]

    @functools.wraps(fn)
    def wrapper(*args: Any, price_per_hour: Any = None, region: Any = None, pue: Any = None,
                **kw: Any) -> Any:
        given = price_per_hour is not None or region is not None or pue is not None
        if given:
            from .analysis.economics import check_economics

            price, reg, p = check_economics(price_per_hour, region, pue)
        r = fn(*args, **kw)
        if not given:
            return r
        from dataclasses import replace

        return replace(r, price_per_hour=price, region=reg, pue=p)

    wrapper.__signature__ = sig.replace(  # type: ignore[attr-defined]
        parameters=[*sig.parameters.values(), *extra])
    rules = getattr(fn, "__checked_rules__", None)
    if rules is not None:  # roofline._args.checked: the three are checked by check_economics
        from . import _args as A

        wrapper.__checked_rules__ = {  # type: ignore[attr-defined]
            **rules, **{k: A.anything for k in ECON_KW}}
    return wrapper  # type: ignore[return-value]
