"""make_room, the caches' one eviction rule: the cap holds, the oldest goes first, and threads
evicting at once never raise (the old ``d.pop(next(iter(d)))`` raised KeyError when two took the
same oldest key)."""

import sys
import threading

from roofline._cache import make_room


def test_the_oldest_entry_goes_at_the_cap():
    d = {k: k for k in range(4)}
    make_room(d, 5)
    assert list(d) == [0, 1, 2, 3]
    make_room(d, 4)
    assert list(d) == [1, 2, 3]
    make_room({}, 0)  # an empty cache at a cap of 0: nothing to drop, no error


def test_threads_evicting_at_once_never_raise():
    d: dict[int, int] = {}
    errors: list[BaseException] = []

    def work(base: int) -> None:
        try:
            for i in range(20_000):
                make_room(d, 8)
                d[base + i] = i
        except BaseException as e:  # noqa: BLE001 - any escape fails the test
            errors.append(e)

    ts = [threading.Thread(target=work, args=(n * 100_000,)) for n in range(4)]
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: the old rule then raised on every run
    try:
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert errors == []
    assert len(d) <= 8 + len(ts)  # each thread can add at most one past the cap at a time
