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

__all__ = ["cases", "rows", "report_table", "summary"]


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
                  optimizer=c["optimizer"])
        ours = r.samples_per_s
        out.append(dict(c, ours=ours, error=ours / c["published"] - 1.0, mfu=r.mfu))
    return out


def summary(rs: list[dict[str, Any]]) -> dict[str, float]:
    errs = sorted(abs(r["error"]) for r in rs)
    n = len(errs)
    med = errs[n // 2] if n % 2 else 0.5 * (errs[n // 2 - 1] + errs[n // 2])
    geo = math.exp(sum(math.log(r["ours"] / r["published"]) for r in rs) / n)
    return {"median_abs_error": med, "max_abs_error": errs[-1], "geomean_ratio": geo}


def report_table() -> str:
    rs = rows()
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
