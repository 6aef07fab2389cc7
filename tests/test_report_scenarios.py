"""The serving, training, planning and simulation reports in a real headless browser (Debian's
chromium, as tests/test_report_browser.py): the DOM holds the numbers the library computed, the
console stays silent, the page makes no request, names are escaped, a screenshot is saved; and
``roofline report serve|train|plan|simulate ... -o FILE`` writes the same reports."""

import html
import math
import re
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from browser import load, need_chromium

import roofline as rl
from roofline.cli import main
from roofline.units import fmt_bytes, fmt_time

ART = Path(__file__).resolve().parents[1] / "tests" / "_artifacts"
WL = dict(prompt=rl.lengths("uniform", 500, 1500), output=rl.lengths("uniform", 50, 150),
          rate=10.0)
SLO = rl.SLO(ttft_p99=1.0, tpot_p99=0.05)


@pytest.fixture(scope="module")
def chromium_exe():
    return need_chromium()


def _self_contained(page: str) -> None:
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", page)
    assert not re.search(r"url\((?!#)", page)
    assert "default-src 'none'" in page  # the CSP forbids any fetch


def _open(path: Path, name: str):
    shot = path.with_suffix(".png")
    got = load(path, screenshot=shot)
    assert got.console == [], got.console
    assert got.requests == [], got.requests
    assert got.screenshot is not None and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 30_000  # a blank page is a few kB
    if ART.exists():
        shutil.copy(shot, ART / f"report-{name}.png")
    return got, html.unescape(re.sub(r"<[^>]+>", " ", got.dom))


def _data_v(dom: str) -> list[float]:
    return [float(v) for v in re.findall(r'data-v="([^"]+)"', dom) if v != "NaN"]


def _has(values: list[float], x: float) -> bool:
    return any(math.isclose(v, x, rel_tol=1e-12) for v in values)


def test_serve_report_in_browser(chromium_exe, tmp_path):
    s = rl.serve("llama-3.1-8b", "H100", batch=8, prompt_len=1024, output_len=128)
    page = s.to_html(tmp_path / "serve.html")
    _self_contained(page)
    got, text = _open(tmp_path / "serve.html", "serve")
    assert fmt_time(s.ttft) in text and fmt_time(s.tpot) in text
    v = _data_v(got.dom)
    # where the time goes: every cause's seconds and share, as the result holds them
    for k, sec in s.phase_seconds.items():
        if sec > 0:
            assert _has(v, sec) and _has(v, s.shares[k]), k
            assert f"{k} {100 * s.shares[k]:.1f} %" in text
    assert _has(v, s.ttft) and _has(v, s.tpot)  # the prefill/decode table
    assert fmt_bytes(s.memory_breakdown["kv_cache"]) in text and f"{s.max_batch:,}" in text
    # the serving charts: the same call at other batches, in the batch table
    b64 = rl.serve("llama-3.1-8b", "H100", batch=64, prompt_len=1024, output_len=128)
    assert _has(v, b64.tpot) and _has(v, b64.ttft)
    assert "TTFT vs batch" in text or "time to first token vs batch" in text
    assert "What to change" in text
    # the decode step's per-op rows
    assert len(re.findall(r'<tr id="op\d+"', got.dom)) == len(s.decode.ops)


