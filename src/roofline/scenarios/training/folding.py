"""MoE parallel folding: the expert layers' parallel groups laid over the attention layers'.

Megatron-Core builds two rank layouts over the same GPUs (``parallel_state
.initialize_model_parallel``, NVIDIA/Megatron-LM; Liu et al. 2025, "MoE Parallel Folding",
arXiv:2504.14960): the attention layers' tp × cp × dp × pp and the expert layers'
etp × ep × edp × pp, the expert tensor-parallel size ``etp`` defaulting to tp (``if
expert_tensor_parallel_size is None``). The two share pp; within a stage the etp·ep·edp expert
ranks are the tp·cp·dp attention ranks, so etp·ep must divide tp·cp·dp (Megatron raises when
the world size is not divisible by etp·ep·pp) and edp = tp·cp·dp / (etp·ep). The expert
layout is generated in the order etp, ep, edp (no cp): an expert-parallel group is ep ranks
spaced etp apart, an expert-data-parallel group edp ranks spaced etp·ep apart. ep need not
divide dp (the point of folding: with etp = 1, ep = 8 is the eight GPUs of a node whatever
tp is).

What is priced here: the rules (``check_folding``), the per-layer tensor-parallel
collectives (``tp_pair``, with the alltoall dispatcher's expert-TP pair ``expert_pair``), the
expert-parallel exchange (``ep_exposed``: the flex dispatcher's over the etp·ep ranks, the
alltoall one's over the ep ranks spaced etp apart). The expert graph (width F_e/etp, etp/tp ×
the rows) is ``graphs.training.training_graph(etp=...)``; the expert weights' ZeRO sharding and
reduction over edp ranks are in step.py / memory.py. Activation memory: a rank keeps etp/tp ×
the expert rows at F_e/etp width (the experts' own tensors: the same product whatever etp),
and etp/tp × b·s·k permuted token copies, each D wide (``moe_mlp_activation_bytes(etp=)``):
at etp = tp every copy of the tp group's tokens, at etp = 1 those of its own b·s/tp."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import SpecError
from ...graphs.shard import etp_problem
from ...ops import collectives as coll
from ...ops.training_formulas import moe_dispatch_ranks
from ...ops.xp import SCALAR
from .context import _Ctx


def folding_eps(n_experts: int, ranks: int, etp: int) -> list[int]:
    """The ep sizes Megatron-Core's group rules allow with ``etp`` over the ``ranks``
    (tp·cp·dp) of a stage: etp·ep divides them, ep the experts (none where etp does not divide
    the ranks). One rule for ``check_folding`` and the parallel search (search.py)."""
    if ranks % etp:
        return []
    return [e for e in range(1, ranks // etp + 1) if (ranks // etp) % e == 0
            and (not n_experts or n_experts % e == 0)]


def check_folding(ctx: _Ctx, tp: int, dp: int, ep: int, etp: int) -> None:
    """Megatron-Core's group rules for the expert layers over the tp·cp·dp ranks of a stage."""
    ranks = tp * ctx.cp * dp
    what = "tp·cp·dp" if ctx.cp > 1 else "tp·dp"
    vals = f"{tp}·{ctx.cp}·{dp}" if ctx.cp > 1 else f"{tp}·{dp}"
    if ranks % (etp * ep):
        eps = folding_eps(ctx.cfg.n_experts, ranks, etp)
        allowed = (f"with etp={etp}, ep one of {', '.join(map(str, eps))}" if eps else
                   f"etp must divide {ranks}")
        raise SpecError(f"ep={ep}, etp={etp}: etp·ep = {etp}·{ep} = {etp * ep} must divide the "
                        f"{what} = {vals} = "
                        f"{ranks} ranks of a pipeline stage (MoE parallel folding: the expert "
                        f"groups etp × ep × edp are those ranks); {allowed}")
    # each routed expert is split etp ways (at etp = tp shard_config names tp instead)
    why = None if etp == tp else etp_problem(ctx.cfg, etp, lambda e: ranks % (e * ep) == 0)
    if why is not None:
        raise SpecError(why)


