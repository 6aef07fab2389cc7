"""Timing with warm-up, repetitions, median and spread, and run-queue filtering.

A sample is one timed call (or ``inner`` back-to-back calls for sub-10 µs work). On a shared
machine another tenant can take the core mid-sample; Linux counts the time each thread waited
on the run queue in ``/proc/self/task/<tid>/schedstat`` (second field, ns). A sample during
which our threads waited more than ``max_wait_fraction`` of its duration is discarded and
counted, so the median is of undisturbed samples only.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Sample", "time_call", "time_after", "runqueue_wait_ns", "sample_from_times",
           "thread_limit", "stable_sample", "AGREE", "MAX_SPREAD"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sample:
    """Timings of one benchmark: the median of undisturbed repetitions and their spread."""

    median_s: float  #: median seconds per call
    p10_s: float  #: 10th percentile, s
    p90_s: float  #: 90th percentile, s
    n: int  #: samples kept
    discarded: int = 0  #: samples dropped for run-queue delay
    #: kept samples that themselves waited on the run queue beyond the threshold (every
    #: sample was disturbed: another process held the cores); 0 for an undisturbed Sample
    disturbed: int = 0
    #: the least run-queue wait, as a fraction of a sample's time, among disturbed kept samples
    wait_fraction: float = 0.0

    @property
    def spread(self) -> float:
        """(p90 − p10) / median: the relative spread of the kept samples."""
        return (self.p90_s - self.p10_s) / self.median_s if self.median_s > 0 else math.nan


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    i = q * (len(s) - 1)
    lo, hi = math.floor(i), math.ceil(i)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


def sample_from_times(times_s: list[float], discarded: int = 0, disturbed: int = 0,
                      wait_fraction: float = 0.0) -> Sample:
    """A Sample from per-call times (s)."""
    if not times_s:
        raise ValueError("no timings")
    return Sample(median_s=statistics.median(times_s), p10_s=_pct(times_s, 0.1),
                  p90_s=_pct(times_s, 0.9), n=len(times_s), discarded=discarded,
                  disturbed=disturbed, wait_fraction=wait_fraction)


_TASK_DIR = "/proc/self/task"


def runqueue_wait_ns() -> int:
    """Total ns this process's threads have waited on a run queue (0 where unsupported)."""
    total = 0
    try:
        tids = os.listdir(_TASK_DIR)
    except OSError:
        return 0
    for tid in tids:
        try:
            with open(f"{_TASK_DIR}/{tid}/schedstat", "rb") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total


