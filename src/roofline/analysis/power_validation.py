"""The power model against MEASURED power and energy (data/validation/power.toml).

Each case is run through roofline (``rl.serve`` or ``rl.train``) for its operating point: MFU,
MBU, the devices, the work rate and (training) the node overhead; idle and peak come from the
part's power model (a measured idle where one is published, else 30 % of TDP; peak = TDP).
The device power is then P = idle + (peak − idle)·min(1, w_c·MFU + w_m·MBU) and

    energy_per_token   devices · P / output tokens per second        (GPU energy, PUE 1)
    device_power       P                                              W per GPU
    node_power         devices · P + node overhead                    W per node

The weights (w_c, w_m) are FITTED (``fit_weights``: least squares of log(predicted/measured)
over the cases marked fit = true) and judged leave-one-source-out: fitted to every source but
one, applied to the one left out. ``validation_rows`` also reports the previous model (idle 30 %
of TDP, activity = max(MFU, MBU)) for comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

__all__ = ["PowerCase", "power_cases", "predict", "predict_previous", "fit_weights",
           "validation_rows", "validation_markdown"]

_UNIT = {"energy_per_token": "J/token", "device_power": "W", "node_power": "W"}
#: the weight grid of the fit (step 0.01)
_WC = np.round(np.arange(0.0, 6.0 + 1e-9, 0.01), 2)
_WM = np.round(np.arange(0.0, 1.5 + 1e-9, 0.01), 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerCase:
    """One measurement and the operating point roofline predicts for it."""

    name: str
    group: str  #: the source (left out together in leave-one-source-out)
    kind: str  #: energy_per_token, device_power or node_power
    measured: float  #: SI: J per token or W
    source: str
    assumed: str  #: what we had to assume to run the case
    mfu: float
    mbu: float  #: NaN where roofline does not report it (training)
    idle_w: float
    peak_w: float
    devices: int
    units_per_s: float  #: output tokens/s (energy_per_token), else NaN
    other_w: float = 0.0  #: node overhead (node_power)
    fit: bool = True  #: used to fit the weights (else reported only)
    why_not_fitted: str = ""


def _scale(c: PowerCase, p: Any) -> Any:
    if c.kind == "energy_per_token":
        return c.devices * p / c.units_per_s
    if c.kind == "device_power":
        return p
    return c.devices * p + c.other_w


def predict(c: PowerCase, weights: tuple[float, float]) -> float:
    """The case's quantity under P = idle + (peak − idle)·min(1, w_c·MFU + w_m·MBU)."""
    wc, wm = weights
    b = 0.0 if math.isnan(c.mbu) else c.mbu
    a = min(1.0, max(0.0, wc * c.mfu + wm * b))
    return float(_scale(c, c.idle_w + (c.peak_w - c.idle_w) * a))


def predict_previous(c: PowerCase, tdp_w: float, idle_fraction: float = 0.3) -> float:
    """The case under the previous model: TDP·(f + (1 − f)·max(MFU, MBU))."""
    u = min(1.0, max(0.0, max(v for v in (c.mfu, c.mbu) if not math.isnan(v))))
    return float(_scale(c, tdp_w * (idle_fraction + (1.0 - idle_fraction) * u)))


def fit_weights(cases: list[PowerCase] | tuple[PowerCase, ...]) -> tuple[float, float]:
    """(w_c, w_m) on a 0.01 grid minimising Σ log(predicted / measured)² over ``cases``."""
    wc, wm = _WC[:, None], _WM[None, :]
    err = np.zeros((len(_WC), len(_WM)))
    for c in cases:
        b = 0.0 if math.isnan(c.mbu) else c.mbu
        a = np.clip(wc * c.mfu + wm * b, 0.0, 1.0)
        err += np.log(_scale(c, c.idle_w + (c.peak_w - c.idle_w) * a) / c.measured) ** 2
    i, j = np.unravel_index(int(np.argmin(err)), err.shape)
    return float(_WC[i]), float(_WM[j])


def _operating_point(raw: dict[str, Any]) -> dict[str, Any]:
    import roofline as rl

    from .economics import _hw_of
    from .power import power_model

    if raw["kind"] in ("energy_per_token", "device_power"):
        s = rl.serve(raw["model"], raw["hardware"], batch=raw["batch"],
                     prompt_len=raw["prompt_len"], output_len=raw["output_len"],
                     engine=raw.get("engine", "trtllm"))
        pm = power_model(rl.hardware(raw["hardware"]))
        return {"mfu": s.mfu, "mbu": s.mbu, "idle_w": pm.idle_w, "peak_w": pm.peak_w,
                "tdp_w": float(rl.hardware(raw["hardware"]).tdp_w),
                "devices": s.devices, "units_per_s": s.tokens_per_s}
    kw: dict[str, Any] = dict(global_batch=raw["global_batch"], seq_len=raw["seq_len"])
    kw.update({k: raw[k] for k in ("attention_kernel", "elementwise") if k in raw})
    best = rl.best_parallelism(raw["model"], raw["cluster"], nodes=1, top=1, **kw)[0]
    t = rl.train(raw["model"], raw["cluster"], nodes=1, tp=best["tp"], pp=best["pp"],
                 micro_batch=best["micro_batch"], interleave=best["interleave"],
                 recompute=best["recompute"], zero=best["zero"], **kw)
    hw = _hw_of(t, "device")
    pm = power_model(hw)
    return {"mfu": t.mfu, "mbu": math.nan, "idle_w": pm.idle_w, "peak_w": pm.peak_w,
            "tdp_w": float(hw.tdp_w), "devices": t.devices, "units_per_s": math.nan,
            "other_w": t.other_power_w}


