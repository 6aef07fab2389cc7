"""rl.solve (default and bound presets) against published GPU inference measurements: the
cases priced, docs/validation/inference.md's generated tables, and the what-if pricing behind
them (tests/validation/test_validation_inference.py asserts the tolerances).

Cases, with their sources, live in data/validation/inference.toml (read by
roofline.validation.load_cases, which refuses a case without a source). ``case_table()`` is the
page's ``table`` block, ``tried_table()`` its ``tried`` block; ``python -m
roofline.validation.regenerate --only pages:inference.md`` rewrites both, and
``python -m roofline.validation.inference`` prints them (``--tried``; ``--fit`` prints the
refit table of roofline.validation.inference_refit, about a minute).

Error convention: r = predicted time per batch / measured time per batch (for throughput cases
the measured time is batch / samples-per-second). r < 1: we predict faster than measured. The
error factor is max(r, 1/r).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace
from typing import Any

import roofline as rl

from ..errors import SpecError
from .cases import Case, ValidationSet, load_cases
from .holdout import fmt_pct

__all__ = ["inference_cases", "solve_kwargs", "measured_seconds", "predicted_seconds",
           "seconds_with", "graph_seconds", "Row", "factor", "rows", "summary",
           "case_table", "TRT_QKV", "T4_SMS", "L4_SMS", "seconds_variant", "VARIANTS",
           "tried_ratios", "tried_table", "tried_figures", "case_figures", "query_floors",
           "floor_figures"]


#: the folds of a case with ``fuse_qkv``: TensorRT's BERT demo builds one fully connected layer
#: of 3 x hidden for Q, K and V (NVIDIA/TensorRT demo/BERT/builder.py, attention_layer_opt:
#: ``add_fully_connected(input, 3 * hidden_size, Wall, Ball)`` feeding the QKV-to-context
#: plugin; source ``trtbertbuild`` of the data file), so its cases price one QKV GEMM
TRT_QKV = frozenset({"bn", "activation", "residual", "qkv"})


def inference_cases() -> ValidationSet:
    """The GPU inference cases (data/validation/inference.toml)."""
    return load_cases("inference")


def _precision(c: Case) -> Any:
    if "activations" in c.scenario:
        return rl.precision(c["precision"], activations=c["activations"])
    return c["precision"]


def solve_kwargs(c: Case) -> dict[str, Any]:
    """rl.solve's keywords for case ``c`` (all but the model, the hardware and the preset)."""
    if c.get("fuse_qkv", False) and not c["fuse"]:
        # one QKV GEMM is a fold of the fused graph: without folds it would be dropped silently
        raise SpecError(f"inference case {c.id!r}: fuse_qkv = true needs fuse = true (TensorRT's "
                        "one QKV GEMM is one of its folds); got fuse = false")
    fuse: Any = TRT_QKV if c["fuse"] and c.get("fuse_qkv", False) else c["fuse"]
    kw: dict[str, Any] = {"batch": c["batch"], "precision": _precision(c), "fuse": fuse,
                          "runtime": c["runtime"],
                          "fused_attention": c.get("fused_attention", True)}
    if "seq_len" in c.scenario:
        kw["seq_len"] = c["seq_len"]
    return kw


def measured_seconds(c: Case) -> float:
    """Measured time per batch in seconds."""
    if c.metric == "throughput":
        return float(c["batch"]) / c.value_si
    return c.value_si


def predicted_seconds(c: Case, preset: str, **override: Any) -> float:
    """rl.solve's time per batch for case ``c`` with ``preset`` (and keyword overrides)."""
    r = rl.solve(c["model"], c["hardware"], preset=preset, **{**solve_kwargs(c), **override})
    if not r.feasible:
        raise SpecError(f"inference case {c.id!r} is infeasible on {c['hardware']}: {r.reason}")
    return float(r.latency)


