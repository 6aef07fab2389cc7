"""Pipeline stages of unequal size: how many layers each of the ``pp`` stages holds.

``pp`` need not divide the layers. Without ``pp_stages`` the layers are split as evenly as
possible and the stages with one layer fewer go to the ends of the pipeline first (the first,
then the last, then the second, ...), since the first stage also runs the embedding and the last
the LM head and loss: 126 layers over 16 stages is ``(7, 8, …, 8, 7)``, the layout the Llama 3
paper describes (Llama Team 2024, "The Llama 3 Herd of Models", arXiv:2407.21783, §3.3.2:
one transformer layer fewer on the first and the last stage); 70 over 12 is ``(5, 6, …, 6, 5)``.

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

__all__ = ["default_stages", "pipeline_stages", "StageLayout", "pp_exposed"]

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
                    *, pp_given: bool = True) -> tuple[int, ...]:
    """The layers per stage for ``pp`` stages: ``stages`` checked (its length is pp, it sums to
    the layers) or the default split. With ``interleave`` v > 1, equal stages must hold a
    multiple of v layers; unequal ones at least v (their chunks then differ by a layer: each
    is priced as the stage's n_i / v, the average chunk — an approximation, stated)."""
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
    if interleave > 1:
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
