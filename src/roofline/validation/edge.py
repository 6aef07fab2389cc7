"""Edge devices against published measurements (data/validation/edge.toml; the Coral Edge TPU's
MobileNet latencies and llama.cpp decode rates on Apple M-series, nothing fitted): our number
per case, priced by ``rl.solve`` as docs/validation/edge.md states. The page's table is checked
against ``predict_edge`` by tests/validation/test_validation_edge.py; README's edge row quotes
``edge_figures``."""

from __future__ import annotations

from typing import Any

from .cases import Case, load_cases
from .holdout import fmt_pct

__all__ = ["edge_cases", "predict_edge", "edge_figures"]


def edge_cases() -> tuple[Case, ...]:
    return load_cases("edge").cases


def predict_edge(c: Case) -> float:
    """Our number for case ``c``, in the case's unit (ms or tokens/s)."""
    from ..engine.solve import solve
    from ..specs.dtypes import precision as make_precision

    p = make_precision(c["precision"], weights=c.get("weights"), group_size=c.get("group_size"))
    r = solve(c["model"], c["hardware"], batch=c["batch"], precision=p,
              phase=c.get("phase"), context=c.get("context"))
    if not r.feasible:
        raise AssertionError(f"{c.id}: infeasible: {r.reason}")
    return r.latency * 1e3 if c.metric == "latency" else float(r.tokens_per_s)


def edge_figures(ours: dict[str, float] | None = None) -> dict[str, Any]:
    """Each case's error (ours / published − 1) as README's edge row quotes it, "+15.7 %"
    (``readme.edge.<case id>``); ``ours``: case id -> ``predict_edge`` when computed."""
    out = {}
    for c in edge_cases():
        v = predict_edge(c) if ours is None else ours[c.id]
        out[f"readme.edge.{c.id}"] = fmt_pct(v / c.measured - 1, 1)
    return out