def time_call(fn: Callable[[], object], *, warmup: int = 2, min_reps: int = 5,
              max_reps: int = 200, min_time_s: float = 0.05, inner: int = 1,
              sync: Callable[[], object] | None = None, max_wait_fraction: float = 0.05,
              max_time_s: float = 5.0, before: Callable[[], object] | None = None) -> Sample:
    """Time ``fn`` (``inner`` calls per sample) until ``min_reps`` kept samples and
    ``min_time_s`` have passed; per-call median and spread.

    ``sync`` (e.g. ``torch.cuda.synchronize``) is called before reading the clock. Samples whose
    run-queue wait exceeds ``max_wait_fraction`` of their duration are dropped; if every sample
    was disturbed the least disturbed half is kept rather than nothing. ``before``: called
    untimed ahead of every sample (e.g. an op that evicts the caches); its run-queue wait counts
    against the sample too.
    """
    for _ in range(warmup):
        if before:
            before()
        for _ in range(inner):
            fn()
    if sync:
        sync()
    kept: list[float] = []
    disturbed: list[tuple[float, float]] = []
    start = time.perf_counter()
    while True:
        w0 = runqueue_wait_ns()
        s0 = time.perf_counter_ns()
        if before:
            before()
            if sync:
                sync()
        t0 = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        if sync:
            sync()
        t1 = time.perf_counter_ns()
        wait = runqueue_wait_ns() - w0
        per_call = (t1 - t0) * 1e-9 / inner
        if wait > max_wait_fraction * (t1 - s0):
            disturbed.append((wait / max(t1 - s0, 1), per_call))
        else:
            kept.append(per_call)
        elapsed = time.perf_counter() - start
        n = len(kept) + len(disturbed)
        if (len(kept) >= min_reps and elapsed >= min_time_s) or n >= max_reps \
                or elapsed >= max_time_s:
            break
    n_dist, wait_fraction = 0, 0.0
    if len(kept) < max(1, min_reps // 2):
        disturbed.sort()
        take = disturbed[: max(1, len(disturbed) // 2)]
        kept += [t for _, t in take]
        n_dist, wait_fraction = len(take), take[0][0]
        disturbed = disturbed[max(1, len(disturbed) // 2):]
    return sample_from_times(kept, discarded=len(disturbed), disturbed=n_dist,
                             wait_fraction=wait_fraction)


#: two timing rounds of one item agree when their medians are within this factor
AGREE = 1.25
#: a round whose p10-p90 spread exceeds this fraction of its median is not trusted alone
MAX_SPREAD = 0.5


def stable_sample(time_round: Callable[[], Sample], *, max_rounds: int = 4,
                  agree: float = AGREE, max_spread: float = MAX_SPREAD) -> tuple[Sample, str]:
    """Time one item in rounds until two consecutive rounds agree, so a spike (another
    process's load, a frequency dip, a page-cache storm during one round) is never reported as
    the item's time.

    ``time_round()`` times the item once (a ``Sample``). Rounds are added until the medians of
    the last two agree within ``agree``×, neither round's spread exceeds ``max_spread`` and
    neither was disturbed (``Sample.disturbed``: every sample waited on the run queue while
    other processes held the cores); the faster of those two is returned with an empty note.
    After ``max_rounds`` without agreement the fastest round is returned with a note saying
    the item is unstable (its medians listed): callers keep such items out of error
    statistics.
    """
    rounds = [time_round()]
    while True:
        if len(rounds) >= 2:
            a, b = rounds[-2], rounds[-1]
            ok = max(a.median_s, b.median_s) <= agree * min(a.median_s, b.median_s) and \
                a.spread <= max_spread and b.spread <= max_spread and \
                not a.disturbed and not b.disturbed
            if ok:
                return min(a, b, key=lambda s: s.median_s), ""
        if len(rounds) >= max_rounds:
            break
        rounds.append(time_round())
    meds = ", ".join(f"{s.median_s * 1e3:.4g}" for s in rounds)
    loaded = [s for s in rounds if s.disturbed]
    why = (f"; {len(loaded)} of them under load from other processes (every sample waited "
           f">= {min(s.wait_fraction for s in loaded):.0%} of its time on the run queue)"
           if loaded else "")
    return min(rounds, key=lambda s: s.median_s), (
        f"unstable: {len(rounds)} timing rounds never agreed within {agree}x undisturbed "
        f"(medians {meds} ms){why}")


def time_after(fn: Callable[[], object], before: Callable[[], object], **kw: Any) -> Sample:
    """Time one call of ``fn`` right after an untimed call of ``before``, sample after sample
    (``time_call`` with ``before``; keyword arguments as there)."""
    return time_call(fn, before=before, **kw)


@contextlib.contextmanager
def thread_limit(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` compute threads in PyTorch (if loaded) and in the BLAS /
    OpenMP pools threadpoolctl finds; restore them after. ``None``: leave everything as is."""
    if threads is None:
        yield
        return
    if not isinstance(threads, int) or isinstance(threads, bool) or threads < 1:
        from ..errors import SpecError

        raise SpecError(f"threads must be a positive integer, got {threads!r}")
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch is not None else None
    with contextlib.ExitStack() as stack:
        try:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(threads))
        except ImportError:
            pass
        if torch is not None:
            torch.set_num_threads(threads)
        try:
            yield
        finally:
            if torch is not None and before is not None:
                torch.set_num_threads(before)
