"""The tile / wave model of AMD CDNA GPUs (MI300X, MI325X: CDNA 3; MI355X: CDNA 4) against
measured GEMM rates (docs/validation/gemm.md, section "AMD CDNA").

Sources: AMD's ROCm/xla matmul tables (data/validation/cdna_gemm.toml: 125 b = 1 dots of m, n,
k in 256 … 4096 per part and dtype, kernel time) and the large-shape rows of
data/validation/vendors.toml — Stas Bekman's MAMF best shapes (bf16: MI300X, MI325X, MI355X)
and Azure's hipBLASLt fp8 sweep on an ND MI300X v5 (4096³ … 32768³). The tables alone do not
fix the large-GEMM limit: their largest dot is 4096³, and along the direction "higher ``max``,
larger row / column penalty ``a``" their loss is nearly flat (the MAMF MI300X row moves from
−23 % to +7 % between fits within one point of the table's median error). So each parameter
set is fitted on **both** kinds of source, each source weighted equally (the sum over sources
of the mean squared log error of its cases), by a grid search over ``max``, ``a`` (= ``b``),
``c`` and ``fill`` (engine/tiles.py; the same model and vectorised path as the NVIDIA fit of
roofline.validation.gemm).

Held out (``cdna_holdout``, leave one source out): without the large-shape source the table
alone is fitted (all four parameters) and the large shapes are predicted; without the table the
one or two large rows cannot fix a shape dependence, so ``a``, ``c`` and ``fill`` are the NVIDIA
16-bit set's (data/presets/tiles.toml ``[arch.hopper]``) and ``max`` alone is fitted on them.
CDNA 4 fp8 has no second source: fitted on its table, in-sample only. Whether a set runs the
stream-K candidates is the library's documented default unless the other choice fits better
beyond noise (``stream_k_choice``: a bootstrap over the set's cases).

The vendors fit (validation/vendors.py) sets the smooth model's ``gemm.max`` of
``[gpu-cdna3]`` / ``[gpu-cdna4]``, which prices these parts where the tiles do not: serving,
training (they strip the tiles) and matrix-vector products.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import numpy as np

from .cases import Case, load_cases
from .holdout import ErrorSummary, FitReport, Refit, error_summary, leave_one_source_out

__all__ = ["CDNA_SETS", "CDNA_GRID", "cdna_table_cases", "cdna_anchor_cases",
           "cdna_judged_cases", "cdna_fit_cases",
           "cdna_set_cases", "fit_cdna_tiles", "cdna_log_errors", "cdna_holdout",
           "cdna_in_sample", "cdna_summary_table", "cdna_fit_table", "cdna_anchor_table",
           "cdna_stream_k_table", "STREAM_K_DEFAULT", "StreamKChoice", "stream_k_choice"]

#: (architecture, dtype) -> (the table's source, the source of its large-shape rows in
#: vendors.toml, their parts) — () where the set has its table only
CDNA_SETS: dict[tuple[str, str], tuple[str, str, tuple[str, ...]]] = {
    ("cdna3", "bf16"): ("xla_gfx942", "mamf", ("mi300x", "mi325x")),
    ("cdna3", "fp8"): ("xla_gfx942_fp8", "azure", ("mi300x",)),
    ("cdna4", "bf16"): ("xla_gfx950", "mamf", ("mi355x",)),
    ("cdna4", "fp8"): ("xla_gfx950_fp8", "", ()),
}

PARAMS = ("max", "a", "c", "fill")
#: the fit's grid (``b`` tied to ``a``); ``max`` from 0.40: the tables' large dots run at 0.45
#: (MI300X bf16) … 0.67 (MI300X fp8) of the dense peak
CDNA_GRID: dict[str, tuple[float, ...]] = {
    "max": tuple(round(0.40 + 0.025 * i, 3) for i in range(25)),
    "a": (0.0, 8.0, 16.0, 32.0, 64.0, 128.0),
    "c": (0.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0),
    "fill": tuple(x * 1e-6 for x in (2, 3, 4, 5, 6, 8, 10))}  # as the data file reads "us"


#: each architecture's stream-K default, the library's documented one (tiles.toml source
#: hipblaslt_streamk: the Stream-K library is hipBLASLt's default on the MI350 series, gfx950;
#: the tuned library elsewhere, gfx942); the other choice ships only where the data say so
#: beyond noise (``stream_k_choice``)
STREAM_K_DEFAULT: dict[str, bool] = {"cdna3": False, "cdna4": True}
#: the share of bootstrap resamples in which the other choice must fit better, and their number
STREAM_K_CONFIDENCE = 0.95
STREAM_K_RESAMPLES = 2000


def cdna_table_cases() -> tuple[Case, ...]:
    """The ROCm/xla table rows (data/validation/cdna_gemm.toml)."""
    return load_cases("cdna_gemm").cases


@lru_cache(maxsize=1)
def _vendor_gemm_cases() -> tuple[Case, ...]:
    """The GEMM rows of vendors.toml on CDNA parts as cases of the gemm form (b = 1, kernel
    time), so that the fit prices them through its one path."""
    parts = {p for _, _, ps in CDNA_SETS.values() for p in ps}
    out = []
    for c in load_cases("vendors").cases:
        sc = c.scenario
        if sc.get("kind") != "gemm" or sc["hardware"] not in parts:
            continue
        out.append(replace(c, scenario=MappingProxyType(
            {"hardware": sc["hardware"], "dtype": sc["dtype"], "b": 1, "m": sc["m"],
             "n": sc["n"], "k": sc["k"]})))
    return tuple(out)


def _in_set(c: Case, key: tuple[str, str]) -> bool:
    _, _, parts = CDNA_SETS[key]
    return c["hardware"] in parts and c["dtype"] == key[1]


def cdna_anchor_cases() -> tuple[Case, ...]:
    """The large-shape rows the sets are fitted on (MAMF bf16, Azure fp8)."""
    return tuple(c for c in _vendor_gemm_cases() if any(
        _in_set(c, k) and c.source == src for k, (_, src, _) in CDNA_SETS.items()))


def cdna_judged_cases() -> tuple[Case, ...]:
    """The other GEMM rows of vendors.toml on CDNA parts, which no fit sees (mamfv1)."""
    fit = {c.id for c in cdna_anchor_cases()}
    return tuple(c for c in _vendor_gemm_cases() if c.id not in fit)


def cdna_fit_cases() -> tuple[Case, ...]:
    return cdna_table_cases() + _vendor_gemm_cases()


def cdna_set_cases(arch: str, dtype: str) -> tuple[Case, ...]:
    """The cases one parameter set is fitted on: its table and its large-shape rows."""
    table = CDNA_SETS[(arch, dtype)][0]
    return tuple(c for c in cdna_table_cases() if c.source == table) + tuple(
        c for c in cdna_anchor_cases() if _in_set(c, (arch, dtype)))


def cdna_log_errors(values: Mapping[str, float] | None, cases: Sequence[Case]) -> list[float]:
    """log(ours / measured) per case: the engine's kernel time in whole waves (the vectorised
    path of validation/gemm.py), with ``values`` for the case's dtype set (None: shipped)."""
    from .gemm import _log_errors

    return _log_errors(values, cases)


