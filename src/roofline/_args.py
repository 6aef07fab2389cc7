"""Argument checks at the public boundary: one rule per parameter, one decorator per function.

Every public function (``solve``, ``serve``, ``train``, ...) is wrapped by ``@checked(...)``
naming a rule for each of its parameters. A rule takes ``(name, value)`` and returns the value
normalised (numpy integer and float scalars become ``int``/``float``, so no numpy overflow
reaches the engine) or raises ``ArgumentError`` naming the argument, the value received and what
is allowed. Rules never convert text: ``"2"`` is refused for an integer, and so are ``2.9`` and
``True``; an integral float (``2.0``) is taken as the integer it equals.

Ranges are *plausible* bounds, not physical limits: they exist so that a typo (``batch=10**30``)
is refused at the boundary instead of overflowing an int64 array or looping for hours. They are
stated in each message, so a user who really needs more sees exactly which bound to raise.

Core module: stdlib + numpy (imported lazily) only; it imports nothing above ``errors``.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers
import sys
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from .errors import SpecError, closest

__all__ = [
    "ArgumentError", "Rule", "show", "checked", "count", "real", "flag", "text", "choice",
    "dtype", "seq", "optional", "instance_of", "path", "progress", "iso_date", "anything",
    "either", "mapping", "MAX_COUNT", "MAX_TOKENS", "MAX_DEVICES", "check_count",
]

F = TypeVar("F", bound=Callable[..., Any])
Rule = Callable[[str, Any], Any]

#: batch sizes, group sizes and similar counts
MAX_COUNT = 2**30
#: sequence lengths (prompt, output, context): far beyond any published context window
MAX_TOKENS = 2**30
#: parallel degrees and node counts
MAX_DEVICES = 2**20


class ArgumentError(SpecError, TypeError):
    """A public function got an argument it cannot use (also a ``ValueError`` and a
    ``TypeError``, so both familiar ``except`` clauses catch it)."""


def show(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


def _is_int(v: Any) -> bool:
    if type(v) is int:  # a plain int: Integral and not a bool (skips the ABC check)
        return True
    return isinstance(v, numbers.Integral) and not _is_bool(v)


def _is_bool(v: Any) -> bool:
    if isinstance(v, bool):
        return True
    np = _numpy()
    return np is not None and isinstance(v, np.bool_)


def _numpy() -> Any:
    return sys.modules.get("numpy")  # only a numpy scalar needs numpy, and then it is loaded


def check_count(name: str, v: Any, lo: int = 1, hi: int = MAX_COUNT) -> int:
    """``v`` as an ``int`` in [lo, hi]: ints, numpy integers and integral floats; never bools,
    strings or fractional floats."""
    if type(v) is int and lo <= v <= hi:
        return v
    kind = {1: "a positive integer", 0: "a non-negative integer"}.get(lo, f"an integer >= {lo}")
    if _is_int(v):
        iv = int(v)
    elif isinstance(v, numbers.Real) and not _is_bool(v):
        fv = float(v)
        if not (math.isfinite(fv) and fv.is_integer()):
            raise ArgumentError(f"{name} must be {kind}, got {show(v)}")
        iv = int(fv)
    else:
        raise ArgumentError(f"{name} must be {kind}, got {show(v)} ({type(v).__name__})")
    if iv < lo:
        raise ArgumentError(f"{name} must be >= {lo}, got {iv}")
    if iv > hi:
        raise ArgumentError(f"{name}={iv:,} is more than the largest accepted, {hi:,} "
                            f"(a plausibility cap: {kind} up to {hi:,})")
    return iv


def count(lo: int = 1, hi: int = MAX_COUNT) -> Rule:
    """An integer in [lo, hi]."""
    rule: Rule = lambda name, v: check_count(name, v, lo, hi)  # noqa: E731
    _INT_RANGE[rule] = (lo, hi)
    return rule


# What a rule returns unchanged, so that checked() accepts it without calling the rule (a
# call per argument is a tenth of a warm rl.train): an int in a count's range, a choice's str
# or int option, a bool for flag. Only values of exactly that type (never a bool for an int)
_INT_RANGE: dict[Rule, tuple[int, int]] = {}
_STR_OPTIONS: dict[Rule, frozenset[str]] = {}
_INT_OPTIONS: dict[Rule, frozenset[int]] = {}


def real(lo: float = 0.0, hi: float = math.inf, *, lo_open: bool = True,
         hi_open: bool = False, unit: str = "") -> Rule:
    """A finite real number in (lo, hi] (``lo_open``/``hi_open`` choose the interval ends)."""
    left, right = "(" if lo_open else "[", ")" if hi_open or math.isinf(hi) else "]"
    span = f"{left}{lo:g}, {hi:g}{right}" + (f" {unit}" if unit else "")

    def rule(name: str, v: Any) -> float:
        if type(v) is float and math.isfinite(v) and (lo < v if lo_open else lo <= v) and (
                v < hi if hi_open else v <= hi):
            return v
        if _is_bool(v) or isinstance(v, str) or not isinstance(v, numbers.Real):
            raise ArgumentError(f"{name} must be a finite number in {span}, got {show(v)} "
                                f"({type(v).__name__})")
        fv = float(v)
        ok = math.isfinite(fv) and (fv > lo if lo_open else fv >= lo) and (
            fv < hi if hi_open else fv <= hi)
        if not ok:
            raise ArgumentError(f"{name}={fv!r} is out of range; allowed: a finite number in "
                                f"{span}")
        return fv

    return rule


def flag(name: str, v: Any) -> bool:
    """True or False (numpy bools too); never 0/1, strings or None."""
    if v is True or v is False:
        return v
    if not _is_bool(v):
        raise ArgumentError(f"{name} must be True or False, got {show(v)} ({type(v).__name__})")
    return bool(v)


def text(name: str, v: Any) -> str:
    """A string (its values are checked by the function itself, which names the choices)."""
    if not isinstance(v, str):
        raise ArgumentError(f"{name} must be a string, got {show(v)} ({type(v).__name__})")
    return v


def choice(*options: Any) -> Rule:
    """One of ``options`` (strings or ints); the message suggests the closest name."""
    shown = ", ".join(repr(o) for o in options)
    has_int = any(isinstance(o, int) and not isinstance(o, bool) for o in options)

    def rule(name: str, v: Any) -> Any:
        if isinstance(v, str):
            if v in options:
                return v
            hint = closest(v, [o for o in options if isinstance(o, str)])
            raise ArgumentError(f"{name}={show(v)} is not allowed; allowed: {shown}.{hint}")
        if _is_int(v) and has_int:
            if int(v) in options:
                return int(v)
        elif isinstance(v, float) and v.is_integer() and int(v) in options:
            return int(v)
        raise ArgumentError(f"{name}={show(v)} is not allowed; allowed: {shown}")

    _STR_OPTIONS[rule] = frozenset(o for o in options if type(o) is str)
    _INT_OPTIONS[rule] = frozenset(o for o in options if type(o) is int)
    return rule


def dtype(name: str, v: Any) -> str:
    """A dtype name (validated against the dtype table by ``precision``)."""
    if not isinstance(v, str):
        raise ArgumentError(f"{name} must be a dtype name such as 'fp16', 'bf16' or 'int8', "
                            f"got {show(v)} ({type(v).__name__})")
    return v


def instance_of(*types: type, what: str) -> Rule:
    """An instance of one of ``types``."""

    def rule(name: str, v: Any) -> Any:
        if not isinstance(v, types):
            raise ArgumentError(f"{name} must be {what}, got {show(v)} ({type(v).__name__})")
        return v

    return rule


def path(name: str, v: Any) -> Any:
    """A file path: a non-empty ``str`` or ``os.PathLike`` without NUL characters."""
    import os

    raw = os.fspath(v) if isinstance(v, os.PathLike) else v
    if not isinstance(raw, str) or not raw or "\x00" in raw or len(raw) > 4096:
        raise ArgumentError(f"{name} must be a file path (a non-empty string or os.PathLike "
                            f"without NUL characters, at most 4096 long), got {show(v)}")
    return v


def progress(name: str, v: Any) -> Any:
    """True (stderr), False (silent) or a text stream (anything with ``write``)."""
    if _is_bool(v):
        return bool(v)
    if v is None or not callable(getattr(v, "write", None)):
        raise ArgumentError(f"{name} must be True, False or a text stream, got {show(v)}")
    return v


def iso_date(name: str, v: Any) -> str:
    """A calendar date written YYYY-MM-DD."""
    import datetime

    try:
        if isinstance(v, str) and len(v) == 10:
            return datetime.date.fromisoformat(v).isoformat()
    except ValueError:
        pass
    raise ArgumentError(f"{name} must be a date written YYYY-MM-DD, got {show(v)}")


def mapping(key: Rule, value: Rule, *, what: str) -> Rule:
    """A dict whose keys and values pass ``key`` and ``value``; returned as a new dict."""

    def rule(name: str, v: Any) -> dict[Any, Any]:
        if not isinstance(v, dict):
            raise ArgumentError(f"{name} must be a dict of {what}, got {show(v)} "
                                f"({type(v).__name__})")
        return {key(f"{name} key", k): value(f"{name}[{k!r}]", x) for k, x in v.items()}

    return rule


_NONE_OK: set[Rule] = set()  # rules that pass None through unchanged (optional(...))


def optional(rule: Rule) -> Rule:
    """``None`` or what ``rule`` allows."""
    def opt(name: str, v: Any) -> Any:
        return None if v is None else rule(name, v)

    _NONE_OK.add(opt)  # checked() skips it for None without calling it
    if rule in _INT_RANGE:
        _INT_RANGE[opt] = _INT_RANGE[rule]
    if rule in _STR_OPTIONS:
        _STR_OPTIONS[opt], _INT_OPTIONS[opt] = _STR_OPTIONS[rule], _INT_OPTIONS[rule]
    return opt


def anything(name: str, v: Any) -> Any:
    """Checked by the function itself (a model, a hardware spec, a stream...)."""
    return v


def either(*rules: Rule, what: str) -> Rule:
    """The first of ``rules`` that accepts the value; otherwise an error saying ``what``."""

    def rule(name: str, v: Any) -> Any:
        if type(v) is str and rules[0] in (text, dtype):
            return v
        for r in rules:
            try:
                return r(name, v)
            except ArgumentError:
                continue
        raise ArgumentError(f"{name} must be {what}, got {show(v)} ({type(v).__name__})")

    return rule


def seq(item: Rule, *, min_len: int = 1, max_len: int = 10**7, scalar: bool = False,
        what: str = "values", ints: tuple[int, int] | None = None) -> Rule:
    """A list/tuple/range/1-D array of items each checked by ``item``, returned as a tuple.
    ``scalar=True`` also takes one bare item as a one-element sequence. ``ints=(lo, hi)``:
    the items are integers in [lo, hi], so a numeric array is checked in one vectorised pass
    (``item`` still words the message)."""

    def rule(name: str, v: Any) -> tuple[Any, ...]:
        np = _numpy()
        if scalar and not isinstance(v, list | tuple | range) and not (
                np is not None and isinstance(v, np.ndarray) and v.ndim > 0):
            return (item(name, v),)
        if np is not None and isinstance(v, np.ndarray):
            if v.ndim != 1:
                raise ArgumentError(f"{name} must be a 1-D sequence of {what}, got an array "
                                    f"of shape {v.shape}")
            if ints is not None and v.dtype.kind in "iuf" and len(v) <= max_len:
                lo, hi = ints  # vectorised: a context grid may hold a million values
                bad = ~np.isfinite(v) | (v != np.round(v)) | (v < lo) | (v > hi) \
                    if v.dtype.kind == "f" else (v < lo) | (v > hi)
                if bad.any():
                    i = int(np.argmax(bad))
                    item(f"{name}[{i}]", v[i].item())  # raises with the standard message
                if len(v) < min_len:
                    raise ArgumentError(f"{name} must hold {_span(min_len, max_len)} {what}, "
                                        f"got {len(v):,}")
                return tuple(v.astype(np.int64).tolist())
            v = v.tolist()
        if isinstance(v, str | bytes | dict | set | frozenset) or not isinstance(v, Iterable):
            raise ArgumentError(f"{name} must be a list or tuple of {what}, got {show(v)} "
                                f"({type(v).__name__})")
        items = list(v) if len(v) <= max_len else None  # type: ignore[arg-type]
        if items is None or not min_len <= len(items):
            n = len(v)  # type: ignore[arg-type]
            raise ArgumentError(f"{name} must hold {_span(min_len, max_len)} {what}, got {n:,}")
        return tuple(item(f"{name}[{i}]", x) for i, x in enumerate(items))

    return rule


def _span(lo: int, hi: int) -> str:
    return f"exactly {lo}" if lo == hi else (f"at least {lo}" if hi >= 10**6 else
                                             f"{lo} to {hi:,}")


def checked(**rules: Rule) -> Callable[[F], F]:
    """Check (and normalise) the named arguments of a public function before it runs.

    Every parameter of the function should have a rule (``anything`` where the function checks
    it itself); tests/test_arguments.py fails for a public function with a parameter that has
    none, so a parameter added later cannot slip past unchecked. Unknown keyword
    arguments and missing required ones are ArgumentErrors naming the closest parameter.
    """

    def wrap(fn: F) -> F:
        sig = inspect.signature(fn)
        params = list(sig.parameters.values())
        names = [p.name for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        # a parameter without a rule is passed through unchecked (tests/test_arguments.py
        # fails until it gets one): never an import-time error for a parallel change
        all_rules = {n: rules.get(n, anything) for n in names}
        positional = [p.name for p in params
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        required = [p.name for p in params if p.default is p.empty
                    and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        var_kw = any(p.kind == p.VAR_KEYWORD for p in params)
        title = fn.__name__
        # the per-call work is kept to dictionary look-ups: solve() runs in tens of µs
        active = {n: r for n, r in all_rules.items() if r is not anything}
        pos_rules = [(i, n, active[n]) for i, n in enumerate(positional) if n in active]
        n_pos = len(positional)
        req_pos = sum(1 for n in positional if n in required)
        req_kw = [n for n in required if n not in positional]

        def slow_checks(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            if len(args) > n_pos:
                raise ArgumentError(
                    f"{title}() takes {n_pos} positional argument(s) "
                    f"({', '.join(positional)}), got {len(args)}; pass the others by keyword")
            for k in kwargs:
                if k not in all_rules and not var_kw:
                    raise ArgumentError(f"{title}() has no argument {k!r}."
                                        f"{closest(k, names)} Arguments: {', '.join(names)}")
                if k in positional[:len(args)]:
                    raise ArgumentError(f"{title}() got {k!r} twice (by position and by "
                                        "keyword)")
            miss = [n for n in required if n not in kwargs and
                    (n not in positional or positional.index(n) >= len(args))]
            if miss:
                raise ArgumentError(f"{title}() is missing the required argument(s) "
                                    f"{', '.join(repr(m) for m in miss)}")

        none_ok = _NONE_OK
        # values accepted without calling their rule (the rule would return them unchanged)
        ranges = {n: _INT_RANGE[r] for n, r in active.items() if r in _INT_RANGE}
        int_opts = {n: _INT_OPTIONS[r] for n, r in active.items() if r in _INT_OPTIONS}
        str_opts = {n: _STR_OPTIONS[r] for n, r in active.items() if r in _STR_OPTIONS}
        flags = frozenset(n for n, r in active.items() if r is flag)
        no: frozenset[Any] = frozenset()
        kw_only = frozenset(n for n in names if n not in positional)
        req_kw_set = frozenset(req_kw)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            na = len(args)
            keys = kwargs.keys()
            if na > n_pos or na < req_pos or not req_kw_set <= keys or not keys <= kw_only:
                slow_checks(args, kwargs)
            if pos_rules and na:
                lst = list(args)
                for i, n, rule in pos_rules:
                    if i < na:
                        lst[i] = rule(n, lst[i])
                args = tuple(lst)
            for k, v in kwargs.items():
                t = type(v)
                if t is int:
                    rg = ranges.get(k)
                    if rg is not None and rg[0] <= v <= rg[1] or v in int_opts.get(k, no):
                        continue
                elif t is str:
                    if v in str_opts.get(k, no):
                        continue
                elif t is bool and k in flags:
                    continue
                r = active.get(k)
                if r is not None and (v is not None or r not in none_ok):
                    kwargs[k] = r(k, v)
            return fn(*args, **kwargs)

        call.__signature__ = sig  # type: ignore[attr-defined]
        call.__checked_rules__ = rules  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return wrap
