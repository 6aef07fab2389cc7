"""Sweeps over batch × hardware × precision: one broadcast per precision, not a loop per config."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

import numpy as np

from .. import _args as A
from .._display import Display
from .._text import printable_str
from ..engine.core import TOTALS, time_model
from ..engine.memory import fit_reason, resident_weights
from ..engine.memory import fits as mem_fits
from ..engine.presets import check_preset, check_runtime, efficiency_for, for_runtime
from ..engine.solve import (
    PHASE_ARG,
    TOKENS_ARG,
    check_batch,
    check_phase_lengths,
    non_finite_reason,
    solve,
)
from ..engine.table import Table
from ..errors import SpecError
from ..graphs.model import Model
from ..graphs.resolve import model as resolve_model
from ..progress import Progress, progress_stream
from ..specs.dtypes import PRECISION_ARG
from ..specs.dtypes import precision as make_precision
from ..specs.hardware import Hardware
from ..specs.resolve import hardware as resolve_hardware
from ..units import FRACTION

__all__ = ["sweep", "Sweep"]


class Sweep(Display):
    """The sweep table plus crossover detection."""

    def __init__(self, table: Table, model_name: str, preset: str = "default",
                 runtime: str = "eager", warnings: tuple[str, ...] = ()) -> None:
        self.table = table
        self.model = model_name
        self.preset = preset  #: the preset every row was priced with
        self.runtime = runtime  #: "eager" or "compiled" (see ``solve``)
        #: what every row leaves out (ops without a formula), as ``Result.warnings``
        self.warnings = warnings
        #: row "hardware" name -> its Hardware (names are unique within a sweep)
        self.hardware_specs: dict[str, Hardware] = {}

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, key: str | int) -> Any:
        return self.table[key]

    def to_pandas(self) -> Any:
        return self.table.to_pandas()

    def to_dicts(self) -> list[dict[str, Any]]:
        return self.table.to_dicts()

    def crossover(self) -> dict[str, int | None]:
        """Smallest batch at which each (hardware, precision) turns compute-bound (None if
        it never does in the swept range). Keys are hardware names, suffixed with the
        precision when several precisions were swept."""
        t = self.table
        precs = sorted(set(t["precision"]))
        out: dict[str, int | None] = {}
        for hw in dict.fromkeys(t["hardware"]):
            for pr in precs:
                mask = (t["hardware"] == hw) & (t["precision"] == pr)
                b = t["batch"][mask]
                cb = t["bottleneck"][mask] == "compute"
                key = hw if len(precs) == 1 else f"{hw} {pr}"
                hits = b[cb]
                out[key] = int(hits.min()) if len(hits) else None
        return out

    def plot(self, path: Any = None, **kw: Any) -> Any:
        """Throughput and latency vs batch per device, the crossover ringed
        (``roofline.viz.charts.plot_sweep``; needs ``pip install 'roofline[plot]'``)."""
        from ..viz.charts import plot_sweep

        return plot_sweep(self, path=path, **kw)

    @printable_str
    def to_string(self, max_rows: int | None = 60, width: int | None = 100,
                  more: str = "") -> str:
        """The sweep as text: one unit per column, at most ``width`` characters a line and
        ``max_rows`` rows (what is left out is counted and named; ``None`` lifts a limit)."""
        t = self.table
        one_prec = len(set(t["precision"])) == 1 if len(t) else True
        cols = ["hardware", "precision", "batch", "latency", "throughput", "bottleneck",
                "feasible", "mfu", "t_overhead", "t_fill", "arithmetic_intensity"]
        if one_prec:
            cols.remove("precision")
        body = t.to_string(cols, max_rows=max_rows, width=width, more=more)
        how = f"preset {self.preset}" + (
            f", runtime {self.runtime}" if self.runtime != "eager" else "")
        if one_prec and len(t):
            how = f"{t['precision'][0]}, {how}"
        items = [f"{k}: {v if v is not None else 'never'}" for k, v in self.crossover().items()]
        cross = "compute-bound from batch — " + ", ".join(items)
        if width is not None and len(cross) > width:
            cross = "compute-bound from batch:\n" + "\n".join(f"  {i}" for i in items)
        return f"{self.model} sweep ({how})\n{body}\n{cross}" + "".join(
            f"\nWARNING: {w}" for w in self.warnings)

    def __str__(self) -> str:
        return self.to_string()


def _as_list(x: Any) -> list[Any]:
    if isinstance(x, str | Hardware | Model) or not isinstance(x, Iterable):
        return [x]
    return list(x)


@A.checked(model=A.anything, hardware=A.anything,
           batch=A.seq(A.count(), scalar=True, what="positive integers",
                       ints=(1, A.MAX_COUNT)),
           precision=A.seq(PRECISION_ARG, scalar=True, what="dtype names or Precisions"),
           preset=A.text, phase=PHASE_ARG, seq_len=TOKENS_ARG, context=TOKENS_ARG,
           fuse=A.flag, runtime=A.text, progress=A.progress)
def sweep(model: Any, hardware: Any, *, batch: Sequence[int] | int = (1,),
          precision: str | Sequence[str] = "fp16", preset: str = "default",
          phase: str | None = None, seq_len: int | None = None,
          context: int | None = None, fuse: bool = False, runtime: str = "eager",
          progress: bool | TextIO = False) -> Sweep:
    """Price every (hardware, precision, batch); returns a Sweep (``.crossover()``,
    ``.to_pandas()``). Per-op pricing throughout; each precision is one vectorised pass.
    ``fuse`` and ``runtime`` ("eager" | "compiled") as in ``solve``. ``progress``: a line per
    (precision, hardware) priced with the rate and time left (True: on stderr when it is a
    terminal; a stream: there; see ``roofline.progress``)."""
    m = resolve_model(model)
    hws = [resolve_hardware(h) for h in _as_list(hardware)]
    if not hws:
        raise SpecError("sweep needs at least one hardware")
    _check_distinct_names(hws)
    batches = np.array([check_batch(b) for b in _as_list(batch)], dtype=np.int64)
    if not len(batches):
        raise SpecError("sweep needs at least one batch")
    preset = check_preset(preset)
    runtime = check_runtime(runtime, preset)
    precs = [make_precision(p) for p in _as_list(precision)]
    if m.default_seq_len is not None:  # as solve: a length the phase does not use is refused
        check_phase_lengths(phase or m.default_phase, seq_len, context)
    # (hardware names, precision label, columns: [h, nb] arrays or one value for the block),
    # put together once at the end: every block is len(names) x nb rows
    blocks: list[tuple[list[str], str, dict[str, Any]]] = []

    def block(hw_names: list[str], plabel: str, nb: int, **cols: Any) -> None:
        blocks.append((hw_names, plabel, cols))

    nb = len(batches)
    warnings: list[str] = []
    bar = Progress(len(precs) * len(hws), progress_stream(progress), unit="config",
                   min_interval=0.5)
    for p in precs:
        ok = [hw for hw in hws if hw.has(p.compute)]
        for hw in hws:
            if not hw.has(p.compute):
                nan = math.nan
                block([hw.name], p.label, nb, latency=nan, latency_bound=nan, t_overhead=nan,
                      t_fill=nan, throughput=0.0,
                      tokens_per_s=nan, bottleneck="none", flops=nan, bytes=nan,
                      arithmetic_intensity=nan, ridge_point=nan, mfu=nan,
                      memory_footprint=nan, feasible=False,
                      reason=f"{hw.name} has no {p.compute} peak")
                bar.step(f"{hw.name} {p.label}", "no peak for this dtype")
        if not ok:
            continue
        if preset == "mlsysim" or m.batch_dependent:
            # aggregate preset and MoE graphs: per-config solves (each is microseconds)
            for hw in ok:
                rs = [solve(m, hw, batch=int(b), precision=p, preset=preset, phase=phase,
                            seq_len=seq_len, context=context, fuse=fuse, runtime=runtime)
                      for b in batches]
                warnings += [w for r in rs for w in r.warnings]
                rows = [_row(r.to_dict()) for r in rs]
                block([hw.name], p.label, nb, **{k: np.array([[r[k] for r in rows]],
                                                               dtype=object if k in (
                                                                   "bottleneck", "reason")
                                                               else None)
                                                  for k in rows[0]})
                bar.step(f"{hw.name} {p.label}", f"{nb} batches")
            continue
        g = m.graph(precision=p, phase=phase, seq_len=seq_len, context=context, fuse=fuse)
        warnings += g.meta.get("warnings", ())
        effs = [for_runtime(efficiency_for(hw, preset), runtime) for hw in ok]
        # one plan per hardware: its closed-form totals take every batch at once
        per_hw = []
        for hw, e in zip(ok, effs):
            per_hw.append(time_model(g, hw, e).totals_many(batches))
            bar.step(f"{hw.name} {p.label}", f"{nb} batches")
        T = np.stack(per_hw)
        arr = {k: T[:, i, :] for i, k in enumerate(TOTALS)}
        arr["live"] = arr["live_activation_bytes"]
        arr["t_memory_bound_ops"] = arr["latency"] - arr["t_overhead"] - \
            arr["t_compute_bound_ops"] - arr["t_fill"]
        parts = np.stack([arr["t_compute_bound_ops"], arr["t_memory_bound_ops"],
                          arr["t_overhead"] + arr["t_fill"]])  # fill: latency (solve's label)
        names = np.array(["compute", "memory", "overhead"], dtype=object)
        bott = names[parts.argmax(0)]
        bf = batches.astype(np.float64)[None, :]
        foot, fits, reason = _memory_fit(g, ok, effs, arr["live"], bf)
        peak = np.array([hw.peak(p.compute) for hw in ok])[:, None]
        lat, fl, by = arr["latency"], arr["flops"], arr["bytes"]
        tps = bf * g.tokens_per_sample / lat if g.meta.get("seq_len") else np.full_like(lat, np.nan)
        _never_non_finite(fits, reason, lat=lat, bound=arr["latency_bound"], fl=fl, by=by,
                          foot=foot)
        block([hw.name for hw in ok], p.label, nb, latency=lat,
              latency_bound=arr["latency_bound"], t_overhead=arr["t_overhead"],
              t_fill=arr["t_fill"], throughput=bf / lat, tokens_per_s=tps,
              bottleneck=bott, flops=fl, bytes=by, arithmetic_intensity=fl / by,
              ridge_point=np.broadcast_to(peak / np.array(
                  [hw.memory_bytes_per_s for hw in ok])[:, None], lat.shape),
              mfu=fl / (lat * peak), memory_footprint=foot, feasible=fits, reason=reason)
    table = Table(_columns(blocks, m.name, batches),
                  units={"latency": "s", "latency_bound": "s", "t_overhead": "s", "t_fill": "s",
                         "throughput": "1/s",
                         "flops": "FLOP", "bytes": "B", "memory_footprint": "B",
                         "mfu": FRACTION, "arithmetic_intensity": "FLOP/B"})
    bar.close()
    out = Sweep(table, m.name, preset, runtime, tuple(dict.fromkeys(warnings)))
    out.hardware_specs = {hw.name: hw for hw in hws}
    return out


def _columns(blocks: list[tuple[list[str], str, dict[str, Any]]], model: str,
             batches: np.ndarray) -> dict[str, np.ndarray]:
    """The sweep's columns from its blocks (``sweep``'s ``block``), rows in block order."""
    nb = len(batches)
    names = [n for hn, _, _ in blocks for n in hn]
    n = len(names) * nb
    cols = {"model": np.full(n, model, dtype=object),
            "hardware": np.repeat(np.array(names, dtype=object), nb),
            "precision": np.repeat(np.array([p for hn, p, _ in blocks for _ in hn],
                                            dtype=object), nb),
            "batch": np.tile(batches, len(names)).astype(np.int64)}
    floats = ("latency", "latency_bound", "t_overhead", "t_fill", "throughput", "tokens_per_s",
              "flops", "bytes", "arithmetic_intensity", "ridge_point", "mfu", "memory_footprint")
    for k in _KEYS[4:]:
        typ = np.float64 if k in floats else bool if k == "feasible" else object
        cols[k] = np.concatenate([np.broadcast_to(np.asarray(c[k], dtype=typ), (len(hn), nb))
                                  for hn, _, c in blocks]).reshape(n)
    return cols


_KEYS = ("model", "hardware", "precision", "batch", "latency", "latency_bound", "t_overhead",
         "t_fill", "throughput", "tokens_per_s", "bottleneck", "flops", "bytes",
         "arithmetic_intensity", "ridge_point", "mfu", "memory_footprint", "feasible", "reason")


def _memory_fit(g: Any, ok: list[Hardware], effs: list[Any], live: np.ndarray,
                bf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """[h, b] footprint, fits and reason (the parts as ``solve`` lists them; weights that do
    not fit a weight store say so) of graph ``g`` on each hardware at each batch."""
    ws = np.array([e.workspace for e in effs])[:, None]
    held = [resident_weights(g, hw) for hw in ok]  # weight streaming holds one op's
    w_on = np.array([h for h, _ in held])[:, None]
    foot = w_on + live + g.state_bytes_per_sample * bf + ws
    cap = np.array([hw.memory_capacity_bytes for hw in ok])[:, None]
    fits = mem_fits(foot, cap)
    reason = np.full(fits.shape, "", dtype=object)
    for hi, (_, why) in enumerate(held):
        if why:  # the weights do not fit the weight store
            reason[hi, fits[hi]] = why
            fits[hi] = False
    # the message per configuration that does not fit, from Python floats (numpy scalars
    # format the same text several times slower)
    hs, bs = np.nonzero(~fits)
    kv = (g.state_bytes_per_sample * bf[0]).tolist()
    w_l, cap_l, ws_l = w_on[:, 0].tolist(), cap[:, 0].tolist(), ws[:, 0].tolist()
    for hi, bi, f, act in zip(hs.tolist(), bs.tolist(), foot[hs, bs].tolist(),
                              live[hs, bs].tolist()):
        if reason[hi, bi]:
            continue
        reason[hi, bi] = fit_reason(f, cap_l[hi], ok[hi].name, {
            "weights": w_l[hi], "activations": act, "kv_cache": kv[bi],
            "workspace": ws_l[hi]})
    return foot, fits, reason


def _never_non_finite(fits: np.ndarray, reason: np.ndarray, **cols: np.ndarray) -> None:
    """A row holding a non-finite or negative number (an absurd spec: a peak of 1e-320) is not
    feasible, with solve's reason (engine/solve.py); ``fits`` and ``reason`` are set in place."""
    names = {"lat": "latency", "bound": "latency_bound", "fl": "flops", "by": "bytes",
             "foot": "memory_footprint"}
    bad = {k: ~(np.isfinite(v) & (v >= 0)) for k, v in cols.items()}
    if not any(b.any() for b in bad.values()):
        return
    for hi, bi in zip(*np.nonzero(fits & np.logical_or.reduce(list(bad.values())))):
        which = [names[k] for k, b in bad.items() if b[hi, bi]]
        fits[hi, bi] = False
        reason[hi, bi] = non_finite_reason(which)


