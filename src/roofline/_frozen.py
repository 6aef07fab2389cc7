"""``fast_init``: a faster ``__init__`` for a frozen, slotted dataclass, same behaviour.

A frozen dataclass's generated ``__init__`` sets each field with ``object.__setattr__(self,
name, value)`` (its own ``__setattr__`` raises), a call that costs ~5× a plain attribute store:
~110 ns a field on the 2-core dev machine, ~4.5 µs for solve's 41-field ``Result`` — a fifth of
a solve. ``fast_init(cls)`` replaces that ``__init__`` with one of the same signature, defaults
and default factories that turns the instance into a mutable twin class of the same slots for
the stores (``self.x = x``, ~20 ns) and back into ``cls`` before ``__post_init__``. Nothing else
changes: the instance is of type ``cls``, still frozen (assignment raises
``FrozenInstanceError``), ``dataclasses.replace`` / ``fields`` work as before (they call this
``__init__`` or read the slots); pickling stores the fields' values in order (below).

``build_on_pickle=("_prefill", ...)``: fields holding a zero-argument builder that a pickle
stores built (a builder may close over what does not pickle); a pickle also stores every lazy
field computed and drops a ``_call`` that does not pickle (a call on an imported model holds
the traced module) — the copy's ``levers()`` then says it has no call to vary.

``lazy={"energy": fn}``: a field passed the value ``LAZY`` is left unset and computed by
``fn(self)`` the first time it is read (then stored; ``dataclasses.replace`` reads it, so a
replaced copy carries the computed value — ``fn`` must read only inputs fixed at construction,
never fields a ``replace`` could change, or the value would go stale). Stdlib only.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["fast_init", "LAZY"]

T = TypeVar("T")


class _Lazy:
    """The marker of a field computed on first read (``fast_init(lazy=...)``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "LAZY"


LAZY: Any = _Lazy()


def fast_init(*, lazy: dict[str, Callable[[Any], Any]] | None = None,
              build_on_pickle: tuple[str, ...] = ()) -> Callable[[type[T]], type[T]]:
    """Class decorator (apply above ``@dataclass(frozen=True, slots=True)``); see the module."""

    def wrap(cls: type[T]) -> type[T]:
        params = getattr(cls, "__dataclass_params__", None)
        slots: tuple[str, ...] = cls.__dict__.get("__slots__", ())
        if params is None or not params.frozen or "__slots__" not in cls.__dict__:
            raise TypeError(f"fast_init: {cls.__name__} is not a frozen slotted dataclass")
        fs = dataclasses.fields(cls)  # type: ignore[arg-type]
        if set(lazy or ()) - {f.name for f in fs if f.init}:
            raise TypeError(f"fast_init: {cls.__name__}: a lazy field must be an init field")
        own = list(inspect.signature(cls.__init__).parameters)[1:]
        if own != [f.name for f in fs if f.init and not f.kw_only] + [
                f.name for f in fs if f.init and f.kw_only]:  # an InitVar, a custom __init__
            raise TypeError(f"fast_init: {cls.__name__}.__init__ is not the dataclass's own")
        # the same slots on the same bases: the layouts match, so ``__class__`` can switch
        twin = type(f"_{cls.__name__}Init", cls.__bases__,
                    {"__slots__": slots, "__module__": cls.__module__,
                     "__doc__": f"{cls.__name__} while its __init__ runs (roofline._frozen)",
                     "_construction_twin": True})
        cls.__init__ = _init_function(cls, twin, fs, lazy or {})  # type: ignore[method-assign]
        for name, fn in (lazy or {}).items():
            setattr(cls, name, _LazySlot(cls.__dict__[name], fn, f"{cls.__name__}.{name}"))
        if set(build_on_pickle) - {f.name for f in fs}:
            raise TypeError(f"fast_init: {cls.__name__}: build_on_pickle names a non-field")
        get, put = _state_functions(tuple(f.name for f in fs), frozenset(build_on_pickle))
        setattr(cls, "__getstate__", get)  # noqa: B010 - mypy refuses the plain assignment
        setattr(cls, "__setstate__", put)  # noqa: B010
        return cls

    return wrap


def _init_function(cls: type, twin: type, fs: tuple[dataclasses.Field[Any], ...],
                   lazy: dict[str, Callable[[Any], Any]]) -> Callable[..., None]:
    """An ``__init__`` with the dataclass's signature that stores through ``twin``."""
    env: dict[str, Any] = {"_cls": cls, "_twin": twin, "_set": object.__setattr__,
                           "_FACTORY": object(), "_LAZY": LAZY}
    pos: list[str] = []
    kw: list[str] = []
    body = ["_set(self, '__class__', _twin)"]
    for f in fs:
        n = f.name
        if not f.init:  # as the dataclass's init: its default (or factory), else left unset
            if f.default is not dataclasses.MISSING:
                env[f"_d_{n}"] = f.default
                body.append(f"self.{n} = _d_{n}")
            elif f.default_factory is not dataclasses.MISSING:
                env[f"_f_{n}"] = f.default_factory
                body.append(f"self.{n} = _f_{n}()")
            continue
        if f.default is not dataclasses.MISSING:
            env[f"_d_{n}"] = f.default
            arg = f"{n}=_d_{n}"
        elif f.default_factory is not dataclasses.MISSING:
            env[f"_f_{n}"] = f.default_factory
            arg = f"{n}=_FACTORY"
        else:
            arg = n
        (kw if f.kw_only else pos).append(arg)
        if f.default_factory is not dataclasses.MISSING:
            body.append(f"self.{n} = _f_{n}() if {n} is _FACTORY else {n}")
        elif n in lazy:
            body.append(f"if {n} is not _LAZY: self.{n} = {n}")
        else:
            body.append(f"self.{n} = {n}")
    body.append("self.__class__ = _cls")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    sig = ", ".join(["self", *pos, *(["*", *kw] if kw else [])])
    src = f"def __init__({sig}):\n" + "".join(f"    {line}\n" for line in body)
    exec(src, env)  # noqa: S102 - the code is built above from the class's own field names
    fn: Callable[..., None] = env["__init__"]
    fn.__qualname__ = f"{cls.__qualname__}.__init__"
    return fn


class _Unset:
    """A pickle's marker of a slot left unset (an ``init=False`` field without a default)."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "_UNSET"


_UNSET = _Unset()


def _pickles(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


def _state_functions(names: tuple[str, ...], build: frozenset[str]
                     ) -> tuple[Callable[[Any], tuple[Any, ...]], Callable[[Any, Any], None]]:
    """``__getstate__`` / ``__setstate__``: the fields' values in order (see the module)."""

    def __getstate__(self: Any) -> tuple[Any, ...]:
        out = []
        for n in names:
            try:
                v = getattr(self, n)
            except AttributeError:
                v = _UNSET
            if n in build and callable(v):
                v = v()
            elif n == "_call" and v is not None and not _pickles(v):
                v = None
            out.append(v)
        return tuple(out)

    def __setstate__(self: Any, state: tuple[Any, ...]) -> None:
        for n, v in zip(names, state, strict=True):
            if v is not _UNSET:
                object.__setattr__(self, n, v)

    return __getstate__, __setstate__


class _LazySlot:
    """The class attribute of a lazy field: reads the slot, or computes, stores and returns
    the value where the slot is unset. Only this field's reads pass through Python; every other
    field keeps the interpreter's fast slot read."""

    __slots__ = ("member", "fn", "owner")

    def __init__(self, member: Any, fn: Callable[[Any], Any], owner: str) -> None:
        self.member, self.fn, self.owner = member, fn, owner

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        try:
            return self.member.__get__(obj, objtype)
        except AttributeError:
            pass
        try:
            value = self.fn(obj)
        except AttributeError as e:  # never let it read as "no such attribute"
            raise RuntimeError(f"{self.owner}: computing it failed: {e}") from e
        self.member.__set__(obj, value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        self.member.__set__(obj, value)

    def __delete__(self, obj: Any) -> None:
        self.member.__delete__(obj)
