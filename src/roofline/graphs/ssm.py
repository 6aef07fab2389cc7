"""Mamba language models (selective state-space models), built per scenario.

A Mamba block (Gu & Dao 2023, Fig. 3; ``mamba_ssm/modules/mamba_simple.py``), D = d_model,
E·D = d_inner, N = d_state, R = dt_rank, k = d_conv:
RMSNorm → in_proj [D, 2·E·D] (x and the gate z) → causal depthwise conv1d (kernel k, bias) →
SiLU → x_proj [E·D, R + 2N] (Δ, B, C) → dt_proj [R, E·D] (+ bias) → softplus → the selective
scan (with the D skip, gated by silu(z)) → out_proj [E·D, D] → residual add. Embeddings are
tied to the LM head (unless ``tie_embeddings`` is false). A decode step carries the recurrent
state (fp32 [E·D, N] per layer) and the conv window ([E·D, k − 1] per layer) instead of a KV
cache: constant in the context.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import SpecError
from ..specs.dtypes import Precision
from .graph import Graph, GraphBuilder

__all__ = ["MambaConfig", "mamba_graph"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MambaConfig:
    """The shape of a Mamba LM (the fields of its config.json)."""

    d_model: int  #: D
    n_layer: int  #: L
    vocab_size: int  #: V before padding
    d_state: int = 16  #: N
    d_conv: int = 4  #: k
    expand: int = 2  #: E
    pad_vocab_size_multiple: int = 8
    time_step_rank: int = 0  #: R given (HF's time_step_rank); 0: mamba_simple's ceil(D / 16)
    bias: bool = False  #: biases on in_proj and out_proj (HF's use_bias)
    conv_bias: bool = True  #: a bias on the depthwise conv (HF's use_conv_bias)
    tie_embeddings: bool = True  #: the LM head shares the embedding table

    def __post_init__(self) -> None:
        for f in ("d_model", "n_layer", "vocab_size", "d_state", "d_conv", "expand",
                  "pad_vocab_size_multiple", "time_step_rank"):
            v, lo = getattr(self, f), 0 if f == "time_step_rank" else 1
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                what = "a non-negative" if lo == 0 else "a positive"
                raise SpecError(f"mamba: {f} must be {what} integer, got {v!r}")
        for f in ("bias", "conv_bias", "tie_embeddings"):
            if not isinstance(getattr(self, f), bool):
                raise SpecError(f"mamba: {f} must be true or false, got {getattr(self, f)!r}")

    @property
    def d_inner(self) -> int:
        return self.expand * self.d_model

    @property
    def dt_rank(self) -> int:
        """``time_step_rank`` when given, else mamba_simple's default: ceil(d_model / 16)."""
        return self.time_step_rank or math.ceil(self.d_model / 16)

    @property
    def vocab(self) -> int:
        """The vocabulary padded to a multiple of ``pad_vocab_size_multiple`` (as the model)."""
        m = self.pad_vocab_size_multiple
        return -(-self.vocab_size // m) * m


def mamba_graph(cfg: MambaConfig, precision: Precision, *, phase: str = "forward",
                seq_len: int = 2048) -> Graph:
    """The op graph of one scenario: ``forward``/``prefill`` over ``seq_len`` tokens, or one
    ``decode`` step with the recurrent state read and written."""
    if phase not in ("forward", "prefill", "decode"):
        raise SpecError(f"mamba: phase {phase!r}; allowed: forward, prefill, decode")
    D, Di, N, R, k, V = (cfg.d_model, cfg.d_inner, cfg.d_state, cfg.dt_rank, cfg.d_conv,
                         cfg.vocab)
    decode = phase == "decode"
    T = 1 if decode else seq_len
    b = GraphBuilder(f"mamba-{D}x{cfg.n_layer}", phase, precision)
    b.meta.update(seq_len=T, kv_len=0)
    b.add("embedding", "embedding", params=V * D, tokens=T, dim=D)
    for i in range(cfg.n_layer):
        p = f"layers.{i}"
        b.add("norm", f"{p}.norm", params=D, elements=T * D, features=D, variant="rmsnorm")
        bias = cfg.bias
        b.add("linear", f"{p}.mixer.in_proj", params=D * 2 * Di + bias * 2 * Di, tokens=T,
              d_in=D, d_out=2 * Di, bias=bias)
        # causal depthwise conv over time: pad k-1 before (prefill), or the cached k-1 inputs
        # plus the new one (decode)
        b.add("conv", f"{p}.mixer.conv1d", params=Di * k + cfg.conv_bias * Di, c_in=Di,
              spatial=(k if decode else T,), c_out=Di, kernel=k, groups=Di, bias=cfg.conv_bias,
              padding=0 if decode else k - 1, padding_end=0)
        b.add("elementwise", f"{p}.mixer.act", elements=T * Di, op="silu")
        b.add("linear", f"{p}.mixer.x_proj", params=Di * (R + 2 * N), tokens=T, d_in=Di,
              d_out=R + 2 * N)
        b.add("linear", f"{p}.mixer.dt_proj", params=R * Di + Di, tokens=T, d_in=R, d_out=Di,
              bias=True)
        b.add("elementwise", f"{p}.mixer.softplus", elements=T * Di, op="softplus")
        b.add("selective_scan", f"{p}.mixer.scan", params=Di * N + Di, seq_len=T,
              channels=Di, state=N, gated=True, state_from_cache=decode)
        b.add("linear", f"{p}.mixer.out_proj", params=Di * D + bias * D, tokens=T, d_in=Di,
              d_out=D, bias=bias)
        b.add("elementwise", f"{p}.residual", elements=T * D, op="add")
    b.add("norm", "norm_f", params=D, elements=T * D, features=D, variant="rmsnorm")
    # tied: the embedding's table, counted there
    b.add("linear", "lm_head", params=0 if cfg.tie_embeddings else V * D, tokens=1, d_in=D,
          d_out=V)
    if decode:  # the recurrent state (fp32) and the conv window, per layer
        b.state_bytes_per_sample = float(cfg.n_layer * (Di * N * 4.0
                                                        + Di * (k - 1) * precision.act_bytes))
    return b.build(tokens_per_sample=T)
