"""The client-side end-to-end option (``solve(..., client=True)``, engine/client.py) against
published ResNet-50 Triton Inference Server latencies (data/validation/client.toml): the fit of
its two factors (per-request floor, serving-stack transport bandwidth), in-sample and
leave-one-source-out errors, and the tables of docs/validation/client.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import Any

from .cases import Case, load_cases
from .holdout import FitReport, Refit, holdout_tables, leave_one_source_out

__all__ = ["cases", "fit_client", "client_holdout", "holdout_table", "case_table",
           "FLOOR_GRID_MS", "TRANSPORT_GRID_GBS"]

FLOOR_GRID_MS = tuple(round(0.05 * i, 2) for i in range(0, 81))  # 0 … 4 ms
TRANSPORT_GRID_GBS = tuple(round(0.1 * 1.1 ** i, 4) for i in range(0, 60))  # 0.1 … ~28 GB/s


@lru_cache(maxsize=1)
def cases() -> tuple[Case, ...]:
    return load_cases("client").cases


def _solve(c: Case, client: bool) -> Any:
    from ..engine.solve import solve

    sc = c.scenario
    return solve(sc["model"], sc["hardware"], batch=sc["batch"], precision=sc["precision"],
                 fuse=sc["fuse"], runtime=sc["runtime"], client=client)


@lru_cache(maxsize=256)
def _parts(cid: str) -> tuple[float, float, float]:
    """(device latency, request bytes, host-link copy seconds) of case ``cid``."""
    from ..engine.client import client_time, io_bytes_per_sample
    from ..graphs.resolve import model as resolve_model
    from ..specs.dtypes import precision
    from ..specs.hardware import hardware as resolve_hardware

    c = next(x for x in cases() if x.id == cid)
    sc = c.scenario
    r = _solve(c, False)
    g = resolve_model(sc["model"]).graph(precision=precision(sc["precision"]),
                                         batch=sc["batch"], fuse=sc["fuse"])
    i, o = io_bytes_per_sample(g)
    copies = client_time(g, resolve_hardware(sc["hardware"]), sc["batch"])["copies"]
    return r.latency, sc["batch"] * (i + o), copies


def predict(c: Case, values: Mapping[str, float] | None = None) -> float:
    """Our end-to-end latency of ``c`` in s (the shipped factors, or ``values``)."""
    if values is None:
        return _solve(c, True).latency
    dev, n, copies = _parts(c.id)
    return dev + copies + n / values["transport_bandwidth"] + values["floor"]


def _log_errors(values: Mapping[str, float] | None, cs: Sequence[Case]) -> list[float]:
    return [math.log(predict(c, values) / c.value_si) for c in cs]


def fit_client(cs: Sequence[Case] | None = None) -> Refit:
    """Grid search of (floor, transport bandwidth) minimising the RMS of log(ours/measured)."""
    cs = cases() if cs is None else cs
    parts = [(_parts(c.id), c.value_si) for c in cs]
    best: tuple[float, float, float] | None = None
    for f_ms in FLOOR_GRID_MS:
        f = f_ms * 1e-3
        for bw_g in TRANSPORT_GRID_GBS:
            bw = bw_g * 1e9
            sse = sum(math.log((d + cp + n / bw + f) / v) ** 2 for (d, n, cp), v in parts)
            if best is None or sse < best[0]:
                best = (sse, f, bw)
    assert best is not None
    return Refit(values={"floor": best[1], "transport_bandwidth": best[2]})


def _shipped() -> dict[str, float]:
    from ..engine.client import client_factors

    f = client_factors()
    return {"floor": f.floor_s, "transport_bandwidth": f.transport_bytes_per_s}


def client_holdout() -> FitReport:
    return leave_one_source_out("client", cases(), ("floor", "transport_bandwidth"),
                                _shipped(), fit_client, _log_errors)


def holdout_table(rep: FitReport | None = None) -> str:
    rep = client_holdout() if rep is None else rep

    def fmt(k: str, v: float) -> str:
        return f"{v * 1e3:.2f} ms" if k == "floor" else f"{v / 1e9:.3g} GB/s"
    return holdout_tables(rep, fmt)


def case_table(rep: FitReport | None = None) -> str:
    """Every case: published, device-only, ours end to end, error, held-out error."""
    rep = client_holdout() if rep is None else rep
    lines = ["| case | published [ms] | device only [ms] | ours, client=True [ms] | error | "
             "held out |", "|---|---:|---:|---:|---:|---:|"]
    for c in cases():
        dev = _parts(c.id)[0]
        ours = predict(c)
        h = math.expm1(rep.held_out_errors[c.id])
        lines.append(f"| {c.id} | {c.value_si * 1e3:.3f} | {dev * 1e3:.3f} | {ours * 1e3:.3f} | "
                     f"{ours / c.value_si - 1:+.1%} | {h:+.1%} |")
    return "\n".join(lines)
