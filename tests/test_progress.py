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


# -- big sweeps, plans and explorations (issue 15) -----------------------------------------------

_LINE = re.compile(r"^\[\s*(\d+)/(\d+)\] .+  \([0-9.e+-]+/s, (\d+:\d\d|\?) left\)$")


def test_min_interval_keeps_lines_sparse_and_the_last():
    clk, out = _Clock(), io.StringIO()
    p = Progress(5, out, clock=clk, min_interval=1.0)
    for _ in range(5):
        clk.t += 0.3  # steps every 0.3 s: a line at most once a second, and the last one
        p.step("chunk")
    lines = out.getvalue().splitlines()
    assert [ln.split("]")[0] for ln in lines] == ["[1/5", "[5/5"]  # at 0.3 s (first) and 1.5 s


def test_sweep_progress_lines_and_same_table():
    import roofline as rl

    buf = io.StringIO()
    kw = dict(batch=[1, 2, 4, 8], precision=["fp16", "fp8"])
    s = rl.sweep("resnet50", ["A100", "H100"], progress=buf, **kw)
    lines = buf.getvalue().splitlines()
    assert lines and all(_LINE.match(ln) for ln in lines), lines
    m = _LINE.match(lines[-1])
    assert m.group(1) == m.group(2) == "4"  # 2 precisions x 2 parts (A100 has no fp8 peak)
    quiet = rl.sweep("resnet50", ["A100", "H100"], **kw)
    import numpy as np

    for c in s.table.columns:  # the lines change nothing priced (NaN rows: no fp8 on A100)
        np.testing.assert_array_equal(s.table[c], quiet.table[c])


def test_progress_true_is_silent_off_a_terminal(capsys):
    import roofline as rl

    rl.sweep("resnet50", "A100", batch=[1, 2], precision="fp16", progress=True)
    assert capsys.readouterr().err == ""
    from roofline.cli import main

    assert main(["sweep", "resnet50", "A100", "--batch", "1,2"]) == 0
    assert capsys.readouterr().err == ""


def test_bad_progress_is_refused():
    import roofline as rl
    from roofline.errors import RooflineError

    with pytest.raises(RooflineError, match="progress"):
        rl.sweep("resnet50", "A100", progress=3)


def test_plan_progress_counts_layouts_and_simulations():
    import roofline as rl

    wl = rl.Workload(prompt=rl.lengths("uniform", 500, 1500),
                     output=rl.lengths("uniform", 50, 150), rate=10.0)
    slo = rl.SLO(ttft_p99=1.0, tpot_p99=0.05)
    buf = io.StringIO()
    p = rl.plan_serving("llama-3.1-8b", "H100", devices=4, workload=wl, slo=slo, requests=300,
                        progress=buf)
    lines = buf.getvalue().splitlines()
    assert all(_LINE.match(ln) for ln in lines), lines
    lay = [ln for ln in lines if "] layout " in ln]
    sims = [ln for ln in lines if "] simulated " in ln]
    # every (tp, pp, precision) priced once; every sizing simulation once
    assert _LINE.match(lay[-1]).group(1) == _LINE.match(lay[-1]).group(2) == str(len(lay))
    assert len(lay) >= len(p.infeasible) + 1 and len(sims) == len(p.simulated)
    q = rl.plan_serving("llama-3.1-8b", "H100", devices=4, workload=wl, slo=slo, requests=300)
    assert q.best.layout == p.best.layout and q.simulated.to_dicts() == p.simulated.to_dicts()


def test_explore_progress_per_chunk():
    import roofline as rl

    space = rl.Space(model=["llama-3.1-8b"], hardware=["H100", "A100"],
                     scenario=dict(phase="decode", batch=[1, 8, 64], context=[2048, 4096]))
    buf = io.StringIO()
    res = rl.explore(space, objectives=["tokens_per_s"], constraints=["fits"], progress=buf)
    lines = buf.getvalue().splitlines()
    assert lines and all(_LINE.match(ln) for ln in lines), lines
    m = _LINE.match(lines[-1])
    assert m.group(1) == m.group(2) and int(m.group(2)) == len(list(space.chunks()))
    assert f"{res.evaluated:,} points priced" in lines[-1]
