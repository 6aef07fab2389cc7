"""``rl.train`` against published training runs of zoo models on H100 clusters
(data/validation/training_runs.toml): LoRA and SFT fine-tuning, Llama 3 405B pre-training with
unequal pipeline stages. Nothing is fitted to these cases.

``rows()`` prices every case (searching the knobs a source does not publish, as
``predict_training`` does for Narayanan et al.); ``report_table()`` is the markdown table of
docs/validation/training-runs.md, which tests/validation/test_validation_training_runs.py
checks. Errors are ours / published − 1 in throughput: positive = predicted too fast.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from .cases import Case, load_cases
from .holdout import FitReport, Refit, fmt_pct, holdout_tables, leave_one_source_out, span_pct

__all__ = ["cases", "predict_run", "rows", "report_table", "summary", "hopper_cases",
           "training_runs_figures",
           "fit_hopper", "hopper_holdout", "hopper_holdout_table", "LONG_SEQ", "long_rows",
           "long_table"]

#: tokens per rank (seq_len / cp) from which a run is a long-sequence row (judged apart)
LONG_SEQ = 32768

_RECOMPUTES = ("none", "selective", "full")
#: the scenario keys passed to train() as published (never searched)
_FIXED = ("zero", "lora_rank", "lora_targets", "sequence_parallel", "ep", "etp", "moe_routing",
          "moe_dispatcher", "cp_overlap", "ep_overlap", "elementwise", "optimizer_dtype",
          "pp_flushes", "recompute_layers", "pp_overlap", "pp_account_embedding",
          "pp_account_loss")


def _kernel(sc: Mapping[str, Any], attention_kernel: str) -> str:
    """The kernel a case is priced with: the one its source names under "auto"."""
    return str(sc.get("attention_kernel", "auto")) if attention_kernel == "auto" \
        else attention_kernel


@lru_cache(maxsize=1)
def cases() -> tuple[Case, ...]:
    """The published runs (load_cases refuses a case without a source or its table and row)."""
    return load_cases("training_runs").cases


def _choices(sc: dict[str, Any], key: str, options: tuple[Any, ...]) -> tuple[Any, ...]:
    return (sc[key],) if key in sc else options


def predict_run(case: Case, attention_kernel: str = "auto") -> tuple[Any, dict[str, Any]]:
    """The fastest feasible result over the knobs ``case`` does not publish, and those knobs
    (``attention_kernel`` as ``rl.train``'s; "auto" takes the case's own kernel where its
    source names the one that ran)."""
    from ..errors import SpecError
    from ..scenarios.training import train

    sc = dict(case.scenario)
    if sc["model"] == "gpt":  # a GPT shape given by the source (MPT)
        from .training import gpt_model

        sc["model"] = gpt_model(sc["heads"], sc["hidden"], sc["layers"], sc["vocab"],
                                sc["seq_len"])
    tp, pp, gpus = sc["tp"], sc["pp"], sc["gpus"]
    dp = gpus // (tp * pp * sc.get("cp", 1))
    fixed: dict[str, Any] = {k: sc[k] for k in _FIXED if k in sc}
    if sc.get("cp", 1) > 1:
        fixed["cp"] = sc["cp"]
    best: tuple[float, Any, dict[str, Any]] | None = None
    over: tuple[float, Any, dict[str, Any]] | None = None
    for b in _choices(sc, "micro_batch", (1, 2)):
        for v in _choices(sc, "interleave", (1, 2, 3, 4, 5, 6, 7, 8, 10) if pp > 1 else (1,)):
            for rc in _choices(sc, "recompute", _RECOMPUTES):
                try:
                    r = train(sc["model"], sc["cluster"], nodes=gpus // 8,
                              global_batch=sc["global_batch"], seq_len=sc["seq_len"],
                              micro_batch=b, tp=tp, pp=pp, dp=dp, interleave=v, recompute=rc,
                              precision=sc["precision"],
                              attention_kernel=_kernel(sc, attention_kernel), **fixed)
                except SpecError:
                    continue  # not a valid split (interleave against the stages or batches)
                knobs = {"micro_batch": b, "interleave": v, "recompute": rc}
                if r.feasible and (best is None or r.step_time < best[0]):
                    best = (r.step_time, r, knobs)
                if not r.feasible and (over is None or r.step_time < over[0]):
                    over = (r.step_time, r, knobs)
    if best is None:  # the source's part held more memory than the zoo's: time it anyway
        if over is None:
            raise RuntimeError(f"{case.id}: no valid configuration")
        best = over
    searched = {k: v for k, v in best[2].items() if k not in sc
                and not (k == "interleave" and pp == 1)}
    return best[1], searched


def rows() -> list[dict[str, Any]]:
    """Each case with our tokens/s/GPU (or MFU), the published one and the error."""
    out = []
    for c in cases():
        r, searched = predict_run(c)
        if c.metric == "mfu":
            ours, published = r.mfu, c.value_si
        else:
            ours, published = r.tokens_per_s / r.devices, c.value_si
        out.append({"id": c.id, "source": c.source, "metric": c.metric, "ours": ours,
                    "published": published, "error": ours / published - 1.0, "mfu": r.mfu,
                    "searched": searched, "result": r, "stack": c.scenario.get("stack", ""),
                    "outlier": c.known_outlier, "reason": c.reason,
                    "lora_targets": c.scenario.get("lora_targets", "all")})
    return out


def summary(rs: list[dict[str, Any]]) -> dict[str, float]:
    """Median and largest |error| and the geometric-mean ratio, known outliers left out."""
    rs = [r for r in rs if not r["outlier"]]
    errs = sorted(abs(r["error"]) for r in rs)
    n = len(errs)
    med = errs[n // 2] if n % 2 else 0.5 * (errs[n // 2 - 1] + errs[n // 2])
    geo = math.exp(sum(math.log(r["ours"] / r["published"]) for r in rs) / n)
    return {"median_abs_error": med, "max_abs_error": errs[-1], "geomean_ratio": geo, "n": n}


def _split(r: Any) -> str:
    s = f"{r.tp}·{r.pp}·{r.dp}"
    if len(set(r.pp_stages)) > 1:
        s += f" (stages {r.pp_stages[0]}, {r.pp_stages[1]}…{r.pp_stages[-1]})"
    return s


def report_table(rs: list[dict[str, Any]] | None = None) -> str:
    """The generated table of docs/validation/training-runs.md."""
    rs = rows() if rs is None else rs
    lines = ["| case | precision | split t·p·d | knobs (searched) | published | ours | error "
             "| source |", "|---|---|---|---|---:|---:|---:|---|"]
    for x in rs:
        r = x["result"]
        knobs = f"b={r.micro_batch}, v={r.interleave}, {r.recompute}"
        if r.lora_rank:
            knobs += f", LoRA r={r.lora_rank}"
            if x.get("lora_targets", "all") != "all":
                knobs += f" on {x['lora_targets']}"
        if x["searched"]:
            knobs += " (" + ", ".join(sorted(x["searched"])) + " searched)"
        if x["metric"] == "mfu":
            pub, ours = f"MFU {x['published']:.0%}", f"MFU {x['ours']:.1%}"
        else:
            pub, ours = f"{x['published']:,.0f} tok/s/GPU", f"{x['ours']:,.0f} tok/s/GPU"
        mark = " (known outlier)" if x["outlier"] else ""
        if not r.feasible:
            mark += " (over the zoo part's memory)"
        lines.append(f"| {x['id']}{mark} | {r.precision} | {_split(r)} | {knobs} | {pub} | {ours} "
                     f"| {x['error']:+.1%} | {x['source']} |")
    s = summary(rs)
    lines += ["", f"**{s['n']} runs (known outliers left out): median |error| "
                  f"{s['median_abs_error']:.1%}, largest {s['max_abs_error']:.1%}, "
                  f"geometric-mean ratio ours/published {s['geomean_ratio']:.3f}.**"]
    d = summary([x for x in rs if x["result"].ep == 1])
    lines += ["", f"Dense runs only ({d['n']}): median |error| {d['median_abs_error']:.1%}, "
                  f"largest {d['max_abs_error']:.1%}."]
    ours_of = {x["id"]: x["ours"] for x in rs}
    published_of = {x["id"]: x["published"] for x in rs}
    a, b = "NeMo Llama2-7B LoRA", "NeMo Llama2-7B SFT"
    if a in ours_of and b in ours_of:
        lines += ["", f"LoRA / SFT throughput, Llama 2 7B on the same split (the fp8 kernel "
                      f"efficiency cancels): published {published_of[a] / published_of[b]:.3f}, "
                      f"ours {ours_of[a] / ours_of[b]:.3f}."]
    return "\n".join(lines)


# -- long sequences: the rows at >= 32k tokens per rank, priced at "auto" and at "fa2" ---------

def long_rows() -> list[dict[str, Any]]:
    """The long-sequence cases (seq_len / cp >= LONG_SEQ) priced with the kernel their source
    ran ("auto": the case's own, FlashAttention-1 class for llm-foundry), with
    FlashAttention-2 and with FlashAttention-3."""
    out = []
    for c in cases():
        if c.scenario["seq_len"] / c.scenario.get("cp", 1) < LONG_SEQ:
            continue
        run, _ = predict_run(c)
        per = {k: r.tokens_per_s / r.devices for k, r in
               (("run", run), ("fa2", predict_run(c, "fa2")[0]),
                ("fa3", predict_run(c, "fa3")[0]))}
        out.append({"id": c.id, "published": c.value_si, **per, "result": run,
                    "kernel": _kernel(c.scenario, "auto"),
                    **{f"error_{k}": v / c.value_si - 1.0 for k, v in per.items()}})
    return out


def long_table(rs: list[dict[str, Any]] | None = None) -> str:
    """The generated table of the 'Long sequences' section of docs/validation/training-runs.md."""
    rs = long_rows() if rs is None else rs
    lines = ["| case | recompute | published | ours, as run | error | ours, fa2 | error "
             "| ours, fa3 | error |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for x in rs:
        lines.append(f"| {x['id']} | {x['result'].recompute} | {x['published']:,.0f} tok/s/GPU "
                     f"| {x['run']:,.0f} ({x['kernel']}) | {x['error_run']:+.1%} "
                     f"| {x['fa2']:,.0f} | {x['error_fa2']:+.1%} "
                     f"| {x['fa3']:,.0f} | {x['error_fa3']:+.1%} |")
    import statistics

    med = {k: statistics.median(abs(x[f"error_{k}"]) for x in rs) for k in ("run", "fa2", "fa3")}
    lines += ["", f"**{len(rs)} rows at 32,768 tokens: median |error| {med['run']:.1%} with the "
                  f"kernel each ran, {med['fa2']:.1%} with FA2, {med['fa3']:.1%} with FA3.**"]
    return "\n".join(lines)


# -- the Hopper training GEMM fraction ([gpu-hopper] of data/presets/training.toml) ----------

def hopper_cases() -> tuple[Case, ...]:
    """The cases the Hopper fit uses: bf16 dense runs on a Hopper part, known outliers apart
    (the fp8 rows belong to the fp8 factor, docs/validation/fp8.md; the MoE rows judge the
    expert-parallel model, not the GEMM fraction)."""
    from ..scenarios.training.factors import training_factors
    from ..specs.resolve import cluster as resolve_cluster

    devs = training_factors("gpu", "h100-sxm5").devices
    return tuple(c for c in cases() if c.scenario["precision"] == "bf16" and not c.known_outlier
                 and "ep" not in c.scenario
                 and resolve_cluster(c.scenario["cluster"], 1).device.key in devs)


@lru_cache(maxsize=64)
def _knobs(cid: str) -> dict[str, Any]:
    """The train() arguments of case ``cid`` with its searched knobs fixed where the shipped
    factors put them (the fit then moves only the GEMM fraction)."""
    c = next(x for x in cases() if x.id == cid)
    r, _ = predict_run(c)
    sc = dict(c.scenario)
    if sc["model"] == "gpt":
        from .training import gpt_model

        sc["model"] = gpt_model(sc["heads"], sc["hidden"], sc["layers"], sc["vocab"],
                                sc["seq_len"])
    kw = dict(nodes=sc["gpus"] // 8, global_batch=sc["global_batch"], seq_len=sc["seq_len"],
              micro_batch=r.micro_batch, tp=r.tp, pp=r.pp, dp=r.dp, interleave=r.interleave,
              recompute=r.recompute, precision=sc["precision"])
    kw.update({k: sc[k] for k in _FIXED + ("cp",) if k in sc})
    kw["attention_kernel"] = _kernel(sc, "auto")
    return {"model": sc["model"], "cluster": sc["cluster"], **kw}


def _ours_at(c: Case, gemm_max: float | None) -> float:
    from dataclasses import replace

    from ..scenarios.training import train
    from ..scenarios.training.factors import _OVERRIDE, training_factors

    kw = dict(_knobs(c.id))
    model, cl = kw.pop("model"), kw.pop("cluster")
    if gemm_max is None:
        r = train(model, cl, **kw)
    else:
        base = training_factors("gpu", "h100-sxm5")
        _OVERRIDE["gpu-hopper"] = replace(base, gemm=replace(base.gemm, max=gemm_max))
        try:
            r = train(model, cl, **kw)
        finally:
            _OVERRIDE.pop("gpu-hopper", None)
    return r.mfu if c.metric == "mfu" else r.tokens_per_s / r.devices


def _hopper_log_errors(values: Mapping[str, float] | None, cs: Sequence[Case]) -> list[float]:
    v = None if values is None else values["gemm_max"]
    return [math.log(_ours_at(c, v) / c.value_si) for c in cs]


def fit_hopper(cs: Sequence[Case] | None = None) -> Refit:
    """Grid fit of the Hopper GEMM fraction (0.40-0.80 by 0.02, then ±0.01 around the best)
    minimising the RMS of log(ours / published)."""
    cs = hopper_cases() if cs is None else cs

    def sse(v: float) -> float:
        return sum(e * e for e in _hopper_log_errors({"gemm_max": v}, cs))
    grid = [round(0.40 + 0.02 * i, 2) for i in range(21)]
    best = min(grid, key=sse)
    best = min((round(best - 0.01, 2), best, round(best + 0.01, 2)), key=sse)
    return Refit(values={"gemm_max": best})


def hopper_holdout() -> FitReport:
    from ..scenarios.training.factors import training_factors

    shipped = {"gemm_max": training_factors("gpu", "h100-sxm5").gemm.max}
    return leave_one_source_out("training gpu-hopper", hopper_cases(), ("gemm_max",), shipped,
                                fit_hopper, _hopper_log_errors)


def hopper_holdout_table(rep: FitReport | None = None) -> str:
    return holdout_tables(hopper_holdout() if rep is None else rep,
                          lambda _k, v: f"{v:.2f}")


def _slug(case_id: str) -> str:
    return re.sub(r"[^\w.-]+", "_", case_id).strip("_")


def training_runs_figures(rs: list[dict[str, Any]] | None = None,
                 long: list[dict[str, Any]] | None = None,
                 rep: FitReport | None = None) -> dict[str, str]:
    """The figures docs/validation/training-runs.md's prose quotes (inline ``<!--v:KEY-->``
    markers), from the rows, long rows and Hopper hold-out its tables use: every run's error
    (``tr.err.<id slug>``: "−1.2 %"; ``tr.err0.…``: "−1 %") and ours (``tr.ours.…``), the
    long rows' ranges and median, the Hopper fraction, its refits and held-out medians, the
    LoRA / SFT ratios."""
    import statistics

    rs = rows() if rs is None else rs
    long = long_rows() if long is None else long
    rep = hopper_holdout() if rep is None else rep

    def span(es: list[float], sep: str = " to ") -> str:
        lo, hi = min(es, key=abs), max(es, key=abs)
        return f"{lo * 100:+.0f}{sep}{hi * 100:+.0f} %".replace("-", "−")

    out: dict[str, str] = {}
    for x in rs:
        k = _slug(x["id"])
        out |= {f"tr.err.{k}": fmt_pct(x["error"], 1), f"tr.err0.{k}": fmt_pct(x["error"]),
                f"tr.ours.{k}": f"{x['ours']:,.0f}"}
    for kern in ("run", "fa2", "fa3"):
        es = [x[f"error_{kern}"] for x in long]
        out[f"tr.long.{kern}.range"] = span(es)
        out[f"tr.long.{kern}.median"] = fmt_pct(statistics.median(map(abs, es)), 0, sign=False)
    nemo = [x["error"] for x in rs if x["source"] == "nemo2407" and x["id"] != "NeMo Llama2-7B SFT"]
    out["tr.nemo_others"] = span_pct(nemo, signed=False)
    by = {x["id"]: x for x in rs}
    lora, sft = by["NeMo Llama2-7B LoRA"], by["NeMo Llama2-7B SFT"]
    out["tr.lora.published"] = f"{lora['published'] / sft['published']:.2f}"
    out["tr.lora.ours"] = f"{lora['ours'] / sft['ours']:.2f}"
    # mcoremoe's two priced recipes: the FSDP one's tokens/s/GPU over the TP 4 one's
    fsdp = by["Megatron-Core Qwen3-235B-A22B EP8 FSDP full recompute"]
    tp4 = by["Megatron-Core Qwen3-235B-A22B EP8 TP4 PP8 VP4"]
    out["tr.mcoremoe.ratio.published"] = f"{fsdp['published'] / tp4['published']:.2f}"
    out["tr.mcoremoe.ratio.ours"] = f"{fsdp['ours'] / tp4['ours']:.2f}"
    without = [p.fitted_without.values["gemm_max"] for p in rep.per_source]
    out |= {"tr.gemm_max": f"{rep.shipped['gemm_max']:.2f}",
            "tr.gemm_without": f"{min(without):.2f}–{max(without):.2f}",
            "tr.hopper.n": str(rep.loso.n),
            "tr.loso.median": fmt_pct(rep.loso.median_abs, 1, sign=False),
            "tr.loso.worst": fmt_pct(rep.loso.worst, 1)}
    for p in rep.per_source:
        out[f"tr.held.{p.source}"] = fmt_pct(p.held_out.median_abs, 1, sign=False)
    from .training_fold import fold_figures  # MoE parallel folding, tried (not shipped)

    return out | _whatif_figures() | fold_figures(rs)


def _variant(cid: str, kernel: str = "auto", **changes: Any) -> tuple[float, float]:
    """(ours, ours / published − 1) of case ``cid`` priced with its scenario changed (the
    what-ifs the page's prose quotes), the knobs searched as for the case itself."""
    from dataclasses import replace
    from types import MappingProxyType

    c = next(x for x in cases() if x.id == cid)
    c = replace(c, scenario=MappingProxyType({**c.scenario, **changes}))
    r, _ = predict_run(c, kernel)
    ours = r.mfu if c.metric == "mfu" else r.tokens_per_s / r.devices
    return ours, ours / c.value_si - 1.0


#: Megatron-Bridge's Qwen3-30B-A3B row (a known outlier) and the tuned Megatron-Core figure
#: for the model on H100 in BF16 the page compares it with: NVIDIA/Megatron-LM pull request
#: 5728 (2026-07-09, 'docs: refresh Qwen3 MoE recipe performance': 240.5 model TFLOP/s/GPU,
#: 242.9 in FP8 blockwise), over the 25.11 row's own model FLOPs per token (121 TFLOP/s at
#: 5,275 tokens/s/GPU): 240.5 / 121 x 5,275 tokens/s/GPU (derived)
QWEN_MB = "Megatron-Bridge Qwen3-30B-A3B EP8 fp8"
QWEN_MCORE_BF16_TOK_S = 240.5 / 121.0 * 5275.0


def _whatif_figures() -> dict[str, str]:
    """The what-ifs of training-runs.md's prose: DeepSeek-V3 on 1024 GPUs in one pipeline
    schedule (``pp_flushes=1``) and with 4 virtual stages, the MoE rows under random routing,
    the 128k CP row with FlashAttention-3, Megatron-Bridge's Qwen3 row at its table row's
    printed knobs, without the a2a overlap and in bf16."""
    ds = "AutoModel DeepSeek-V3 1024 GPUs EP64"
    ours, e = _variant(ds, pp_flushes=1)
    out = {"tr.whatif.ds1024.flushes1": fmt_pct(e, 1),
           "tr.whatif.ds1024.flushes1.ours": f"{ours:,.0f}",
           "tr.whatif.ds1024.vp4": fmt_pct(_variant(ds, interleave=4)[1], 1),
           "tr.whatif.cp128k.fa3": fmt_pct(_variant("Llama 3 405B 16K GPUs CP16 128K", "fa3")[1]),
           "tr.whatif.qwen.row": fmt_pct(_variant(QWEN_MB, micro_batch=2, interleave=24,
                                                  ep_overlap=False)[1], 1),
           "tr.whatif.qwen.noovl": fmt_pct(_variant(QWEN_MB, ep_overlap=False)[1], 1)}
    # Megatron-Bridge's Qwen3-30B-A3B in bf16 against the tuned Megatron-Core BF16 figure
    # (QWEN_MCORE_BF16_TOK_S), with the a2a overlap as configured and without
    for k, ovl in (("bf16", True), ("bf16.noovl", False)):
        ours, _ = _variant(QWEN_MB, precision="bf16", ep_overlap=ovl)
        out[f"tr.whatif.qwen.{k}.ours"] = f"{ours:,.0f}"
        out[f"tr.whatif.qwen.{k}"] = fmt_pct(ours / QWEN_MCORE_BF16_TOK_S - 1.0, 0)
    for cid in ("AutoModel Qwen3-30B-A3B EP8", "AutoModel DeepSeek-V3 256 GPUs EP64", ds):
        out[f"tr.whatif.random.{_slug(cid)}"] = fmt_pct(_variant(cid, moe_routing="random")[1])
    return out | _pp_overlap_figures()


#: the interleaved rows whose stack overlaps the pipeline sends at rl.train's default
#: (Megatron's overlap_p2p_comm); rows pinned with ``pp_overlap`` in the data are read there
PP_OVERLAP_ROWS = ("NeMo Llama2-13B SFT", "NeMo Llama2-70B SFT",
                   "Megatron-Bridge DeepSeek-V3 1024 GPUs EP64 fp8",
                   "Megatron-Bridge Qwen3-30B-A3B EP8 fp8")


def _pp_overlap_figures() -> dict[str, str]:
    """Each interleaved row the other way: the rows that overlap their pipeline sends (by
    default or ``pp_overlap = true`` in the data) with them blocking (``tr.pp.off.<slug>``),
    the rows pinned to blocking sends at rl.train's default (``tr.pp.on.<slug>``)."""
    out = {}
    for c in cases():
        if c.id in PP_OVERLAP_ROWS or c.scenario.get("pp_overlap") is True:
            out[f"tr.pp.off.{_slug(c.id)}"] = fmt_pct(_variant(c.id, pp_overlap=False)[1], 1)
        elif c.scenario.get("pp_overlap") is False:
            out[f"tr.pp.on.{_slug(c.id)}"] = fmt_pct(_variant(c.id, pp_overlap=None)[1], 1)
    return out
