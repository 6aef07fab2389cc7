"""The power model against MEASURED power and energy (data/economics/power.toml [[validation]]).

Each case is run through roofline (``rl.serve`` or ``rl.train``) for its operating point: the
utilisation u of the binding resource, the TDP, the devices, the work rate and (training) the
node overhead. The power model P(u) = TDP · (f + (1 − f)·u) is then evaluated at an idle
fraction f:

    energy_per_token   devices · P(u) / output tokens per second        (GPU energy, PUE 1)
    device_power       P(u)                                              W per GPU
    node_power         devices · P(u) + node overhead                    W per node

``validation_rows`` reports the default f (0.30, assumed: nothing was fitted to these cases)
and, to judge a FITTED f honestly, f fitted to every source but one and applied to the one
left out (leave-one-source-out), plus the in-sample fit to all of them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["PowerCase", "power_cases", "predict", "fit_idle_fraction", "validation_rows",
           "validation_markdown"]

_UNIT = {"energy_per_token": "J/token", "device_power": "W", "node_power": "W"}


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerCase:
    """One measurement and the operating point roofline predicts for it."""

    name: str
    group: str  #: the source (left out together in leave-one-source-out)
    kind: str  #: energy_per_token, device_power or node_power
    measured: float  #: SI: J per token or W
    source: str
    assumed: str  #: what we had to assume to run the case
    tdp_w: float
    utilisation: float  #: of the binding resource at the operating point
    devices: int
    units_per_s: float  #: output tokens/s (energy_per_token), else NaN
    other_w: float = 0.0  #: node overhead (node_power)


def predict(c: PowerCase, idle_fraction: float) -> float:
    """The case's quantity under P(u) = TDP · (f + (1 − f)·u)."""
    f = idle_fraction
    p = c.tdp_w * (f + (1.0 - f) * min(1.0, max(0.0, c.utilisation)))
    if c.kind == "energy_per_token":
        return c.devices * p / c.units_per_s
    if c.kind == "device_power":
        return p
    return c.devices * p + c.other_w


def fit_idle_fraction(cases: list[PowerCase] | tuple[PowerCase, ...]) -> float:
    """The f in [0, 1] minimising Σ log(predicted / measured)² (grid of 0.001)."""
    grid = np.linspace(0.0, 1.0, 1001)
    err = [sum(math.log(predict(c, f) / c.measured) ** 2 for c in cases) for f in grid]
    return float(grid[int(np.argmin(err))])


def _operating_point(raw: dict[str, Any]) -> dict[str, Any]:
    import roofline as rl

    from .economics import for_serve

    if raw["kind"] in ("energy_per_token", "device_power"):
        s = rl.serve(raw["model"], raw["hardware"], batch=raw["batch"],
                     prompt_len=raw["prompt_len"], output_len=raw["output_len"],
                     engine=raw.get("engine", "trtllm"))
        e = for_serve(s)
        return {"tdp_w": float(rl.hardware(raw["hardware"]).tdp_w), "utilisation": e.utilisation,
                "devices": s.devices, "units_per_s": s.tokens_per_s}
    kw = dict(global_batch=raw["global_batch"], seq_len=raw["seq_len"])
    best = rl.best_parallelism(raw["model"], raw["cluster"], nodes=1, top=1, **kw)[0]
    t = rl.train(raw["model"], raw["cluster"], nodes=1, tp=best["tp"], pp=best["pp"],
                 micro_batch=best["micro_batch"], interleave=best["interleave"],
                 recompute=best["recompute"], zero=best["zero"], **kw)
    from .economics import _hw_of

    return {"tdp_w": float(_hw_of(t, "device").tdp_w), "utilisation": t.mfu,
            "devices": t.devices, "units_per_s": math.nan, "other_w": t.other_power_w}


@lru_cache(maxsize=1)
def power_cases() -> tuple[PowerCase, ...]:
    """The measured cases of power.toml with their roofline operating points."""
    from .._data import read_toml
    from .data import ECON, _reader

    path = ECON / "power.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))
    out = []
    for i, raw in enumerate(doc.get("validation", [])):
        kind = raw["kind"]
        dim = "energy" if kind == "energy_per_token" else "power"
        v, prov = q(raw["measured"], f"validation.{i}.measured", dim)
        out.append(PowerCase(name=str(raw["name"]), group=str(raw["source_group"]), kind=kind,
                             measured=v, source=prov.source, assumed=str(raw.get("assumed", "")),
                             **_operating_point(raw)))
    return tuple(out)


def validation_rows() -> list[dict[str, Any]]:
    """Per case: measured, predicted at the default f, and at f fitted leaving its source out."""
    from .data import power_defaults

    cases = power_cases()
    f0 = power_defaults()["idle_fraction"][0]
    rows = []
    for c in cases:
        others = [o for o in cases if o.group != c.group]
        f_loso = fit_idle_fraction(others)
        p0, p1 = predict(c, f0), predict(c, f_loso)
        rows.append({"case": c.name, "unit": _UNIT[c.kind], "measured": c.measured,
                     "u": c.utilisation, "predicted": p0, "ratio": p0 / c.measured,
                     "f_loso": f_loso, "predicted_loso": p1, "ratio_loso": p1 / c.measured})
    return rows


def validation_markdown() -> str:
    """The power-validation table as markdown (a test pins docs/validation/economics.md to it)."""
    from .data import power_defaults

    f0 = power_defaults()["idle_fraction"][0]
    out = [f"| case | u | measured | predicted (f = {f0:.2f}) | pred. / meas. | f fitted to the "
           "other sources | pred. / meas. |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in validation_rows():
        out.append(f"| {r['case']} | {r['u']:.2f} | {r['measured']:,.4g} {r['unit']} | "
                   f"{r['predicted']:,.4g} | {r['ratio']:.2f} | {r['f_loso']:.3f} | "
                   f"{r['ratio_loso']:.2f} |")
    cases = power_cases()
    f_all = fit_idle_fraction(cases)
    ratios = [predict(c, f_all) / c.measured for c in cases]
    out.append("")
    out.append(f"In-sample (f fitted to all {len(cases)} cases): f = {f_all:.3f}, predicted / "
               f"measured {min(ratios):.2f} to {max(ratios):.2f}.")
    return "\n".join(out)
