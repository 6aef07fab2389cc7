"""``serving_capacity``: the highest Poisson request rate meeting TTFT and TPOT SLOs."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ... import _args as A
from ..._display import Display
from ...errors import SpecError
from ...specs.dtypes import PRECISION_ARG
from . import args as R
from .phases import serve
from .result import QUEUE_MODEL


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class Capacity(Display):
    """The highest request rate meeting the SLOs, and the state it runs in."""

    rate_per_s: float  #: requests/s
    concurrency: float  #: mean requests in decode (Little's law)
    ttft: float  #: s, mean TTFT at that rate (queueing included)
    tpot: float  #: s, mean TPOT at that rate
    tokens_per_s: float  #: output tokens/s
    limited_by: str  #: "ttft", "tpot", "memory" or "none"
    queue_model: str = QUEUE_MODEL
    #: cost, energy, carbon per output token at that rate (``analysis.economics.Economics``:
    #: the tp devices at the binding utilisation of a decode batch of the concurrency)
    economics: Any = None

    @property
    def cost_per_million_output_tokens(self) -> float | None:
        """USD per 1M output tokens at the capacity rate (None without a price or traffic)."""
        c = None if self.economics is None else self.economics.cost_per_unit
        return None if c is None else c * 1e6

    @property
    def energy_per_output_token(self) -> float:
        """J of facility energy per output token at the capacity rate."""
        return math.nan if self.economics is None else self.economics.energy_per_unit

    @property
    def carbon_per_million_output_tokens(self) -> float | None:
        """kg CO2e per 1M output tokens (None without ``region``)."""
        g = None if self.economics is None else self.economics.carbon_per_unit
        return None if g is None else g * 1e6

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.economics is not None:
            d["economics"] = self.economics.to_dict()
        return d




@A.checked(model=A.anything, hardware=A.anything, prompt_len=R.TOKENS, output_len=R.TOKENS,
           ttft_slo=A.real(0, 1e6, unit="s"), tpot_slo=A.real(0, 1e6, unit="s"),
           precision=PRECISION_ARG, kv_precision=R.OPT_DTYPE, weight_precision=R.OPT_DTYPE,
           tp=R.DEGREE, preset=A.text, engine=R.ENGINE, kv_window=R.KV_WINDOW,
           price_per_hour=A.anything, region=A.anything, pue=A.anything)
def serving_capacity(model: Any, hardware: Any, *, prompt_len: int, output_len: int,
                     ttft_slo: float, tpot_slo: float, precision: str = "bf16",
                     kv_precision: str | None = None, weight_precision: str | None = None,
                     tp: int = 1, preset: str = "default", engine: str = "trtllm",
                     kv_window: str = "ring", price_per_hour: float | None = None,
                     region: str | None = None, pue: float | None = None) -> Capacity:
    """Highest Poisson request rate whose mean TTFT and TPOT meet the SLOs (``QUEUE_MODEL``).
    ``kv_window``: KV layout of sliding-window layers, as in ``serve``. ``price_per_hour``,
    ``region``, ``pue``: as in ``serve``; the result's ``economics`` prices the output tokens
    of the capacity rate on the tp devices."""
    from ...analysis.economics import check_economics

    price_per_hour, region, pue = check_economics(price_per_hour, region, pue)
    for nm, v in (("ttft_slo", ttft_slo), ("tpot_slo", tpot_slo)):
        if not (isinstance(v, int | float) and v > 0):
            raise SpecError(f"{nm} must be > 0 seconds, got {v!r}")
    one = serve(model, hardware, batch=1, prompt_len=prompt_len, output_len=output_len,
                precision=precision, kv_precision=kv_precision, weight_precision=weight_precision,
                tp=tp, preset=preset, engine=engine, kv_window=kv_window)
    if not one.feasible and math.isnan(one.ttft):
        raise SpecError(f"cannot serve at all: {one.reason}")
    s = one.ttft  # prefill of one prompt + request overhead
    n = output_len
    cmax = max(one.max_batch, 0)
    step_cache: dict[int, float] = {}

    def step(C: float) -> float:
        c = max(1, min(math.ceil(C), max(cmax, 1)))
        if c not in step_cache:
            r = serve(model, hardware, batch=c, prompt_len=prompt_len, output_len=output_len,
                      precision=precision, kv_precision=kv_precision,
                      weight_precision=weight_precision, tp=tp, preset=preset, engine=engine,
                      kv_window=kv_window)
            step_cache[c] = r.tpot
        return step_cache[c]

    def state(lam: float) -> tuple[float, float, float, bool]:
        rho = lam * s
        if rho >= 1:
            return math.inf, math.inf, math.inf, False
        tpot = step(1) / (1 - rho)
        C = 1.0
        for _ in range(50):
            ttft = s + rho * s / (2 * (1 - rho)) + step(C) / 2
            C_new = lam * (ttft + (n - 1) * tpot)
            tpot = step(C_new) / (1 - rho)
            if abs(C_new - C) < 1e-3 * max(C, 1):
                C = C_new
                break
            C = C_new
        ttft = s + rho * s / (2 * (1 - rho)) + step(C) / 2
        return ttft, tpot, C, C <= max(cmax, 0)

    def ok(lam: float) -> tuple[bool, str]:
        ttft, tpot, _C, fits = state(lam)
        if not fits:
            return False, "memory"
        if ttft > ttft_slo:
            return False, "ttft"
        if tpot > tpot_slo:
            return False, "tpot"
        return True, "none"

    def econ(C: float, tokens_per_s: float) -> Any:
        """The tp devices at the binding utilisation of a decode batch of C sequences."""
        from ...analysis.economics import _hw_of, economics, for_serve

        c = max(1, min(math.ceil(C), max(cmax, 1)))
        r = serve(model, hardware, batch=c, prompt_len=prompt_len, output_len=output_len,
                  precision=precision, kv_precision=kv_precision,
                  weight_precision=weight_precision, tp=tp, preset=preset, engine=engine,
                  kv_window=kv_window)
        return economics(_hw_of(r, "hardware"), devices=r.devices, units_per_s=tokens_per_s,
                         utilisation=for_serve(r).utilisation, unit="output token",
                         preset=preset, price_per_hour=price_per_hour, region=region, pue=pue)

    good, why0 = ok(1e-9)
    if not good:
        return Capacity(rate_per_s=0.0, concurrency=0.0, ttft=one.ttft, tpot=one.tpot,
                        tokens_per_s=0.0, limited_by=why0, economics=econ(1.0, 0.0))
    lo, hi = 0.0, 1.0 / s
    why = "none"
    for _ in range(60):
        mid = (lo + hi) / 2
        g, w = ok(mid)
        if g:
            lo = mid
        else:
            hi, why = mid, w
    ttft, tpot, C, _ = state(lo)
    return Capacity(rate_per_s=lo, concurrency=C, ttft=ttft, tpot=tpot,
                    tokens_per_s=lo * output_len, limited_by=why,
                    economics=econ(C, lo * output_len))
