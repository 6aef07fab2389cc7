"""Progress of long work: each line carries the rate and the time left; a live bar on a terminal
(tqdm, optional); silence when ``progress=True`` and stderr is not a terminal."""

import io
import re
import sys

import pytest

from roofline.progress import Progress, fmt_eta, progress_stream


class _Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t


def test_rate_and_time_left_from_the_clock():
    clk, out = _Clock(), io.StringIO()
    p = Progress(10, out, clock=clk)
    clk.t += 4.0
    p.step("GEMM 512³", "1.2 TFLOP/s")
    clk.t += 4.0
    p.step("STREAM copy")
    # 2 steps in 8 s: 0.25/s; 8 steps left: 32 s
    lines = out.getvalue().splitlines()
    assert lines[0] == "[ 1/10] GEMM 512³: 1.2 TFLOP/s  (0.25/s, 0:36 left)"  # 9 / 0.25 = 36 s
    assert lines[1] == "[ 2/10] STREAM copy  (0.25/s, 0:32 left)"
    assert p.rate() == pytest.approx(0.25) and p.eta() == pytest.approx(32.0)


def test_fmt_eta():
    assert fmt_eta(75.2) == "1:15" and fmt_eta(3725) == "1:02:05" and fmt_eta(float("nan")) == "?"


def test_silent_off_a_terminal_and_none():
    assert progress_stream(False) is None and progress_stream(None) is None
    buf = io.StringIO()
    assert progress_stream(buf) is buf  # an explicit stream always gets the lines
    # under pytest stderr is captured, not a terminal: True means silence
    assert not sys.stderr.isatty() and progress_stream(True) is None
    p = Progress(3, None)
    p.step("x")
    p.note("y")  # nothing to print to, nothing raised


def test_live_bar_on_a_terminal():
    pytest.importorskip("tqdm")

    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    p = Progress(4, out, unit="benchmark")
    assert p._bar is not None
    for k in range(4):
        p.step(f"bench {k}")
    p.close()
    text = out.getvalue()
    assert "[1/4] bench 0" in text and "[4/4] bench 3" in text
    assert re.search(r"benchmark/s", text)  # tqdm's own rate


def test_measure_lines_carry_rate_and_eta():
    from roofline.calibrate.backends import FakeBackend, FakeMachine
    from roofline.calibrate.measure import measure

    out = io.StringIO()
    measure(backends=[FakeBackend(FakeMachine())], quick=True, progress=out,
            date="2026-01-01", host="example")
    steps = [ln for ln in out.getvalue().splitlines() if ln.startswith("[")]
    assert steps and all(re.search(r"\(\S+/s, (\d+:)?\d+:\d\d left\)$", ln) or "?" in ln
                         for ln in steps)
    n = int(re.match(r"\[\s*\d+/(\d+)\]", steps[0]).group(1))
    assert len(steps) == n  # the count announced is the count done
