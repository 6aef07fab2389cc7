"""The HTML report in a real headless browser (Debian's chromium, driven by its own CLI).

Checks: the DOM holds the numbers the library computed; no console message (errors included);
no network request (every request goes to a recording proxy that refuses it); hovering a chart
point highlights its table row and clicking a header sorts numerically; a screenshot is saved.
The harness itself is checked on a page that does make a request and throw.
"""

import html
import math
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest
from browser import load, need_chromium

import roofline as rl
from roofline.report import report
from roofline.units import fmt_time

#: appended to a copy of the report: hover the costliest op's point, sort by time ascending,
#: and write what happened into the DOM (``--dump-dom`` shows it)
PROBE = """<script>
(function(){
var out={};var pts=document.querySelectorAll('svg [data-row]');out.points=pts.length;
var p=null;for(var i=0;i<pts.length;i++){if(pts[i].dataset.row==='op'+window.RL_TOP){p=pts[i];}}
if(p){p.dispatchEvent(new MouseEvent('mouseenter'));
 var row=document.getElementById(p.dataset.row);out.hl=row&&row.classList.contains('rl-hl');
 out.tip=document.querySelector('.rl-tip').textContent;}
var t=document.querySelectorAll('table.rl-sort');t=t[t.length-1];
var ths=t.tHead.rows[0].cells,ti=-1;
for(var j=0;j<ths.length;j++){if(ths[j].textContent.indexOf('time [')===0)ti=j;}
ths[ti].click();
var v=[];for(var k=0;k<t.tBodies[0].rows.length;k++){v.push(parseFloat(
 t.tBodies[0].rows[k].cells[ti].dataset.v));}
var asc=true;for(var k=1;k<v.length;k++){if(v[k]<v[k-1])asc=false;}
out.sorted_asc=asc;out.rows=v.length;
var pre=document.createElement('pre');pre.id='rl-probe';pre.textContent=JSON.stringify(out);
document.body.appendChild(pre);})();
</script>"""


class _Cells(HTMLParser):
    """Text of every element with an id, and the data-v values of the last table's rows."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self._row: str | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "tr" and a.get("id", "").startswith("op"):
            self._row = a["id"]
            self.rows[self._row] = []
        elif tag == "td" and self._row is not None:
            self.rows[self._row].append(a.get("data-v", ""))

    def handle_endtag(self, tag):
        if tag == "tr":
            self._row = None

    def handle_data(self, data):
        self.text.append(data)


@pytest.fixture(scope="module")
def chromium_exe():
    return need_chromium()


def test_harness_sees_requests_and_errors(chromium_exe, tmp_path):
    """The checks below could fail: a page that fetches and throws is caught."""
    bad = tmp_path / "bad.html"
    bad.write_text('<html><body><img src="http://example.invalid/x.png">'
                   '<script>throw new Error("boom")</script></body></html>')
    got = load(bad)
    assert any("example.invalid" in r for r in got.requests), got.requests
    assert any("boom" in m for m in got.console), got.console


def test_report_in_browser(chromium_exe, tmp_path):
    r = rl.solve("resnet50", "A100", batch=4, precision="fp16")
    page = report("resnet50", "A100", batch=4, precision="fp16", path=tmp_path / "r.html")
    # nothing to fetch: no src/href but in-page anchors and data: URLs, no url() but #ids
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?!#|data:)""", page)
    assert not re.search(r"url\((?!#)", page)
    t = r.ops
    top = max(range(len(t)), key=lambda i: t["time"][i])
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", f"<script>window.RL_TOP={top}</script>{PROBE}"
                                              "</body>"), encoding="utf-8")
    shot = tmp_path / "report.png"
    got = load(tmp_path / "r.html", screenshot=shot)
    assert got.console == [], got.console
    assert got.requests == [], got.requests
    # the numbers the library computed are in the DOM
    cells = _Cells()
    cells.feed(got.dom)
    text = html.unescape(" ".join(cells.text))
    assert fmt_time(r.latency) in text and fmt_time(r.latency_bound) in text
    assert f"MFU {r.mfu * 100:.2f} %" in text
    assert len(cells.rows) == len(t)  # every operator has its row
    cols = ["name", "kind", "flops", "bytes", "intensity", "bound", "t_compute", "t_memory",
            "overhead", "time", "share"]
    ti = cols.index("time")
    for i in (0, top, len(t) - 1):
        assert math.isclose(float(cells.rows[f"op{i}"][ti]), float(t["time"][i]), rel_tol=1e-12)
    # a screenshot of the rendered page
    assert got.screenshot is not None and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 30_000  # a blank page is a few kB
    keep = Path(__file__).resolve().parents[1] / "tests" / "_artifacts"
    if keep.exists():
        shutil.copy(shot, keep / "report.png")
    # interaction: hover highlights the op's row, a header click sorts by value
    got = load(probe)
    assert got.console == [], got.console
    m = re.search(r'<pre id="rl-probe">(.*?)</pre>', got.dom)
    assert m, "the probe script did not run"
    import json

    out = json.loads(html.unescape(m.group(1)))
    assert out["hl"] is True and t["name"][top] in out["tip"]
    assert out["sorted_asc"] is True and out["rows"] == len(t)
    assert out["points"] == len(t) + 1  # every ResNet-50 op has FLOPs and bytes; + the model


def test_names_escaped_in_browser(chromium_exe, tmp_path):
    """A hostile model name renders as text, never as markup or script."""
    from dataclasses import replace

    r = rl.solve("resnet50", "A100", batch=1, precision="fp16")
    evil = replace(r, model='<img src=x onerror="console.error(1)"><script>alert(1)</script>')
    evil.to_html(tmp_path / "e.html")
    got = load(tmp_path / "e.html")
    assert got.console == [] and got.requests == []
    assert "<script>alert(1)</script>" not in got.dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in got.dom
