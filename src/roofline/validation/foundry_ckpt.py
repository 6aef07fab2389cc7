"""What full activation checkpointing costs in llm-foundry's runs, against what ``rl.train``
prices for it (docs/validation/training-runs.md, "Full recompute in llm-foundry's runs").

llm-foundry's benchmark tables run the same model with and without checkpointing on the same
GPUs and stack (data/validation/foundry_ckpt.toml). Each row is priced as run, and a
checkpointed row also without recompute (a configuration that would not fit in memory: only
its time is used). Between the two, the row's published time per token says how much of the
recompute we price the run leaves room for:

    share = (1/published − 1/ours without recompute) / (1/ours as run − 1/ours without recompute)

1 when the recompute costs what we price (a second forward of every block), 0 when the run is
as fast as ours without any recompute. ``pair_rows`` sets each model's run without
checkpointing against its run with it: the extra time per token the published figures leave,
against what a second forward needs at the peak. Nothing here is fitted; no default reads it.
"""

from __future__ import annotations

import statistics
from functools import lru_cache
from typing import Any

__all__ = ["ckpt_rows", "ckpt_table", "ckpt_figures", "hfu_bound", "pair_rows", "pair_table"]

_GPU = {"dgx-h100": "H100", "dgx-a100": "A100"}
_PER_NODE = 8  # GPUs per node of both clusters (DGX H100 / DGX A100)


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    from .._data import DATA, read_toml

    return _checked(read_toml(DATA / "validation" / "foundry_ckpt.toml"))


def _checked(d: dict[str, Any]) -> dict[str, Any]:
    """The data file's rows as the code reads them: a known source, cluster and shape each, and
    per GPU and model one row without checkpointing and at least one with it (the pairs)."""
    for r in d["row"]:
        for key, allowed in (("source", d["sources"]), ("cluster", _GPU), ("model", d["shape"])):
            if r[key] not in allowed:
                raise ValueError(f"foundry_ckpt.toml: row {r['where']!r} has {key}="
                                 f"{r[key]!r}; allowed: {', '.join(sorted(allowed))}")
        g = r["gpus"]
        if type(g) is not int or g < _PER_NODE or g % _PER_NODE:
            raise ValueError(f"foundry_ckpt.toml: row {r['where']!r} has gpus={g!r}; allowed: "
                             f"a positive multiple of {_PER_NODE} (whole DGX nodes)")
    for pair in dict.fromkeys((r["cluster"], r["model"]) for r in d["row"]):
        flags = [r["checkpointing"] for r in d["row"] if (r["cluster"], r["model"]) == pair]
        if flags.count(False) != 1 or True not in flags:
            raise ValueError(f"foundry_ckpt.toml: {pair[0]} {pair[1]} has {flags.count(False)} "
                             f"rows without checkpointing and {flags.count(True)} with it; "
                             "allowed: exactly one without and at least one with")
    return d


def _result(r: dict[str, Any], recompute: str) -> Any:
    """``rl.train``'s result for row ``r`` with ``recompute`` ("none" or "full")."""
    from ..scenarios.training import train
    from .training import gpt_model

    shape = _data()["shape"][r["model"]]
    model = gpt_model(shape["heads"], shape["hidden"], shape["layers"], shape["vocab"],
                      r["seq_len"])
    gpus = r["gpus"]
    return train(model, r["cluster"], nodes=gpus // _PER_NODE,
                 global_batch=r["micro_batch"] * r["grad_accum"] * gpus, seq_len=r["seq_len"],
                 micro_batch=r["micro_batch"], tp=1, pp=1, dp=gpus, recompute=recompute,
                 zero=3, precision="bf16", attention_kernel=r["attention_kernel"])


def _price(r: dict[str, Any], recompute: str) -> float:
    """Our tokens/s/GPU for row ``r`` with ``recompute`` ("none" or "full")."""
    res = _result(r, recompute)
    return float(res.tokens_per_s / res.devices)


def pair_rows() -> list[dict[str, Any]]:
    """Per GPU and model, the run without checkpointing against the shortest checkpointed run:
    the checkpointed run's published time per token less the other's, i.e. the time the
    recompute can have taken if both ran at one efficiency; and the least time a second
    forward needs, its FLOPs per token at the bf16 peak. The other's time is scaled to the
    checkpointed run's configuration by our own time ratio of the two without recompute,
    which moves the attention term with the length and also what we price for the micro-batch
    and the step's size (``room``); ``room_flops`` scales it by the forward FLOPs per token
    only (the attention term alone)."""
    from ..specs.resolve import cluster

    d = _data()
    out = []
    for cl in dict.fromkeys(r["cluster"] for r in d["row"]):
        for mo in dict.fromkeys(r["model"] for r in d["row"] if r["cluster"] == cl):
            rs = [r for r in d["row"] if r["cluster"] == cl and r["model"] == mo]
            plain = next(r for r in rs if not r["checkpointing"])
            ck = min((r for r in rs if r["checkpointing"]), key=lambda r: r["seq_len"])
            rp, rn = _result(plain, "none"), _result(ck, "none")
            scale = (rp.tokens_per_s / rp.devices) / (rn.tokens_per_s / rn.devices)
            t_plain = scale / plain["tok_s_gpu"]
            t_ck = 1.0 / ck["tok_s_gpu"]
            fwd = rn.model_flops_per_step / 3 / (rn.global_batch * rn.seq_len)
            fwd_plain = rp.model_flops_per_step / 3 / (rp.global_batch * rp.seq_len)
            t_flops = fwd / fwd_plain / plain["tok_s_gpu"]
            peak = float(cluster(cl, 1).device.peak_flops_per_s["bf16"])
            out.append({"gpu": _GPU[cl], "model": mo.upper(), "plain": plain, "ck": ck,
                        "t_plain": t_plain, "t_ck": t_ck, "room": t_ck - t_plain,
                        "room_flops": t_ck - t_flops,
                        "fwd_at_peak": fwd / peak, "fwd_at_plain": t_plain / 3})
    return out


