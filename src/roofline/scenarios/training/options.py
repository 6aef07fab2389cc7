"""Checks of ``train``'s options against the model: LoRA and MoE options for the families that
have them, the op-level recompute policy's model families, and partial full recompute
(``recompute_layers``, Megatron-LM's block method)."""

from __future__ import annotations

from typing import Any

from ..._args import ArgumentError
from ..._text import a_family
from ...errors import SpecError
from .context import _Ctx, check_dispatcher_value

#: the activation layouts a generic graph's convolutions can run in (``train(conv_layout=)``,
#: ``generic._nchw_transposes``)
CONV_LAYOUTS = ("nhwc", "nchw")


def check_model_options(m: Any, lora_rank: int | None, lora_targets: str, ep_overlap: bool,
                 moe_routing: str, etp: int | None = None,
                 moe_dispatcher: str | None = None) -> None:
    """LoRA is modelled for decoder LMs; ``ep_overlap``, ``moe_routing``, ``moe_dispatcher``
    and ``etp`` (expert tensor parallelism, MoE parallel folding) for MoE models."""
    if etp is not None and (m.config is None or not m.config.n_experts):
        raise SpecError(f"etp={etp} (expert tensor parallelism) applies to mixture-of-experts "
                        f"models; {m.name} has no experts (leave etp unset)")
    if (lora_rank, lora_targets) != (None, "all") and getattr(m.config, "arch", 0) != "decoder":
        raise SpecError(f"lora_rank={lora_rank}, lora_targets={lora_targets!r}: LoRA is modelled "
                        f"for decoder LMs; {m.name} is {a_family(m.family)} model")
    if (m.config is None or not m.config.n_experts) and (ep_overlap or moe_routing != "random"):
        raise SpecError(f"ep_overlap / moe_routing apply to mixture-of-experts models; "
                        f"{m.name} has no experts")
    check_dispatcher_value(moe_dispatcher, m)  # the one rule, best_parallelism's too


def check_flex_group(moe_dispatcher: str | None, tp: int, ep: int, etp: int | None) -> None:
    """``moe_dispatcher="flex"`` asked for: Megatron-Core's flex dispatcher needs more than one
    rank in its expert-TP × EP group (``MoEFlexTokenDispatcher.__init__`` asserts
    ``tp_ep_size > 1``, megatron/core/transformer/moe/token_dispatcher.py at NVIDIA/Megatron-LM
    d98e8a64). Left unset the knob prices flex's layout, which at one rank moves nothing."""
    e = tp if etp is None else etp
    if moe_dispatcher == "flex" and e * ep == 1:
        raise SpecError(f"moe_dispatcher='flex' with etp·ep = {e}·{ep} = 1: Megatron-Core's flex "
                        "(DeepEP) dispatcher needs more than one rank in its expert-TP × EP "
                        "group; allowed: ep > 1 or etp > 1, or moe_dispatcher='alltoall' "
                        "(or unset)")


def check_conv_layout(conv_layout: Any, hw: Any) -> str:
    """``train(conv_layout=)`` of a generic graph, returned resolved (None: "nhwc", the
    default): one of ``CONV_LAYOUTS``; "nchw" prices cuDNN's NCHW <-> NHWC copies
    (``generic._nchw_transposes``), so only on NVIDIA devices (a TPU's compiler picks its own
    layouts; no source here gives MIOpen's NCHW cost)."""
    if conv_layout is None:
        return "nhwc"
    if conv_layout not in CONV_LAYOUTS:
        raise SpecError(f"conv_layout={conv_layout!r}; allowed: {', '.join(CONV_LAYOUTS)}")
    if conv_layout == "nchw" and not layout_priced_on(hw):
        raise SpecError(f"conv_layout='nchw' prices cuDNN's NCHW <-> NHWC transposes on NVIDIA "
                        f"GPUs; {hw.name} ({hw.vendor or 'no vendor'} {hw.kind}) has no "
                        "source for its layout cost: use conv_layout='nhwc'")
    return str(conv_layout)


def layout_priced_on(hw: Any) -> bool:
    """Whether the convolution layout has a price on ``hw``: cuDNN's NCHW <-> NHWC copies are
    sourced for NVIDIA devices only (``check_conv_layout``, ``generic._layout_fields``)."""
    return bool(hw.vendor == "NVIDIA")


