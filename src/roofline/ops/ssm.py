"""The selective scan of a Mamba block (a selective state-space model, S6).

Notation (Gu & Dao 2023): B batch, L sequence length, D channels (the block's d_inner), N
state size per channel.
"""

from __future__ import annotations

from .cost import OpCost
from .formulas import _ints
from .registry import register

__all__ = ["selective_scan", "SCAN_FLOPS_PER_STATE", "SCAN_FLOPS_PER_CHANNEL"]

#: FLOPs per (b, l, d, n) state element: Δ·A (mul), exp (discretised Ā), (Δ·x)·B (mul),
#: Ā·h (mul), + B̄x (add), C·h (mul), accumulate into y (add)
SCAN_FLOPS_PER_STATE = 7
#: FLOPs per (b, l, d) channel element: Δ·x (mul), the skip D·x (mul) and its add
SCAN_FLOPS_PER_CHANNEL = 3


@register("selective_scan", "elementwise")
def selective_scan(*, batch: int, seq_len: int, channels: int, state: int, gated: bool = True,
                   state_from_cache: bool = False, act_bytes: float, weight_bytes: float,
                   state_bytes: float = 4.0) -> OpCost:
    """Mamba's selective scan ``h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_t,  y_t = C_t h_t + D x_t``
    over x, Δ ``[B, L, D]``, B, C ``[B, L, N]`` with A ``[D, N]`` and D ``[D]`` learned, gated
    by y · silu(z) when ``gated``.

    FLOPs: B·L·D·(7·N + 3) (``SCAN_FLOPS_PER_STATE`` per state element,
    ``SCAN_FLOPS_PER_CHANNEL`` per channel element; + 5 per channel element for the silu(z)
    gate: silu 4, multiply 1). A transcendental counts 1 FLOP, as in ``ELEMENTWISE_FLOPS``.
    Bytes (the hardware-aware kernel of Gu & Dao's sec. 3.3: the state lives in SRAM, never in
    main memory): x, Δ (and z) ``[B, L, D]`` and B, C ``[B, L, N]`` read once, y ``[B, L, D]``
    written once; A and D read once. ``state_from_cache`` (a decode step carrying the state
    from the previous token): the state ``[B, D, N]`` is read and written once, at
    ``state_bytes`` each (fp32 in the reference kernel), counted as KV-like state traffic.
    Assumptions: the causal conv1d and the softplus of Δ are separate ops; no recomputation.
    A sequential recurrence in L: the FLOPs are vector work, not a GEMM.

    References: Gu & Dao 2023, "Mamba: Linear-Time Sequence Modeling with Selective State
    Spaces" (arXiv:2312.00752), Algorithm 2 and sec. 3.3 (the kernel fuses discretisation, scan
    and the C projection in SRAM).
    """
    _ints(batch=batch, seq_len=seq_len, channels=channels, state=state)
    Bt, L, D, N = batch, seq_len, channels, state
    per_channel = SCAN_FLOPS_PER_STATE * N + SCAN_FLOPS_PER_CHANNEL + (5 if gated else 0)
    n_in = 3 if gated else 2  # x, Δ (, z)
    state_elems = Bt * D * N if state_from_cache else 0
    return OpCost(
        flops=Bt * L * D * per_channel,
        act_bytes_read=(n_in * Bt * L * D + 2 * Bt * L * N) * act_bytes,
        act_bytes_written=Bt * L * D * act_bytes,
        weight_bytes_read=(D * N + D) * weight_bytes,
        kv_bytes_read=state_elems * state_bytes,
        kv_bytes_written=state_elems * state_bytes,
    )
