"""Notebook display (``_repr_html_``, one-line ``__repr__``) and the HTML report, without a
browser (tests/test_report_browser.py loads the report in chromium)."""

import html
import math
import re
import subprocess
import sys
from dataclasses import replace
from html.parser import HTMLParser

import pytest

import roofline as rl
from roofline.cli import main
from roofline.units import fmt_bytes, fmt_time


class _Parse(HTMLParser):
    """Counts tags and checks they nest (a card must be well-formed to embed in a notebook)."""

    VOID = {"br", "meta", "img", "input", "hr", "line", "circle", "rect", "polygon",
            "polyline", "path"}

    def __init__(self):
        super().__init__()
        self.stack, self.counts, self.errors = [], {}, []

    def handle_starttag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.counts[tag] = self.counts.get(tag, 0) + 1

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:] or 'nothing'}")
        else:
            self.stack.pop()


def _check(h: str) -> _Parse:
    p = _Parse()
    p.feed(h)
    assert not p.errors, p.errors[:3]
    assert not p.stack, p.stack
    return p


@pytest.fixture(scope="module")
def res():
    return rl.solve("resnet50", "A100", batch=1, precision="fp16")


def test_result_repr_is_one_line(res):
    s = repr(res)
    assert "\n" not in s and len(s) < 160
    assert s.startswith("<Result ResNet-50 on NVIDIA A100") and fmt_time(res.latency) in s
    assert f"MFU {res.mfu * 100:.2f} %" in s and "fits" in s


def test_result_card(res):
    h = res._repr_html_()
    p = _check(h)
    text = html.unescape(re.sub(r"<[^>]+>", " ", h))
    assert fmt_time(res.latency) in text and fmt_time(res.latency_bound) in text
    assert f"{res.bottleneck}-bound" in text and f"MFU {res.mfu * 100:.2f} %" in text
    assert fmt_bytes(res.memory_footprint) in text and "fits" in text
    assert p.counts["details"] == 2  # the chart and the per-op table, both collapsed
    # the per-op table: every op (ResNet-50 has 174 < 200), the most expensive first
    rows = re.findall(r'<tr id="rl\d+-op(\d+)">', h)
    assert len(rows) == len(res.ops)
    times = [res.ops["time"][int(i)] for i in rows]
    assert times == sorted(times, reverse=True)
    assert 'class="rl-sort"' in h and "<script>" in h


def test_card_caps_rows_and_says_so():
    r = rl.solve("llama-3.1-8b", "A100", phase="decode", context=512)
    h = r._repr_html_()
    n = len(r.ops)
    assert n > 200
    assert len(re.findall(r'<tr id="rl\d+-op\d+">', h)) == 200
    assert f"200 of {n} rows shown; {n - 200} hidden" in h and "max_rows=None" in h


def test_names_are_escaped(res):
    evil = replace(res, model="<b>x</b>&<script>alert(1)</script>", hardware='"q"<i>')
    h = evil._repr_html_()
    assert "<script>alert(1)</script>" not in h and "<b>x</b>" not in h
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in h and "&quot;q&quot;&lt;i&gt;" in h
    _check(h)
    page = evil.to_html()
    assert "<script>alert(1)</script>" not in page
    _check(page)


def test_table_repr_and_html(res):
    t = res.ops
    s = repr(t)
    assert "\n" not in s and len(s) < 200 and f"{len(t)} rows × {len(t.columns)} columns" in s
    h = t._repr_html_()
    _check(h)
    # one unit per column: the time column's unit is chosen once, in the header
    assert re.search(r"<th>time \[µs\]</th>", h)
    full = t.to_html()
    assert full.count("<tr>") == len(t) + 1  # header + every row


def test_sweep_card_has_charts_and_crossover():
    s = rl.sweep("resnet50", ["A100", "H100"], batch=[1, 2, 4, 8], preset="mlsysim")
    r = repr(s)
    assert "\n" not in r and "8 rows = 2 hardware × 1 precision × 4 batch" in r
    h = s._repr_html_()
    _check(h)
    assert h.count("<svg") == 2  # throughput and latency vs batch
    cross = s.crossover()
    assert cross == {"NVIDIA A100 SXM4 80GB": 2, "NVIDIA H100 SXM5 80GB": 4}
    assert "compute-bound from 2" in h and "compute-bound from 4" in h
    assert "A100 SXM4 80GB" in h and "H100 SXM5 80GB" in h  # the legend names each device