def _check_distinct_names(hws: list[Hardware]) -> None:
    """Rows are labelled by the part's name: two different specs under one name (a hypothetical
    part made with ``with_peak``, say) would be indistinguishable, and the chart would draw
    both with one spec. The same part given twice is allowed (its rows repeat)."""
    seen: dict[str, Hardware] = {}
    for hw in hws:
        other = seen.setdefault(hw.name, hw)
        if other is not hw and other != hw:
            raise SpecError(
                f"hardware: two different specs are both named {hw.name!r}; rows are labelled "
                "by name, so give one another name, e.g. dataclasses.replace(hw, name='...')")


def _row(d: dict[str, Any]) -> dict[str, Any]:
    nan = math.nan
    return dict(latency=d["latency"] if d["latency"] is not None else nan,
                latency_bound=d["latency_bound"] if d["latency_bound"] is not None else nan,
                t_overhead=nan if d["t_overhead"] is None else d["t_overhead"],
                t_fill=nan if d["t_fill"] is None else d["t_fill"],
                throughput=d["throughput"], tokens_per_s=d["tokens_per_s"] or nan,
                bottleneck=d["bottleneck"], flops=d["flops"] or nan, bytes=d["bytes"] or nan,
                arithmetic_intensity=d["arithmetic_intensity"] or nan,
                ridge_point=d["ridge_point"] or nan, mfu=d["mfu"] or nan,
                memory_footprint=d["memory_footprint"] or nan, feasible=d["feasible"],
                reason=d["reason"])
