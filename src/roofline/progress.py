"""Counted progress for long work (``measure``, ``validate``, big ``sweep``s, ``plan_serving``,
``explore``): each step's line with the rate and the time left, and on a terminal a live bar.

``progress=True`` means "on a terminal": the lines go to stderr only when stderr is a terminal
(piped or captured output stays clean); pass a stream (``progress=sys.stdout``, a file) to get
the lines there always, ``False`` for silence. On a terminal with the optional ``tqdm``
installed (``pip install 'roofline[progress]'``, imported only then) a live bar with rate and
ETA sits under the lines; without it, the lines carry the rate and ETA themselves. Work made of
many quick steps (the chunks of an exploration) passes ``min_interval``: a line at most that
often (and for the last step), while the bar counts every step. tqdm was
chosen because it is small, pure Python, widely used and renders correctly in terminals and
notebooks alike.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["Progress", "progress_stream", "fmt_eta"]


def progress_stream(progress: bool | TextIO | None) -> TextIO | None:
    """The stream progress lines go to: True -> stderr when it is a terminal, else None."""
    if progress is True:
        return sys.stderr if _isatty(sys.stderr) else None
    return progress or None


def _isatty(out: Any) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def fmt_eta(seconds: float) -> str:
    """``75.2`` -> ``"1:15"``, ``3725`` -> ``"1:02:05"``."""
    if seconds != seconds or seconds < 0:
        return "?"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class Progress:
    """``total`` steps; ``step(what, result)`` after each one prints
    ``[ 12/149] what: result  (2.1/s, 1:05 left)``."""

    def __init__(self, total: int, out: TextIO | None, *, unit: str = "step",
                 clock: Callable[[], float] = time.monotonic, bar: bool | None = None,
                 min_interval: float = 0.0) -> None:
        self.total, self.i, self.out, self.clock = max(int(total), 0), 0, out, clock
        self.t0 = clock()
        self.min_interval = float(min_interval)
        self._last = -float("inf")  #: clock of the last line printed
        self._bar = None
        if out is not None and (bar if bar is not None else _isatty(out)):
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self._bar = tqdm(total=self.total, file=out, unit=unit, leave=False,
                                 dynamic_ncols=True)

    def rate(self) -> float:
        """Steps per second so far."""
        dt = self.clock() - self.t0
        return self.i / dt if dt > 0 else float("nan")

    def eta(self) -> float:
        """Seconds left at the rate so far."""
        r = self.rate()
        return (self.total - self.i) / r if r and r == r and r > 0 else float("nan")

    def line(self, what: str, result: str = "") -> str:
        w = len(str(self.total))
        return (f"[{self.i:>{w}}/{self.total}] {what}{': ' + result if result else ''}"
                f"  ({self.rate():.3g}/s, {fmt_eta(self.eta())} left)")

    def step(self, what: str, result: str = "") -> None:
        self.i += 1
        if self.out is None:
            return
        if self._bar is not None:
            self._bar.update(1)
        now = self.clock()
        if self.i < self.total and now - self._last < self.min_interval:
            return  # a line at most every min_interval seconds (the bar counts every step)
        self._last = now
        text = self.line(what, result)
        if self._bar is not None:
            self._bar.write(text, file=self.out)
        else:
            print(text, file=self.out, flush=True)

    def note(self, msg: str) -> None:
        if self.out is None:
            return
        if self._bar is not None:
            self._bar.write(msg, file=self.out)
        else:
            print(msg, file=self.out, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