def check_graph_only_options(m: Any, data_loader: Any, conv_layout: str | None) -> None:
    """A decoder LM refuses the options that only the generic (any-graph) model reads: an image
    loader's ceiling and a convolution layout."""
    if data_loader is not None:  # allowed: None (a decoder LM reads tokenized text)
        raise SpecError(f"data_loader={data_loader!r} prices image loaders; {m.name}: use None")
    if conv_layout not in (None, "nhwc"):
        raise SpecError(f"conv_layout={conv_layout!r} prices convolution layouts; {m.name} (a "
                        "decoder LM) has no convolutions: leave conv_layout='nhwc'")


def check_selective_op(ctx: _Ctx, recomputes: tuple[str, ...]) -> None:
    """recompute="selective_op" is modelled for dense decoders with standard attention (its
    saved set, ``ops.training_formulas.op_sac_activation_bytes``)."""
    if "selective_op" in recomputes and (ctx.cfg.n_experts or ctx.cfg.mla):
        raise SpecError(f"recompute='selective_op' is modelled for dense decoders without latent "
                        f"attention; {ctx.cfg.name} has "
                        f"{'experts' if ctx.cfg.n_experts else 'multi-head latent attention'}: "
                        "use 'none', 'selective' or 'full'")


def recompute_fraction(recompute: str, layers: int | None, stages: tuple[int, ...],
                       interleave: int) -> float:
    """The share of each pipeline stage's layers that ``recompute="full"`` re-runs, given
    ``layers`` = k recomputed layers per stage (None: all of them, 1.0).

    Megatron-LM's ``--recompute-granularity full --recompute-method block
    --recompute-num-layers k`` (NVIDIA/Megatron-LM 767a8a81,
    megatron/core/transformer/transformer_block.py, ``TransformerBlock._checkpointed_forward``):
    of the layers a pipeline rank's block holds, the first k are checkpointed one by one (input
    kept, forward re-run in the backward), the rest keep their activations. Modelled for equal
    stages without interleaving (then the step's per-layer recompute terms scale by k / L_stage,
    exactly 1.0 when k = L_stage); ``--recompute-method uniform`` (every layer re-run, one input
    kept per group of k) is not modelled."""
    if layers is None:
        return 1.0
    if recompute != "full":
        raise SpecError(f"recompute_layers={layers} sets how many layers per stage "
                        f"recompute='full' re-runs (Megatron-LM's block method); got "
                        f"recompute={recompute!r}: use recompute='full'")
    if interleave > 1 or len(set(stages)) > 1:
        raise SpecError(f"recompute_layers={layers} is modelled for equal pipeline stages "
                        f"without interleaving; got stages {stages}, interleave={interleave}")
    n = stages[0]
    if layers > n:
        raise ArgumentError(f"recompute_layers={layers} is out of range; allowed: 0..{n} "
                            f"(the layers per pipeline stage)")
    return layers / n


def check_ep_overlap(ctx: _Ctx, ep: int, pp: int, interleave: int, recompute: str) -> None:
    """The rules of Megatron-Core's combined 1F1B all-to-all overlap (its developer guide and
    Megatron-Bridge's checks): an MoE model with ep > 1, no full recompute (a fully
    recomputed layer cannot be interleaved with the adjacent micro-batch), virtual pipeline
    stages when pp > 1."""
    if not ctx.cfg.n_experts or ep < 2:
        raise SpecError(f"ep_overlap=True overlaps expert-parallel exchanges: it needs an MoE "
                        f"model with ep > 1 (got {ctx.cfg.name}, ep={ep})")
    if recompute == "full":
        raise SpecError("ep_overlap=True (combined 1F1B) is incompatible with recompute='full'; "
                        "allowed: 'none', 'selective'")
    if pp > 1 and interleave < 2:
        raise SpecError(f"ep_overlap=True with pp={pp} needs the interleaved schedule "
                        "(interleave >= 2)")


def pp_overlap_of(pp_overlap: bool | None, interleave: int, pp: int) -> bool:
    """``train(pp_overlap=...)``: Megatron's ``overlap_p2p_comm`` for this split. None: the
    launcher's default (Megatron-LM d98e8a64 megatron/training/arguments.py: on, turned off
    without virtual pipeline stages; Megatron-Bridge comm_overlap.py the same): on where the
    schedule is interleaved (pp > 1, interleave > 1). True needs that schedule (schedules.py
    refuses it for the plain 1F1B one)."""
    interleaved = pp > 1 and interleave > 1
    if pp_overlap is None:
        return interleaved
    if pp_overlap and not interleaved:
        raise SpecError(f"pp_overlap=True overlaps pipeline sends in the interleaved 1F1B "
                        f"schedule (Megatron's overlap_p2p_comm); it needs pp > 1 and "
                        f"interleave >= 2, got pp={pp}, interleave={interleave}")
    return bool(pp_overlap)
