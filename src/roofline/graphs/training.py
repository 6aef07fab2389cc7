"""The training graph of one pipeline stage's worth of work on one device.

Built from the inference graph (``transformer_graph``) of a tensor-parallel *shard* of the
model: N/t query heads, max(K/t, 1) KV heads, F/t MLP width, V/t vocabulary (Megatron's
column/row-parallel split, Shoeybi et al. 2019 §3; vocabulary-parallel embedding and logits).
Each forward op then gets its backward op(s), derived from the same op costs:

| forward op                 | backward                                                       |
|----------------------------|----------------------------------------------------------------|
| linear Y = X·W             | dX = dY·Wᵀ (same FLOPs; reads dY and W, writes dX) and          |
|                            | dW = Xᵀ·dY (same FLOPs; reads X and dY, accumulates fp32 dW)    |
| matmul C = A·B (attention) | dA = dC·Bᵀ and dB = Aᵀ·dC: 2× FLOPs; reads A, B, dC; writes dA, dB |
| fused attention (Flash)    | 2.5× forward FLOPs (FlashAttention-2's backward runs 5 matmuls |
|                            | to the forward's 2, recomputing QKᵀ); reads Q, K, V, O, dO;    |
|                            | writes dQ, dK, dV                                               |
| elementwise, norm, softmax | 2× forward FLOPs; reads the saved input(s) and dY, writes dX   |
| embedding lookup           | scatter-add of dY into the fp32 gradient rows                  |

So matmul backward ≈ 2× forward FLOPs and fwd+bwd ≈ 3× forward (the 6·N·tokens rule).
Weight gradients are accumulated in fp32 across micro-batches (Megatron's fused
gradient-accumulation buffers): each dW GEMM reads and writes ``4`` bytes per parameter.

Ops carry a group tag so the scenario can time forward, backward, recompute and the
embedding/head separately (see ``GROUPS``). With sequence parallelism (Korthikanti et al.
2022 §4.2.2) the norms and residual adds, which tensor parallelism leaves replicated, run on
T/t tokens per rank.

Assumptions: no dropout ops in the timing graph (modern LLM pre-training runs without
dropout; the activation-memory model can still count dropout masks); the dW GEMM's batch·tokens
dimension is its K, but it is priced with the forward GEMM's efficiency (all three sizes are
large in training); the loss is one softmax over the local V/t logits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import SpecError
from ..ops import QUANTITIES
from ..specs.dtypes import Precision
from .graph import Graph, GraphBuilder, Q
from .shard import expert_width, shard_config
from .transformer import TransformerConfig, transformer_graph

__all__ = ["TrainingGraph", "training_graph", "GROUPS", "moe_layer_fraction", "op_recomputed",
           "eager_elementwise", "EAGER_OPS"]

#: the ops whose eager-PyTorch op chain data/presets/eager.toml counts
EAGER_OPS = ("rmsnorm", "rope", "swiglu", "cross_entropy")

#: op groups of a training graph
GROUPS = ("layer_fwd", "layer_fwd_core", "layer_bwd", "layer_bwd_dw", "layer_bwd_dw_col",
          "head_fwd", "head_bwd", "embed_fwd", "embed_bwd", "layer_fwd_op")
_G = {g: i for i, g in enumerate(GROUPS)}

_F, _WR, _AR, _AW, _KR, _KW, _WW = (Q[k] for k in QUANTITIES)
#: bytes per parameter of the fp32 gradient accumulator
GRAD_ACC_BYTES = 4.0


@dataclass(frozen=True, slots=True, eq=False, kw_only=True)
class TrainingGraph:
    """Forward + backward ops of one transformer layer and of the embedding/head, on one
    tensor-parallel rank, with a group tag per op."""

    graph: Graph  #: all ops (forward, backward), costs affine in the micro-batch
    group: np.ndarray  #: [n] index into GROUPS
    layer_params: float  #: parameters of one layer on this rank
    embed_params: float  #: embedding parameters on this rank (first stage)
    head_params: float  #: final norm + LM-head parameters on this rank (last stage)
    tp: int
    sequence_parallel: bool
    seq_len: int
    local: TransformerConfig | None = None  #: one layer's per-rank config (``shard_config``)
    #: trainable parameters on this rank (LoRA: the adapters only; else every parameter)
    layer_trainable: float | None = None
    embed_trainable: float | None = None
    head_trainable: float | None = None
    lora_rank: int | None = None  #: LoRA adapter rank (None: full training)
    #: [n] each op's weight in the average layer (a dense and an MoE layer weighted by their
    #: share of the layers); None: every op counts once
    op_weight: np.ndarray | None = None
    #: routed-expert parameters of the (average) layer on this rank (in ``layer_params``)
    layer_expert_params: float = 0.0
    moe_fraction: float = 0.0  #: share of the layers that are MoE layers


def op_recomputed(names: Any, kinds: Any) -> np.ndarray:
    """[n] which forward ops of the layers op-level selective checkpointing re-runs in the
    backward (``recompute="selective_op"``, torchtitan's ``selective_ac_option = "op"``
    policy, torchtitan/parallelisms/parallelize_llama.py ``_apply_ac_to_transformer_block``):
    the outputs of every matmul (``aten.mm``) and of fused attention are saved except every
    second matmul of a block (the 2nd, 4th, ... in forward order), so the even-numbered
    linears of each layer and every op that is neither a linear nor the attention core (norms,
    RoPE, activations, residual adds) are recomputed. LoRA adapters are not counted (the
    policy's count on an adapter graph is not modelled)."""
    out = np.zeros(len(names), dtype=bool)
    count: dict[str, int] = {}
    for i, (nm, kind) in enumerate(zip(names, kinds)):
        if not nm.startswith("layers.") or _is_core(nm) or nm.endswith((".lora_a", ".lora_b")):
            continue
        if kind != "linear":
            out[i] = True
            continue
        layer = nm.split(".", 2)[1]
        count[layer] = count.get(layer, 0) + 1
        out[i] = count[layer] % 2 == 0
    return out


def _is_core(name: str) -> bool:
    return any(s in name for s in (".attn.attention", ".attn.scores", ".attn.scale_mask",
                                   ".attn.softmax", ".attn.context"))


def training_graph(cfg: TransformerConfig, precision: Precision, *, seq_len: int, tp: int = 1,
                   sequence_parallel: bool = True, fused_attention: bool = True, ep: int = 1,
                   micro_batch: int | None = None, dropout: bool = False,
                   lora_rank: int | None = None, cp: int = 1,
                   eager: dict[str, tuple[float, float]] | None = None,
                   lora_targets: str = "all", etp: int | None = None) -> TrainingGraph:
    """Forward and backward ops of one layer and of the embedding/head on one TP rank.

    Unfused attention (``fused_attention=False``) is Megatron's path of 2021–22: QKᵀ, one fused
    scale-mask-softmax kernel (the separate mask op of the inference graph is folded into the
    softmax), ·V; with ``dropout`` an attention-probability dropout op over the N/t·T·S scores
    follows the softmax (hidden-state dropouts are fused into the residual adds and not priced).

    ``micro_batch`` is needed only for mixture-of-experts models (expert coverage is not
    affine in the batch); dense graphs are affine in the micro-batch.

    ``lora_rank`` r (LoRA, Hu et al. 2021, arXiv:2106.09685 §4.1): every linear of the blocks
    gets a trainable adapter W + A·B, A [D_in, r], B [r, D_out] (two linears after it in the
    graph, the "all linear layers" placement of QLoRA, Dettmers et al. 2023, arXiv:2305.14314
    §3); every other weight is frozen: its dW = Xᵀ·dY GEMM is not run (dX = dY·Wᵀ still is,
    for the layers below) and the embedding has no backward. ``lora_targets``: ``_adapters``.

    ``cp`` (context parallelism; Megatron-LM's load-balanced causal split, every rank holding
    2 of 2·cp sequence chunks): ``seq_len`` is the rank's share T = s/cp of the sequence; its
    queries attend to all s keys, so the attention core costs cp × the T-token graph's (a
    cp-th of the full causal attention); the Q/O bytes of that scaling are an overcount
    (Assumption); the KV exchange is a collective of the scenario. ``eager``: see
    ``eager_elementwise``. ``etp``: the experts' tensor-parallel size (``_fold_experts``)."""
    if cp > 1 and not fused_attention:
        raise SpecError("cp > 1 (context parallelism) is modelled with fused attention only")
    if lora_rank is not None and cfg.n_experts:
        raise SpecError(f"lora_rank: LoRA on a mixture-of-experts model ({cfg.name}) is not "
                        "modelled")
    if cfg.arch != "decoder":
        raise SpecError(f"training graphs are built for decoder LMs; {cfg.name} is an {cfg.arch}")
    # one layer of the per-rank shape (the embedding and head are priced apart); a model
    # mixing dense and MoE layers (DeepSeek's first_k_dense_replace, Llama 4's interleave) gets
    # one of each, weighted by their share of the layers (op_weight): the average layer
    f_moe = moe_layer_fraction(cfg)
    two = 0.0 < f_moe < 1.0
    local = replace(shard_config(cfg, tp, ep=ep, etp=etp), name=f"{cfg.name}[tp{tp}]",
                    moe_every=1, n_layers=2 if two else 1, first_dense_layers=1 if two else 0)
    if cfg.n_experts and f_moe == 0.0:
        local = replace(local, n_experts=0, top_k=0)
    T = seq_len
    fwd = transformer_graph(local, precision, phase="forward", seq_len=T,
                            fused_attention=fused_attention,
                            batch=micro_batch if cfg.n_experts else None, logits="all")
    if cfg.n_experts and etp is not None and etp != tp:
        fwd = _fold_experts(fwd, cfg, local, precision, T, fused_attention, micro_batch, tp, etp)
    sp = sequence_parallel and tp > 1
    c0, c1, gemm, params, grp = _forward_costs(fwd, tp, ep, cp, sp)
    # -- the loss: softmax cross-entropy over the local V/t logits (all tokens)
    lb = GraphBuilder(cfg.name, "train", precision)
    lb.add("softmax", "loss.cross_entropy", elements=T * local.vocab)
    if dropout and not fused_attention:
        lb.add("elementwise", "layers.0.attn.probs_dropout", op="dropout",
               elements=local.n_heads * T * T)
    loss = lb.build()
    names, kinds = list(fwd.names) + list(loss.names), list(fwd.kinds) + list(loss.kinds)
    classes = list(fwd.classes) + list(loss.classes)
    c0 = np.concatenate([c0, loss.c0], axis=1)
    c1 = np.concatenate([c1, loss.c1], axis=1)
    gemm = np.concatenate([gemm, loss.gemm], axis=1)
    params = np.concatenate([params, loss.params])
    grp = np.concatenate([grp, np.array([_G["head_fwd"]] + [_G["layer_fwd_core"]] *
                                        (len(loss.names) - 1), dtype=np.int64)])
    adapter = np.zeros(len(names), dtype=bool)
    if lora_rank is not None:
        ad = _adapters(cfg, precision, fwd, lora_rank, T, lora_targets)
        names, kinds = names + list(ad.names), kinds + list(ad.kinds)
        classes += list(ad.classes)
        c0 = np.concatenate([c0, ad.c0], axis=1)
        c1 = np.concatenate([c1, ad.c1], axis=1)
        gemm = np.concatenate([gemm, ad.gemm], axis=1)
        params = np.concatenate([params, ad.params])
        grp = np.concatenate([grp, np.full(len(ad.names), _G["layer_fwd"], dtype=np.int64)])
        adapter = np.concatenate([adapter, np.ones(len(ad.names), dtype=bool)])
    frozen = ~adapter if lora_rank is not None else adapter

    # -- backward ops
    bn, bk, bc, b0, b1, bg, bgr, bp = _backward(names, kinds, classes, c0, c1, gemm, params,
                                                grp, frozen, precision)
    names, kinds, classes = names + bn, kinds + bk, classes + bc
    c0 = np.concatenate([c0, np.array(b0).T], axis=1)
    c1 = np.concatenate([c1, np.array(b1).T], axis=1)
    gemm = np.concatenate([gemm, np.array(bg, dtype=np.float64).T], axis=1)
    params = np.concatenate([params, np.array(bp)])
    grp = np.concatenate([grp, np.array(bgr, dtype=np.int64)])
    eager_elementwise(names, kinds, c0, c1, cfg, precision, eager or {})
    n_f = len(adapter)  # forward ops: the model's, the loss, the adapters
    is_layer = np.array([nm.startswith("layers.") for nm in names[:n_f]])
    is_embed = np.array([nm.startswith("embed") for nm in names[:n_f]])
    # parameters per rank: MoE expert params are divided by ep above only in `params`
    w = np.ones(len(names))
    if two:
        w[np.array([nm.startswith("layers.0.") for nm in names])] = 1.0 - f_moe
        w[np.array([nm.startswith("layers.1.") for nm in names])] = f_moe
        w[np.array([nm.endswith(".attn.probs_dropout") for nm in names])] = 1.0
    p_fwd = params[:n_f] * w[:n_f]
    is_expert = np.array([".moe.experts." in nm for nm in names[:n_f]])
    layer_params = float(p_fwd[is_layer].sum())
    embed_params = float(p_fwd[is_embed].sum())
    head_params = float(p_fwd[~is_layer & ~is_embed].sum())
    p_train = np.where(frozen, 0.0, p_fwd)
    graph = Graph(name=cfg.name, phase="train", precision=precision, names=tuple(names),
                  kinds=tuple(kinds), classes=tuple(classes), c0=c0, c1=c1, gemm=gemm,
                  params=np.concatenate([p_fwd, np.zeros(len(names) - n_f)]),
                  weight_footprint_bytes=float(p_fwd.sum()) * precision.weight_bytes,
                  fixed_batch=fwd.fixed_batch, tokens_per_sample=T,
                  meta={"seq_len": T, "tp": tp, "sequence_parallel": sp, "ep": ep})
    return TrainingGraph(graph=graph, group=grp, layer_params=layer_params,
                         embed_params=embed_params, head_params=head_params, tp=tp,
                         sequence_parallel=sp, seq_len=T, local=local,
                         layer_trainable=float(p_train[is_layer].sum()),
                         embed_trainable=float(p_train[is_embed].sum()),
                         head_trainable=float(p_train[~is_layer & ~is_embed].sum()),
                         lora_rank=lora_rank, op_weight=w,
                         layer_expert_params=float(p_fwd[is_layer & is_expert].sum()),
                         moe_fraction=f_moe)


def _is_routed(name: str) -> bool:
    """A routed expert's op (its GEMMs and activation, and ``moe.combine`` over their k output
    rows per token; not the shared experts, the router)."""
    return ".moe.experts." in name or name.endswith((".moe.act_mul", ".moe.combine"))


def _fold_experts(fwd: Graph, cfg: TransformerConfig, local: TransformerConfig,
                  precision: Precision, T: int, fused_attention: bool,
                  micro_batch: int | None, tp: int, etp: int) -> Graph:
    """MoE parallel folding (Megatron-Core's expert tensor-parallel size ``etp``, default tp;
    scenarios/training/folding.py): the forward graph ``fwd`` of a tp rank with its routed
    experts split etp ways in width (F_e/etp) instead of tp ways, each rank running etp/tp ×
    the rows (the tokens its etp group gathers): the same FLOPs in larger GEMMs, E/ep experts
    of width F_e/etp held. The routed-expert ops are taken from the graph of ``local`` with
    that width, their per-sample costs (FLOPs, activation bytes) and GEMM rows scaled by
    etp/tp, their weight reads (the touched experts, read once) as built. The shared experts
    stay split by tp (the attention's group), as every other op."""
    width = expert_width(cfg)[1]  # etp divides it: shard_config checked (etp_problem)
    rows = etp / tp
    fe = transformer_graph(replace(local, moe_d_ff=width // etp), precision, phase="forward",
                           seq_len=T, fused_attention=fused_attention,
                           batch=micro_batch, logits="all")
    at = {nm: j for j, nm in enumerate(fe.names)}
    c0, c1, gemm, params = fwd.c0.copy(), fwd.c1.copy(), fwd.gemm.copy(), fwd.params.copy()
    for i, nm in enumerate(fwd.names):
        if _is_routed(nm):
            j = at[nm]
            c0[:, i], c1[:, i] = fe.c0[:, j], fe.c1[:, j] * rows
            gemm[:, i], params[i] = fe.gemm[:, j], fe.params[j]
            gemm[0, i] *= rows
    return replace(fwd, c0=c0, c1=c1, gemm=gemm, params=params)


def _eager_op(name: str, kind: str, cfg: TransformerConfig) -> str | None:
    """Which EAGER_OPS entry forward op ``name`` is (None: one kernel in eager PyTorch too)."""
    if kind == "norm" and cfg.norm == "rmsnorm":
        return "rmsnorm"
    if name.endswith(".rope"):
        return "rope"
    if name.endswith(".act_mul") and cfg.gated_mlp and cfg.act == "silu":
        return "swiglu"
    if name == "loss.cross_entropy":
        return "cross_entropy"
    return None


def eager_elementwise(names: list[str], kinds: list[str], c0: np.ndarray, c1: np.ndarray,
                      cfg: TransformerConfig, precision: Precision,
                      table: dict[str, tuple[float, float]]) -> None:
    """Scale, in place, the activation bytes of the RMSNorms, RoPE, SwiGLU product and loss
    (forward ops and their ``.grad`` ops) to ``table``'s bytes per output element: PyTorch
    eager's op chains (fp32 upcasts, one kernel per op: data/presets/eager.toml) instead of the
    fused kernel the graph counts. The output elements are the forward op's bytes written /
    the activation width; counted for 16-bit activations (refused otherwise). An empty
    ``table``: nothing changes."""
    if not table:
        return
    if precision.act_bytes != 2:
        raise SpecError(f"elementwise='eager' counts PyTorch eager's op chains for 16-bit "
                        f"activations; {precision.activations} activations are "
                        f"{precision.act_bytes:g} bytes")
    fwd_of = {nm: i for i, nm in enumerate(names) if not nm.endswith(".grad")}
    outs = (c0[_AW].copy() / precision.act_bytes, c1[_AW].copy() / precision.act_bytes)
    for i, nm in enumerate(names):
        base = nm[:-5] if nm.endswith(".grad") else nm
        j = fwd_of.get(base)
        if j is None:
            continue
        op = _eager_op(base, kinds[j], cfg)
        if op is None or op not in table:
            continue
        per = table[op][1 if nm.endswith(".grad") else 0]
        for c, out in zip((c0, c1), outs):  # out: the forward op's output elements
            moved = c[_AR, i] + c[_AW, i]
            if moved > 0:
                c[[_AR, _AW], i] *= per * out[j] / moved


def moe_layer_fraction(cfg: TransformerConfig) -> float:
    """The share of the layers that are mixture-of-experts layers (0 for a dense model)."""
    if not cfg.n_experts:
        return 0.0
    return sum(cfg.layer_is_moe(i) for i in range(cfg.n_layers)) / cfg.n_layers


def _adapters(cfg: TransformerConfig, precision: Precision, fwd: Graph, r: int,
              T: int, targets: str = "all") -> Graph:
    """The LoRA adapter linears of one layer: x·A ([T, D_in] ·_D_in [D_in, r]) and ·B
    ([T, r] ·_r [r, D_out]) for each linear of the block (not the MoE router), on the shapes of
    this rank's shard (so a column-parallel linear's A is whole and its B split, a
    row-parallel one's the other way round, as Megatron's LoRA layers shard them).
    ``targets`` "qkv": one pair per layer on the fused q / k / v projection (B's width the sum
    of their outputs)."""
    b = GraphBuilder(cfg.name, "train", precision)
    for nm, d_in, d_out in lora_target_shapes(fwd, targets):
        b.add("linear", f"{nm}.lora_a", params=d_in * r, tokens=T, d_in=d_in, d_out=r)
        b.add("linear", f"{nm}.lora_b", params=r * d_out, tokens=T, d_in=r, d_out=d_out)
    return b.build()


#: where LoRA adapters go: every linear of the blocks, or the fused q / k / v projection only
LORA_TARGETS = ("all", "qkv")
#: the q / k / v linears of a block: three (Llama-style) or one already fused (GPT-2 c_attn,
#: TransformerConfig.fused_qkv)
_QKV = (".attn.q_proj", ".attn.k_proj", ".attn.v_proj", ".attn.qkv_proj")


def lora_target_shapes(fwd: Graph, targets: str = "all") -> list[tuple[str, int, int]]:
    """(name, D_in, D_out) of each adapted linear of a forward graph's blocks: every linear but
    the MoE router ("all"), or per layer one fused q / k / v projection ("qkv": the q, k and v
    linears' common input, the sum of their outputs)."""
    if targets not in LORA_TARGETS:
        raise SpecError(f"lora_targets={targets!r}: allowed: {', '.join(LORA_TARGETS)}")
    out: list[tuple[str, int, int]] = []
    fused: dict[str, list[int]] = {}
    for i, nm in enumerate(fwd.names):
        if fwd.kinds[i] != "linear" or not nm.startswith("layers.") or ".moe.router" in nm:
            continue
        d_out, d_in = int(round(fwd.gemm[1, i])), int(round(fwd.gemm[2, i]))
        if targets == "all":
            out.append((nm, d_in, d_out))
        elif nm.endswith(_QKV):
            key = nm.rsplit(".", 1)[0] + ".qkv"
            if key not in fused:
                fused[key] = [d_in, 0]
                out.append((key, 0, 0))
            fused[key][1] += d_out
    if targets == "qkv":
        if not fused:
            raise SpecError("lora_targets='qkv': the model's graph has no q / k / v projections")
        out = [(k, fused[k][0], fused[k][1]) for k, _, _ in out]
    return out


#: MoE ops on the rank's own b·s/tp tokens under sequence parallelism: Megatron-Core's MoE layer
#: takes the sequence-parallel input, and the router (TopKRouter) runs on it (NVIDIA/Megatron-LM
#: d98e8a64). Not ``moe.combine``: it is priced over the routed experts' output rows, which a
#: rank holds etp/tp x T·k of (the flex dispatcher sends each token to every etp rank of its
#: experts), so it is scaled with the routed experts (``_is_routed``, ``_fold_experts``): at
#: etp = tp not split. It stands in for the permute / unpermute traffic; Megatron-Core runs no
#: probability-weighting pass of its own (the probabilities multiply the expert activation)
_MOE_SP = (".moe.router", ".moe.router_softmax")


def _forward_costs(fwd: Graph, tp: int, ep: int, cp: int, sp: bool) -> tuple[np.ndarray, ...]:
    """The forward graph's cost columns on one rank, and each op's group: context parallelism
    scales the attention core by cp, the mask folds into the fused softmax, sequence
    parallelism splits norms, residual adds and the MoE router by tp (the norms' γ/β and the
    router's weight read whole), expert
    parallelism keeps E/ep experts' weights per rank."""
    n = len(fwd)
    c0, c1 = fwd.c0.copy(), fwd.c1.copy()
    gemm = fwd.gemm.copy()
    params = fwd.params.copy()
    grp = np.empty(n, dtype=np.int64)
    for i, nm in enumerate(fwd.names):
        if cp > 1 and nm.startswith("layers.") and _is_core(nm):
            c0[:, i] *= cp  # local queries against the whole sequence's keys
            c1[:, i] *= cp
        if nm.endswith(".attn.scale_mask"):
            c0[:, i] = 0.0  # folded into the fused scale-mask-softmax kernel
            c1[:, i] = 0.0
        if nm.startswith("layers."):
            grp[i] = _G["layer_fwd_core"] if _is_core(nm) else _G["layer_fwd"]
        elif nm.startswith("embed"):
            grp[i] = _G["embed_fwd"]
        else:
            grp[i] = _G["head_fwd"]
        if sp and (nm.endswith("norm") or nm.endswith("residual") or nm.endswith(_MOE_SP)):
            c0[:, i] /= tp
            c1[:, i] /= tp
            if nm.endswith("norm") or nm.endswith(".moe.router"):
                c0[_WR, i] *= tp  # the norm's γ/β, the router's weight: read whole by every rank
            if nm.endswith(".moe.router"):
                gemm[0, i] /= tp  # the rank's b·s/tp tokens
        if ".moe.experts." in nm and ep > 1:
            # each rank holds E/ep experts and, with balanced routing, runs T·k rows on them
            c0[:, i] /= np.where(np.arange(c0.shape[0]) == _WR, ep, 1)
            params[i] /= ep
            gemm[0, i] *= ep
    # the ops op-level selective checkpointing re-runs (recompute="selective_op")
    grp[op_recomputed(fwd.names, fwd.kinds) & (grp == _G["layer_fwd"])] = _G["layer_fwd_op"]
    return c0, c1, gemm, params, grp


def _backward(names: list[str], kinds: list[str], classes: list[str], c0: np.ndarray,
              c1: np.ndarray, gemm: np.ndarray, params: np.ndarray, grp: np.ndarray,
              frozen: np.ndarray, precision: Precision) -> tuple[Any, ...]:
    """The backward op(s) of each forward op (the module table): names, kinds, classes, cost
    columns c0 and c1, GEMM dims, groups and parameters of the new ops, as lists. ``frozen``
    ops (LoRA: every base weight) get no weight gradient; a frozen embedding no backward."""
    bn: list[str] = []
    bk: list[str] = []
    bc: list[str] = []
    b0: list[np.ndarray] = []
    b1: list[np.ndarray] = []
    bg: list[tuple[float, ...]] = []
    bgr: list[int] = []
    bp: list[float] = []
    for i in range(len(names)):
        q0, q1, g = c0[:, i], c1[:, i], gemm[:, i]
        kind, cls, nm = kinds[i], classes[i], names[i]
        grp_b = {_G["layer_fwd"]: _G["layer_bwd"], _G["layer_fwd_core"]: _G["layer_bwd"],
                 _G["layer_fwd_op"]: _G["layer_bwd"],
                 _G["head_fwd"]: _G["head_bwd"], _G["embed_fwd"]: _G["embed_bwd"]}[int(grp[i])]
        has_w = q0[_WR] > 0 and cls == "matmul"
        if kind == "embedding" and frozen[i]:
            continue  # a frozen embedding needs no gradient
        if cls == "matmul" and (kind == "linear" or has_w):
            # dX = dY·Wᵀ
            dx0, dx1 = np.zeros_like(q0), np.zeros_like(q1)
            dx0[_F], dx1[_F] = q0[_F], q1[_F]
            dx0[_WR] = q0[_WR]
            dx0[_AR], dx1[_AR] = q0[_AW], q1[_AW]
            dx0[_AW], dx1[_AW] = q0[_AR], q1[_AR]
            _append(bn, bk, bc, b0, b1, bg, bgr, bp, f"{nm}.grad_input", kind, cls, dx0, dx1,
                    (g[0], g[2], g[1]), grp_b, 0.0)
            if frozen[i]:
                continue  # a frozen weight: no dW
            # dW = Xᵀ·dY, accumulated into the fp32 gradient buffer
            dw0, dw1 = np.zeros_like(q0), np.zeros_like(q1)
            dw0[_F], dw1[_F] = q0[_F], q1[_F]
            dw0[_AR] = q0[_AR] + q0[_AW]
            dw1[_AR] = q1[_AR] + q1[_AW]
            dw0[_WR] = dw0[_WW] = params[i] * GRAD_ACC_BYTES
            col = any(k in nm for k in ("qkv_proj", "q_proj", "k_proj", "v_proj", "up_proj",
                                        "gate_proj"))
            dw_grp = grp_b if grp_b != _G["layer_bwd"] else \
                _G["layer_bwd_dw_col"] if col else _G["layer_bwd_dw"]
            _append(bn, bk, bc, b0, b1, bg, bgr, bp, f"{nm}.grad_weight", kind, cls, dw0, dw1,
                    tuple(g), dw_grp, 0.0)
        elif cls in ("matmul", "attention"):
            # activation × activation (unfused attention): dA and dB, twice the forward FLOPs;
            # fused attention backward recomputes the scores: 2.5× (module table above)
            factor = 2.0 if cls == "matmul" else 2.5
            d0, d1 = _activation_grads(q0, factor), _activation_grads(q1, factor)
            _append(bn, bk, bc, b0, b1, bg, bgr, bp, f"{nm}.grad", kind, cls, d0, d1, tuple(g),
                    grp_b, 0.0)
        elif kind == "embedding":
            d0, d1 = np.zeros_like(q0), np.zeros_like(q1)
            d1[_AR] = q1[_AW]  # dY rows
            d1[_WR] = d1[_WW] = q1[_AW] / precision.act_bytes * GRAD_ACC_BYTES  # fp32 grad rows
            d1[_F] = q1[_AW] / precision.act_bytes  # one add per gradient element
            _append(bn, bk, bc, b0, b1, bg, bgr, bp, f"{nm}.grad", kind, cls, d0, d1, tuple(g),
                    grp_b, 0.0)
        else:
            # elementwise / norm / softmax: 2× FLOPs, reads saved inputs and dY, writes dX
            d0, d1 = np.zeros_like(q0), np.zeros_like(q1)
            d0[_F], d1[_F] = 2 * q0[_F], 2 * q1[_F]
            d0[_AR], d1[_AR] = q0[_AR] + q0[_AW], q1[_AR] + q1[_AW]
            d0[_AW], d1[_AW] = q0[_AR], q1[_AR]
            d0[_WR] = q0[_WR]
            _append(bn, bk, bc, b0, b1, bg, bgr, bp, f"{nm}.grad", kind, cls, d0, d1, tuple(g),
                    grp_b, 0.0)
    return bn, bk, bc, b0, b1, bg, bgr, bp


def _append(names: list[str], kinds: list[str], classes: list[str], c0: list[np.ndarray],
            c1: list[np.ndarray], gemms: list[tuple[float, ...]], groups: list[int],
            params: list[float], name: str, kind: str, cls: str, q0: np.ndarray,
            q1: np.ndarray, gemm: tuple[float, ...], group: int, p: float) -> None:
    names.append(name)
    kinds.append(kind)
    classes.append(cls)
    c0.append(q0)
    c1.append(q1)
    gemms.append(tuple(float(x) for x in gemm))
    groups.append(group)
    params.append(p)


def _activation_grads(q: np.ndarray, flop_factor: float) -> np.ndarray:
    """Backward of an op whose operands are all activations: ``flop_factor`` × its FLOPs;
    reads its inputs and twice its output size (dY and the saved output), writes one gradient
    per input."""
    d = np.zeros_like(q)
    d[_F] = flop_factor * q[_F]
    d[_AR] = q[_AR] + 2 * q[_AW]
    d[_AW] = q[_AR]
    return d