def seconds_with(c: Case, **changes: float) -> float:
    """The default preset's time per batch for case ``c`` with some factors replaced, priced
    through the same engine plan as rl.solve (tested equal to it without changes; used by the
    refit grid)."""
    from roofline.engine.core import time_model
    from roofline.engine.efficiency import flat_efficiency
    from roofline.engine.presets import efficiency_for, for_runtime

    hw = rl.hardware(c["hardware"])
    kw = solve_kwargs(c)
    g = rl.model(c["model"]).graph(precision=kw["precision"], seq_len=kw.get("seq_len"),
                                   batch=kw["batch"], fused_attention=kw["fused_attention"],
                                   fuse=kw["fuse"])
    base = for_runtime(efficiency_for(hw, "default"), kw["runtime"])
    # flat_efficiency keeps the base's whole-wave tile model (A100, H100, H200, B200), as rl.solve
    eff = flat_efficiency(base=base, label="default/what-if", **changes)  # type: ignore[arg-type]
    return time_model(g, hw, eff).totals_at(kw["batch"]).latency


def graph_seconds(c: Case) -> float:
    """What-if: the fused engine run as one CUDA graph (rl.solve runtime="compiled")."""
    return predicted_seconds(c, "default", runtime="compiled")


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One case priced (seconds per batch)."""

    case: Case
    measured_s: float
    default_s: float
    bound_s: float
    graph_s: float | None

    @property
    def r_default(self) -> float:
        return self.default_s / self.measured_s

    @property
    def r_bound(self) -> float:
        return self.bound_s / self.measured_s

    @property
    def outlier(self) -> bool:
        return self.case.known_outlier


def factor(r: float) -> float:
    """The error factor max(r, 1/r) of a ratio r = ours / measured."""
    return max(r, 1.0 / r)


def rows() -> list[Row]:
    """Every case priced: measured, default, bound and (fused cases) runtime="compiled"."""
    out = []
    for c in inference_cases().cases:
        nd = graph_seconds(c) if c["fuse"] else None
        out.append(Row(case=c, measured_s=measured_seconds(c),
                       default_s=predicted_seconds(c, "default"),
                       bound_s=predicted_seconds(c, "bound"), graph_s=nd))
    return out


def summary(rs: list[Row], attr: str = "r_default") -> dict[str, float]:
    """n, median / geometric-mean / worst error factor and bias of ``attr`` over ``rs``."""
    fs = [factor(getattr(r, attr)) for r in rs]
    logs = [math.log(getattr(r, attr)) for r in rs]
    return {"n": len(rs), "median": statistics.median(fs),
            "geomean": math.exp(statistics.fmean(math.log(f) for f in fs)),
            "worst": max(fs), "bias": math.exp(statistics.fmean(logs))}


def _ms(s: float) -> str:
    return f"{s * 1e3:,.3f}" if s < 0.01 else f"{s * 1e3:,.2f}" if s < 1 else f"{s * 1e3:,.1f}"


def _err(r: float) -> str:
    return f"{r - 1:+.0%}"


def _measured(c: Case) -> str:
    m = int(c.measured) if c.measured.is_integer() else c.measured
    if c.metric == "throughput":
        return f"{m:,} /s"
    return f"{m} ms"


def case_table(rs: list[Row] | None = None) -> str:
    """docs/validation/inference.md's ``table`` block: case table and summary (markdown)."""
    rs = rows() if rs is None else rs
    lines = [
        "| # | case | model | hardware | batch | seq | precision | engine | source | measured "
        "| measured ms/batch | ours default ms | error | ours bound ms | error "
        "| what-if runtime=\"compiled\" ms | error |",
        "|---|---|---|---|---:|---:|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for i, r in enumerate(rs, 1):
        c = r.case
        prec = c["precision"] + (f" (act {c['activations']})" if "activations" in c else "")
        nd = ("—", "—") if r.graph_s is None else (
            _ms(r.graph_s), _err(r.graph_s / r.measured_s))
        flag = " (outlier)" if r.outlier else ""
        lines.append(
            f"| {i} | {c.id}{flag} | {c['model']} | {c['hardware']} | {c['batch']} "
            f"| {c.get('seq_len', '—')} | {prec} | {c['engine']} "
            f"({'fused' if c['fuse'] else 'unfused'}, {c['runtime']}) "
            f"| {c.source} | {_measured(c)} | {_ms(r.measured_s)} | {_ms(r.default_s)} "
            f"| {_err(r.r_default)} | {_ms(r.bound_s)} | {_err(r.r_bound)} | {nd[0]} | {nd[1]} |")
    inl = [r for r in rs if not r.outlier]
    sd, sb = summary(inl, "r_default"), summary(inl, "r_bound")
    sa, sab = summary(rs, "r_default"), summary(rs, "r_bound")
    worst = max(inl, key=lambda r: factor(r.r_default))
    comp = [r for r in inl if r.graph_s is not None]
    lines += [
        "",
        "| summary (error factor = max(r, 1/r), r = ours / measured) | default | bound |",
        "|---|---:|---:|",
        f"| cases (not outliers / all) | {sd['n']} / {sa['n']} | {sb['n']} / {sab['n']} |",
        f"| median error factor, not outliers | {sd['median']:.2f} | {sb['median']:.2f} |",
        f"| geometric-mean error factor, not outliers | {sd['geomean']:.2f} | "
        f"{sb['geomean']:.2f} |",
        f"| worst, not outliers | {sd['worst']:.2f} | {sb['worst']:.2f} |",
        f"| bias (geometric mean of r), not outliers | {sd['bias']:.2f} | {sb['bias']:.2f} |",
        f"| median / geometric-mean error factor, all cases | {sa['median']:.2f} / "
        f"{sa['geomean']:.2f} | {sab['median']:.2f} / {sab['geomean']:.2f} |",
        "",
        f"Worst case (not an outlier): {worst.case.id}, ours {_err(worst.r_default)}.",
    ]
    if comp:
        nd_f = [factor(r.graph_s / r.measured_s) for r in comp]  # type: ignore[operator]
        df = [factor(r.r_default) for r in comp]
        lines.append(
            f"Fused (TensorRT) cases ({len(comp)}): median error factor "
            f"{statistics.median(df):.2f} as priced, {statistics.median(nd_f):.2f} with "
            f"runtime=\"compiled\" for all of them (what-if).")
    return "\n".join(lines) + "\n"


def case_figures(rs: list[Row] | None = None) -> dict[str, str]:
    """The summary figures the page's prose quotes (inline ``<!--v:KEY-->`` markers): median
    error factor of the cases not marked outliers, default and bound presets (``.median3``:
    three decimals; ``.median/SOURCE``: one source's cases), how many of them the default
    preset prices within +-10 %, and each case's default error (``case/ID``, "−22 %")."""
    rs = rows() if rs is None else rs
    inl = [r for r in rs if not r.outlier]
    within = sum(abs(r.r_default - 1) <= 0.10 for r in inl)
    med = summary(inl, "r_default")["median"]
    return {"inference.median": f"{med:.2f}", "inference.median3": f"{med:.3f}",
            "inference.bound_median": f"{summary(inl, 'r_bound')['median']:.2f}",
            "inference.within10": f"{within} of the {len(inl)}"} | {
        f"inference.median/{src}": f"{summary(g, 'r_default')['median']:.3f}"
        for src in dict.fromkeys(r.case.source for r in inl)
        if (g := [r for r in inl if r.case.source == src])} | {
        f"case/{r.case.id}": fmt_pct(r.r_default - 1) for r in rs}



def query_floors(rs: list[Row] | None = None) -> dict[str, dict[str, float]]:
    """Per MLPerf system with an Offline case: the per-image time ``t_img`` = Offline seconds per
    sample, and for each of its latency scenarios the part of the measured query latency that
    does not scale with the batch, ``floor = measured - batch * t_img`` (s). Derived from the
    measurements alone, no model in it: what a query costs beyond its images at Offline rate."""
    rs = rows() if rs is None else rs
    ml = [r for r in rs if r.case.source == "mlperf30"]
    out: dict[str, dict[str, float]] = {}
    for off in (r for r in ml if r.case.metric == "throughput"):
        hw = off.case["hardware"]
        t_img = off.measured_s / off.case["batch"]
        out[hw] = {"t_img": t_img} | {
            r.case.id: r.measured_s - r.case["batch"] * t_img
            for r in ml if r.case["hardware"] == hw and r.case.metric == "latency"}
    return out


def floor_figures(rs: list[Row] | None = None) -> dict[str, str]:
    """The query floors ``inference.md`` quotes (inline markers ``floor/CASE`` in µs,
    ``floor/HW.t_img`` in µs per image)."""
    out = {}
    for hw, f in query_floors(rs).items():
        out[f"floor/{hw}.t_img"] = f"{f['t_img'] * 1e6:.1f} µs"
        out |= {f"floor/{k}": f"{v * 1e6:.0f} µs" for k, v in f.items() if k != "t_img"}
    return out


# ------------------------------------------------- tried and not kept (issue 18, whole waves)
#: the T4's 40 SMs (TU104 as the T4 ships it: TechPowerUp's database as reproduced at
#: sysrqmts.com/en/gpus/nvidia/tesla/t4, the source ``tpu`` of t4.toml); since session 28 the
#: T4's count in data/presets/tiles.toml (``[arch.turing.sm_count]``, tested equal)
T4_SMS = 40
#: the L4's 58 SMs (AD104 as the L4 ships it), derived: 30.3 TFLOP/s fp32 (its datasheet, the
#: source ``ds`` of l4.toml) / (128 fp32 lanes per Ada SM x 2 FLOP x 2040 MHz boost, assumed:
#: the zoo file has no clock) = 58.0
L4_SMS = 58


def seconds_variant(c: Case, *, qkv: bool | None = None, fill: float | None = None,
                    t4_waves: bool | None = None, trt_dispatch: float | None = None,
                    l4_waves: bool = False, t4_int8: float | None = None) -> float:
    """The default preset's time per batch for ``c``, priced as rl.solve does (tested), with
    one of the variants of the "tried" table: the TensorRT rows with three Q/K/V GEMMs
    (``qkv=False``; one QKV GEMM, as the cases say since session 27, is ``None``), the tile
    model's per-kernel ``fill`` replaced on the parts that have one (16-bit and int8 sets), the
    T4 without its whole waves (``t4_waves=False``: the smooth model, as until session 28; its
    tile set, the A100's transferred on its 40 SMs, is data/presets/tiles.toml's since then),
    the L4 in whole waves (the A100's sets on its 58 SMs), the host dispatch per op of the
    TensorRT engines enqueued without CUDA graphs (fused, eager cases) replaced, the T4's
    ``[sustained]`` int8 fraction replaced (``t4_int8``; 0.41 in t4.toml)."""
    from roofline.engine.core import time_model
    from roofline.engine.presets import efficiency_for, for_runtime
    from roofline.engine.tiles import tiles_for

    hw = rl.hardware(c["hardware"])
    if t4_int8 is not None and c["hardware"] == "t4":
        hw = replace(hw, sustained_fraction={**hw.sustained_fraction, "int8": t4_int8})
    kw = solve_kwargs(c)
    fuse = kw["fuse"] if qkv is None or not c.get("fuse_qkv", False) else \
        (TRT_QKV if qkv else True)
    g = rl.model(c["model"]).graph(precision=kw["precision"], seq_len=kw.get("seq_len"),
                                   batch=kw["batch"], fused_attention=kw["fused_attention"],
                                   fuse=fuse)
    eff = for_runtime(efficiency_for(hw, "default"), kw["runtime"])
    if t4_waves is False and c["hardware"] == "t4":
        eff = replace(eff, tiles=None)  # the smooth matmul model, as until session 28
    if l4_waves and c["hardware"] == "l4":
        a100 = tiles_for(rl.hardware("a100-sxm4-40gb"))
        if a100 is None:  # pragma: no cover - the A100 has tile data (data/tiles)
            raise SpecError("the A100's tile set is missing: the L4 variant transfers it")
        eff = replace(eff, tiles=replace(a100, arch="ada (transferred)", slots=L4_SMS))
    if fill is not None and eff.tiles is not None:  # the 16-bit set's fill and the int8 one's
        t = eff.tiles
        eff = replace(eff, tiles=replace(t, fill=fill, narrow=tuple(
            (d, replace(n, fill=fill) if d == "int8" else n) for d, n in t.narrow)))
    if trt_dispatch is not None and kw["fuse"] and kw["runtime"] == "eager":
        eff = replace(eff, launch=replace(eff.launch, dispatch=trt_dispatch))
    return time_model(g, hw, eff).totals_at(kw["batch"]).latency


#: (label, short key, seconds_variant keywords) of the "tried" table
VARIANTS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("as shipped (TensorRT BERT's one QKV GEMM since session 27, the T4 in whole waves since 28)",
     "shipped", {}),
    ("TensorRT BERT with three Q/K/V GEMMs (as shipped until session 27)", "three",
     {"qkv": False}),
    ("tile fill 3 µs (A100 / H100 / T4 fp16 and int8)", "fill3", {"fill": 3e-6}),
    ("tile fill 0 (A100 / H100 / T4 fp16 and int8)", "fill0", {"fill": 0.0}),
    ("three Q/K/V GEMMs + fill 3 µs", "three_fill3", {"qkv": False, "fill": 3e-6}),
    ("T4 without whole waves (smooth, as shipped until session 28)", "t4smooth",
     {"t4_waves": False}),
    ("session 26 as shipped: three Q/K/V GEMMs, the T4 smooth", "s26",
     {"qkv": False, "t4_waves": False}),
    ("L4 in whole waves (58 SMs, transferred set)", "l4", {"l4_waves": True}),
    ("TensorRT without graphs: 8 µs dispatch per op", "trt8", {"trt_dispatch": 8e-6}),
    ("8 µs dispatch + three Q/K/V GEMMs", "trt8_three", {"trt_dispatch": 8e-6, "qkv": False}),
    ("T4 int8 sustained 0.50 (t4.toml: 0.41)", "t4i50", {"t4_int8": 0.50}),
    ("T4 int8 sustained 0.60 (t4.toml: 0.41)", "t4i60", {"t4_int8": 0.60}),
)