def fold_terms(ctx: _Ctx, n_act: Any, tp: Any, one: Any, ep: Any, etp: Any,
               xp: Any, rows: Any = 0.0) -> tuple[Any, Any, Any, Any]:
    """(the layer's tensor-parallel collectives ``tp_pair`` for ``n_act`` bytes per all-reduce
    and ``rows`` elements of the micro-batch's sequence (b·s·D: the alltoall dispatcher's pair),
    the experts' tensor-parallel size etp (the dispatch's replication, ``ep_exposed``), the
    experts' split counted in tp ranks ep·etp/tp, and the part of ``tp_pair`` that is the
    alltoall dispatcher's expert pair, which no weight-gradient GEMM hides in the backward
    (step.py)) of the configurations priced with ``etp``;
    ``etp`` a number, or with numpy ``xp`` a column (``search.best_parallelism`` searching it);
    etp None is etp = tp. The expert weights
    are split etp·ep ways over the tp·dpc ranks of a stage, so ZeRO shards them over
    edp = dpc / (ep·etp/tp) ranks spaced etp·ep apart (step._dp_exposed, memory._memory)."""
    t_ar = coll.group_all_reduce(n_act, tp, one, ctx.links, xp)
    if not ctx.cfg.n_experts:
        return 2 * t_ar, tp, ep, 0.0
    if etp is None or (xp is SCALAR and etp == tp):
        t_exp = expert_pair(ctx, rows, tp, tp, xp)
        return tp_pair(ctx, t_ar, t_exp), tp, ep, ctx.moe_fraction * t_exp
    # a column: exact where etp = tp
    t_exp = expert_pair(ctx, rows, tp, etp, xp)
    return tp_pair(ctx, t_ar, t_exp), etp, ep * etp / tp, ctx.moe_fraction * t_exp


def expert_pair(ctx: _Ctx, rows: Any, tp: Any, etp: Any, xp: Any) -> Any:
    """The alltoall dispatcher's collectives around the routed experts, one layer's forward (or
    backward), in seconds: after the all-to-all over ep it all-gathers the received copies
    (k per token of the rank's b·s/tp) over the etp expert-TP ranks (consecutive ranks), and
    reduce-scatters the experts' outputs back before the return all-to-all
    (``MoEAlltoAllTokenDispatcher.dispatch_postprocess`` / ``combine_preprocess``, via
    ``gather_from_sequence_parallel_region`` / ``reduce_scatter_to_sequence_parallel_region``
    over the expert-TP group, NVIDIA/Megatron-LM d98e8a64): etp/tp × b·s·k rows of D each
    gathered (``rows`` = b·s·D), 16-bit (``Precision.link_bytes``; the reduce-scatter runs in
    the routing probabilities' dtype, the hidden states' unless a recipe sets
    ``--moe-router-dtype``, not modelled). Exposed in the backward too (step.py): there the
    pair runs as its own autograd nodes before and after the experts' whole backward (an
    all-gather of the output gradients, a reduce-scatter of the input gradients), beside no
    weight-gradient GEMM. Zero at etp = 1 (a one-rank group) and under
    "flex", whose expert TP is paid in its dispatch (``ep_exposed``)."""
    if ctx.moe_dispatcher != "alltoall":
        return 0.0
    n = rows * etp / tp * ctx.cfg.top_k * ctx.prec.link_bytes
    return coll.group_all_gather(n, etp, 1, ctx.links, xp) + \
        coll.group_reduce_scatter(n, etp, 1, ctx.links, xp)


def tp_pair(ctx: _Ctx, t_ar: Any, t_exp: Any = 0.0) -> Any:
    """The tensor-parallel collectives of one layer's forward (or backward), in seconds: around
    the attention an all-reduce (with sequence parallelism its all-gather + reduce-scatter) over
    tp, ``t_ar``; around a dense MLP the same again; around an MoE layer's routed experts
    ``t_exp`` (``expert_pair``: the alltoall dispatcher's; none under flex), and ``t_ar`` for
    its shared experts if any (a tp-split MLP of their own, Megatron-Core's SharedExpertMLP).
    With the flex (DeepEP) dispatcher the routed experts' tensor parallelism is paid in the
    dispatch (``ep_exposed``): each token goes to every etp rank of each expert-parallel rank
    holding one of its experts, and the combine sums their partial outputs
    (``MoEFlexTokenDispatcher._initialize_metadata`` expands the routing map over the tp × ep
    group, NVIDIA/Megatron-LM d98e8a64)."""
    f = ctx.moe_fraction
    moe_block = t_exp + (t_ar if ctx.cfg.n_shared_experts else 0.0)
    return t_ar + (1.0 - f) * t_ar + f * moe_block


