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
from functools import lru_cache
from typing import Any

from .cases import Case, load_cases

__all__ = ["cases", "predict_run", "rows", "report_table", "summary"]

_RECOMPUTES = ("none", "selective", "full")


@lru_cache(maxsize=1)
def cases() -> tuple[Case, ...]:
    """The published runs (load_cases refuses a case without a source or its table and row)."""
    return load_cases("training_runs").cases


def _choices(sc: dict[str, Any], key: str, options: tuple[Any, ...]) -> tuple[Any, ...]:
    return (sc[key],) if key in sc else options


def predict_run(case: Case) -> tuple[Any, dict[str, Any]]:
    """The fastest feasible result over the knobs ``case`` does not publish, and those knobs."""
    from ..errors import SpecError
    from ..scenarios.training import train

    sc = dict(case.scenario)
    tp, pp, gpus = sc["tp"], sc["pp"], sc["gpus"]
    dp = gpus // (tp * pp * sc.get("cp", 1))
    fixed = {k: sc[k] for k in ("zero", "lora_rank", "sequence_parallel") if k in sc}
    if sc.get("cp", 1) > 1:
        fixed["cp"] = sc["cp"]
    best: tuple[float, Any, dict[str, Any]] | None = None
    for b in _choices(sc, "micro_batch", (1, 2)):
        for v in _choices(sc, "interleave", (1, 2, 3, 4, 5, 6, 7, 8, 10) if pp > 1 else (1,)):
            for rc in _choices(sc, "recompute", _RECOMPUTES):
                try:
                    r = train(sc["model"], sc["cluster"], nodes=gpus // 8,
                              global_batch=sc["global_batch"], seq_len=sc["seq_len"],
                              micro_batch=b, tp=tp, pp=pp, dp=dp, interleave=v, recompute=rc,
                              precision=sc["precision"], **fixed)
                except SpecError:
                    continue  # not a valid split (interleave against the stages or batches)
                if r.feasible and (best is None or r.step_time < best[0]):
                    best = (r.step_time, r, {"micro_batch": b, "interleave": v, "recompute": rc})
    if best is None:
        raise RuntimeError(f"{case.id}: no feasible configuration")
    searched = {k: v for k, v in best[2].items() if k not in sc}
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
                    "outlier": c.known_outlier, "reason": c.reason})
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
        if x["searched"]:
            knobs += " (" + ", ".join(sorted(x["searched"])) + " searched)"
        if x["metric"] == "mfu":
            pub, ours = f"MFU {x['published']:.0%}", f"MFU {x['ours']:.1%}"
        else:
            pub, ours = f"{x['published']:,.0f} tok/s/GPU", f"{x['ours']:,.0f} tok/s/GPU"
        mark = " (known outlier)" if x["outlier"] else ""
        lines.append(f"| {x['id']}{mark} | {r.precision} | {_split(r)} | {knobs} | {pub} | {ours} "
                     f"| {x['error']:+.1%} | {x['source']} |")
    s = summary(rs)
    lines += ["", f"**{s['n']} runs (known outliers left out): median |error| "
                  f"{s['median_abs_error']:.1%}, largest {s['max_abs_error']:.1%}, "
                  f"geometric-mean ratio ours/published {s['geomean_ratio']:.3f}.**"]
    lora = {x["id"]: x["ours"] for x in rs}
    pub = {x["id"]: x["published"] for x in rs}
    a, b = "NeMo Llama2-7B LoRA", "NeMo Llama2-7B SFT"
    if a in lora and b in lora:
        lines += ["", f"LoRA / SFT throughput, Llama 2 7B on the same split (the fp8 kernel "
                      f"efficiency cancels): published {pub[a] / pub[b]:.3f}, ours "
                      f"{lora[a] / lora[b]:.3f}."]
    return "\n".join(lines)