def tried_ratios() -> dict[str, dict[str, float]]:
    """Variant key -> case id -> r (ours / measured) over the cases not marked outliers."""
    cases = [c for c in inference_cases().cases if not c.known_outlier]
    return {key: {c.id: seconds_variant(c, **kw) / measured_seconds(c) for c in cases}
            for _, key, kw in VARIANTS}


def _summary3(r: dict[str, float]) -> tuple[float, float, float]:
    fs = [factor(x) for x in r.values()]
    return (statistics.median(fs), math.exp(statistics.fmean(math.log(f) for f in fs)),
            max(fs))


def tried_table(ratios: dict[str, dict[str, float]] | None = None) -> str:
    """docs/validation/inference.md's ``tried`` block: the inference summary and the TensorRT
    BERT rows under each variant (markdown)."""
    ratios = tried_ratios() if ratios is None else ratios
    trt = [c.id for c in inference_cases().cases if c.source == "trtbert" and not c.known_outlier]
    head = "| variant | median | geo-mean | worst | " + " | ".join(
        i.replace("-s", " s").replace("-b", " b") for i in trt) + " |"
    lines = [head, "|---|---:|---:|---:|" + "---:|" * len(trt)]
    for label, key, _ in VARIANTS:
        r = ratios[key]
        med, geo, worst = _summary3(r)
        lines.append(f"| {label} | {med:.3f} | {geo:.3f} | {worst:.2f} | "
                     + " | ".join(_err(r[i]) for i in trt) + " |")
    return "\n".join(lines)


def tried_figures(ratios: dict[str, dict[str, float]] | None = None) -> dict[str, str]:
    """The figures the page's reading of the "tried" table quotes (inline ``<!--v:KEY-->``
    markers): ``tried/VARIANT/CASE`` an error ("−22 %"), ``tried/VARIANT.median``."""
    ratios = tried_ratios() if ratios is None else ratios
    out = {}
    for key, r in ratios.items():
        out[f"tried/{key}.median"] = f"{_summary3(r)[0]:.3f}"
        out |= {f"tried/{key}/{cid}": fmt_pct(x - 1) for cid, x in r.items()}
    return out


if __name__ == "__main__":  # pragma: no cover - a maintenance command
    import sys

    if "--fit" in sys.argv:
        from .inference_refit import refit_table

        print(refit_table())
    elif "--tried" in sys.argv:
        print(tried_table())
    else:
        print(case_table(), end="")
