"""Cost, energy and carbon of ``plan_serving``'s frontier points (``layouts``, ``pareto``).

Each point's devices run at a power activity (analysis/power.py: a = min(1, w_c·MFU + w_m·MBU))
estimated in closed form: a decode step of C sequences reads the weights and C × (P + n/2)
tokens of KV (MBU = bytes / (step × bandwidth)) and does 2 × params × C FLOPs (MFU); a prompt's
prefill does 2 × params × P FLOPs in its time (MFU; its MBU is not counted). Activation
traffic is not counted and the bytes are spread over the whole step (launch overheads
included), so it reads under ``rl.serve``'s MBU, which divides by busy device time.
Aggregated replicas weight decode and prefill by the time they take in the cycle;
disaggregated groups weight decode and prefill workers by device count (power is linear in a).
The tables' ``utilisation`` column is that activity.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..engine.table import Table
from .econ_columns import ECON_COLUMN_UNITS, econ_columns
from .power import power_activity
from .stepcost import StepCosts

__all__ = ["u_decode", "u_prefill", "u_aggregated", "points_table"]


def _shape(c: StepCosts, hw: Any) -> tuple[float, float, float]:
    """(parameters per device, bandwidth B/s, peak FLOP/s) of one layout's devices."""
    from ..specs.dtypes import precision as make_precision

    p = make_precision(c.precision, kv=c.kv_precision, weights=c.weight_precision)
    return (c.weights_bytes / p.weight_bytes, hw.memory_bytes_per_s,
            hw.peak_flops_per_s.get(p.compute, math.nan))


def u_decode(c: StepCosts, hw: Any, C: int, context: float, d: float) -> float:
    """Power activity of a decode step of C sequences at a mean context, taking d seconds."""
    n_dev, bw, peak = _shape(c, hw)
    mbu = (c.weights_bytes + C * context * c.kv_bytes_per_token) / (d * bw)
    return float(power_activity(2 * n_dev * C / (d * peak), mbu))


def u_prefill(c: StepCosts, hw: Any, P: float, t: float) -> float:
    """Power activity (of its MFU) of P prompt tokens' prefill taking t seconds."""
    n_dev, _, peak = _shape(c, hw)
    return float(power_activity(2 * n_dev * P / (t * peak))) if t > 0 else math.nan


def u_aggregated(c: StepCosts, hw: Any, C: int, P: float, n: float, att_pair: float) -> float:
    """Time-weighted power activity of an aggregated replica's cycle (n decode steps of C
    sequences, C prompts' prefill mixed in)."""
    d = c.decode_time(C, C * (P + n / 2))
    add = c.prompt_add(C, P, att_pair)
    ud, up = u_decode(c, hw, C, P + n / 2, d), u_prefill(c, hw, P, add)
    return (n * d * ud + C * add * (up if math.isfinite(up) else 0.0)) / (n * d + C * add)


def points_table(pts: list[Any], labels: list[str], hw: Any, price_per_hour: float | None,
                 region: str | None, pue: float | None, preset: str) -> Table:
    """The frontier points as a Table, with the cost, energy and carbon columns."""

    tpd = np.array([p.tps_device for p in pts])
    # per device: the columns are per token, so one device at its share of the throughput
    ec = econ_columns(hw, devices=1.0, units_per_s=tpd,
                      utilisation=np.array([p.util for p in pts]), price_per_hour=price_per_hour,
                      region=region, pue=pue, preset=preset)
    return Table({
        "mode": [p.mode for p in pts], "layout": labels,
        "max_concurrency": np.array([p.conc for p in pts], dtype=np.int64),
        "tpot_ms": np.array([p.tpot * 1e3 for p in pts]),
        "tokens_per_s_per_user": np.array([p.tps_user for p in pts]),
        "tokens_per_s_per_device": tpd,
        "devices_per_req_per_s": np.array([p.dev_per_rate for p in pts]),
        "utilisation": np.array([p.util for p in pts]), **ec.columns(),
    }, units=ECON_COLUMN_UNITS,
        title="frontier points (closed form, steady state at max concurrency)",
        show=("layout", "max_concurrency", "tpot_ms", "tokens_per_s_per_user",
              "tokens_per_s_per_device", "mode", "usd_per_million_tokens"),
        notes=(ec.note(),))
