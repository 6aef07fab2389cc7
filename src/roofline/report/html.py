"""HTML building blocks shared by the notebook cards and the report: escaping, a sortable
table, a key/value card, and the one inline stylesheet and script (no network, no CDN).

Every string that comes from a model, hardware or op name goes through :func:`esc`. Plain
string building with ``html.escape`` is enough for these few fixed shapes, so no template
engine is needed (and ``import roofline`` stays light).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..units import FRACTION, column_unit, fmt_num

__all__ = ["CSS", "JS", "esc", "kv_table", "table_html", "column_units", "card"]

#: scoped under .rl so a notebook's own styles are left alone
CSS = """
.rl{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:13px;
color:#1d2330;line-height:1.4;max-width:1100px}
.rl h1{font-size:20px;margin:.2em 0 .4em}.rl h2{font-size:16px;margin:1.2em 0 .4em;
border-bottom:1px solid #dde2ea;padding-bottom:2px}
.rl .rl-head{font-size:14px;margin-bottom:4px}.rl .rl-sub{color:#5b6474}
.rl table{border-collapse:collapse;margin:4px 0}
.rl td,.rl th{padding:2px 8px;border-bottom:1px solid #eef0f4;text-align:right;
white-space:nowrap}
.rl td:first-child,.rl th:first-child,.rl td.rl-s,.rl th.rl-s{text-align:left}
.rl table.rl-kv th{text-align:left;color:#5b6474;font-weight:500;padding-right:14px}
.rl table.rl-kv td{text-align:left;white-space:normal}
.rl table.rl-sort th{cursor:pointer;background:#f4f6f9;position:sticky;top:0}
.rl table.rl-sort th:hover{background:#e6ebf2}
.rl table.rl-sort tr.rl-hl td{background:#fff3b0}
.rl .rl-scroll{max-height:420px;overflow:auto;border:1px solid #eef0f4}
.rl .rl-bad{color:#b42318;font-weight:600}.rl .rl-ok{color:#067647;font-weight:600}
.rl .rl-note{color:#5b6474;font-size:12px}
.rl details>summary{cursor:pointer;color:#1f4e9c;margin:6px 0}
.rl svg text{font-family:inherit}
.rl .rl-tip{position:fixed;pointer-events:none;background:#1d2330;color:#fff;padding:3px 6px;
border-radius:3px;font-size:12px;display:none;z-index:10}
.rl .rl-bar{display:flex;height:16px;border-radius:2px;overflow:hidden;max-width:600px}
.rl .rl-bar span{display:block;height:100%}
.rl .rl-legend span{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px}
"""

#: click a header to sort (numbers by their data-v value); hover a chart point to highlight its
#: table row (points carry data-row="ID", rows id="ID") and see its data-tip; any other chart
#: element with a data-tip (a bar, a line point) shows its tip on hover
JS = """
(function(){
function sortBy(th){var t=th.closest('table'),b=t.tBodies[0],i=th.cellIndex,
 d=th.dataset.dir==='asc'?'desc':'asc';th.dataset.dir=d;
 var rows=Array.prototype.slice.call(b.rows);
 rows.sort(function(x,y){var a=x.cells[i],c=y.cells[i];
  var va=a.dataset.v!==undefined?parseFloat(a.dataset.v):a.textContent,
      vc=c.dataset.v!==undefined?parseFloat(c.dataset.v):c.textContent;
  if(typeof va==='number'&&isNaN(va))va=-Infinity;if(typeof vc==='number'&&isNaN(vc))vc=-Infinity;
  var r=va<vc?-1:va>vc?1:0;return d==='asc'?r:-r;});
 rows.forEach(function(r){b.appendChild(r);});}
document.querySelectorAll('.rl table.rl-sort').forEach(function(t){
 if(t.dataset.rlInit)return;t.dataset.rlInit='1';
 Array.prototype.forEach.call(t.tHead.rows[0].cells,function(th){
  th.addEventListener('click',function(){sortBy(th);});});});
var tip=document.querySelector('.rl .rl-tip');
document.querySelectorAll('.rl [data-row], .rl svg [data-tip]').forEach(function(p){
 if(p.dataset.rlInit)return;p.dataset.rlInit='1';
 function row(){return p.dataset.row?document.getElementById(p.dataset.row):null;}
 p.addEventListener('mouseenter',function(e){var r=row();
  if(r){r.classList.add('rl-hl');var det=r.closest('details');if(det)det.open=true;
   var s=r.closest('.rl-scroll');if(s)s.scrollTop=r.offsetTop-s.clientHeight/2;}
  if(tip&&p.dataset.tip){tip.textContent=p.dataset.tip;tip.style.display='block';
   tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';}});
 p.addEventListener('mouseleave',function(){var r=row();
  if(r)r.classList.remove('rl-hl');if(tip)tip.style.display='none';});});
})();
"""


def esc(v: Any) -> str:
    """HTML-escaped text of any value (quotes too: safe inside attributes)."""
    return html.escape(str(v), quote=True)


def column_units(columns: Mapping[str, Any], units: Mapping[str, str]) -> dict[str, tuple]:
    """Per column: ``(scale, label)`` of the one display unit it is shown in."""
    out = {}
    for c, v in columns.items():
        u = units.get(c, "")
        arr = np.asarray(v)
        out[c] = column_unit(arr.tolist() if arr.dtype.kind in "iuf" else [], u) if u else \
            (1.0, "")
    return out


def table_html(table: Any, *, columns: Sequence[str] | None = None, max_rows: int | None = 200,
               row_ids: Sequence[str] | None = None, caption: str = "", note_more: str = "") -> str:
    """A sortable HTML table of a :class:`~roofline.engine.table.Table` (one unit per column
    in the header; numbers carry their raw value in ``data-v`` so sorting is numeric).

    ``max_rows``: rows shown (the rest are counted in a note naming ``note_more``).
    ``row_ids``: one ``id`` per row, so chart points can point at rows.
    """
    cols = [c for c in (columns or table.columns) if c in table.columns]
    data = {c: table[c] for c in cols}
    units = column_units(data, getattr(table, "units", {}))
    n = len(table)
    shown = n if max_rows is None else min(n, max_rows)
    text_col = {c: np.asarray(data[c]).dtype.kind in "OUS" for c in cols}
    cls = ' class="rl-s"'
    head = "".join(f"<th{cls if text_col[c] else ''}>{esc(c)}"
                   f"{' [' + esc(units[c][1]) + ']' if units[c][1] else ''}</th>" for c in cols)
    body = []
    for i in range(shown):
        cells = []
        for c in cols:
            v = data[c][i]
            scale = units[c][0]
            if _num(v):
                f = float(v)
                shown_v = fmt_num(f / scale if scale != 1.0 else v)
                dv = "NaN" if math.isnan(f) else repr(f)
                cells.append(f'<td data-v="{esc(dv)}">{esc(shown_v)}</td>')
            else:
                cells.append(f"<td>{esc(fmt_num(v))}</td>" if isinstance(v, bool | np.bool_)
                             else f'<td class="rl-s">{esc(v)}</td>')
        rid = f' id="{esc(row_ids[i])}"' if row_ids is not None else ""
        body.append(f"<tr{rid}>{''.join(cells)}</tr>")
    more = ""
    if shown < n:
        more = (f'<div class="rl-note">{shown} of {n} rows shown; {n - shown} hidden'
                + (f" ({esc(note_more)} shows them)" if note_more else "") + "</div>")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return (f'<div class="rl-scroll"><table class="rl-sort">{cap}<thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(body)}</tbody></table></div>{more}")


def kv_table(rows: Iterable[tuple[str, str]], *, raw: bool = False) -> str:
    """Two-column key/value table; values are escaped unless ``raw`` (pre-built HTML)."""
    return '<table class="rl-kv">' + "".join(
        f"<tr><th>{esc(k)}</th><td>{v if raw else esc(v)}</td></tr>" for k, v in rows) \
        + "</table>"


def card(head: str, rows: Sequence[tuple[str, str]], *, details: str = "",
         details_label: str = "", extra: str = "") -> str:
    """A notebook card: the stylesheet, a title line (already escaped HTML), a key/value table,
    optional extra HTML and a collapsed ``<details>`` section; the sort script at the end."""
    det = (f"<details><summary>{esc(details_label)}</summary>{details}</details>"
           if details else "")
    return (f'<div class="rl"><style>{CSS}</style><div class="rl-head">{head}</div>'
            f"{kv_table(rows, raw=True)}{extra}{det}<div class=\"rl-tip\"></div>"
            f"<script>{JS}</script></div>")


def _num(v: Any) -> bool:
    if isinstance(v, bool | np.bool_):
        return False
    return isinstance(v, int | float | np.integer | np.floating)


def pct(x: float, digits: int = 2) -> str:
    """A fraction as a percentage (``0.0303`` -> ``"3.03 %"``); NaN -> "-"."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x * 100:.{digits}f} %"


__all__ += ["pct", "FRACTION"]