def ckpt_rows() -> list[dict[str, Any]]:
    """Each row: published and our tokens/s/GPU as run, ours without recompute, the errors and
    (checkpointed rows) the share of our priced recompute the published time leaves room for."""
    d = _data()
    out = []
    for r in d["row"]:
        ours = _price(r, "full" if r["checkpointing"] else "none")
        none = _price(r, "none") if r["checkpointing"] else ours
        pub = float(r["tok_s_gpu"])
        share = ((1 / pub - 1 / none) / (1 / ours - 1 / none)) if r["checkpointing"] else None
        out.append({"gpu": _GPU[r["cluster"]], "model": r["model"].upper(),
                    "seq_len": r["seq_len"], "micro_batch": r["micro_batch"],
                    "checkpointing": r["checkpointing"], "published": pub, "ours": ours,
                    "error": ours / pub - 1, "ours_none": none, "error_none": none / pub - 1,
                    "share": share, "kernel": r["attention_kernel"]})
    return out


def _pct(x: float) -> str:
    return f"{x * 100:+.1f}%"


def ckpt_table(rows: list[dict[str, Any]] | None = None) -> str:
    rs = ckpt_rows() if rows is None else rows
    lines = ["| GPU | model | tokens | checkpointing | micro-batch | published | ours, as run "
             "| error | ours, no recompute | error | share of our recompute |",
             "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rs:
        ck = "full" if r["checkpointing"] else "none"
        none = f"{r['ours_none']:,.0f} | {_pct(r['error_none'])}" if r["checkpointing"] \
            else "(as run) | "
        share = f"{r['share']:.2f}" if r["share"] is not None else ""
        lines.append(f"| {r['gpu']} | MPT-{r['model']} | {r['seq_len']:,} | {ck} | "
                     f"{r['micro_batch']} | {r['published']:,.0f} tok/s/GPU | "
                     f"{r['ours']:,.0f} ({r['kernel']}) | {_pct(r['error'])} | {none} | {share} |")
    f = ckpt_figures(rs)
    lines += ["", f"**Checkpointed rows: {f['trc.n_full']} errors {f['trc.full.range']} as run, "
              f"{f['trc.none.range']} without recompute; the published times leave room for "
              f"{f['trc.share.range']} of the recompute we price (median {f['trc.share.median']})."
              f" Rows without checkpointing: {f['trc.plain.range']}.**"]
    return "\n".join(lines)


def _span(es: list[float]) -> str:
    lo, hi = min(es), max(es)
    return _pct(lo).replace("-", "−") + " to " + _pct(hi).replace("-", "−")


def _share_span(rows: list[dict[str, Any]]) -> str:
    shares = [r["share"] for r in rows]
    return f"{min(shares):.2f} to {max(shares):.2f}"


def hfu_bound() -> dict[str, Any]:
    """The A100 checkpointed row with the highest published HFU against the fastest bf16
    matmul measured on the part (source mamf, data/validation/vendors.toml): the rate its HFU
    column stands for (``rate``: four forwards' FLOPs, the LM head's included), and the rate of
    the work the run did (``hw_rate``: its published tokens/s/GPU times our hardware FLOPs per
    token with full recompute, which re-runs the blocks but not the LM head, as llm-foundry's
    checkpointing wraps MPTBlock only), that one as a fraction of the matmul (``of_mamf``); and
    the same table's best A100 row without checkpointing (its MFU, which is its HFU)."""
    from ..specs.resolve import cluster
    from .cases import load_cases

    rows = [r for r in _data()["row"] if r["cluster"] == "dgx-a100"]
    top = max((r for r in rows if r["checkpointing"]), key=lambda r: r["hfu"])
    plain = max((r for r in rows if not r["checkpointing"]), key=lambda r: r["hfu"])
    peak = float(cluster("dgx-a100", 1).device.peak_flops_per_s["bf16"])
    mamf = next(c for c in load_cases("vendors").cases if c.id == "mamf A100 SXM bf16").value_si
    res = _result(top, "full")
    hw_per_token = res.hardware_flops_per_step / (res.global_batch * res.seq_len)
    hw_rate = top["tok_s_gpu"] * hw_per_token
    return {"hfu": top["hfu"] / 100, "model": top["model"], "seq_len": top["seq_len"],
            "rate": top["hfu"] / 100 * peak, "peak": peak, "mamf": mamf,
            "tok_s_gpu": top["tok_s_gpu"], "hw_per_token": hw_per_token, "hw_rate": hw_rate,
            "of_mamf": hw_rate / mamf, "plain_hfu": plain["hfu"] / 100,
            "plain_model": plain["model"], "plain_of_mamf": plain["hfu"] / 100 * peak / mamf}


def ckpt_figures(rows: list[dict[str, Any]] | None = None) -> dict[str, str]:
    """Inline figures (``<!--v:trc.KEY-->``) of the page's prose."""
    rs = ckpt_rows() if rows is None else rows
    full = [r for r in rs if r["checkpointing"]]
    plain = [r for r in rs if not r["checkpointing"]]
    shares = [r["share"] for r in full]
    b = hfu_bound()
    ps = pair_rows()
    below = [p for p in ps if p["room"] < p["fwd_at_peak"]]
    below_f = [p for p in ps if p["room_flops"] < p["fwd_at_peak"]]
    h7 = next(p for p in ps if p["gpu"] == "H100" and p["model"] == "7B")
    pairs = {"trc.pair.n": str(len(ps)), "trc.pair.below": str(len(below)),
             "trc.pair.below_flops": str(len(below_f)),
             "trc.pair.h100_7b.room_flops": f"{h7['room_flops'] * 1e6:.1f} µs",
             "trc.pair.h100_7b.room": f"{h7['room'] * 1e6:.1f} µs",
             "trc.pair.h100_7b.peak": f"{h7['fwd_at_peak'] * 1e6:.1f} µs",
             "trc.pair.h100_7b.plain_fwd": f"{h7['fwd_at_plain'] * 1e6:.0f} µs",
             "trc.pair.h100_7b.t_ck": f"{h7['t_ck'] * 1e6:.1f} µs",
             "trc.pair.h100_7b.t_plain": f"{h7['t_plain'] * 1e6:.1f} µs"}
    by = {f"trc.share.{g.lower()}.range": _share_span([r for r in full if r["gpu"] == g])
          for g in _GPU.values()}
    a100 = [r for r in full if r["gpu"] == "A100"]
    for n, L in (("short", min(r["seq_len"] for r in a100)),
                 ("long", max(r["seq_len"] for r in a100))):
        by[f"trc.share.a100.{n}"] = _share_span([r for r in a100 if r["seq_len"] == L])
        by[f"trc.share.a100.{n}_len"] = f"{L:,} tokens"
    return pairs | by | {"trc.bound.hfu": f"{b['hfu'] * 100:.1f} %",
            "trc.bound.row": f"{b['model'].upper()} row at {b['seq_len']:,} tokens",
            "trc.bound.rate": f"{b['rate'] / 1e12:.0f} TFLOP/s",
            "trc.bound.peak": f"{b['peak'] / 1e12:.0f} TFLOP/s",
            "trc.bound.mamf": f"{b['mamf'] / 1e12:.1f} TFLOP/s",
            "trc.bound.tok_s": f"{b['tok_s_gpu']:,}",
            "trc.bound.hw_per_token": f"{b['hw_per_token'] / 1e9:.1f} GFLOP",
            "trc.bound.hw_rate": f"{b['hw_rate'] / 1e12:.0f} TFLOP/s",
            "trc.bound.of_mamf": f"{b['of_mamf'] * 100:.1f} %",
            "trc.bound.plain": f"{b['plain_hfu'] * 100:.1f} %",
            "trc.bound.plain_model": b["plain_model"].upper(),
            "trc.bound.plain_of_mamf": f"{b['plain_of_mamf'] * 100:.0f} %",
            "trc.n_full": str(len(full)),
            "trc.full.range": _span([r["error"] for r in full]),
            "trc.none.range": _span([r["error_none"] for r in full]),
            "trc.plain.range": _span([r["error"] for r in plain]),
            "trc.share.range": _share_span(full),
            "trc.share.median": f"{statistics.median(shares):.2f}"}


def pair_table(pairs: list[dict[str, Any]] | None = None) -> str:
    ps = pair_rows() if pairs is None else pairs
    lines = ["| GPU | model | without checkpointing | with | µs/token without (scaled to the "
             "other's configuration) | µs/token with | room for the recompute "
             "| room, FLOPs-only scaling | a forward at the peak |",
             "|---|---|---|---|---:|---:|---:|---:|---:|"]
    for p in ps:
        a, b = p["plain"], p["ck"]
        lines.append(f"| {p['gpu']} | MPT-{p['model']} | {a['seq_len']:,} tokens, micro-batch "
                     f"{a['micro_batch']} | {b['seq_len']:,} tokens, micro-batch "
                     f"{b['micro_batch']} | {p['t_plain'] * 1e6:.1f} | {p['t_ck'] * 1e6:.1f} | "
                     f"{p['room'] * 1e6:.1f} µs | {p['room_flops'] * 1e6:.1f} µs | "
                     f"{p['fwd_at_peak'] * 1e6:.1f} µs |")
    return "\n".join(lines)
