"""``_args.checked`` accepts an int in a count's range, a choice's option and a bool for a flag
without calling the rule; every other value still goes through the rule (a bool is never an
int, a float is converted, an out-of-range value is refused naming it)."""

from __future__ import annotations

from typing import Any

import pytest

from roofline import _args as A
from roofline._args import ArgumentError

calls: list[str] = []


def _counting(rule: A.Rule) -> A.Rule:
    """``rule`` registered with the same fast-path data, counting its calls."""
    def r(name: str, v: Any) -> Any:
        calls.append(name)
        return rule(name, v)

    for fast in (A._INT_RANGE, A._STR_OPTIONS, A._INT_OPTIONS):
        if rule in fast:
            fast[r] = fast[rule]  # type: ignore[index]
    return r


COUNT = _counting(A.count(1, 8))
CHOICE = _counting(A.choice("a", "b", 0, 3))
OPT = A.optional(A.count(2, 4))


@A.checked(n=COUNT, c=CHOICE, f=A.flag, o=OPT)
def fn(*, n: int = 1, c: Any = "a", f: bool = False, o: int | None = None) -> tuple[Any, ...]:
    return n, c, f, o


def test_fast_values_skip_the_rule_and_pass_unchanged() -> None:
    calls.clear()
    assert fn(n=8, c="b", f=True, o=3) == (8, "b", True, 3)
    assert fn(c=3) == (1, 3, False, None)
    assert calls == []


def test_other_values_go_through_the_rule() -> None:
    calls.clear()
    assert fn(n=4.0) == (4, "a", False, None) and type(fn(n=4.0)[0]) is int  # converted
    assert calls == ["n", "n"]
    for kw in (dict(n=True), dict(n=9), dict(n=0), dict(c="z"), dict(c=1), dict(c=True),
               dict(f=1), dict(f="yes"), dict(o=5), dict(o=True)):
        with pytest.raises(ArgumentError, match=next(iter(kw))):
            fn(**kw)
    assert fn(c=3.0) == (1, 3, False, None)  # an integral float: the rule's int


def test_optional_keeps_the_fast_path() -> None:
    assert A._INT_RANGE[OPT] == (2, 4)
    opt_choice = A.optional(A.choice("x", 1))
    assert A._STR_OPTIONS[opt_choice] == {"x"} and A._INT_OPTIONS[opt_choice] == {1}