def ep_exposed(ctx: _Ctx, tok: Any, etp: Any, ep: Any, rc: Any, t_comp: Any, m: Any,
               pp: Any, overlap: bool, xp: Any, rc_frac: float = 1.0) -> Any:
    """Exposed expert-parallel exchange per layer and micro-batch. A dispatch and a combine in
    the forward, the same two in the backward, two more in a fully recomputed forward. With
    the alltoall dispatcher each is NCCL's all-to-all of k copies of the rank's ``tok`` bytes
    (its tokens × width, one copy per selected expert: ``MoEAlltoAllTokenDispatcher
    .token_dispatch`` after "Permutation 1", NVIDIA/Megatron-LM d98e8a64) over the ep ranks
    spaced etp apart (``ops.collectives.group_all_to_all``; the routing probabilities, k·4
    bytes a token, not counted). With the flex dispatcher (the default) each
    moves ``tok`` bytes (the rank's tokens × width), as DeepEP's dispatch lays it out
    (``ops.collectives.group_dispatch``): once to every domain holding one of a token's
    experts, and inside the domain to each rank holding one, where with the experts split
    ``etp`` ways a rank holding one is each of the etp ranks of an expert-parallel rank
    (Megatron-Core's flex dispatcher over its tp × ep group: etp·ep consecutive ranks, the
    expert layout's order etp, ep): etp × the distinct expert-parallel ranks per token. The
    MoE layers' share of the layers (dense layers send nothing).

    Exposed unless ``overlap``: Megatron-Core's combined 1F1B (``--overlap-moe-expert-parallel-
    comm``, Megatron-Core developer guide, "Combined 1F1B: Expert-Parallel All-to-All
    Overlap") runs one micro-batch's four exchanges behind the adjacent micro-batch's forward
    and backward compute of the layer (``t_comp``), leaving max(0, 4a − t_comp); the
    micro-batches with no partner (the 1F1B warm-up and cool-down, about min(1, pp/m) of them:
    an approximation) stay exposed. The guide's rules (no full recompute, interleaving when
    pp > 1) are checked by ``train``."""
    if ctx.moe_dispatcher == "alltoall":
        a = coll.group_all_to_all(tok * ctx.cfg.top_k, ep, etp, ctx.links, xp)
    else:
        _, n_dom = coll.group_split(ep, etp, ctx.links.domain, xp)
        a = coll.group_dispatch(tok * etp * _dispatch_ranks(ctx, ep, xp),
                                tok * _dispatch_ranks(ctx, n_dom, xp), ep * etp, 1, ctx.links,
                                xp)
    exposed = a * (4 + 2 * (rc == 2) * rc_frac)  # rc_frac of the layers recomputed
    if overlap:
        u = xp.minimum(1.0, pp / m)  # micro-batches without a partner
        exposed = u * 4 * a + (1 - u) * xp.maximum(4 * a - t_comp, 0.0)
    return exposed * ctx.moe_fraction


def _dispatch_ranks(ctx: _Ctx, ep: Any, xp: Any) -> Any:
    """Expected distinct ranks a token is dispatched to, per ep (ops/training_formulas.py)."""
    cfg = ctx.cfg
    if xp is SCALAR:
        return moe_dispatch_ranks(cfg.n_experts, cfg.top_k, int(ep), ctx.moe_routing)
    ep = np.asarray(ep)
    out = np.ones(ep.shape)
    for e in np.unique(ep):
        out[ep == e] = moe_dispatch_ranks(cfg.n_experts, cfg.top_k, int(e), ctx.moe_routing)
    return out
