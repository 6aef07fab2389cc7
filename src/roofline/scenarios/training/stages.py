"""Pipeline stages of unequal size: how many layers each of the ``pp`` stages holds.

``pp`` need not divide the layers. Without ``pp_stages`` the layers are split as evenly as
possible and the stages with one layer fewer go to the ends of the pipeline first (the first,
then the last, then the second, ...), since the first stage also runs the embedding and the last
the LM head and loss: 126 layers over 16 stages is ``(7, 8, …, 8, 7)``, the layout the Llama 3
paper describes (Llama Team 2024, "The Llama 3 Herd of Models", arXiv:2407.21783, §3.3.2:
one transformer layer fewer on the first and the last stage); 70 over 12 is ``(5, 6, …, 6, 5)``.

Megatron-Core's layouts that count the embedding and the loss as layers (its
``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split`` and its
``pipeline_model_parallel_layout`` string) set the stages too (``megatron_stages``,
``layout_stages``); there a model chunk may hold fewer layers than the others, or none (only the
embedding or the loss), and a stage's chunks are still priced as its n_i / v.

The step then runs at the pace of the slowest stage: with per-micro-batch stage times t_i,
1F1B with m micro-batches costs m · max t_i plus a bubble of (pp − 1)/v · max t_i (the
equal-stage formula with the slowest stage's time; a stage faster than the slowest only waits,
so this is an upper bound on the fill and drain that Σ t_i − max t_i would give). Memory is the
fullest stage's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ... import _args as A
from ...errors import SpecError

__all__ = ["default_stages", "pipeline_stages", "StageLayout", "pp_exposed", "megatron_stages",
           "layout_stages", "megatron_layout"]

#: argument rule of ``pp_stages``: layers per pipeline stage, first to last
STAGES_ARG = A.optional(A.seq(A.count(1, 10**6),
                                  what="layers per pipeline stage, e.g. (7, 8, 8, 7)"))


def default_stages(n_layers: int, pp: int) -> tuple[int, ...]:
    """``n_layers`` over ``pp`` stages as evenly as possible, the lighter stages at the ends:
    ``default_stages(126, 16) == (7,) + (8,) * 14 + (7,)``."""
    if pp > n_layers:
        raise SpecError(f"pp={pp} stages need at least {pp} layers; the model has {n_layers}")
    base, extra = divmod(n_layers, pp)
    out = [base + 1 if extra else base] * pp
    if extra:
        ends = [i // 2 if i % 2 == 0 else pp - 1 - i // 2 for i in range(pp - extra)]
        for i in ends:  # first, last, second, second-to-last, ...
            out[i] = base
    return tuple(out)


def pipeline_stages(n_layers: int, pp: int, stages: Any = None, interleave: int = 1,
                    *, pp_given: bool = True, chunked: bool = False) -> tuple[int, ...]:
    """The layers per stage for ``pp`` stages: ``stages`` checked (its length is pp, it sums to
    the layers) or the default split. With ``interleave`` v > 1, equal stages must hold a
    multiple of v layers; unequal ones at least v (their chunks then differ by a layer: each
    is priced as the stage's n_i / v, the average chunk — an approximation, stated), unless
    ``chunked``: the stages come from a layout whose chunks Megatron-Core's rules have
    checked (``megatron_stages``, ``layout_stages``; a chunk may hold only the embedding or
    the loss)."""
    if stages is None:
        st = default_stages(n_layers, pp)
    else:
        st = tuple(int(x) for x in stages)
        if pp_given and len(st) != pp:
            raise SpecError(f"pp_stages has {len(st)} stages but pp={pp}; give pp=len(pp_stages) "
                            "or leave pp out")
        if sum(st) != n_layers:
            raise SpecError(f"pp_stages={list(st)} holds {sum(st)} layers; the model has "
                            f"{n_layers}")
    if interleave > 1 and not chunked:
        if len(set(st)) == 1 and st[0] % interleave:
            raise SpecError(f"interleave={interleave} must divide the {st[0]} layers per "
                            "pipeline stage")
        if min(st) < interleave:
            raise SpecError(f"interleave={interleave} model chunks need at least {interleave} "
                            f"layers on every stage; stages {list(st)} have {min(st)}")
    return st


@dataclass(frozen=True, slots=True)
class StageLayout:
    """What the step model needs of a stage layout: the layers of the first, the last and the
    fullest middle stage (time), and the activation-holding layer count of the fullest stage,
    in units of the first stage's in-flight micro-batches (memory)."""

    first: float
    last: float
    middle: float  #: 0 without a middle stage (pp ≤ 2)
    act_layers: float  #: max_i n_i · inflight_i / inflight_0, inflight_i = min(m, pp − i)

    @classmethod
    def of(cls, stages: tuple[int, ...], microbatches: float) -> StageLayout:
        pp = len(stages)
        mid = max(stages[1:-1], default=0)
        inflight = [min(microbatches, pp - i) for i in range(pp)]
        act = max(n * f for n, f in zip(stages, inflight)) / inflight[0]
        return cls(first=float(stages[0]), last=float(stages[-1]), middle=float(mid),
                   act_layers=float(act))


def pp_exposed(pp_mb: Any, t_p2p: Any, f_mb: Any, b_mb: Any, v: Any, overlap: Any,
               xp: Any) -> Any:
    """Exposed pipeline send / receive seconds per micro-batch in the steady 1F1B state.

    Without overlap: ``pp_mb`` (each of the v chunks sends its activation forward and its
    gradient backward, ``2 v t_p2p``, blocking). With Megatron's ``overlap_p2p_comm``
    (NVIDIA/Megatron-LM d98e8a64, megatron/core/pipeline_parallel/schedules.py,
    ``forward_backward_pipelining_with_interleaving``: ``pp_post_forward`` posts a chunk's
    send / receive asynchronously and ``pp_pre_forward`` waits on it only before the next
    forward chunk; backward likewise) a forward chunk's transfer runs behind the backward chunk
    that follows it and a backward chunk's behind the next forward chunk, so each shows only
    what is longer than that chunk's compute: ``v (max(t_p2p − b/v, 0) + max(t_p2p − f/v, 0))``
    with ``f``, ``b`` the micro-batch's forward and backward (+ recompute) compute on the
    stage. ``overlap``: None is Megatron-LM's launcher default, on where the schedule is
    interleaved (v > 1; arguments.py turns it off otherwise, the plain 1F1B schedule refuses
    it). The warm-up and cool-down sends stay blocking (overlap_p2p_comm_warmup_flush off, its
    default): the bubble keeps ``pp_mb``."""
    on = v > 1 if overlap is None else overlap
    hidden = v * (xp.maximum(t_p2p - b_mb / v, 0.0) + xp.maximum(t_p2p - f_mb / v, 0.0))
    return xp.where(on, xp.minimum(hidden, pp_mb), pp_mb)


#: Megatron-Core's layer-type letters of ``pipeline_model_parallel_layout``
#: (transformer/pipeline_parallel_layer_layout.py ``parse_str_to_list``)
LAYOUT_LETTERS = {"E": "the embedding", "L": "the loss", "t": "a transformer layer",
                  "m": "a multi-token-prediction layer"}


def megatron_stages(n_layers: int, pp: int, interleave: int, embedding: bool,
                    loss: bool) -> tuple[int, ...]:
    """The transformer layers per pipeline stage under Megatron-Core's
    ``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``
    (NVIDIA/Megatron-LM d98e8a64, megatron/core/transformer/transformer_block.py
    ``get_num_layers_to_build``, and the checks of transformer_config.py ``__post_init__``):
    the embedding (and the loss) count as one layer each, so N' = L + [embedding] + [loss]
    slots must divide evenly over the pp stages and each stage's N'/pp over its v model
    chunks; every chunk builds N'/(pp·v) transformer layers except the first chunk of the first
    stage, one fewer for the embedding, and the last chunk of the last stage, one fewer for
    the loss (neither may go below 0). ``megatron_stages(94, 32, 3, True, True)`` is
    ``(2, 3, …, 3, 2)``: Megatron-Core's Qwen3-235B recipe at PP 32, VPP 3, whose first and
    last virtual stages hold only the embedding and only the loss."""
    slots = n_layers + int(embedding) + int(loss)
    what = " + ".join(["layers"] + ["embedding"] * embedding + ["loss"] * loss)
    if slots % pp:
        raise SpecError(f"pp_account_embedding={embedding}, pp_account_loss={loss}: the "
                        f"{what} = {slots} pipeline slots must divide evenly over pp={pp} "
                        f"stages (Megatron-Core's rule); allowed pp: "
                        f"{', '.join(str(p) for p in range(1, slots + 1) if slots % p == 0)}")
    per = slots // pp
    if per % interleave:
        raise SpecError(f"pp_account_embedding={embedding}, pp_account_loss={loss}: the {per} "
                        f"slots of each stage ({what} = {slots} over pp={pp}) must divide into "
                        f"interleave={interleave} model chunks (Megatron-Core's rule)")
    # every chunk holds per / v >= 1 slots, so the end chunks' counts stay >= 0 (Megatron's
    # "Not enough layers in the first virtual pipeline stage" cannot fire once these hold)
    out = [per] * pp
    out[0] -= int(embedding)
    out[-1] -= int(loss)
    return tuple(out)


#: the most characters a ``pp_layout`` may unroll to (a layout holds each layer's letter and a
#: '|' per virtual stage; ``pp_stages`` allows 10**6 layers a stage): checked before building
LAYOUT_MAX_CHARS = 10**6


def _unroll(text: str) -> str:
    """Megatron-Core's layout shorthand unrolled: commas dropped, ``(…)*n`` and ``x*n``
    repeated (``parse_str_to_list``'s two patterns, in its order). Each step's length is
    counted before the string is built: past ``LAYOUT_MAX_CHARS`` it is a SpecError (a count
    such as ``t*10000000000`` would take gigabytes)."""
    import re

    orig = text
    text = text.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        found = list(re.finditer(pattern, text))
        size = len(text) + sum(len(g.group(1)) * int(g.group(2)) - (g.end() - g.start())
                               for g in found)
        if size > LAYOUT_MAX_CHARS:
            raise SpecError(f"pp_layout={orig[:60]!r}{'…' if len(orig) > 60 else ''} unrolls to "
                            f"more than {LAYOUT_MAX_CHARS:,} characters ({size:,}); allowed: at "
                            f"most {LAYOUT_MAX_CHARS:,} letters and '|' once unrolled")
        text = re.sub(pattern, lambda g: g.group(1) * int(g.group(2)), text)
    return text


def layout_stages(layout: str, n_layers: int, pp: int, interleave: int,
                  pp_given: bool) -> tuple[tuple[int, ...], int]:
    """(transformer layers per stage, model chunks per stage v) of Megatron-Core's
    ``pipeline_model_parallel_layout`` string (NVIDIA/Megatron-LM d98e8a64,
    megatron/core/transformer/pipeline_parallel_layer_layout.py): ``|`` separates the pp·v
    virtual stages in layer order, virtual stage j on pipeline rank j mod pp (chunk j // pp);
    ``E`` the embedding, ``t`` a transformer layer, ``L`` the loss; ``(…)*n`` and ``x*n``
    repeat, commas are cosmetic: "Et|(tt|)*46,tL" is 94 layers on 48 virtual stages, the
    first holding the embedding and a layer, the last a layer and the loss.
    Checked as ``validate_layer_layout`` checks it (the embedding first and once, the loss last
    and once, the layer count), and here also: the embedding in the first virtual stage and the
    loss in the last (the step model prices them on the first and the last pipeline rank);
    no ``m`` (multi-token prediction is not modelled)."""
    text = _unroll(layout)
    stages = text.split("|")
    bad = sorted({c for c in text if c not in LAYOUT_LETTERS and c != "|"})
    if bad:
        raise SpecError(f"pp_layout={layout!r}: {', '.join(map(repr, bad))} is not a layer; "
                        "allowed: " + ", ".join(f"{k} ({v})" for k, v in LAYOUT_LETTERS.items()
                                                if k != "m")
                        + ", '|' between virtual stages, (…)*n and x*n to repeat")
    if "m" in text:
        raise SpecError(f"pp_layout={layout!r}: multi-token-prediction layers (m) are not "
                        "modelled; give a layout of E, t and L only")
    n_virtual = len(stages)
    if not pp_given and n_virtual > 1:
        ok = [d for d in range(2, n_virtual + 1) if n_virtual % d == 0]
        raise SpecError(f"pp_layout={layout!r} has {n_virtual} virtual stages and pp={pp} (given "
                        "or the default): the layout is pp × interleave virtual stages "
                        f"(Megatron-Core's rule), and at pp={pp} all {n_virtual} would be model "
                        f"chunks of one rank, no pipeline; give pp, one of {ok}")
    if n_virtual % pp:
        raise SpecError(f"pp_layout={layout!r} has {n_virtual} virtual stages; pp={pp} must "
                        "divide them (Megatron-Core's rule: pp × the model chunks)")
    v = n_virtual // pp
    if interleave not in (1, v):
        raise SpecError(f"pp_layout={layout!r}: {n_virtual} virtual stages over pp={pp} are "
                        f"{v} model chunks per stage, but interleave={interleave}; leave "
                        f"interleave out or give {v}")
    if text.count("E") != 1 or not stages[0].startswith("E"):
        raise SpecError(f"pp_layout={layout!r}: the embedding (E) must appear once, first in the "
                        "first virtual stage")
    if text.count("L") != 1 or not stages[-1].endswith("L"):
        raise SpecError(f"pp_layout={layout!r}: the loss (L) must appear once, last in the last "
                        "virtual stage")
    if text.count("t") != n_layers:
        raise SpecError(f"pp_layout={layout!r} holds {text.count('t')} transformer layers (t); "
                        f"the model has {n_layers}")
    return tuple(sum(stages[c * pp + r].count("t") for c in range(v)) for r in range(pp)), v


def megatron_layout(n: int, pp: int, interleave: int, pp_stages: Any, embedding: bool,
                    loss: bool, layout: str | None) -> tuple[Any, int, bool]:
    """(pp_stages, interleave, whether Megatron-Core's rules set the stages' chunks) of a
    model of ``n`` layers under ``train``'s Megatron-Core stage-layout arguments
    (``megatron_stages``, ``layout_stages``); ``pp_stages`` and ``interleave`` unchanged
    without them.
    ``pp`` must be given with ``pp_layout`` (the layout is pp × interleave virtual stages)."""
    given = [name for name, on in (("pp_stages", pp_stages is not None),
                                   ("pp_account_embedding/pp_account_loss", embedding or loss),
                                   ("pp_layout", layout is not None)) if on]
    if len(given) > 1:
        raise SpecError(f"{' and '.join(given)}: give one way of laying out the pipeline "
                        "stages (Megatron-Core refuses pipeline_model_parallel_layout with the "
                        "account_for_* flags or uneven first/last stages, and those together)")
    if layout is not None:
        st, v = layout_stages(layout, n, pp, interleave, pp_given=pp > 1)
        return st, v, True
    if embedding or loss:
        return megatron_stages(n, pp, interleave, embedding, loss), interleave, True
    return pp_stages, interleave, False
