"""``make_room``: the one eviction rule of the package's small insertion-ordered caches."""

from __future__ import annotations

from typing import Any


def make_room(cache: dict[Any, Any], cap: int) -> None:
    """Drop ``cache``'s oldest entries while it holds ``cap`` or more, before a new one is stored.

    Safe when threads evict at once: ``cache.pop(next(iter(cache)))`` raised ``KeyError`` when
    two threads took the same oldest key (and ``StopIteration`` / ``RuntimeError`` when another
    emptied or resized the dict between ``iter`` and ``next``); here a thread that lost the
    race looks again until the cache is under its cap (so contention cannot grow it).
    """
    while len(cache) >= cap:
        try:
            cache.pop(next(iter(cache)), None)
        except StopIteration:  # emptied by another thread
            return
        except RuntimeError:  # resized by another thread between iter and next: look again
            continue
