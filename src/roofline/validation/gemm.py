"""The GPU matmul model against measured GEMM kernel rates across shapes
(docs/validation/gemm.md).

Cases: src/roofline/data/validation/gemm.toml (OpenXLA's matmul performance table: bf16 dots
of m, n, k in 256..4096 on H100 and B200, kernel time). Each is priced as a one-op graph (the
``matmul`` formula, one dot) on the zoo part with the ``default`` preset: ours is the dot's
FLOPs over its **kernel** time (``OpTimes.t_kernel``: the compute / memory maximum, without the
launch gap or host dispatch the table's kernel tracer does not see).

Fitted here: the tile model's ``max``, ``a`` (= ``b``), ``c`` and ``fill`` of
data/presets/tiles.toml — one set for Hopper and Blackwell, by a grid search minimising the
squared log error over the cases given. Each device's table is its own source, so the
leave-one-source-out report is a leave-one-device-out one: the parameters fitted on the H100
table alone predict the B200's (and the reverse) with only the SM count, peak and bandwidth of
the part changed. "Before" is the smooth model (``1/e = (1 + a/M + b/N + c/K) / max`` of
``[gpu.gemm]``), the one every GPU had.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from .cases import Case, load_cases
from .holdout import FitReport, Refit, holdout_tables, leave_one_source_out

__all__ = ["gemm_cases", "kernel_cases", "op_time_cases", "a100_cases", "bf16_cases",
           "fp8_cases", "hopper_fp8_cases", "sets_max", "fit_fp8_max", "fp8_fit_report",
           "predict_gemm", "gemm_errors", "fit_tiles", "gemm_holdout", "gemm_summary_table",
           "size_class_table", "gemm_shape_table", "gemm_holdout_table", "fp8_tile_table",
           "a100_table", "stream_k_report", "stream_k_table", "nvidia_control_cases",
           "unseen_table", "clocked", "NVIDIA_ARCHS", "PARAMS", "GRID"]

PARAMS = ("max", "a", "c", "fill")
#: the fit's grid (``b`` is tied to ``a``: the tables cannot tell rows from columns apart)
GRID: dict[str, tuple[float, ...]] = {
    "max": (0.85, 0.9, 0.95, 1.0), "a": (0.0, 8.0, 16.0, 32.0, 64.0),
    "c": (0.0, 32.0, 64.0, 128.0, 256.0, 512.0),
    "fill": (3e-6, 4e-6, 5e-6, 6e-6, 7e-6, 8e-6)}


def gemm_cases() -> tuple[Case, ...]:
    return load_cases("gemm").cases


def kernel_cases() -> tuple[Case, ...]:
    """The cases measured as kernel time (OpenXLA's tables; the fits use only these)."""
    return tuple(c for c in gemm_cases() if c.get("timing") != "op")


def op_time_cases() -> tuple[Case, ...]:
    """The cases measured as the kernel and its launch (the A100 sweeps and the H100 PCIe /
    SXM5 harness pair of validation/sustained.py: judged only)."""
    return tuple(c for c in gemm_cases() if c.get("timing") == "op")


def a100_cases() -> tuple[Case, ...]:
    """The A100 sweeps (op time; the Ampere set is transferred: judged only)."""
    return tuple(c for c in op_time_cases() if c["hardware"].startswith("a100"))


def bf16_cases() -> tuple[Case, ...]:
    """The 16-bit kernel-time cases (the 16-bit parameter set's fit and hold-out)."""
    return tuple(c for c in kernel_cases() if c["dtype"] == "bf16")


def fp8_cases() -> tuple[Case, ...]:
    """The B200's fp8 rows (source xla_b200_fp8: the fp8 parameter set's fit)."""
    return tuple(c for c in gemm_cases() if c["dtype"] == "fp8")


@lru_cache(maxsize=1)
def hopper_fp8_cases() -> tuple[Case, ...]:
    """The fp8 GEMM rows of Hopper parts in data/validation/vendors.toml (Azure's cuBLASLt
    sizes 4096 ... 32768 on ND H100 / H200 v5, MAMF's best shape on the H200) as cases of this
    module (b = 1): Hopper's fp8 ``max`` is fitted and judged on them, one source at a time."""
    from types import MappingProxyType

    from ..engine.tiles import tiles_for
    from ..specs.hardware import hardware

    out = []
    for c in load_cases("vendors").cases:
        sc = c.scenario
        if sc.get("kind") != "gemm" or sc.get("dtype") != "fp8":
            continue
        t = tiles_for(hardware(sc["hardware"]))
        if t is None or t.arch != "hopper":
            continue
        out.append(replace(c, scenario=MappingProxyType(
            {"hardware": sc["hardware"], "dtype": "fp8", "b": 1, "m": sc["m"], "n": sc["n"],
             "k": sc["k"], **({"clock": sc["clock"]} if "clock" in sc else {})})))
    return tuple(out)


def _all_cases() -> tuple[Case, ...]:
    from .cdna import cdna_fit_cases  # the AMD CDNA sets are fitted through the same path

    return gemm_cases() + hopper_fp8_cases() + cdna_fit_cases()


@lru_cache(maxsize=1024)
def _graph(m: int, n: int, k: int, dtype: str) -> Any:
    from ..graphs.graph import GraphBuilder
    from ..specs.dtypes import precision

    b = GraphBuilder(f"dot {m}x{n}x{k}", "forward", precision(dtype))
    b.add("matmul", "dot", m=m, k=k, n=n)
    return b.build()


def clocked(hw: Any, clock: str | None) -> Any:
    """``hw`` as a case's harness runs it: ``clock`` None — at the clock its peaks are quoted
    at (the spec as is); "max" — each call alone, with no power cap binding, at the part's
    maximum boost clock: every peak × ``hw.clock_ratio()`` (1 for a part without ``[clock]``).
    The per-kernel fill and the memory rate are not scaled."""
    from ..errors import SpecError

    if clock is None:
        return hw
    if clock != "max":
        raise SpecError(f"clock={clock!r}; allowed: 'max' (or leave it out: the peaks' clock)")
    r = hw.clock_ratio()
    return hw if r == 1.0 else replace(
        hw, peak_flops_per_s={d: v * r for d, v in hw.peak_flops_per_s.items()})


@lru_cache(maxsize=16)
def _hw_eff(key: str, clock: str | None = None, uncapped: bool = False) -> tuple[Any, Any]:
    """The part (at ``clock``; ``uncapped``: without its ``[sustained]`` fractions) and its
    default-preset efficiency."""
    from ..engine.presets import efficiency_for
    from ..specs.hardware import hardware

    hw = clocked(hardware(key), clock)
    if uncapped and hw.sustained_fraction:
        hw = replace(hw, sustained_fraction={})
    return hw, efficiency_for(hw, "default")


def _model(case: Case, eff: Any, uncapped: bool = False) -> Any:
    from ..engine.core import TimeModel

    hw, _ = _hw_eff(case["hardware"], case.get("clock"), uncapped)
    return TimeModel(_graph(case["m"], case["n"], case["k"], case["dtype"]), hw, eff)


def predict_gemm(case: Case, values: Mapping[str, float] | None = None, *,
                 smooth: bool = False, op_time: bool = False, uncapped: bool = False) -> float:
    """Our FLOP/s for ``case``: FLOPs / kernel time of the one-op graph at batch b;
    ``values``: tile parameters of the case's dtype to use instead of the shipped ones;
    ``smooth``: without the tile model (the smooth matmul model, as before); ``op_time``:
    FLOPs / the op's time with the launch model (kernel + gap, at least the dispatch floor)
    instead of the kernel time (always, for a case measured that way: ``timing = "op"``);
    ``uncapped``: the part without its ``[sustained]`` fractions."""
    hw, eff = _hw_eff(case["hardware"], case.get("clock"), uncapped)
    op_time = op_time or case.get("timing") == "op"
    if smooth:
        eff = replace(eff, tiles=None)
    elif values is not None:
        eff = replace(eff, tiles=_with_values(eff.tiles, case["dtype"], values))
    ot = _model(case, eff, uncapped).evaluate(float(case["b"]))
    return float(ot.flops.sum() / (ot.time if op_time else ot.t_kernel).sum())


def _tiles(t: Any, values: Mapping[str, float]) -> Any:
    v = dict(values)
    return replace(t, **{k: v[k] for k in ("max", "a", "c", "fill") if k in v},
                   **({"b": v["a"]} if "a" in v else {}),
                   **({"stream_k": bool(v["stream_k"])} if "stream_k" in v else {}))


def _with_values(t: Any, dtype: str, values: Mapping[str, float]) -> Any:
    """A part's Tiles with ``values`` for ``dtype``'s parameter set (16-bit or a narrow one)."""
    from ..engine.tiles import TILE_DTYPES

    if dtype in TILE_DTYPES:
        return _tiles(t, values)
    narrow = tuple((d, _tiles(x, values) if d == dtype else x) for d, x in t.narrow)
    return replace(t, narrow=narrow)


def gemm_errors(*, smooth: bool = False, cases: Sequence[Case] | None = None
                ) -> list[tuple[Case, float, float]]:
    """(case, our FLOP/s, ours / measured − 1) for every kernel-time case (or ``cases``)."""
    out = []
    for c in kernel_cases() if cases is None else cases:
        f = predict_gemm(c, smooth=smooth)
        out.append((c, f, f / c.value_si - 1))
    return out


@lru_cache(maxsize=4)
def _arrays(ids: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Per part, the batch-independent arrays of its cases for the vectorised fit: the cases'
    positions, M/N/K, FLOPs, the memory time (it does not depend on the fitted parameters:
    the smooth model's, at the set's streaming fraction), the peak the tiles run at and the
    part's tiles."""
    from ..engine.tiles import WaveOps, mem_ratio, streamed

    by_id = {c.id: c for c in _all_cases()}
    cases = [by_id[i] for i in ids]
    out = []
    def group(c: Case) -> tuple[str, str, str | None]:
        return c["hardware"], c["dtype"], c.get("clock")

    for key, dt, clock in dict.fromkeys(group(c) for c in cases):
        hw, eff = _hw_eff(key, clock)
        pos = [i for i, c in enumerate(cases) if group(c) == (key, dt, clock)]
        mine = [cases[i] for i in pos]
        f, tm, dims = [], [], []
        for c in mine:
            ot = _model(c, replace(eff, tiles=None)).evaluate(float(c["b"]))
            f.append(float(ot.flops.sum()))
            tm.append(float(ot.t_memory.sum()))
            dims.append((c["m"] * c["b"], c["n"], c["k"]))
        d = np.array(dims, dtype=np.float64).T
        # the engine's rate (tiles.wave_ops): the 16-bit set scales by gemm_dtype (1 there), a
        # narrow dtype's own set is a fraction of that dtype's own peak; a part's measured
        # clock ratio to its set's fitted part (tiles.Tiles.clock) scales it as the engine does
        t = eff.tiles.for_dtype(dt)
        peak = hw.peak(dt) * hw.sustained(dt) * t.clock_of(dt)
        inv_bw = 1.0 / (hw.memory_bytes_per_s * eff.memory.max)
        # a tile-priced op streams at the set's own fraction, the engine's rule (tiles.streamed:
        # not below the smallest tile's rows, where the smooth model prices it)
        w = WaveOps(np.arange(len(mine)), d[0], d[1], d[2], np.ones(len(mine)), peak, t, inv_bw,
                    mem_ratio(t, eff))
        tm_a = streamed(np.array(tm), w, 1.0)
        out.append((np.array(pos), d, np.array(f), tm_a, peak, t, inv_bw))
    return out


def _log_errors(values: Mapping[str, float] | None, cases: Sequence[Case]) -> list[float]:
    """log(ours / measured) per case (vectorised: the engine's kernel time, max(compute in
    whole waves, memory), for the one dot of each case; a test checks it against
    ``predict_gemm``)."""
    from ..engine.tiles import WaveOps

    ids = tuple(c.id for c in cases)
    out = np.empty(len(cases))
    for pos, (m, n, k), flops, t_mem, peak, t, inv_bw in _arrays(ids):
        tt = t if values is None else _tiles(t, values)
        w = WaveOps(np.arange(len(m)), m, n, k, flops / (2.0 * m * n * k), peak * tt.max, tt,
                    inv_bw)
        tk = np.maximum(w.seconds(1.0, np.nan), t_mem)
        meas = np.array([cases[i].value_si for i in pos])
        out[pos] = np.log(flops / tk / meas)
    return out.tolist()


def fit_tiles(cases: Sequence[Case], stream_k: bool | None = None) -> Refit:
    """The tile parameters (max, a = b, c, fill) minimising Σ log² error over ``cases``, on
    ``GRID``; ``stream_k``: with the stream-K candidates forced on or off (None: as shipped)."""
    best: tuple[float, dict[str, float]] | None = None
    for combo in itertools.product(*(GRID[p] for p in PARAMS)):
        vals = dict(zip(PARAMS, combo))
        if stream_k is not None:
            vals["stream_k"] = stream_k
        e = _log_errors(vals, cases)
        s = math.fsum(x * x for x in e)
        if best is None or s < best[0]:
            best = (s, vals)
    assert best is not None
    return Refit(values=best[1], note="b tied to a")


def gemm_holdout() -> FitReport:
    """In-sample and leave-one-device-out error of the 16-bit tile parameters."""
    cs = bf16_cases()
    t = _hw_eff(cs[0]["hardware"])[1].tiles
    shipped = {"max": t.max, "a": t.a, "c": t.c, "fill": t.fill}
    return leave_one_source_out("gpu tiles", cs, PARAMS, shipped, fit_tiles, _log_errors)


#: the grid of Hopper's fp8 ``max`` (a, c, fill: the B200 fp8 fit's)
FP8_MAX_GRID = tuple(round(0.5 + 0.01 * i, 2) for i in range(51))


def fit_fp8_max(cases: Sequence[Case], stream_k: bool | None = None) -> Refit:
    """Hopper's fp8 ``max`` minimising Σ log² error over ``cases`` (on ``FP8_MAX_GRID``), the
    other fp8 parameters held at the shipped ones (fitted on the B200's fp8 table);
    ``stream_k`` as in ``fit_tiles``."""
    sk: dict[str, float] = {} if stream_k is None else {"stream_k": stream_k}
    best = min(FP8_MAX_GRID, key=lambda x: (math.fsum(
        e * e for e in _log_errors({"max": x, **sk}, cases)), x))
    return Refit(values={"max": best, **sk}, note="a, c, fill: the B200 fp8 fit's")


def sets_max(c: Case) -> bool:
    """Whether the large-GEMM limit ``max`` decides ``c``'s time: at least 1024 rows and
    columns and more than 2048³ multiply-adds. Hopper's fp8 ``max`` is fitted on these rows
    only; below (the per-kernel fill and whole waves decide, at Blackwell's fp8 values) and on
    thin outputs (802816 x 192: the memory side) the rows are judged by it."""
    return min(c["m"], c["n"]) >= 1024 and c["m"] * c["n"] * c["k"] > 2048 ** 3


def _fit_fp8_large(cases: Sequence[Case], stream_k: bool | None = None) -> Refit:
    return fit_fp8_max([c for c in cases if sets_max(c)], stream_k)


def fp8_fit_report() -> tuple[Refit, Any, FitReport]:
    """The fp8 parameter sets: (the fit on the B200 fp8 table — shipped for Blackwell —, its
    in-sample errors, Hopper's ``max`` fitted and judged one source at a time on the Hopper
    fp8 rows of data/validation/vendors.toml)."""
    from .holdout import error_summary

    cs = fp8_cases()
    fit = fit_tiles(cs)
    ins = error_summary(list(zip((c.id for c in cs), _log_errors(None, cs))))
    hw, eff = _hw_eff(hopper_fp8_cases()[0]["hardware"])
    t = eff.tiles.for_dtype("fp8")
    rep = leave_one_source_out("hopper fp8 tiles", hopper_fp8_cases(), ("max",),
                               {"max": t.max}, _fit_fp8_large, _log_errors)
    return fit, ins, rep


def _summary(errs: Sequence[float]) -> str:
    a = np.abs(np.asarray(errs))
    return f"{np.median(a):.1%} | {a.max():.0%}"


def gemm_summary_table() -> str:
    """Markdown: per part and size class, median and worst |error| before and after."""
    return size_class_table(gemm_errors(), gemm_errors(smooth=True))


def size_class_table(after: Sequence[tuple[Any, Any, float]],
                     before: Sequence[tuple[Any, Any, float]]) -> str:
    """Markdown: per (part, dtype) of ``after`` and size class (all, m·n·k ≤ 1024³, ≥ 2048³), the
    median and worst |error| of ``before`` and ``after`` (each ``gemm_errors`` triples of the
    same cases)."""
    rows = ["| part | shapes | n | before: median | worst | with waves: median | worst |",
            "|---|---|---:|---:|---:|---:|---:|"]
    classes = (("all", lambda c: True),
               ("small (m·n·k ≤ 1024³)", lambda c: c["m"] * c["n"] * c["k"] <= 1024 ** 3),
               ("large (m·n·k ≥ 2048³)", lambda c: c["m"] * c["n"] * c["k"] >= 2048 ** 3))
    for hw, dt in dict.fromkeys((c["hardware"], c["dtype"]) for c, _, _ in after):
        for label, sel in classes:
            a = [e for c, _, e in after if (c["hardware"], c["dtype"]) == (hw, dt) and sel(c)]
            b = [e for c, _, e in before if (c["hardware"], c["dtype"]) == (hw, dt) and sel(c)]
            rows.append(f"| {hw} {dt} | {label} | {len(a)} | {_summary(b)} | {_summary(a)} |")
    return "\n".join(rows)


def gemm_shape_table() -> str:
    """Markdown: the square dots of each part, before and after (FLOP/s; + = too fast)."""
    before = {c.id: e for c, _, e in gemm_errors(smooth=True)}
    rows = ["| case | published | ours (kernel) | error | before: kernel | error "
            "| before: op time (gap, dispatch floor) | error |",
            "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c, f, e in gemm_errors():
        if not (c["m"] == c["n"] == c["k"]):
            continue
        fb = c.value_si * (1 + before[c.id])
        fo = predict_gemm(c, smooth=True, op_time=True)
        rows.append(f"| {c.id} | {c.value_si / 1e12:.1f} TFLOP/s | {f / 1e12:.1f} | {e:+.1%} | "
                    f"{fb / 1e12:.1f} | {before[c.id]:+.1%} | {fo / 1e12:.1f} | "
                    f"{fo / c.value_si - 1:+.1%} |")
    return "\n".join(rows)


def _fmt(k: str, v: float) -> str:
    return f"{v * 1e6:g} µs" if k == "fill" else f"{v:g}"


def gemm_holdout_table(rep: FitReport | None = None) -> str:
    """The markdown hold-out tables of docs/validation/gemm.md (the 16-bit set)."""
    return holdout_tables(gemm_holdout() if rep is None else rep, _fmt)


def a100_table() -> str:
    """Markdown: the A100 sweeps (op time, judged only: the Ampere set is the Hopper /
    Blackwell fit's), per source, before (the smooth model) and with waves."""
    rows = ["| source | n | before: median | worst | with waves: median | worst |",
            "|---|---:|---:|---:|---:|---:|"]
    cs = a100_cases()
    after, before = gemm_errors(cases=cs), gemm_errors(smooth=True, cases=cs)
    for s in dict.fromkeys(c.source for c in cs):
        a = [e for c, _, e in after if c.source == s]
        b = [e for c, _, e in before if c.source == s]
        rows.append(f"| {s} | {len(a)} | {_summary(b)} | {_summary(a)} |")
    a = [e for _, _, e in after]
    b = [e for _, _, e in before]
    rows.append(f"| all | {len(a)} | {_summary(b)} | {_summary(a)} |")
    return "\n".join(rows)


#: the NVIDIA architectures of data/presets/tiles.toml (the CDNA sets are judged in validation/cdna)
NVIDIA_ARCHS = ("hopper", "blackwell", "ampere")


def nvidia_control_cases() -> tuple[Case, ...]:
    """The GEMM rows of data/validation/vendors.toml on NVIDIA tile parts that no tile fit
    uses (MAMF's best shapes except the Hopper fp8 ones, which Hopper's fp8 fit uses), as
    cases of this module, priced as op time like vendors.md prices them."""
    from types import MappingProxyType

    from ..engine.tiles import tiles_for
    from ..specs.hardware import hardware

    fitted = {c.id for c in hopper_fp8_cases()}
    out = []
    for c in load_cases("vendors").cases:
        sc = c.scenario
        t = tiles_for(hardware(sc["hardware"])) if sc.get("kind") == "gemm" else None
        if t is None or t.arch not in NVIDIA_ARCHS or c.id in fitted:
            continue
        out.append(replace(c, scenario=MappingProxyType(
            {"hardware": sc["hardware"], "dtype": sc["dtype"], "b": 1, "m": sc["m"],
             "n": sc["n"], "k": sc["k"], "timing": "op",
             **({"clock": sc["clock"]} if "clock" in sc else {})})))
    return tuple(out)


def unseen_table(holdout: FitReport | None = None,
                 fp8: tuple[Refit, Any, FitReport] | None = None) -> str:
    """Markdown: |error| of every NVIDIA GEMM case on a source its parameter set was not fitted
    on — the 16-bit set's cases predicted by the fit without their device, Hopper's fp8 rows by
    the fit without their source, the A100 sources (nothing fitted on Ampere), the MAMF control
    rows, the judged-only sources of validation/gemm_judged.py — per group and pooled."""
    from .gemm_judged import gemm_judged_rows
    from .sustained import pair_cases

    rep = gemm_holdout() if holdout is None else holdout
    _, _, r8 = fp8_fit_report() if fp8 is None else fp8
    groups = [
        ("16-bit set, each device held out (xla_h100, xla_b200)",
         [abs(math.expm1(e)) for e in rep.held_out_errors.values()]),
        ("Hopper fp8 set, each source held out (azure, mamf)",
         [abs(math.expm1(e)) for e in r8.held_out_errors.values()]),
        ("A100, transferred set (tri3551, tri6523, tri7085, azure_a100)",
         [abs(e) for _, _, e in gemm_errors(cases=a100_cases())]),
        ("H100 SXM5, the PCIe comparison's reference rows (zzc_h100)",
         [abs(e) for _, _, e in gemm_errors(cases=pair_cases("h100-pcie")[1])]),
        ("MAMF control rows (H100, A100 SXM / PCIe, B200 bf16 and fp8)",
         [abs(e) for _, _, e in gemm_errors(cases=nvidia_control_cases())]),
        ("Hopper fp8 set, DeepGEMM's H800 table (judged only: gemm_judged)",
         [abs(e) for _, e, _, _ in gemm_judged_rows()])]
    rows = ["| cases on a source their set was not fitted on | n | median \\|error\\| | worst |",
            "|---|---:|---:|---:|"]
    pooled: list[float] = []
    for name, errs in groups:
        pooled += errs
        rows.append(f"| {name} | {len(errs)} | {np.median(errs):.1%} | {max(errs):.0%} |")
    rows.append(f"| all | {len(pooled)} | {np.median(pooled):.1%} | {max(pooled):.0%} |")
    return "\n".join(rows)


def stream_k_report() -> list[tuple[str, bool, Any, Any]]:
    """Each parameter set fitted without and with the stream-K candidates (engine/tiles.py):
    (set, stream-K, in-sample errors of the refit, leave-one-source-out errors or None where
    the set has one source)."""
    from functools import partial

    from .holdout import error_summary

    out: list[tuple[str, bool, Any, Any]] = []
    for sk in (False, True):
        cs = bf16_cases()
        rep = leave_one_source_out("gpu tiles", cs, PARAMS, {}, partial(fit_tiles, stream_k=sk),
                                   lambda v, c: _log_errors(v, c) if v else [0.0] * len(c))
        out.append(("16-bit (xla_h100 + xla_b200)", sk, rep.refit_in_sample, rep.loso))
        cs = fp8_cases()
        fit = fit_tiles(cs, stream_k=sk)
        ins = error_summary(list(zip((c.id for c in cs), _log_errors(fit.values, cs))))
        out.append(("B200 fp8 (xla_b200_fp8)", sk, ins, None))
        cs = hopper_fp8_cases()
        rep = leave_one_source_out("hopper fp8", cs, ("max",), {},
                                   partial(_fit_fp8_large, stream_k=sk),
                                   lambda v, c: _log_errors(v, c) if v else [0.0] * len(c))
        out.append(("Hopper fp8 (azure + mamf)", sk, rep.refit_in_sample, rep.loso))
    return out


def stream_k_table(report: list[tuple[str, bool, Any, Any]] | None = None) -> str:
    """Markdown: ``stream_k_report`` (median |error|, RMS log, worst) per set, off and on."""
    rows = ["| parameter set | stream-K | refit in-sample: median | RMS log | worst "
            "| held out (LOSO): median | RMS log | worst |",
            "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, sk, ins, lo in stream_k_report() if report is None else report:
        held = (f"{lo.median_abs:.1%} | {lo.rms_log:.3f} | {lo.worst:+.1%}" if lo is not None
                else "— | — | —")
        rows.append(f"| {name} | {'on' if sk else 'off'} | {ins.median_abs:.1%} | "
                    f"{ins.rms_log:.3f} | {ins.worst:+.1%} | {held} |")
    return "\n".join(rows)


def fp8_tile_table(report: tuple[Refit, Any, FitReport] | None = None) -> str:
    """Markdown: the fp8 sets — the B200 fit (in-sample), Hopper's ``max`` fitted and held out
    one source at a time, and each Hopper fp8 row before (the smooth model × the end-to-end
    ``gemm_dtype.fp8`` factor) and now (``report``: ``fp8_fit_report()`` when computed)."""
    fit, ins, rep = fp8_fit_report() if report is None else report
    shipped = _hw_eff(fp8_cases()[0]["hardware"])[1].tiles.for_dtype("fp8")
    vals = ", ".join(f"{k} {_fmt(k, x)}" for k, x in fit.values.items())
    ship = ", ".join(f"{k} {_fmt(k, getattr(shipped, k))}" for k in PARAMS)
    lines = [f"B200 fp8 ({ins.n} dots, source xla_b200_fp8): fit {vals} (shipped: {ship}); "
             f"in-sample median |error| {ins.median_abs:.1%}, RMS log {ins.rms_log:.3f}, "
             f"worst {ins.worst:+.1%} ({ins.worst_case}).", "",
             holdout_tables(rep, _fmt), "",
             "| Hopper fp8 row | published | before (smooth × gemm_dtype.fp8) | error "
             "| with fp8 tiles | error | held out (fit on the other source) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for c in hopper_fp8_cases():
        f0, f1 = predict_gemm(c, smooth=True), predict_gemm(c)
        h = math.exp(rep.held_out_errors[c.id]) - 1
        lines.append(f"| {c.id} | {c.value_si / 1e12:.1f} TFLOP/s | {f0 / 1e12:.1f} | "
                     f"{f0 / c.value_si - 1:+.1%} | {f1 / 1e12:.1f} | {f1 / c.value_si - 1:+.1%} "
                     f"| {h:+.1%} |")
    return "\n".join(lines)
