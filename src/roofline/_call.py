"""A result remembers the call that made it: the levers re-run it with one thing changed.

``records_call("solve")`` wraps a public entry point so that its result carries a ``Call``
(the function's name, the model and hardware as given and the keyword arguments). ``Call``
re-runs itself with changes (``call.with_(batch=8).run()``) and prints as the exact roofline
call a user can paste (``rl.solve('resnet50', 'A100', batch=8, precision='fp16')``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ._frozen import fast_init

__all__ = ["Call", "records_call", "call_of"]


@fast_init()  # one per solve/serve/train result (roofline/_frozen.py)
@dataclass(frozen=True, slots=True)
class Call:
    """One public call: ``fn(model, hardware, **kwargs)``."""

    fn: str  #: "solve", "serve" or "train"
    model: Any  #: as the user gave it (zoo name, path, Model)
    hardware: Any  #: as the user gave it (zoo name, path, Hardware, Cluster)
    kwargs: dict[str, Any] = field(default_factory=dict)

    def with_(self, *, model: Any = None, hardware: Any = None, **changes: Any) -> Call:
        """The same call with some arguments changed (``None`` for model/hardware: keep)."""
        kw = dict(self.kwargs)
        kw.update(changes)
        return Call(self.fn, self.model if model is None else model,
                    self.hardware if hardware is None else hardware, kw)

    def run(self) -> Any:
        return _entry(self.fn)(self.model, self.hardware, **self.kwargs)

    def __str__(self) -> str:
        defaults = _defaults(self.fn)
        args = [_show(self.model), _show(self.hardware)]
        args += [f"{k}={_show(v)}" for k, v in self.kwargs.items()
                 if k == "precision" or not (k in defaults and _same(defaults[k], v))]
        return f"rl.{self.fn}({', '.join(args)})"


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except Exception:
        return False


@functools.lru_cache(maxsize=8)
def _defaults(fn: str) -> dict[str, Any]:
    """Keyword defaults of an entry point (a call string leaves them out)."""
    import inspect

    sig = inspect.signature(_entry(fn))
    return {k: p.default for k, p in sig.parameters.items()
            if p.default is not inspect.Parameter.empty}


def _show(v: Any) -> str:
    """A value as the user would type it: zoo objects by key, files by path."""
    if isinstance(v, str | int | float | bool | type(None)):
        return repr(v)
    if isinstance(v, tuple | list):
        inner = ", ".join(_show(x) for x in v)
        return f"({inner},)" if isinstance(v, tuple) and len(v) == 1 else (
            f"({inner})" if isinstance(v, tuple) else f"[{inner}]")
    if isinstance(v, set | frozenset):
        return "{" + ", ".join(sorted(_show(x) for x in v)) + "}"
    key = getattr(v, "key", None)
    label = getattr(v, "label", None)  # Precision
    if isinstance(label, str):
        return repr(label)
    if isinstance(key, str):
        return repr(key)
    return f"<{type(v).__name__}>"


def _entry(fn: str) -> Callable[..., Any]:
    import roofline as rl

    return getattr(rl, fn)


def records_call(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a public ``fn(model, hardware, **kw)`` so its result carries its ``Call``."""

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def inner(model: Any, hardware: Any, **kwargs: Any) -> Any:
            res = fn(model, hardware, **kwargs)
            try:
                object.__setattr__(res, "_call", Call(name, model, hardware, dict(kwargs)))
            except (AttributeError, TypeError):  # a result type without the slot
                pass
            return res

        return inner

    return wrap


def call_of(result: Any) -> Call:
    """The call that produced ``result`` (a Result, ServeResult or TrainingResult)."""
    from .errors import SpecError

    c = getattr(result, "_call", None)
    if not isinstance(c, Call):
        raise SpecError(f"result: {type(result).__name__} carries no call to vary; pass the "
                        "model, hardware and scenario to rl.levers(...) instead")
    return c