def _transfer() -> dict[str, float]:
    """a, c, fill of the NVIDIA 16-bit set (what a fit without a table holds them at)."""
    from ..engine.tiles import tiles_for
    from ..specs.hardware import hardware

    t = tiles_for(hardware("h100-sxm5"))
    assert t is not None
    return {"a": t.a, "c": t.c, "fill": t.fill}


def _loss(values: Mapping[str, float], groups: Sequence[Sequence[Case]]) -> float:
    return math.fsum(math.fsum(e * e for e in cdna_log_errors(values, g)) / len(g)
                     for g in groups)


def fit_cdna_tiles(cases: Sequence[Case], stream_k: bool | None = None) -> Refit:
    """The (max, a = b, c, fill) on ``CDNA_GRID`` minimising the sum over the sources of
    ``cases`` of each source's mean squared log error (``stream_k``: with or without the
    stream-K candidates; None: as the part's set ships). Without a table among them (only
    large-shape rows), ``a``, ``c`` and ``fill`` are held at the NVIDIA set's and ``max``
    alone is fitted."""
    tables = {src for src, _, _ in CDNA_SETS.values()}
    groups = [[c for c in cases if c.source == s] for s in dict.fromkeys(c.source for c in cases)]
    if not any(g[0].source in tables for g in groups):
        tr = _transfer()
        best_max = min(CDNA_GRID["max"] + tuple(round(0.30 + 0.025 * i, 3) for i in range(4)),
                       key=lambda x: (_loss({"max": x, **tr}, groups), x))
        return Refit(values={"max": best_max, **tr},
                     note="a, c, fill: the NVIDIA 16-bit set's (one or two shapes cannot fix "
                          "a shape dependence); max fitted" + _edge_note({"max": best_max}))
    values, _ = _grid_fit(groups, stream_k)
    return Refit(values=values, note="b tied to a" + _edge_note(values))