def test_train_report_in_browser(chromium_exe, tmp_path):
    t = rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=4096, tp=2)
    page = t.to_html(tmp_path / "train.html")
    _self_contained(page)
    got, text = _open(tmp_path / "train.html", "train")
    assert fmt_time(t.step_time) in text
    v = _data_v(got.dom)
    for k, sec in t.breakdown.items():
        if sec > 0:
            assert _has(v, sec), k
    # stacked bars: this split and the fastest ones of best_parallelism, one bar part each
    top = rl.best_parallelism("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=4096, top=5)
    tips = re.findall(r'data-tip="([^"]+)"', got.dom)
    assert any(tip.startswith("this: tp2 pp1 dp4") for tip in tips)
    ranks = {m.group(1) for tip in tips if (m := re.match(r"#(\d+): ", tip))}
    assert len(ranks) >= len(top) - 1  # this split may be one of them (then not repeated)
    assert fmt_time(float(top["step_time"][0])) in text  # the fastest split's step time
    assert fmt_bytes(t.memory_per_device["total"]) in text


@pytest.fixture(scope="module")
def plan():
    return rl.plan_serving("llama-3.1-8b", "H100", devices=4, workload=rl.Workload(**WL),
                           slo=SLO, requests=300)


def test_plan_report_in_browser(chromium_exe, tmp_path, plan):
    page = plan.to_html(tmp_path / "plan.html")
    _self_contained(page)
    got, text = _open(tmp_path / "plan.html", "plan")
    b = plan.best
    assert b is not None and b.layout in text
    # the frontier: one hoverable point per Pareto row, pointing at that row
    pts = re.findall(r'data-row="(pareto\d+)"', got.dom)
    rows = re.findall(r'<tr id="(pareto\d+)"', got.dom)
    assert len(rows) == len(plan.pareto) and set(pts) == set(rows)
    assert 'class="rl-slo"' in got.dom  # the SLO region
    v = _data_v(got.dom)
    assert _has(v, b.sim.ttft.p99) and _has(v, b.sim.tpot.p99)
    assert f"Infeasible layouts ({len(plan.infeasible)})" in text
    for r in plan.infeasible.to_dicts():
        assert r["reason"] in text


def test_simulate_report_in_browser(chromium_exe, tmp_path):
    sim = rl.simulate_serving("llama-3.1-8b", "H100", workload=rl.Workload(**WL),
                              requests=800, slo=SLO)
    page = sim.to_html(tmp_path / "sim.html")
    _self_contained(page)
    got, text = _open(tmp_path / "sim.html", "simulate")
    v = _data_v(got.dom)
    for st in (sim.ttft, sim.tpot, sim.e2e, sim.queue_delay):
        for x in (st.mean, st.p50, st.p90, st.p99, st.max):
            assert _has(v, x)
    # three histograms; each one's bars count every measured request once
    counts = [int(c) for c in re.findall(r': (\d+) requests"', got.dom)]
    raw = sim._raw
    n = int(np.isfinite((raw["done"] - raw["arrival"])[raw["measured"]]).sum())
    assert sum(counts) >= 2 * n  # TTFT and e2e cover every request, TPOT those with > 1 token
    assert got.dom.count("histogram and CDF") == 3
    assert ("SLO met at p99" if sim.meets() else "SLO missed at p99") in text


#: hover the first chart element matching SEL and write what the page did into the DOM
PROBE = """<script>
(function(){var out={};var p=document.querySelector(window.RL_SEL);
p.dispatchEvent(new MouseEvent('mouseenter'));
out.tip=document.querySelector('.rl-tip').textContent;out.want=p.dataset.tip;
var r=p.dataset.row?document.getElementById(p.dataset.row):null;
out.hl=r?r.classList.contains('rl-hl'):null;
var pre=document.createElement('pre');pre.id='rl-probe';pre.textContent=JSON.stringify(out);
document.body.appendChild(pre);})();
</script>"""


def _hover(page: str, sel: str, tmp_path: Path) -> dict:
    import json

    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", f"<script>window.RL_SEL={json.dumps(sel)}</script>"
                                              f"{PROBE}</body>"), encoding="utf-8")
    got = load(probe)
    assert got.console == [], got.console
    m = re.search(r'<pre id="rl-probe">(.*?)</pre>', got.dom)
    assert m, "the probe did not run"
    return json.loads(html.unescape(m.group(1)))


def test_charts_are_interactive_in_browser(chromium_exe, tmp_path, plan):
    """Hovering a histogram bar shows its count; a frontier point highlights its Pareto row."""
    sim = rl.simulate_serving("llama-3.1-8b", "H100", workload=rl.Workload(**WL),
                              requests=300, slo=SLO)
    out = _hover(sim.to_html(), "svg rect[data-tip]", tmp_path)
    assert out["tip"] == out["want"] and re.search(r": \d+ requests$", out["tip"])
    out = _hover(plan.to_html(), 'svg [data-row^="pareto"]', tmp_path)
    assert out["hl"] is True and out["tip"] == out["want"] and "tok/s/user" in out["tip"]


def test_scenario_names_escaped_in_browser(chromium_exe, tmp_path):
    s = rl.serve("llama-3.1-8b", "H100", batch=2)
    evil = replace(s, model='<img src=x onerror="console.error(1)"><script>alert(1)</script>')
    from roofline.report.scenario_pages import serve_page

    (tmp_path / "e.html").write_text(serve_page(evil, batches=False, levers=False))
    got = load(tmp_path / "e.html")
    assert got.console == [] and got.requests == []
    assert "<script>alert(1)</script>" not in got.dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in got.dom


def test_cli_report_scenarios(tmp_path, capsys):
    """``roofline report SCENARIO ARGS -o FILE`` = ``roofline SCENARIO ARGS --format html``."""
    f = tmp_path / "s.html"
    assert main(["report", "serve", "llama-3.1-8b", "H100", "--batch", "8", "-o", str(f)]) == 0
    s = rl.serve("llama-3.1-8b", "H100", batch=8)
    page = f.read_text()
    _self_contained(page)
    assert fmt_time(s.ttft) in page and "Where the end-to-end time goes" in page
    f = tmp_path / "t.html"
    assert main(["report", "train", "llama-3.1-8b", "dgx-h100", "--global-batch", "64",
                 "--seq-len", "4096", "--tp", "2", "-o", str(f)]) == 0
    assert "Step-time breakdown per split" in f.read_text()
    f = tmp_path / "sim.html"
    assert main(["report", "simulate", "llama-3.1-8b", "H100", "--rate", "10", "--requests",
                 "300", "--tpot-p99", "0.05", "-o", str(f)]) == 0
    assert f.read_text().count("histogram and CDF") == 3
    f = tmp_path / "p.html"
    assert main(["report", "plan", "llama-3.1-8b", "H100", "--devices", "4", "--rate", "10",
                 "--requests", "300", "--tpot-p99", "0.05", "--ttft-p99", "1", "-o",
                 str(f)]) == 0
    page = f.read_text()
    assert 'class="rl-slo"' in page and "Infeasible layouts" in page
    assert f"wrote {f}: the plan report" in capsys.readouterr().out
    assert main(["report", "serve", "llama-3.1-8b", "H100", "--format", "json"]) == 2
    assert "writes HTML" in capsys.readouterr().err
