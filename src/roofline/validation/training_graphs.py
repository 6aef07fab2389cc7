"""Validation of ``rl.train`` on non-decoder models (the generic data-parallel model) against
published ResNet-50 and BERT-large training throughput (data/validation/training_graphs.toml).

Cases: ``roofline.validation.load_cases("training_graphs")``. ``rows()`` prices every case;
``report_table()`` is the markdown table in docs/validation/training.md ("Any graph"), which
tests/validation/test_validation_training_graphs.py checks.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

from .cases import load_cases
from .holdout import fmt_pct

__all__ = ["cases", "rows", "report_table", "summary", "loader_rows", "loader_table_md",
           "graphs_figures", "RN50_WORKERS"]


@lru_cache(maxsize=1)
def cases() -> tuple[dict[str, Any], ...]:
    """Each case's scenario with its published samples/s (``published``) and ``source``, read
    by the one loader (load_cases refuses a case without a source or its table and row)."""
    return tuple(dict(c.scenario, id=c.id, published=c.value_si, source=c.source)
                 for c in load_cases("training_graphs").cases)


def rows() -> list[dict[str, Any]]:
    from ..scenarios.training import train

    out = []
    for c in cases():
        b, dp = c["micro_batch"], c["dp"]
        r = train(c["model"], c["cluster"], global_batch=b * dp * c["accumulation"],
                  micro_batch=b, seq_len=c.get("seq_len"), dp=dp, precision=c["precision"],
                  optimizer=c["optimizer"], conv_layout=c.get("conv_layout", "nhwc"))
        ours = r.samples_per_s
        out.append(dict(c, ours=ours, error=ours / c["published"] - 1.0, mfu=r.mfu,
                        breakdown=dict(r.breakdown)))
    return out


def summary(rs: list[dict[str, Any]]) -> dict[str, float]:
    errs = sorted(abs(r["error"]) for r in rs)
    n = len(errs)
    med = errs[n // 2] if n % 2 else 0.5 * (errs[n // 2 - 1] + errs[n // 2])
    geo = math.exp(sum(math.log(r["ours"] / r["published"]) for r in rs) / n)
    return {"median_abs_error": med, "max_abs_error": errs[-1], "geomean_ratio": geo}


def report_table(rs: list[dict[str, Any]] | None = None) -> str:
    rs = rows() if rs is None else rs
    lines = ["| model | seq | precision | GPUs | micro-batch × accumulation "
             "| published [samples/s] | ours [samples/s] | error | our MFU | source |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['model']} | {r.get('seq_len') or '-'} | {r['precision']} | {r['dp']} "
                     f"| {r['micro_batch']} × {r['accumulation']} | {r['published']:,.0f} | "
                     f"{r['ours']:,.0f} | {r['error']:+.1%} | {r['mfu']:.1%} | {r['source']} |")
    s = summary(rs)
    lines.append("")
    lines.append(f"Median |error| {s['median_abs_error']:.1%}, largest {s['max_abs_error']:.1%}, "
                 f"geometric-mean ratio ours/published {s['geomean_ratio']:.3f}.")
    return "\n".join(lines)


#: the source's loader workers per GPU process (DeepLearningExamples ConvNets configs.yml at
#: commit 7bdfc81, the README update that published these rows: ``platform: DGXA100:
#: workers: 16``; the run's ``data_backend: pytorch``, the resnet_params anchor)
RN50_WORKERS = 16


def loader_rows() -> list[dict[str, Any]]:
    """The ResNet-50 cases priced with the host input ceiling of each measured loader of
    data/presets/input_pipeline.toml (``train(data_loader=(loader, RN50_WORKERS))``), beside
    the default (no ceiling). Nothing is fitted: the loaders' times come from another source."""
    from ..scenarios.training import train
    from ..scenarios.training.input_pipeline import loader_table

    out = []
    for c in cases():
        if c["model"] != "resnet50":
            continue
        b, dp = c["micro_batch"], c["dp"]
        kw = dict(global_batch=b * dp * c["accumulation"], micro_batch=b, dp=dp,
                  precision=c["precision"], optimizer=c["optimizer"],
                  conv_layout=c.get("conv_layout", "nhwc"))
        row = dict(c, none=train(c["model"], c["cluster"], **kw).samples_per_s)
        for name in loader_table():
            row[name] = train(c["model"], c["cluster"], data_loader=(name, RN50_WORKERS),
                              **kw).samples_per_s
        out.append(row)
    return out


