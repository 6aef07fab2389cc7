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

import numpy as np

from .cases import load_cases
from .holdout import fmt_pct

__all__ = ["cases", "rows", "report_table", "summary", "loader_rows", "loader_table_md",
           "graphs_figures", "RN50_WORKERS", "term_rows", "term_table_md", "term_figures",
           "tf32_gemm_figures", "TF32_GEMM"]


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
    lines = ["| model | seq | system | precision | GPUs | micro-batch × accumulation "
             "| published [samples/s] | ours [samples/s] | error | our MFU | source |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rs:
        lines.append(f"| {r['model']} | {r.get('seq_len') or '-'} | {r['cluster']} "
                     f"| {r['precision']} | {r['dp']} "
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
        if c["source"] != "rn50":  # the DGX A100 rows: RN50_WORKERS is that machine's
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
    name = f"bert{r.get('seq_len')}" if r["model"] != "resnet50" else (
        "rn50" if r["source"] == "rn50" else "rn50v100")
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


#: the per-term table's columns: (header, op kinds of the training graph; "copy" only the
#: NCHW layout copies, the one copy kind ResNet-50's graph has)
TERMS = (("convolutions", ("conv2d",)), ("batch norms", ("norm",)),
         ("ReLU, add, pools", ("elementwise", "pool2d", "global_pool")),
         ("NCHW copies", ("copy",)))


def term_rows(rs: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Each ResNet-50 case's step on one GPU broken down by op kind, in ms per micro-batch
    (``generic.op_seconds``, the ops ``train`` prices), beside the published step (GPUs ·
    micro-batch / published img/s) and ours (GPUs · micro-batch / our img/s): where the gap
    between them would have to come from. Nothing is fitted."""
    from ..scenarios.training.generic import op_seconds

    out = []
    for r in rows() if rs is None else rs:
        if r["model"] != "resnet50":
            continue
        tg, t = op_seconds(r["model"], r["cluster"], micro_batch=r["micro_batch"],
                           precision=r["precision"], conv_layout=r.get("conv_layout", "nhwc"))
        kinds = np.array(tg.graph.kinds)
        terms = {h: float(t[np.isin(kinds, ks)].sum()) for h, ks in TERMS}
        other = float(t.sum()) - sum(terms.values())
        per_mb = r["dp"] * r["micro_batch"]
        out.append(dict(r, terms=terms, other=other, device=float(t.sum()),
                        published_step=per_mb / r["published"], our_step=per_mb / r["ours"]))
    return out


def term_table_md(rs: list[dict[str, Any]] | None = None) -> str:
    """The generated block "terms" of docs/validation/training.md."""
    rs = term_rows() if rs is None else rs
    heads = " | ".join(f"{h} [ms]" for h, _ in TERMS)
    lines = [f"| case | {heads} | other ops [ms] | ours per micro-batch [ms] "
             "| published [ms] | published − ours [ms] | gap / memory-bound ops |",
             "|---|" + "---:|" * (len(TERMS) + 5)]
    for r in rs:
        tm = r["terms"]
        mem = sum(v for h, v in tm.items() if h != "convolutions")
        gap = r["published_step"] - r["our_step"]
        cells = " | ".join(f"{tm[h] * 1e3:.1f}" for h, _ in TERMS)
        lines.append(f"| {r['id']} | {cells} | {r['other'] * 1e3:.1f} | "
                     f"{r['our_step'] * 1e3:.1f} | {r['published_step'] * 1e3:.1f} | "
                     f"{gap * 1e3:+.1f} | {gap / mem:+.0%} |")
    return "\n".join(lines)


def term_figures(rs: list[dict[str, Any]] | None = None) -> dict[str, str]:
    """The figures the per-term diagnosis quotes (``tg.terms.<row key>.…``): the gap between
    the published and our step per micro-batch in ms (``gap_ms``), that gap over our
    memory-bound ops' time (``gap_share``, "+30 %"), our convolutions' and memory-bound ops'
    share of our step (``conv_share``, ``mem_share``)."""
    rs = term_rows() if rs is None else rs
    out: dict[str, str] = {}
    for r in rs:
        k, tm = _key(r), r["terms"]
        mem = sum(v for h, v in tm.items() if h != "convolutions")
        gap = r["published_step"] - r["our_step"]
        out |= {f"tg.terms.{k}.gap_ms": f"{gap * 1e3:+.1f}".replace("-", "−"),
                f"tg.terms.{k}.gap_share": fmt_pct(gap / mem),
                f"tg.terms.{k}.conv_share": fmt_pct(tm["convolutions"] / r["device"], sign=False),
                f"tg.terms.{k}.mem_share": fmt_pct(mem / r["device"], sign=False)}
    return out


#: PyTorch's CUDA notes, "TensorFloat-32 (TF32) on Ampere (and later) devices"
#: (pytorch/pytorch docs/source/notes/cuda.rst): a 10240 x 10240 x 10240 fp32 matmul with TF32
#: on "takes 0.016s on GA100" (one call, two significant digits, the board and clock not
#: stated). (size, seconds)
TF32_GEMM = (10240, 0.016)


def tf32_gemm_figures(cluster: str = "dgx-a100") -> dict[str, str]:
    """A check of our TF32 matmul rate on the A100 against a published one (``TF32_GEMM``):
    the published and our TFLOP/s and share of the TF32 peak (``tg.tf32gemm.*``), ours with
    the smooth efficiency ``train`` prices convolutions and GEMMs with."""
    from ..engine.core import time_model
    from ..engine.presets import efficiency_for
    from ..engine.tiles import without_tiles
    from ..graphs.graph import GraphBuilder
    from ..specs.dtypes import precision
    from ..specs.resolve import cluster as resolve_cluster

    n, secs = TF32_GEMM
    hw = resolve_cluster(cluster, None).device
    b = GraphBuilder(f"dot {n}^3", "forward", precision("tf32"))
    b.add("matmul", "dot", m=n, k=n, n=n)
    ot = time_model(b.build(), hw, without_tiles(efficiency_for(hw, "default"))).evaluate(1.0)
    flops, ours = float(ot.flops.sum()), float(ot.time.sum())
    peak = hw.peak("tf32")
    return {"tg.tf32gemm.published_tflops": f"{flops / secs / 1e12:.0f}",
            "tg.tf32gemm.published_frac": fmt_pct(flops / secs / peak, sign=False),
            "tg.tf32gemm.ours_ms": f"{ours * 1e3:.1f}",
            "tg.tf32gemm.ours_tflops": f"{flops / ours / 1e12:.0f}",
            "tg.tf32gemm.ours_frac": fmt_pct(flops / ours / peak, sign=False)}
