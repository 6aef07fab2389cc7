"""The self-contained HTML report: one file, styles and script inline, no network request.

Serving, training, the serving plan and the serving simulation have their own report
(``scenario_pages``). For a solve: the summary, the interactive roofline (hover an operator to
see its table row), where the time goes (by binding roof and by operator kind), the memory
footprint against the device's capacity, batch and precision sweeps, the full per-op table, and
the conventions and sources of every hardware number used. Other results (sweeps, tables,
levers, ...) get their notebook card as a page.
"""

from __future__ import annotations

import datetime as _dt
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import SpecError
from ..units import fmt_bytes, fmt_time
from .html import CSS, JS, esc, kv_table, table_html
from .notebook import (
    OP_TABLE_COLUMNS,
    _bar,
    op_table_sorted,
    repr_html,
    result_chart,
    result_head,
    result_rows,
    sweep_charts,
)

__all__ = ["to_html", "report", "result_page", "SWEEP_BATCHES", "BYTE_CONVENTION",
           "write_page", "page"]

#: batches of the report's batch sweep (powers of two)
SWEEP_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: the one byte convention of every printout (stated in each report)
BYTE_CONVENTION = ("bytes use decimal prefixes everywhere (1 kB = 1e3 B, 1 MB = 1e6 B, "
                   "1 GB = 1e9 B); a device sold as \"80 GB\" of HBM holds 80 GiB = 85.9 GB")
#: dtypes tried in the precision sweep, when the hardware has them
SWEEP_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")


def to_html(obj: Any, path: Any = None, **kw: Any) -> str:
    """A self-contained HTML page for a Result (the full report) or any other result/table
    (its card); written to ``path`` (UTF-8) when given."""
    from ..engine.result import Result

    name = type(obj).__name__
    if isinstance(obj, Result):
        text = result_page(obj, **kw)
    elif name in _SCENARIO_PAGES:
        from . import scenario_pages

        text = getattr(scenario_pages, _SCENARIO_PAGES[name])(obj, **kw)
    else:
        max_rows = kw.get("max_rows")
        body = repr_html(obj) if max_rows is not None or type(obj).__name__ != "Table" else \
            _full_table(obj)
        text = page(f"roofline: {type(obj).__name__}", body)
    if path is not None:
        write_page(path, text)
    return text


#: the result types with a report of their own (scenario_pages), by type name
_SCENARIO_PAGES = {"ServeResult": "serve_page", "TrainingResult": "train_page",
                   "ServingPlan": "plan_page", "ServingSim": "sim_page"}


def report(model: Any, hardware: Any, *, path: Any = None, sweeps: bool = True,
           **scenario: Any) -> str:
    """Solve and return the HTML report (written to ``path`` when given). ``scenario``: the
    keywords of :func:`roofline.solve` (batch, precision, preset, phase, seq_len, ...)."""
    from ..engine.solve import solve

    r = solve(model, hardware, **scenario)
    text = result_page(r, model=model, sweeps=sweeps, scenario=scenario)
    if path is not None:
        write_page(path, text)
    return text


def write_page(path: Any, text: str) -> None:
    p = Path(path)
    if not p.parent.exists():
        raise SpecError(f"path {str(path)!r}: folder {str(p.parent)!r} does not exist")
    try:
        p.write_text(text, encoding="utf-8")
    except OSError as e:
        raise SpecError(f"cannot write {str(path)!r}: {e.strerror}") from None


def page(title: str, body: str) -> str:
    """A whole HTML document around ``body``: inline styles, a CSP that forbids any fetch."""
    from .. import __version__

    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            # no request may leave the page: forbid every fetch except inline code and data:
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">"
            f"<title>{esc(title)}</title><style>{CSS}\nbody{{margin:24px}}</style></head>"
            f"<body>{body}<p class=\"rl-note\">made by roofline {esc(__version__)} on "
            f"{stamp}</p></body></html>\n")


def _full_table(t: Any) -> str:
    return (f'<div class="rl"><h1>{esc(t.title or "table")}</h1>'
            f"{table_html(t, max_rows=None)}<script>{JS}</script></div>")


def result_page(r: Any, *, model: Any = None, sweeps: bool = True,
                scenario: dict[str, Any] | None = None) -> str:
    """The full report of one Result (see the module docstring)."""
    sections = [f'<h1>{result_head(r)}</h1>', '<div class="rl-tip"></div>',
                kv_table(result_rows(r), raw=True)]
    t, order = op_table_sorted(r)
    has_ops = bool(len(t)) and "time" in t.columns
    if has_ops:
        sections += ["<h2>Roofline</h2>",
                     '<p class="rl-note">hover an operator to see its row in the table '
                     "below</p>", result_chart(r, "op")]
        sections += ["<h2>Where the time goes</h2>", _time_breakdown(r)]
    if math.isfinite(r.memory_footprint):
        sections += ["<h2>Memory</h2>", _memory(r)]
    if sweeps:
        sw = _sweeps(r, model, scenario or {})
        if sw:
            sections += ["<h2>Batch and precision sweep</h2>", sw]
    lev = _levers(r)
    if lev:
        sections += ["<h2>What to change</h2>", lev]
    if has_ops:
        sections += [f"<h2>Per-operator table ({len(t)} operators)</h2>",
                     '<p class="rl-note">click a header to sort</p>',
                     table_html(t, columns=OP_TABLE_COLUMNS, max_rows=None,
                                row_ids=[f"op{i}" for i in order])]
    sections += ["<h2>Conventions and sources</h2>", _conventions(r)]
    body = f'<div class="rl">{"".join(sections)}<script>{JS}</script></div>'
    return page(f"roofline: {r.model} on {r.hardware}", body)