@lru_cache(maxsize=1)
def _cases() -> tuple[tuple[PowerCase, float], ...]:
    from .._data import DATA, read_toml
    from .data import _reader

    path = DATA / "validation" / "power.toml"
    doc = read_toml(path)
    q = _reader(doc, str(path))
    out = []
    for i, raw in enumerate(doc.get("case", [])):
        kind = raw["kind"]
        dim = "energy" if kind == "energy_per_token" else "power"
        v, prov = q(raw["measured"], f"case.{i}.measured", dim)
        op = _operating_point(raw)
        tdp = op.pop("tdp_w")
        fit = raw.get("fit", True) is not False
        out.append((PowerCase(name=str(raw["name"]), group=str(raw["source_group"]), kind=kind,
                              measured=v, source=prov.source,
                              assumed=str(raw.get("assumed", "")), fit=fit,
                              why_not_fitted=str(raw.get("why_not_fitted", "")), **op), tdp))
    return tuple(out)


def power_cases() -> tuple[PowerCase, ...]:
    """The measured cases of data/validation/power.toml with their roofline operating points."""
    return tuple(c for c, _ in _cases())


def validation_rows() -> list[dict[str, Any]]:
    """Per case: measured; the previous model; the fitted weights in-sample; and the weights
    fitted leaving the case's source out (leave-one-source-out)."""
    from .power import activity_weights

    both = _cases()
    cases = [c for c, _ in both]
    fitted = [c for c in cases if c.fit]
    w_all = activity_weights()
    rows = []
    for c, tdp in both:
        w = fit_weights([o for o in fitted if o.group != c.group])
        p_old, p_in, p_lo = predict_previous(c, tdp), predict(c, w_all), predict(c, w)
        rows.append({"case": c.name, "group": c.group, "unit": _UNIT[c.kind], "fit": c.fit,
                     "why_not_fitted": c.why_not_fitted, "measured": c.measured,
                     "mfu": c.mfu, "mbu": c.mbu, "previous": p_old,
                     "ratio_previous": p_old / c.measured, "predicted": p_in,
                     "ratio": p_in / c.measured, "w_loso": w, "predicted_loso": p_lo,
                     "ratio_loso": p_lo / c.measured})
    return rows


def _median_abs(xs: list[float]) -> float:
    return float(np.median([abs(math.log(x)) for x in xs])) if xs else math.nan


def validation_markdown() -> str:
    """The power-validation table as markdown (a test pins docs/validation/economics.md to it)."""
    from .power import activity_weights

    wc, wm = activity_weights()
    out = ["| case | MFU | MBU | measured | previous model (pred. / meas.) | fitted, "
           f"in-sample (w_c {wc:g}, w_m {wm:g}) | weights fitted to the other sources | "
           "leave-one-source-out |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
    rows = validation_rows()
    for r in rows:
        mbu = "—" if math.isnan(r["mbu"]) else f"{r['mbu']:.2f}"
        tag = "" if r["fit"] else " (not fitted)"
        wl = r["w_loso"]
        out.append(f"| {r['case']}{tag} | {r['mfu']:.3f} | {mbu} | "
                   f"{r['measured']:,.4g} {r['unit']} | {r['ratio_previous']:.2f} | "
                   f"{r['ratio']:.2f} | {wl[0]:g}, {wl[1]:g} | {r['ratio_loso']:.2f} |")
    fit = [r for r in rows if r["fit"]]

    def pct(key: str) -> str:
        return f"{math.expm1(_median_abs([r[key] for r in fit])):.0%}"

    def span(key: str) -> str:
        xs = [r[key] for r in fit]
        return f"{min(xs):.2f} to {max(xs):.2f}"

    out.append("")
    out.append(f"Over the {len(fit)} fitted cases ({len({r['group'] for r in fit})} sources): "
               f"median error {pct('ratio')} in-sample (pred. / meas. {span('ratio')}), "
               f"{pct('ratio_loso')} leave-one-source-out ({span('ratio_loso')}); the previous "
               f"model {pct('ratio_previous')} ({span('ratio_previous')}).")
    return "\n".join(out)