def _grid_fit(groups: Sequence[Sequence[Case]],
              stream_k: bool | None) -> tuple[dict[str, float], float]:
    """The grid point of least ``_grid_loss`` (the first minimum in grid order) and its loss:
    the one fit rule of ``fit_cdna_tiles`` and ``stream_k_choice``."""
    loss = _grid_loss(groups, stream_k)
    i = np.unravel_index(int(np.argmin(loss)), loss.shape)
    return {p: CDNA_GRID[p][j] for p, j in zip(PARAMS, i)}, float(loss[i])


def _edge_note(values: dict[str, float]) -> str:
    """'; at the grid's upper edge: ...' naming the fitted factors at the top of ``CDNA_GRID``
    (the fit would have gone further), or '' when none is."""
    edge = [f"{p} {_fmt(p, x)}" for p, x in values.items() if x >= CDNA_GRID[p][-1]]
    return "; at the grid's upper edge: " + ", ".join(edge) if edge else ""


def _compute_times(w: Any, mx: Any) -> Any:
    """[len(mx), shapes] compute seconds of the WaveOps ``w`` (built at max = 1, no fill) for
    each ``max`` of ``mx``: each candidate's wave time (and a stream-K candidate's loop
    iterations) scale as 1 / max, the split-K reduction and the stream-K fixup (memory) do
    not (engine/tiles.py ``WaveOps.per_shape``)."""
    m = mx[:, None, None]
    Mc = np.maximum(w.m1, 1.0)[:, None]
    waves = np.ceil(np.ceil(Mc / w.tm) * w.cols * w.splits / w.slots)
    t = ((waves * w.per_wave)[None] / m + (Mc * w.per_row)[None]).min(-1)
    if w.sk is not None:
        tm, cols, full_wave, per_tile, seg, fixup = w.sk
        tiles = np.ceil(Mc / tm) * cols
        full = np.floor(tiles / w.slots)
        rest = tiles - full * w.slots
        comp = full * full_wave + np.where(rest > 0, rest * per_tile + seg, 0.0)
        t = np.minimum(t, (comp[None] / m + np.where(rest > 0, fixup, 0.0)[None]).min(-1))
    return t


def _grid_loss(groups: Sequence[Sequence[Case]], stream_k: bool | None = None) -> Any:
    """The loss of ``fit_cdna_tiles`` at every grid point, [max, a, c, fill]: per (a, c) one
    tile model at max = 1 and no fill (``_compute_times`` scales it to every max), ``fill``
    added to the kernel time, the memory time bounding it below (a test checks it against
    the engine path, ``cdna_log_errors``)."""
    from ..engine.tiles import WaveOps
    from .gemm import _arrays

    mx = np.array(CDNA_GRID["max"])
    fill = np.array(CDNA_GRID["fill"])[None, :, None]
    out = np.zeros((len(CDNA_GRID["max"]), len(CDNA_GRID["a"]), len(CDNA_GRID["c"]),
                    len(CDNA_GRID["fill"])))
    for g in groups:
        ids = tuple(c.id for c in g)
        for ia, a in enumerate(CDNA_GRID["a"]):
            for ic, cc in enumerate(CDNA_GRID["c"]):
                for pos, (m, n, k), flops, t_mem, peak, t, inv_bw in _arrays(ids):
                    sk = t.stream_k if stream_k is None else stream_k
                    tt = replace(t, max=1.0, a=a, b=a, c=cc, fill=0.0, stream_k=sk)
                    w = WaveOps(np.arange(len(m)), m, n, k, flops / (2.0 * m * n * k), peak,
                                tt, inv_bw)
                    tc = _compute_times(w, mx)[:, w.inv][:, None, :] + fill  # [max, fill, case]
                    tk = np.maximum(tc, t_mem[None, None, :])
                    meas = np.array([g[i].value_si for i in pos])
                    e = np.log(flops / tk / meas)
                    out[:, ia, ic, :] += (e * e).sum(-1) / len(g)
    return out