def _time_breakdown(r: Any) -> str:
    t = r.ops
    time = np.asarray(t["time"], dtype=float)
    # the fixed per-kernel fill is overhead, as the bottleneck label counts it (engine/core.py)
    over = np.minimum(np.asarray(t["overhead"], dtype=float) + np.asarray(t["fill"],
                                                                          dtype=float), time)
    bound = np.asarray(t["bound"], dtype=object)
    kernel = time - over
    by_bound = {"compute-bound kernels": float(kernel[bound == "compute"].sum()),
                "memory-bound kernels": float(kernel[bound == "memory"].sum()),
                "no-FLOP/no-byte ops": float(kernel[(bound != "compute") &
                                                    (bound != "memory")].sum()),
                "launch/dispatch overhead and kernel fill": float(over.sum())}
    kinds: dict[str, float] = {}
    for k, v in zip(np.asarray(t["kind"], dtype=object), time):
        kinds[str(k)] = kinds.get(str(k), 0.0) + float(v)
    top = dict(sorted(kinds.items(), key=lambda kv: -kv[1])[:8])
    rest = sum(kinds.values()) - sum(top.values())
    if rest > 0:
        top["other kinds"] = rest
    return ('<div class="rl-note">by binding roof (sum of per-operator times, '
            f"{esc(fmt_time(float(time.sum())))})</div>{_bar(by_bound)}"
            f'<div class="rl-note">by operator kind</div>{_bar(top)}')


def _memory(r: Any) -> str:
    parts = {k: v for k, v in r.memory_breakdown.items() if v}
    free = r.memory_capacity - r.memory_footprint
    if math.isfinite(free) and free > 0:
        parts["free"] = free
    rows = [(k, fmt_bytes(v)) for k, v in r.memory_breakdown.items() if v]
    rows.append(("total", f"{fmt_bytes(r.memory_footprint)} of {fmt_bytes(r.memory_capacity)}"))
    return _bar(parts) + kv_table(rows)


def _sweeps(r: Any, model: Any, scenario: dict[str, Any]) -> str:
    """Batch sweep (1..256) at every dtype the device has among SWEEP_DTYPES: throughput and
    latency per batch, the crossover ringed."""
    from ..scenarios.sweep import sweep
    from ..specs.resolve import hardware

    hw = r.hardware_spec() if hasattr(r, "hardware_spec") else hardware(r.hardware_key)
    precs = [r.precision] + [d for d in SWEEP_DTYPES if hw.has(d) and d != r.precision]
    kw = {k: scenario[k] for k in ("preset", "phase", "seq_len", "context", "runtime")
          if scenario.get(k) is not None}
    kw.setdefault("preset", r.preset)
    target = model if model is not None else r.model
    kept = []
    for p in precs[:4]:
        try:
            sweep(target, hw, batch=[1], precision=p, **kw)
        except Exception:  # a dtype this model cannot be priced in is left out, not faked
            continue
        kept.append(p)
    if not kept:
        return ""
    s = sweep(target, hw, batch=list(SWEEP_BATCHES), precision=kept, **kw)
    note = (f'<p class="rl-note">batches {SWEEP_BATCHES[0]}–{SWEEP_BATCHES[-1]} at '
            f"{esc(', '.join(kept))}; preset {esc(s.preset)}; rows that do not fit in memory "
            "are drawn too (see the table)</p>")
    cols = ["precision", "batch", "latency", "throughput", "bottleneck", "mfu",
            "memory_footprint", "feasible"]
    return (note + sweep_charts(s) + "<details><summary>sweep table</summary>"
            + table_html(s.table, columns=cols, max_rows=None) + "</details>")


def _levers(r: Any) -> str:
    """The 15 best levers (``rl.levers``), where that analysis is installed."""
    try:
        from ..analysis.levers import levers
    except ImportError:
        return ""
    from .notebook import levers_table

    if not r.feasible and math.isnan(r.latency):
        return ""
    L = levers(result=r)
    return ('<p class="rl-note">each row: one change (or a combination), priced with the same '
            "model; <code>call</code> in <code>rl.levers(result=r).to_dicts()</code> reproduces "
            "it</p>" + table_html(levers_table(L), max_rows=None))


def _conventions(r: Any) -> str:
    from ..specs.resolve import hardware

    hw = r.hardware_spec() if hasattr(r, "hardware_spec") else hardware(r.hardware_key)
    flop = ("mlsysim's zoo convention (CNNs: 1 FLOP per multiply-add)" if r.preset == "mlsysim"
            else "2 FLOPs per multiply-add")
    rows = [("FLOPs", flop),
            ("bytes", BYTE_CONVENTION),
            ("times", "seconds inside; shown in one unit per column (s, ms, µs, ns)"),
            ("MFU / shares", "percent of the dense peak / of the latency"),
            ("peaks", "dense (a datasheet's with-sparsity figure is never used)"),
            ("energy", r.power_model)]
    src = []
    for fld, prov in sorted(hw.provenance.items()):
        src.append(f"<tr><td>{esc(fld)}</td><td style=\"text-align:left;white-space:normal\">"
                   f"{esc(prov)}</td></tr>")
    srcs = (f'<table class="rl-kv"><thead><tr><th>{esc(hw.name)} field</th><th>source</th>'
            f"</tr></thead><tbody>{''.join(src)}</tbody></table>" if src else
            '<p class="rl-note">no sources recorded for this hardware spec</p>')
    origin = f'<p class="rl-note">hardware spec: {esc(hw.origin or hw.key)}</p>'
    return kv_table(rows) + "<h3>Hardware numbers</h3>" + origin + srcs