def test_serve_train_capacity_cards():
    s = rl.serve("llama-3.1-8b", "H100", batch=8)
    assert "\n" not in repr(s) and fmt_time(s.ttft) in repr(s)
    h = s._repr_html_()
    _check(h)
    assert fmt_time(s.tpot) in html.unescape(h) and "decode step per operator" in h
    t = rl.train("llama-3.1-8b", "dgx-h100", global_batch=64, seq_len=4096, tp=8)
    assert "\n" not in repr(t) and f"MFU {t.mfu * 100:.1f} %" in repr(t)
    h = t._repr_html_()
    _check(h)
    assert fmt_time(t.step_time) in html.unescape(h) and "rl-bar" in h
    # a split that does not fit shows why and no time at all
    bad = rl.train("llama-3.1-70b", "dgx-h100", global_batch=64, seq_len=4096, tp=1)
    assert not bad.feasible
    assert "does not run" in repr(bad)
    hb = bad._repr_html_()
    assert "does not run" in hb and "step time" not in hb
    c = rl.serving_capacity("llama-3.1-8b", "H100", prompt_len=512, output_len=128,
                            ttft_slo=1.0, tpot_slo=0.05)
    assert "\n" not in repr(c) and f"{c.rate_per_s:,.4g} requests/s" in repr(c)
    _check(c._repr_html_())


def test_validation_card():
    from roofline.calibrate.validate import Row, Validation, summarize

    rows = (Row(name="mm<1>", group="compute", measured_s=1e-3, spread=0.01,
                predicted_s=1.2e-3, bound_s=8e-4),
            Row(name="add", group="memory", measured_s=2e-4, spread=0.02,
                predicted_s=1.8e-4, bound_s=1.5e-4))
    v = Validation(hardware="test box", rows=rows, summary=summarize(rows))
    geo = math.sqrt(1.2 * (2 / 1.8))
    assert f"geomean error {geo:.3g}x" in repr(v)
    h = v._repr_html_()
    _check(h)
    assert "mm&lt;1&gt;" in h and f"{geo:.3f}x" in h


def test_report_page_self_contained(res, tmp_path):
    page = res.to_html(tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text(encoding="utf-8") == page
    _check(page)
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", page)
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    for section in ("Roofline", "Where the time goes", "Memory", "Batch and precision sweep",
                    "Per-operator table", "Conventions and sources"):
        assert f"<h2>{section}" in page
    # a chart point for every op with FLOPs and bytes, each pointing at an existing row
    pts = re.findall(r'data-row="(op\d+)"', page)
    ids = set(re.findall(r'<tr id="(op\d+)"', page))
    assert len(ids) == len(res.ops) and pts and set(pts) <= ids
    assert "2 FLOPs per multiply-add" in page and "1 GB = 1e9 B" in page
    # sources of the hardware numbers are listed
    assert "peak.fp16" in page


def test_report_cli(tmp_path, capsys):
    out = tmp_path / "rep.html"
    assert main(["report", "resnet50", "A100", "--batch", "2", "-o", str(out)]) == 0
    msg = capsys.readouterr().out
    assert msg.startswith(f"wrote {out}: ResNet-50 on NVIDIA A100 SXM4 80GB, batch 2")
    assert "self-contained" in msg
    page = out.read_text(encoding="utf-8")
    r = rl.solve("resnet50", "A100", batch=2, precision="fp16")
    assert fmt_time(r.latency) in html.unescape(page)
    assert main(["report", "resnet50", "A100", "-o", str(tmp_path / "x.png")]) == 2
    assert "a report is an .html file" in capsys.readouterr().err


def test_import_stays_light():
    code = ("import sys, roofline as rl; r = rl.solve('resnet50', 'A100'); repr(r); "
            "print(sorted(m for m in sys.modules if m.startswith(('roofline.report', "
            "'matplotlib', 'jinja2', 'pandas'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    # repr() loads the small notebook module, never matplotlib, pandas or a template engine
    assert "matplotlib" not in out and "pandas" not in out and "jinja2" not in out
    code2 = "import sys, roofline; print('roofline.report' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code2], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_levers_in_report_and_card(res):
    L = rl.levers(result=res)
    page = res.to_html()
    assert "<h2>What to change" in page
    best = L.to_dicts()[0]
    assert html.escape(best["setting"]) in page and f"{best['speedup']:.4g}" in page
    h = L._repr_html_()
    _check(h)
    assert h.count("<tr><td") == len(L)  # every lever a row (the summary rows are <th> rows)


def test_plan_card_has_its_chart():
    wl = rl.Workload(prompt=rl.lengths("uniform", 500, 1500), output=rl.lengths("uniform", 50, 150),
                     rate=10.0)
    p = rl.plan_serving("llama-3.1-8b", "H100", devices=4, workload=wl,
                        slo=rl.SLO(ttft_p99=1.0, tpot_p99=0.05), requests=300)
    h = p._repr_html_()
    _check(h)
    # the frontier is inline SVG (no matplotlib needed): one point per Pareto row, each
    # pointing at its row of the table in the card
    assert "<svg" in h and f"Pareto frontier ({len(p.pareto)} rows)" in h
    ids = re.findall(r'<tr id="(rl\d+-pareto\d+)"', h)
    assert len(ids) == len(p.pareto)
    assert set(re.findall(r'data-row="(rl\d+-pareto\d+)"', h)) == set(ids)