def loader_table_md(rs: list[dict[str, Any]] | None = None) -> str:
    """The generated block "loaders" of docs/validation/training.md."""
    from ..scenarios.training.input_pipeline import loader_table

    names = list(loader_table())
    rs = loader_rows() if rs is None else rs
    head = " | ".join(f"{n} × {RN50_WORKERS} [img/s] | error" for n in names)
    lines = [f"| case | published [img/s] | no ceiling [img/s] | error | {head} |",
             "|---|" + "---:|" * (3 + 2 * len(names))]
    for r in rs:
        p = r["published"]
        cells = " | ".join(f"{r[n]:,.0f} | {r[n] / p - 1:+.1%}" for n in names)
        lines.append(f"| {r['id']} | {p:,.0f} | {r['none']:,.0f} | {r['none'] / p - 1:+.1%} | "
                     f"{cells} |")
    return "\n".join(lines)


def _key(r: dict[str, Any]) -> str:
    name = "rn50" if r["model"] == "resnet50" else f"bert{r.get('seq_len')}"
    return f"{name}.{r['precision']}.{r['dp']}"


def graphs_figures(rs: list[dict[str, Any]] | None = None,
                   loaders: list[dict[str, Any]] | None = None) -> dict[str, str]:
    """The figures the "Any graph" and input-pipeline sections of docs/validation/training.md
    quote (inline ``<!--v:KEY-->`` markers), from the rows and loader rows their tables use:
    each row's error (``tg.<model>.<precision>.<gpus>``, "+18 %"; ``….1``: "+18.1 %"), ours
    AMP over TF32 and 8 over 1 GPU, the medians with and
    without each model, the loader rows' errors (``tg.<loader>.<precision>.<gpus>``)."""
    from ..scenarios.training.input_pipeline import loader_table

    rs = rows() if rs is None else rs
    loaders = loader_rows() if loaders is None else loaders

    out: dict[str, str] = {}
    by = {_key(r): r for r in rs}
    for k, r in by.items():
        out |= {f"tg.{k}": fmt_pct(r["error"]), f"tg.{k}.1": fmt_pct(r["error"], 1)}
    for name in ("rn50", "bert128"):
        out[f"tg.{name}.amp_over_tf32"] = \
            f"{by[f'{name}.fp16.1']['ours'] / by[f'{name}.tf32.1']['ours']:.2f}"
    for part in ("forward", "backward"):
        out[f"tg.rn50.fp16.1.{part}_ms"] = f"{by['rn50.fp16.1']['breakdown'][part] * 1e3:.1f}"
    out["tg.rn50.fp16.8.dp_comm_ms"] = f"{by['rn50.fp16.8']['breakdown']['dp_comm'] * 1e3:.1f}"
    out["tg.rn50.scaling"] = f"{by['rn50.fp16.8']['ours'] / by['rn50.fp16.1']['ours']:.2f}"
    for tag, sel in (("all", rs), ("bert", [r for r in rs if r["model"] != "resnet50"]),
                     ("rn50", [r for r in rs if r["model"] == "resnet50"])):
        s = summary(sel)
        out[f"tg.{tag}.median"] = fmt_pct(s["median_abs_error"], 1, sign=False)
        out[f"tg.{tag}.worst"] = fmt_pct(s["max_abs_error"], 1, sign=False)
    for r in loaders:
        for name in ("none", *loader_table()):
            out[f"tg.{name}.{_key(r)}"] = fmt_pct(r[name] / r["published"] - 1)
            out[f"tg.{name}.{_key(r)}.1"] = fmt_pct(r[name] / r["published"] - 1, 1)
    return out