def _shipped(arch: str, dtype: str) -> dict[str, float]:
    from ..engine.tiles import tiles_for
    from ..specs.hardware import hardware

    part = {"cdna3": "mi300x", "cdna4": "mi355x"}[arch]
    t = tiles_for(hardware(part))
    assert t is not None and t.arch == arch
    s = t.for_dtype(dtype)
    assert s is not None
    return {k: float(getattr(s, k)) for k in PARAMS}


@lru_cache(maxsize=4)
def cdna_holdout(arch: str, dtype: str) -> FitReport:
    """In-sample and leave-one-source-out error of one CDNA set (two sources needed)."""
    cs = cdna_set_cases(arch, dtype)
    return leave_one_source_out(f"{arch} {dtype} tiles", cs, PARAMS, _shipped(arch, dtype),
                                fit_cdna_tiles, cdna_log_errors)


@lru_cache(maxsize=4)
def cdna_in_sample(arch: str, dtype: str) -> tuple[Refit, ErrorSummary]:
    """The fit on a set's cases (its table only where it has no second source) and the
    shipped values' in-sample errors."""
    cs = cdna_set_cases(arch, dtype)
    ins = error_summary(list(zip((c.id for c in cs),
                                 cdna_log_errors(None, cs))))
    return fit_cdna_tiles(cs), ins


def _fmt(k: str, v: float) -> str:
    return f"{v * 1e6:g} µs" if k == "fill" else f"{v:g}"


def cdna_summary_table() -> str:
    """Markdown: per part and dtype, the table's dots by size class, before (the smooth model:
    ``gemm.max`` of [gpu-cdna3] / [gpu-cdna4], × gemm_dtype for fp8) and with waves."""
    from .gemm import gemm_errors, size_class_table

    cs = cdna_table_cases()
    return size_class_table(gemm_errors(cases=cs), gemm_errors(smooth=True, cases=cs))


def cdna_fit_table() -> str:
    """Markdown: per CDNA set its factors (shipped, refit, each fit without a source) and the
    in-sample / held-out errors; the set with one source in sample only."""
    from .holdout import holdout_tables

    out = []
    for (arch, dt), (table, src, parts) in CDNA_SETS.items():
        out.append(f"**{arch} {dt}** ({table}" + (f" + the {', '.join(parts)} rows of {src})"
                                                  if parts else " only)") + ":")
        out.append("")
        if parts:
            out.append(holdout_tables(cdna_holdout(arch, dt), _fmt))
        else:
            fit, ins = cdna_in_sample(arch, dt)
            vals = ", ".join(f"{k} {_fmt(k, x)}" for k, x in fit.values.items())
            out.append(f"fit {vals}{_edge_note(dict(fit.values))}; in-sample median |error| "
                       f"{ins.median_abs:.1%}, RMS log "
                       f"{ins.rms_log:.3f}, worst {ins.worst:+.1%} ({ins.worst_case}); no "
                       "second source, no held-out check.")
        out.append("")
    return "\n".join(out).rstrip("\n")


