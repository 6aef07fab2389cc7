"""``TrainingResult``: one training configuration priced on a cluster."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..._display import Display
from ..._frozen import fast_init
from ..._text import summary_str
from ...engine.result import fill_phrase
from ...uncertainty import fmt_band
from ...units import fmt_bytes, fmt_time


@fast_init()  # ~40 fields: the frozen init's stores were ~4 µs (roofline/_frozen.py)
@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class TrainingResult(Display):
    """One training configuration priced on a cluster. Times in s, bytes in B, energy in J."""

    model: str
    cluster: str
    device: str
    devices: int
    precision: str
    preset: str
    global_batch: int  #: sequences per optimizer step
    seq_len: int
    micro_batch: int
    microbatches: int  #: m, micro-batches per data-parallel replica per step
    tp: int
    pp: int
    dp: int
    ep: int
    etp: int = 0  #: expert tensor-parallel size (MoE parallel folding; = tp unless set)
    interleave: int  #: v, model chunks per device (1: plain 1F1B)
    recompute: str
    zero: int
    sequence_parallel: bool
    step_time: float  #: seconds per optimizer step
    tokens_per_s: float
    mfu: float  #: model FLOPs / (step_time × devices × peak)
    hfu: float  #: hardware FLOPs (with recompute) / (step_time × devices × peak)
    model_flops_per_step: float
    hardware_flops_per_step: float
    breakdown: dict[str, float]  #: seconds per step: forward, backward, recompute, optimizer,
    #: tp_comm, dp_comm, pp_comm, ep_comm (exposed parts), bubble; they sum to step_time
    #: s per step of fixed per-kernel fill of tiled matmuls (part of forward and backward). 0:
    #: training prices the smooth matmul model its factors were fitted on (no whole waves of
    #: tiles, no fill)
    t_fill: float = 0.0
    memory_per_device: dict[str, float]  #: bytes: weights, gradients, optimizer, activations,
    #: workspace, total (on the device); weight streaming adds weight_store (held off the chip)
    memory_capacity: float  #: bytes per device
    feasible: bool
    reason: str = ""
    #: cluster IT power while training: devices × (idle + (TDP − idle) × MFU) + node overhead, W
    #: (analysis/power.py); energy_to_train multiplies by the PUE
    power_w: float = math.nan
    other_power_w: float = 0.0  #: the node overhead part of power_w (CPUs, NICs, fans), W
    price_per_hour: float | None = None  #: USD per device-hour given by the user (None: public)
    region: str | None = None  #: grid region for carbon (data/economics/grids.toml)
    pue: float | None = None  #: facility / IT energy given by the user (None: sourced default)
    optimizer: str = "adam"  #: the optimizer step priced (ops.training_formulas.OPTIMIZERS)
    #: layers per pipeline stage, first to last (() where the stages are not modelled)
    pp_stages: tuple[int, ...] = ()
    lora_rank: int | None = None  #: LoRA adapter rank (None: every weight trained)
    #: the linears that carry the LoRA adapters (train's ``lora_targets``): "all" (every linear
    #: of the blocks) or "qkv" (the fused query / key / value projection only)
    lora_targets: str = "all"
    cp: int = 1  #: context-parallel degree (each rank holds seq_len / cp tokens)
    #: whether the steady-state pipeline sends ran behind compute (train's ``pp_overlap``
    #: resolved: Megatron's ``overlap_p2p_comm``; its default is on with interleaving, off
    #: without; always False for pp = 1 and for generic graphs)
    pp_overlap: bool = False
    trainable_params: float = math.nan  #: parameters the step trains (model-wide)
    #: the activation layout the convolutions were priced in (train's ``conv_layout``): "nhwc"
    #: (channels last, no copies) or "nchw" (each tensor-core convolution's input and output
    #: transposed); None for a model without convolutions
    conv_layout: str | None = None
    #: True when ``conv_layout`` is the default "nhwc", not asked for, where the layout changes
    #: the price (tensor-core convolutions on an NVIDIA device: fp32 convolutions run as they
    #: are, and other devices price nhwc only): the result says it was assumed (PyTorch's own
    #: default memory format is NCHW; channels_last must be asked for)
    conv_layout_assumed: bool = False
    #: what the numbers leave out (ops without a formula: "N ops unpriced (x % of bytes)")
    warnings: tuple[str, ...] = ()
    _hw: Any = field(default=None, repr=False, compare=False)  #: the device Hardware
    _call: Any = field(default=None, repr=False, compare=False)  #: the call (levers re-run it)

    def levers(self, **kw: Any) -> Any:
        """Every design lever for the call that made this result, ranked (``rl.levers``)."""
        from ...analysis.levers import levers

        return levers(result=self, **kw)

    @property
    def uncertainty(self) -> dict[str, Any]:
        """``{"step_time": Band, "tokens_per_s": Band}``: 80 % intervals from the training
        validation residuals (docs/validation/uncertainty.md; on a TPU the MaxText runs');
        empty for a preset other than default or a configuration that does not run."""
        from ...uncertainty import bands

        if self.preset != "default" or not self.feasible:
            return {}
        cls = "tpu-training" if getattr(self._hw, "kind", "") == "tpu" else "gpu-training"
        return bands({"step_time": (self.step_time, cls, False),
                      "tokens_per_s": (self.tokens_per_s, cls, True)})

    @property
    def samples_per_s(self) -> float:
        return self.global_batch / self.step_time

    @property
    def energy_per_step(self) -> float:
        return self.power_w * self.step_time

    def time_to_train(self, tokens: float) -> float:
        """Seconds to train on ``tokens`` tokens."""
        return tokens / self.tokens_per_s

    def gpu_hours(self, tokens: float) -> float:
        """Device-hours to train on ``tokens`` tokens."""
        return self.time_to_train(tokens) * self.devices / 3600.0

    # -- money, energy, carbon, failures (roofline.analysis) -----------------------------------
    @property
    def economics(self) -> Any:
        """Cost, facility energy, carbon and water per training token, with sources and the
        reasons a figure is missing (``analysis.economics.Economics``)."""
        from ...analysis.economics import for_train

        return for_train(self)

    def _run(self, tokens: float) -> dict[str, float | None]:
        from ...analysis.reliability import _pos

        return self.economics.for_seconds(self.time_to_train(_pos(tokens, "tokens")))

    def energy_to_train(self, tokens: float) -> float:
        """J of facility energy to train on ``tokens`` tokens: power_w × time × PUE (failure-
        free time; ``reliability(tokens).goodput`` gives the wall-clock with failures)."""
        return float(self._run(tokens)["energy_j"])  # type: ignore[arg-type]

    def cost_to_train(self, tokens: float) -> float | None:
        """USD to train on ``tokens`` tokens: device-hours × $/device-hour (None without a
        price: see ``economics.price_source``)."""
        return self._run(tokens)["cost_usd"]

    def carbon_to_train(self, tokens: float) -> float | None:
        """kg CO2e to train on ``tokens`` tokens (None without ``region``)."""
        return self._run(tokens)["carbon_kg"]

    def water_to_train(self, tokens: float) -> float:
        """Litres of site water to train on ``tokens`` tokens (WUE × IT energy)."""
        return float(self._run(tokens)["water_l"])  # type: ignore[arg-type]

    def uncertainty_to_train(self, tokens: float) -> dict[str, Any]:
        """Bands of the run's totals on ``tokens`` tokens (failure-free): ``time_to_train``
        (s) and ``gpu_hours`` = tokens / the ``tokens_per_s`` band; ``energy_to_train`` (J),
        ``cost_to_train`` (USD), ``carbon_to_train`` (kg), ``water_to_train`` (L) = tokens × the
        per-token band of ``economics.uncertainty`` (price, PUE, grid held as given). Empty
        without a rate band; a figure without a value (no price, no region) has none."""
        from ...analysis.reliability import _pos
        from ...uncertainty import Band

        n = _pos(tokens, "tokens")
        rb = self.uncertainty.get("tokens_per_s")
        if rb is None:
            return {}

        def band(lo: float, hi: float) -> Band:
            return Band(lo, hi, rb.level, rb.cls, rb.n)

        out = {"time_to_train": band(n / rb.high, n / rb.low),
               "gpu_hours": band(n / rb.high * self.devices / 3600,
                                 n / rb.low * self.devices / 3600)}
        names = {"energy_per_unit": "energy_to_train", "cost_per_unit": "cost_to_train",
                 "carbon_per_unit": "carbon_to_train", "water_per_unit": "water_to_train"}
        for k, b in self.economics.uncertainty.items():
            out[names[k]] = band(b.low * n, b.high * n)
        return out

    def reliability(self, tokens: float, **kw: Any) -> Any:
        """Failures of the run: MTBF, checkpoint size and write time, interval, goodput and
        wall-clock with failures (``analysis.reliability``; keywords: storage_bytes_per_s,
        restart_s, failure_rate, method)."""
        from ...analysis.reliability import train_reliability

        return train_reliability(self, tokens, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = {f: getattr(self, f) for f in self.__dataclass_fields__ if not f.startswith("_")}
        d["breakdown"] = dict(self.breakdown)
        d["memory_per_device"] = dict(self.memory_per_device)
        d["samples_per_s"] = self.samples_per_s
        d["energy_per_step"] = self.energy_per_step
        d["uncertainty"] = {k: b.to_dict() for k, b in self.uncertainty.items()}
        return d

    @summary_str
    def __str__(self) -> str:
        mem = self.memory_per_device
        b = fmt_bytes
        sp = "on" if self.sequence_parallel else "off"
        lines = [
            f"{self.model} on {self.cluster} ({self.devices} × {self.device}), {self.precision}, "
            f"global batch {self.global_batch}" + (f" × {self.seq_len} tokens"
                                                    if self.seq_len > 1 else " samples"),
            f"  split: tp={self.tp} pp={self.pp} dp={self.dp} ep={self.ep} "
            + (f"etp={self.etp} " if self.etp and self.etp != self.tp else "")
            + (f"cp={self.cp} " if self.cp > 1 else "") +
            f"micro-batch={self.micro_batch} (m={self.microbatches}) interleave={self.interleave}"
            f" recompute={self.recompute} zero={self.zero} sp={sp}"
            + (f" stages={list(self.pp_stages)}" if len(set(self.pp_stages)) > 1 else "")
            + (f" pp_overlap={'on' if self.pp_overlap else 'off'}" if self.pp > 1 else "")
            + (f" layout={self.conv_layout}" if self.conv_layout else "")
            + (" (assumed: channels last; PyTorch's default is nchw)"
               if self.conv_layout_assumed else "")
            + (f" LoRA r={self.lora_rank} on {self.lora_targets} "
               f"({self.trainable_params / 1e6:,.1f} M trained)" if self.lora_rank else ""),
            f"  memory/device: {b(mem['total'])} of {b(self.memory_capacity)}",
            f"    weights {b(mem['weights'])}, grads {b(mem['gradients'])}, "
            f"optimizer {b(mem['optimizer'])}, activations {b(mem['activations'])}, "
            f"workspace {b(mem['workspace'])}",
        ]
        if "weight_store" in mem:  # weight streaming: the training state off the chip
            lines.append(f"    weight store: {b(mem['weight_store'])} (weights, gradients and "
                         "optimizer states)")
        if not self.feasible:
            lines.append(f"  does not run: {self.reason}")
            return "\n".join(lines + [f"  WARNING: {w}" for w in self.warnings])
        tb = self.uncertainty.get("tokens_per_s")
        rate = (f"{self.tokens_per_s:,.0f} tokens/s" + fmt_band(tb, lambda v: f"{v:,.0f}")
                if self.seq_len > 1 else f"{self.samples_per_s:,.1f} samples/s"
                + fmt_band(tb, lambda v: f"{v / self.seq_len:,.1f}"))  # samples = tokens / T
        lines.append(f"  step time {fmt_time(self.step_time)}"
                     f"{fmt_band(self.uncertainty.get('step_time'), fmt_time)}, {rate}, "
                     f"MFU {self.mfu:.1%}, HFU {self.hfu:.1%}")
        parts = ", ".join(f"{k} {fmt_time(v)}" for k, v in self.breakdown.items() if v > 0)
        lines.append(f"  breakdown: {parts}")
        if self.t_fill > 0:
            lines.append("    " + fill_phrase(self.t_fill, "forward and backward"))
        if self.price_per_hour is not None or self.region is not None or self.pue is not None:
            lines += self.economics.lines(per=1e9, per_label="1B tokens")
        return "\n".join(lines + [f"  WARNING: {w}" for w in self.warnings])
