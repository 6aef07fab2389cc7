"""Content keys of frozen specs, for caches: a hashable value of everything a spec holds.

Caches key on a spec's content, never on ``id()`` (an id is reused once its object is freed)
nor on its name (two specs of one name may differ). A frozen spec (``Hardware``, ``Cluster``,
``TransformerConfig``) keeps its key in a slot of its own (``key_slot()``: not an ``__init__``
argument, not compared, not shown, left out of pickles and ``dataclasses.replace`` copies),
filled on first use: a warm call reads one attribute, an edited copy starts empty.

``SpecKey`` holds the value with its hash computed once; a pickled key (inside a pickled
result or spec) takes its hash again when loaded, since ``hash()`` of a str or a type differs
between processes (PYTHONHASHSEED, addresses).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, fields, is_dataclass
from typing import Any

__all__ = ["SpecKey", "frozen_key", "key_slot", "state_without_keys", "KEY_SLOTS"]

#: the slots that hold a spec's memoized keys (never part of its content)
KEY_SLOTS = frozenset({"_frozen_key", "_spec_key"})
#: a slot's value when a field of the spec does not hash (no key: callers do not cache)
_NO_KEY = False


def key_slot() -> Any:
    """The dataclass field of a memoized key: unset (None) until first use, not an
    ``__init__`` argument, not compared, hashed or shown."""
    return field(default=None, init=False, compare=False, hash=False, repr=False)


class SpecKey:
    """A hashable value of a spec's content, its hash computed once."""

    __slots__ = ("value", "_hash")

    def __init__(self, value: tuple[Any, ...]) -> None:
        self.value = value
        self._hash = hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return self is other or (isinstance(other, SpecKey) and self._hash == other._hash
                                 and self.value == other.value)

    def __reduce__(self) -> tuple[Any, tuple[tuple[Any, ...]]]:
        """Pickled as its value: the hash is taken again in the loading process."""
        return (SpecKey, (self.value,))

    def __repr__(self) -> str:
        return f"SpecKey({self.value[0]!r}, {self._hash:#x})"


def frozen_key(x: Any) -> SpecKey | None:
    """A hashable value of every field of a frozen dataclass instance, nested specs, mappings
    and sequences included (each leaf with its type, a float as its exact text: NaN equals
    itself, -0.0 is not 0.0, 1 is not 1.0 or True), its hash computed once; None when
    a field does not hash. Equal specs (a reloaded file, a ``replace`` with the same values)
    give equal keys; an edited copy another one. Kept in the spec's ``_frozen_key`` slot where
    it has one (a spec without the slot is keyed again each call)."""
    try:
        k = x._frozen_key
    except AttributeError:
        return _new_key(x)
    if k is None:
        k = _new_key(x)
        object.__setattr__(x, "_frozen_key", _NO_KEY if k is None else k)
        return k
    return None if k is _NO_KEY else k


def _new_key(x: Any) -> SpecKey | None:
    try:
        return SpecKey(_freeze(x, top=True))
    except TypeError:
        return None


def _freeze(v: Any, top: bool = False) -> Any:
    if is_dataclass(v) and not isinstance(v, type):
        if not top and hasattr(type(v), "_frozen_key"):  # a nested spec: its own kept key
            k = frozen_key(v)
            if k is None:
                raise TypeError(f"a field of {type(v).__name__} does not hash")
            return k
        return (type(v), tuple((f.name, _freeze(getattr(v, f.name))) for f in fields(v)
                               if f.name not in KEY_SLOTS))
    if isinstance(v, Mapping):
        return ("mapping", tuple(sorted(((repr(a), _freeze(b)) for a, b in v.items()),
                                        key=lambda ab: ab[0])))
    if isinstance(v, list | tuple):
        return (type(v), tuple(_freeze(x) for x in v))
    if isinstance(v, float):  # NaN != NaN, -0.0 == 0.0: a float keys on its exact text
        return (type(v), repr(v))
    hash(v)  # TypeError for an unhashable leaf
    return v if type(v) is str else (type(v), v)  # 1 == 1.0 == True: the type tells them apart


def state_without_keys(self: Any) -> list[Any]:
    """A frozen slotted dataclass's ``__getstate__`` that leaves its kept keys out (unset in
    the copy, taken again on first use there)."""
    return [None if f.name in KEY_SLOTS else getattr(self, f.name) for f in fields(self)]