def cdna_anchor_table() -> str:
    """Markdown: the large-shape rows — published, the smooth model (what serve and train
    price), the tile set (solve), and that set fitted without the row's source (for a row no
    fit saw, the shipped set: judged)."""
    from .gemm import predict_gemm

    rows = ["| row | role | published | smooth model (serve, train) | error | tiles (solve) | "
            "error | tiles, fit without this source | error |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    fit = {c.id for c in cdna_anchor_cases()}
    for c in cdna_anchor_cases() + cdna_judged_cases():
        key = next(k for k in CDNA_SETS if _in_set(c, k))
        f0, f1 = predict_gemm(c, smooth=True), predict_gemm(c)
        h = (math.expm1(cdna_holdout(*key).held_out_errors[c.id]) if c.id in fit
             else f1 / c.value_si - 1)
        rows.append(f"| {c.id} | {'fit' if c.id in fit else 'judged'} | "
                    f"{c.value_si / 1e12:.1f} TFLOP/s | {f0 / 1e12:.1f} | "
                    f"{f0 / c.value_si - 1:+.1%} | {f1 / 1e12:.1f} | "
                    f"{f1 / c.value_si - 1:+.1%} | {c.value_si * (1 + h) / 1e12:.1f} | "
                    f"{h:+.1%} |")
    return "\n".join(rows)


@dataclass(frozen=True)
class StreamKChoice:
    """One set's stream-K choice: the fit without and with the candidates (values, loss), the
    share of bootstrap resamples in which the non-default choice fits better, and the choice."""

    default: bool
    fits: tuple[tuple[dict[str, float], float], tuple[dict[str, float], float]]  # off, on
    other_better: float
    choice: bool


@lru_cache(maxsize=4)
def stream_k_choice(arch: str, dtype: str) -> StreamKChoice:
    """The stream-K rule: the architecture's default (``STREAM_K_DEFAULT``) unless the other
    choice fits better beyond noise — each choice fitted on all the set's cases; per case the
    difference of the two fits' squared log errors; the cases resampled within each source
    (``STREAM_K_RESAMPLES`` times, seed 0) and each source's mean summed as in the loss; the
    other choice ships where that sum is below zero (it fits better) in at least
    ``STREAM_K_CONFIDENCE`` of the resamples."""
    cs = cdna_set_cases(arch, dtype)
    srcs = list(dict.fromkeys(c.source for c in cs))
    groups = [[c for c in cs if c.source == s] for s in srcs]
    fits, errs = [], []
    for sk in (False, True):
        vals, loss = _grid_fit(groups, sk)
        fits.append((vals, loss))
        errs.append(np.array(cdna_log_errors({**vals, "stream_k": sk}, cs)))
    default = STREAM_K_DEFAULT[arch]
    # the other choice's squared error minus the default's, per case
    d = errs[not default] ** 2 - errs[default] ** 2
    rng = np.random.default_rng(0)
    boot = np.zeros(STREAM_K_RESAMPLES)
    for s in srcs:
        ix = np.array([i for i, c in enumerate(cs) if c.source == s])
        boot += d[ix][rng.integers(0, len(ix), size=(STREAM_K_RESAMPLES, len(ix)))].mean(1)
    better = float((boot < 0).mean())
    return StreamKChoice(default, (fits[0], fits[1]), better,
                         (not default) if better >= STREAM_K_CONFIDENCE else default)


def cdna_stream_k_table() -> str:
    """Markdown: each CDNA set fitted without and with the stream-K candidates — the fit's
    values, its loss (the sum over sources of the mean squared log error) — the default, the
    share of bootstrap resamples in which the other choice fits better, and which ships
    (``stream_k_choice``)."""
    rows = ["| set | stream-K | fit (max, a, c, fill) | loss | default | other choice better in "
            "| shipped |", "|---|---|---|---:|---|---:|---|"]
    for (arch, dt), _ in CDNA_SETS.items():
        ch = stream_k_choice(arch, dt)
        for sk, (vals, loss) in zip((False, True), ch.fits):
            v = ", ".join(_fmt(p, vals[p]) for p in PARAMS)
            rows.append(f"| {arch} {dt} | {'on' if sk else 'off'} | {v} | {loss:.4f} | "
                        f"{'yes' if sk == ch.default else ''} | "
                        f"{f'{ch.other_better:.1%}' if sk == ch.default else ''} | "
                        f"{'yes' if sk == _shipped_stream_k(arch, dt) else ''} |")
    return "\n".join(rows)


def _shipped_stream_k(arch: str, dtype: str) -> bool:
    from ..engine.tiles import tiles_for
    from ..specs.hardware import hardware

    t = tiles_for(hardware({"cdna3": "mi300x", "cdna4": "mi355x"}[arch]))
    assert t is not None
    s = t.for_dtype(dtype)
    assert s is not None
    return bool(s.stream_k)
