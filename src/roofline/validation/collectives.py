"""The collectives model against published NCCL all-reduce bandwidths
(docs/validation/collectives.md).

Cases: src/roofline/data/validation/collectives.toml (nccl-tests ``all_reduce_perf`` on 8-GPU
H100 / H200 / H800 NVSwitch nodes, large messages). Each is priced by training's collectives
(``ops.collectives.group_all_reduce`` on ``scenarios.training.factors.cluster_links``, the
``default`` preset's link efficiencies): ``algorithm="auto"`` takes the faster of the ring and
NVLS as NCCL does, ``"nvls"`` / ``"ring"`` the one the run forced. Our busbw is nccl-tests'
``2(p−1)/p · n / t``.

One factor is fitted here: the NVLS fraction of the cluster specs (``[scale_up] nvls``: NVLS
algorithm bandwidth / link bandwidth per direction), as the median of measured algbw / link over
the NVLS cases it is given. The shipped value comes from one source (nccl212); the
leave-one-source-out report says how it does on the others. The forced-ring cases judge the
training preset's ring efficiency (fitted on A100 training runs, data/presets/training.toml),
not fitted here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache

from ..ops import collectives as coll
from ..ops.xp import SCALAR
from .cases import Case, load_cases
from .holdout import FitReport, Refit, holdout_tables, leave_one_source_out

__all__ = ["collective_cases", "predict_busbw", "collective_errors", "fit_nvls",
           "collectives_holdout", "collectives_case_table", "collectives_holdout_table"]

PARAMS = ("nvls",)


def collective_cases() -> tuple[Case, ...]:
    return load_cases("collectives").cases


def _nvls_cases(cases: Sequence[Case]) -> list[Case]:
    """The cases NVLS ran (forced, or NCCL's default on these NVSwitch nodes)."""
    return [c for c in cases if c["algorithm"] in ("nvls", "auto")]


@lru_cache(maxsize=16)
def _cluster(key: str, scale_up_gbps: int | None):
    from ..specs.resolve import cluster

    c = cluster(key)
    return c if scale_up_gbps is None else replace(c, scale_up_bytes_per_s=scale_up_gbps * 1e9)


def predict_busbw(case: Case, nvls: float | None = None) -> float:
    """Our busbw (bytes/s) for ``case``; ``nvls``: the NVLS fraction to use (None: the
    cluster spec's)."""
    from ..scenarios.training.factors import cluster_links, training_factors

    c = _cluster(case["cluster"], case.get("scale_up_gbps"))
    if nvls is not None:
        c = replace(c, scale_up_nvls_fraction=nvls)
    links = cluster_links(c, training_factors(c.device.kind))
    n, p, algo = float(case["bytes"]), case["ranks"], case["algorithm"]
    if algo == "ring":
        t = coll.group_ring_all_reduce(n, p, 1, links, SCALAR)
    elif algo == "nvls":
        t = coll.nvls_all_reduce(n, p, links.nvls_bw, links.up_alpha)
    else:
        t = coll.group_all_reduce(n, p, 1, links, SCALAR)
    return float(coll.bus_factor("all_reduce", p) * n / t)


def _log_errors(values: Mapping[str, float] | None, cases: Sequence[Case]) -> list[float]:
    nv = None if values is None else values["nvls"]
    return [math.log(predict_busbw(c, nv) / c.value_si) for c in cases]


def fit_nvls(cases: Sequence[Case]) -> Refit:
    """The NVLS fraction: median of measured algbw / link bandwidth over the NVLS cases."""
    r = []
    for c in _nvls_cases(cases):
        cl = _cluster(c["cluster"], c.get("scale_up_gbps"))
        algbw = c.value_si / coll.bus_factor("all_reduce", c["ranks"])
        r.append(algbw / cl.scale_up_bytes_per_s)
    return Refit(values={"nvls": round(statistics.median(r), 3)})


def collective_errors() -> list[tuple[Case, float, float]]:
    """(case, our busbw in bytes/s, ours / measured − 1) for every case."""
    out = []
    for c in collective_cases():
        b = predict_busbw(c)
        out.append((c, b, b / c.value_si - 1))
    return out


def collectives_holdout() -> FitReport:
    """In-sample and leave-one-source-out error of the NVLS fraction, on the NVLS cases."""
    from ..specs.resolve import cluster

    cs = _nvls_cases(collective_cases())
    shipped = {"nvls": cluster("dgx-h100").scale_up_nvls_fraction}
    return leave_one_source_out("collectives nvls", cs, PARAMS, shipped, fit_nvls,
                                _log_errors)


def _ring_only(case: Case) -> float:
    """Our busbw for ``case`` without NVLS (the model before the term)."""
    return predict_busbw(replace(case, scenario={**case.scenario, "algorithm": "ring"}), 0.0)


def collectives_case_table() -> str:
    """The markdown case table of docs/validation/collectives.md (generated; a test checks it)."""
    rows = ["| case | ranks | algorithm | published busbw | ours | error | ring only (before) "
            "| error | source |", "|---|---:|---|---:|---:|---:|---:|---:|---|"]
    for c, b, e in collective_errors():
        r = _ring_only(c)
        rows.append(f"| {c.id} | {c['ranks']} | {c['algorithm']} | {c.measured:g} GB/s | "
                    f"{b / 1e9:.0f} GB/s | {e:+.1%} | {r / 1e9:.0f} GB/s | "
                    f"{r / c.value_si - 1:+.1%} | {c.source} |")
    return "\n".join(rows)


def collectives_holdout_table(rep: FitReport | None = None) -> str:
    """The markdown hold-out tables of docs/validation/collectives.md."""
    return holdout_tables(collectives_holdout() if rep is None else rep,
                          lambda k, v: f"{v:.3f}")
