"""``ServeResult``: one serving scenario's latencies, throughput, memory and shares; the queueing
model's statement and the speculative-decoding token expectation."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field, fields
from typing import Any

from ..._display import Display
from ..._frozen import fast_init
from ..._text import summary_str
from ...engine.result import Result, fill_phrase
from ...errors import SpecError
from ...uncertainty import fmt_band
from ...units import fmt_bytes, fmt_time

QUEUE_MODEL = ("Poisson arrivals; the prefill queue is M/D/1 (deterministic service s = TTFT of "
               "one prompt at batch 1 + request overhead): wait = ρ·s / (2(1−ρ)), ρ = λ·s, plus "
               "half a decode step (the step in flight finishes first); decode concurrency by "
               "Little's law C = λ·(TTFT + (n−1)·TPOT), and decode steps stretch by 1/(1−ρ) "
               "because prefills take the device for a fraction ρ of the time")


def expected_tokens_per_step(acceptance: float, draft_len: int) -> float:
    """Speculative decoding: expected tokens per target step, (1 − α^(k+1)) / (1 − α)
    (Leviathan et al. 2023, eq. 1), with acceptance rate α and k drafted tokens."""
    if not 0 <= acceptance <= 1:
        raise SpecError(f"acceptance must be in [0, 1], got {acceptance!r}")
    if isinstance(draft_len, bool) or not isinstance(draft_len, int) or draft_len < 1:
        raise SpecError(f"draft_len must be a positive integer, got {draft_len!r}")
    if acceptance == 1:
        return float(draft_len + 1)
    return (1 - acceptance ** (draft_len + 1)) / (1 - acceptance)


# ~40 fields: the frozen init's stores were ~4 µs; a pickle stores the phases built
@fast_init(build_on_pickle=("_prefill", "_decode"))  # (roofline/_frozen.py)
@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False)
class ServeResult(Display):
    """One serving scenario: latencies, throughput, memory and why. SI units."""

    model: str
    hardware: str
    batch: int  #: concurrent requests (static batch / continuous-batching concurrency)
    prompt_len: int
    output_len: int
    precision: str
    preset: str
    engine: str
    #: KV layout of sliding-window layers: "ring" (hold at most the window), "full" (every
    #: token); "" when the model has no sliding-window layer (the layout changes nothing)
    kv_window: str = ""
    tp: int = 1
    pp: int = 1
    #: expert-parallel groups (MoE): attention data-parallel over ep groups of tp × pp devices,
    #: each serving ⌈batch/ep⌉ sequences, the routed experts split among them
    ep: int = 1
    devices: int = 1
    ttft: float  #: s, time to first token (prefill of the batch, + KV transfer if disaggregated)
    tpot: float  #: s, mean time per output token after the first (inter-token latency)
    e2e_latency: float  #: s, ttft + (output_len − 1)·tpot
    tokens_per_s: float  #: output tokens/s of the deployment
    tokens_per_s_per_device: float
    steady_tpot: float = math.nan  #: s, continuous batching at concurrency=batch
    steady_tokens_per_s: float = math.nan  #: output tokens/s in that steady state
    mbu: float = math.nan  #: decode bytes / (decode time × bandwidth × devices)
    mfu: float = math.nan  #: all FLOPs / (e2e × peak × devices)
    kv_cache_bytes: float = math.nan  #: whole KV cache at the end of the generation (all devices)
    memory_breakdown: dict[str, float] = field(default_factory=dict)  #: per device, bytes
    memory_capacity: float = math.nan  #: per device, bytes
    max_batch: int = 0  #: largest batch whose memory fits
    feasible: bool = True
    reason: str = ""
    #: s of the end-to-end latency per cause (roofline, efficiency, launch, step_overhead,
    #: tp_comm, pp_comm, kv_transfer, and client with ``client=True``; they sum to
    #: ``e2e_latency``)
    phase_seconds: dict[str, float] = field(default_factory=dict)
    #: s of the end-to-end latency that is the fixed per-kernel fill of tiled matmuls (part of
    #: the kernel time; ``prefill.t_fill`` / ``decode.t_fill`` per pass). 0: serving prices the
    #: smooth matmul model its engine factors were fitted on (no whole waves of tiles, no fill)
    t_fill: float = 0.0
    #: the same causes as fractions of the end-to-end latency (they sum to 1; NaN when e2e is
    #: 0 or unknown); derived from ``phase_seconds``, never passed
    shares: dict[str, float] = field(init=False, default_factory=dict)
    notes: tuple[str, ...] = ()
    #: s a client adds to each request end to end, included in ttft / tpot / e2e_latency
    #: (serve(client=True), engine/client.py); 0: device side only
    client_time: float = 0.0
    price_per_hour: float | None = None  #: USD per device-hour given by the user (None: public)
    region: str | None = None  #: grid region for carbon (data/economics/grids.toml)
    pue: float | None = None  #: facility / IT energy given by the user (None: sourced default)
    _prefill: Any = field(default=None, repr=False)
    _decode: Any = field(default=None, repr=False)
    _hw: Any = field(default=None, repr=False)  #: () -> the (prefill) Hardware
    _call: Any = field(default=None, repr=False, compare=False)  #: the call (levers re-run it)

    def __post_init__(self) -> None:
        tot = sum(self.phase_seconds.values())
        object.__setattr__(self, "shares", {k: (v / tot if tot > 0 else math.nan)
                                            for k, v in self.phase_seconds.items()})

    def levers(self, **kw: Any) -> Any:
        """Every design lever for the call that made this result, ranked (``rl.levers``)."""
        from ...analysis.levers import levers

        return levers(result=self, **kw)

    @property
    def uncertainty(self) -> dict[str, Any]:
        """``{"ttft": Band, "tpot": Band, "e2e_latency": Band, "tokens_per_s": Band}``: 80 %
        intervals from the serving validation residuals (docs/validation/uncertainty.md);
        ``"steady_tpot"`` / ``"steady_tokens_per_s"`` (continuous batching): *derived*, not
        judged on any case: the TPOT band on its decode step and the TTFT band on the prefill
        stall it absorbs, both at their ends together (``uncertainty.sum_band``);
        ``engine="llamacpp"`` / ``"vllm-rocm"``: their own decode residuals, and no TTFT band
        (their prompt processing is not validated); empty for a preset other than default, a
        result that cannot run, or a client-side one (``client=True``: those residuals are
        device-side)."""
        from ...uncertainty import bands

        if self.preset != "default" or not self.feasible or self.client_time > 0:
            return {}
        llama, rocm = self.engine == "llamacpp", self.engine == "vllm-rocm"
        d = "serving-llamacpp" if llama else "serving-vllm-rocm" if rocm else "serving-decode"
        want = {"ttft": (self.ttft, "serving-ttft", False), "tpot": (self.tpot, d, False),
                "e2e_latency": (self.e2e_latency, d, False),
                "tokens_per_s": (self.tokens_per_s, d, True),
                "tokens_per_s_per_device": (self.tokens_per_s_per_device, d, True)}
        if llama or rocm:  # their prompt processing / TTFT is not validated
            del want["ttft"]
        out = bands(want)
        if not (llama or rocm):  # continuous batching: derived, no case judges it
            from ...uncertainty import sum_band

            parts = [(max(self.tpot, 0.0), d), (self.steady_tpot - max(self.tpot, 0.0),
                                                "serving-ttft")]
            for k, rate in (("steady_tpot", None), ("steady_tokens_per_s", float(self.batch))):
                b = sum_band(parts, rate_of=rate) if math.isfinite(self.steady_tpot) else None
                if b is not None:
                    out[k] = b
        return out

    @property
    def prefill(self) -> Result:
        """The prefill pass as a roofline Result (per-op table ``.ops``), one device."""
        r = self._prefill
        return r() if callable(r) else r

    @property
    def decode(self) -> Result:
        """One decode step at the mean context of the generation, one device."""
        r = self._decode
        return r() if callable(r) else r

    # -- money, energy, carbon (roofline.analysis.economics) -----------------------------------
    @property
    def economics(self) -> Any:
        """Cost, facility energy, carbon and water per output token with their sources and the
        reasons a figure is missing (``analysis.economics.Economics``)."""
        from ...analysis.economics import for_serve

        return for_serve(self)

    @property
    def cost_per_million_output_tokens(self) -> float | None:
        """USD per 1M output tokens: devices × $/device-hour / output tokens per hour × 1e6
        (None without a price: see ``economics.price_source``)."""
        c = self.economics.cost_per_unit
        return None if c is None else c * 1e6

    @property
    def energy_per_output_token(self) -> float:
        """J of facility energy (device power model × PUE) per output token."""
        return self.economics.energy_per_unit

    @property
    def carbon_per_million_output_tokens(self) -> float | None:
        """kg CO2e per 1M output tokens (None without ``region``)."""
        g = self.economics.carbon_per_unit
        return None if g is None else g * 1e6

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: copy.deepcopy(getattr(self, f.name)) for f in fields(self)
             if not f.name.startswith("_")}  # asdict would deep-copy the call's model too
        for k, v in d.items():
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        d["notes"] = list(self.notes)
        d["uncertainty"] = {k: b.to_dict() for k, b in self.uncertainty.items()}
        d["shares"] = {k: (None if math.isnan(v) else v) for k, v in self.shares.items()}
        return d

    @summary_str
    def __str__(self) -> str:
        head = (f"{self.model} on {self.devices}× {self.hardware} (tp {self.tp}, pp {self.pp}"
                f"{f', ep {self.ep}' if self.ep > 1 else ''}) — "
                f"batch {self.batch}, prompt {self.prompt_len}, output {self.output_len}, "
                f"{self.precision}, preset {self.preset}, engine {self.engine}")
        if not self.feasible and math.isnan(self.ttft):
            return f"{head}\n  cannot run — {self.reason}"
        u = self.uncertainty
        lines = [
            head,
            f"  TTFT            {fmt_time(self.ttft)}" + fmt_band(u.get("ttft"), fmt_time),
            f"  TPOT            {fmt_time(self.tpot)} " + (
                f"({1 / self.tpot:,.1f} tokens/s per request)" if self.tpot > 0 else
                "(output_len 1: the first token comes from prefill, no decode step)")
            + fmt_band(u.get("tpot"), fmt_time),
            f"  end to end      {fmt_time(self.e2e_latency)}"
            + fmt_band(u.get("e2e_latency"), fmt_time)
            + (f" (client=True: + {fmt_time(self.client_time)} per request as a client times "
               "it, in TTFT, TPOT and e2e)" if self.client_time > 0 else ""),
            (f"  throughput      {self.tokens_per_s:,.0f} output tokens/s "
             f"({self.tokens_per_s_per_device:,.0f} per device)"
             + fmt_band(u.get("tokens_per_s"), lambda v: f"{v:,.0f}")),
            (f"  continuous      TPOT {fmt_time(self.steady_tpot)}, "
             f"{self.steady_tokens_per_s:,.0f} tokens/s at concurrency {self.batch}"
             + fmt_band(u.get("steady_tpot"), fmt_time)),
            (f"  utilisation     MBU {self.mbu:.1%} (decode), MFU {self.mfu:.1%}"
             if math.isfinite(self.mbu) else
             f"  utilisation     MBU n/a (no decode step), MFU {self.mfu:.1%}"),
            f"  KV cache        {fmt_bytes(self.kv_cache_bytes)}" + (
                f" (kv_window {self.kv_window!r}: sliding-window layers hold "
                + ("their window)" if self.kv_window == "ring" else "every token)")
                if self.kv_window else ""),
            "  memory/device   " + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in
                                              self.memory_breakdown.items())
            + f" of {fmt_bytes(self.memory_capacity)}; max batch {self.max_batch}"
            + ("" if self.feasible else f" — DOES NOT FIT: {self.reason}"),
        ]
        if self.shares:
            lines.append("  where e2e goes  " + ", ".join(
                f"{k} {v:.1%}" for k, v in self.shares.items() if v > 0))
        if self.t_fill > 0:
            lines.append("    " + fill_phrase(self.t_fill, "the end-to-end latency"))
        if self.price_per_hour is not None or self.region is not None or self.pue is not None:
            lines += self.economics.lines(per=1e6, per_label="1M output tokens")
        return "\n".join(lines)
