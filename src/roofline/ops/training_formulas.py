"""Training-only formulas: the optimizer step (an op, registered) and the activation memory a
transformer layer keeps for its backward pass (bytes held, not traffic: a plain function).

Notation as docs/notation.md: P parameters, s sequence length, b micro-batch, D model width,
N query heads, K KV heads, H head dim, F MLP width, t tensor-parallel degree.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import SpecError
from .cost import OpCost
from .registry import register

__all__ = ["OPTIMIZERS", "OPTIMIZER_FLOPS", "OPTIMIZER_STATES", "optimizer_step",
           "optimizer_state_bytes", "activation_bytes_per_token", "layer_activation_terms",
           "recomputed_layer_input_bytes",
           "sp_split",
           "MOE_ROUTINGS", "MOE_DISPATCHERS", "moe_mlp_activation_bytes", "moe_dispatch_ranks"]

#: the optimizers the library prices (the one table: ``train`` and the formula both read it):
#: plain SGD, SGD with momentum (torch.optim.SGD with momentum > 0), Adam (L2 decay), AdamW
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw")
#: fp32 state tensors per parameter (momentum buffer; Adam's first and second moments)
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2, "adamw": 2}
#: FLOPs per parameter of each update, decay and clipping apart (see ``optimizer_step``)
OPTIMIZER_FLOPS = {
    "sgd": 2,        # w −= lr·g: multiply, subtract
    "momentum": 4,   # buf = μ·buf + g (multiply, add); w −= lr·buf (multiply, subtract)
    # m = β₁m + (1−β₁)g (3); v = β₂v + (1−β₂)g² (4); with the bias corrections folded into
    # scalars (PyTorch's implementation): w −= step·m / (√v / c₂ + ε): sqrt, divide, add,
    # divide, multiply-subtract as 2 (5)
    "adam": 12,
    "adamw": 12,
}


@register("optimizer_step", "optimizer")
def optimizer_step(*, batch: int = 1, params: float, optimizer: str = "adamw",
                   grad_clip: bool = True, weight_decay: bool = True,
                   master_weights: bool = True, grad_bytes: float = 4.0,
                   state_bytes: float = 4.0, weight_bytes: float = 2.0,
                   master_bytes: float = 4.0) -> OpCost:
    """One optimizer update over ``params`` local parameters (independent of the batch; ``batch``
    is accepted as every formula's first argument and ignored).

    FLOPs per parameter: the update (``OPTIMIZER_FLOPS``) + 3 with ``grad_clip`` (the global
    norm's square and add, the rescale) + weight decay: decoupled for AdamW (w ·= 1 − lr·λ, 1)
    or an L2 term in the gradient for the others (g += λ·w, 2).
    Bytes per parameter: the gradient read once (twice with ``grad_clip``: the norm pass, then
    the update; the same rule for every optimizer); each state tensor read and written
    (``OPTIMIZER_STATES`` × 2 × state_bytes);
    with ``master_weights`` (mixed precision) the master copy (``master_bytes``: 4, fp32; 2
    for a bf16 master) read and written and the ``weight_bytes`` working copy written, else
    the parameters read and written at ``weight_bytes``.
    Mixed-precision AdamW with clipping and decay: 12 + 3 + 1 = 16 FLOPs and
    2·4 (grad) + 2·2·4 (m, v) + 2·4 (master) + 2 (bf16 copy) = 34 bytes per parameter.
    Assumptions: one fused pass per tensor group (no multi-tensor-apply launch cost counted
    here); the norm's cross-rank all-reduce is a collective, not part of this op. Clipping,
    for every optimizer alike: the global-norm pass reads each gradient once
    (``multi_tensor_l2norm`` in Megatron-LM's ``megatron/core/optimizer/clip_grads.py``); the
    rescale ``g ·= max_norm / norm`` is counted as one FLOP per parameter but no bytes —
    Megatron-LM runs its in-place ``multi_tensor_scale`` pass only when the coefficient is
    below 1 (the norm above the threshold), taken here as rare in steady-state training (an
    assumption; PyTorch's ``clip_grad_norm_`` rescales every step, one more read and write of
    the gradients that is not counted).

    References: Kingma & Ba 2015, "Adam", Algorithm 1; Loshchilov & Hutter 2019, "Decoupled
    Weight Decay Regularization" (AdamW); PyTorch torch.optim.SGD / Adam / AdamW documentation
    (the update rules as implemented); Micikevicius et al. 2018, "Mixed Precision Training"
    (fp32 master weights).
    """
    if optimizer not in OPTIMIZERS:
        raise SpecError(f"optimizer={optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    if not (isinstance(params, int | float) and not isinstance(params, bool) and params >= 0):
        raise SpecError(f"params must be a number >= 0, got {params!r}")
    for nm, v in (("grad_bytes", grad_bytes), ("state_bytes", state_bytes),
                  ("weight_bytes", weight_bytes), ("master_bytes", master_bytes)):
        if not v > 0:
            raise SpecError(f"{nm} must be > 0 bytes, got {v!r}")
    P = float(params)
    flops = OPTIMIZER_FLOPS[optimizer] + (3 if grad_clip else 0)
    if weight_decay:
        flops += 1 if optimizer == "adamw" else 2
    n_states = OPTIMIZER_STATES[optimizer]
    grad_read = grad_bytes * (2 if grad_clip else 1)
    w_read, w_written = (master_bytes, master_bytes + weight_bytes) if master_weights else \
        (weight_bytes, weight_bytes)
    return OpCost(flops=flops * P,
                  weight_bytes_read=(grad_read + n_states * state_bytes + w_read) * P,
                  weight_bytes_written=(n_states * state_bytes + w_written) * P)


def optimizer_state_bytes(optimizer: str, *, master_weights: bool = True,
                          state_bytes: float = 4.0) -> float:
    """Bytes per parameter the optimizer holds between steps: its state tensors
    (``OPTIMIZER_STATES`` × ``state_bytes``) and, with ``master_weights``, the fp32 master copy
    (mixed-precision AdamW: 2·4 + 4 = 12, as Megatron-LM's distributed-optimizer table)."""
    if optimizer not in OPTIMIZERS:
        raise SpecError(f"optimizer={optimizer!r}; allowed: {', '.join(OPTIMIZERS)}")
    return OPTIMIZER_STATES[optimizer] * state_bytes + (4.0 if master_weights else 0.0)


def sp_split(tp: Any, sequence_parallel: Any, xp: Any = np) -> Any:
    """How many ways a saved tensor that tensor parallelism leaves whole on every rank (a
    layer's input, the norms' inputs, the QKV and MLP input copies, dropout masks) is split: t
    under sequence parallelism with t > 1, else 1 (Korthikanti et al. 2022, arXiv:2205.05198,
    §4.2.2: the sequence-parallel regions shard these along the sequence). Not an MoE block's
    permuted token copies: those follow the experts' split (``moe_mlp_activation_bytes``,
    etp/t × k per token). The one rule of every activation formula here and of
    ``scenarios.training.memory`` (the input a fully recomputed layer keeps). ``tp`` and
    ``sequence_parallel`` may be arrays (``xp``)."""
    return xp.where((tp > 1) & xp.asarray(sequence_parallel, dtype=bool), tp, 1)


def activation_bytes_per_token(*, d_model: float, n_heads: float, n_kv_heads: float,
                               head_dim: float, d_ff: float, gated_mlp: bool, seq_len: float,
                               tp: Any = 1, sequence_parallel: Any = False, recompute: Any = 0,
                               fused_attention: bool = True, dropout: bool = False,
                               xp: Any = np) -> Any:
    """Bytes one transformer layer keeps per token for its backward pass, at 2-byte
    activations, on one tensor-parallel rank (scale by act_bytes / 2 for other widths).

    ``recompute``: 0 none, 1 selective (the attention core recomputed), 2 full (only the
    layer input kept: ``recomputed_layer_input_bytes``, 2·D, split by t under sequence
    parallelism); ``tp``, ``sequence_parallel`` and ``recompute`` may be arrays
    (``xp``) and are broadcast. Per token, Korthikanti et al. generalised to GQA (K·H for the
    K and V inputs) and gated MLPs:
    replicated across TP ranks unless sequence-parallel: 2 norm inputs (4D), the QKV and MLP
    input copies (2D + 2D), dropout masks (2D if ``dropout``);
    split by TP: Q (2D), K and V (4·K·H), the attention output (2D), the MLP activations
    (4F, or 6F gated: gate, up and their product);
    unfused attention only: the softmax output (2·N·s), with dropout its mask and output
    (3·N·s more), split by TP.
    With D = N·H = K·H, F = 4D, dropout and unfused attention this is the paper's
    s·b·h·(34 + 5·a·s/h) per layer (Table 2, no parallelism), (10 + 24/t + 5as/(ht)) with TP,
    (34 + 5as/h)/t with TP and sequence parallelism, 34/t with selective recompute.
    Full recompute: the table's 2·s·b·h is the layer input of a rank that holds the whole
    sequence; under sequence parallelism a rank holds s/t of it, and that slice is what it
    keeps, so 2·h/t per token (see ``recomputed_layer_input_bytes``).

    References: Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
    Models", arXiv:2205.05198, §4 and Table 2.
    """
    none, selective = layer_activation_terms(
        d_model=d_model, n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=head_dim, d_ff=d_ff,
        gated_mlp=gated_mlp, seq_len=seq_len, tp=tp, sequence_parallel=sequence_parallel,
        fused_attention=fused_attention, dropout=dropout, xp=xp)
    full = recomputed_layer_input_bytes(d_model=d_model, tp=tp,
                                        sequence_parallel=sequence_parallel, xp=xp)
    return xp.where(recompute == 0, none, xp.where(recompute == 1, selective, full))


def recomputed_layer_input_bytes(*, d_model: float, tp: Any = 1, sequence_parallel: Any = False,
                                 xp: Any = np) -> Any:
    """Bytes per token a fully recomputed transformer layer keeps on one tensor-parallel rank,
    at 2-byte activations: its input, 2·D, split by ``sp_split`` (D·2/t under sequence
    parallelism with t > 1, else the whole 2·D on every rank).

    One answer for ``activation_bytes_per_token(recompute=2)`` and the training memory model
    (``scenarios.training.memory``). Korthikanti et al. 2022 (arXiv:2205.05198) Table 2 lists
    full recompute as 2·s·b·h per layer, the input of a rank that holds the whole sequence,
    with no sequence-parallel entry; Megatron-Core checkpoints the block's ``hidden_states`` as
    they arrive, which under sequence parallelism is the rank's s/t slice (the embeddings are
    scattered to the sequence-parallel region first: language_model_embedding.py and
    transformer_block.py at NVIDIA/Megatron-LM 19c61ebd). The code is what runs, so the split
    is taken; ``distribute_saved_activations`` (which splits the input without sequence
    parallelism, off by default) is not modelled."""
    return 2.0 * float(d_model) / sp_split(tp, sequence_parallel, xp)


def layer_activation_terms(*, d_model: float, n_heads: float, n_kv_heads: float,
                           head_dim: float, d_ff: float, gated_mlp: bool, seq_len: float,
                           tp: Any, sequence_parallel: Any, fused_attention: bool,
                           dropout: bool, xp: Any = np, fp8: bool = False) -> tuple[Any, Any]:
    """(no recompute, selective recompute) bytes per token of ``activation_bytes_per_token``
    (the training step needs both: a fully recomputed layer holds the first while it runs).

    ``fp8``: the bytes Transformer Engine's fp8 recipe keeps (true bytes, not at 2-byte
    activations): a linear saves its fp8-cast input for the weight gradient (1 byte), every
    other saved tensor stays 16-bit. Read in TE v1.8 (3ec998e9) pytorch/module/:
    ``LayerNormLinear`` saves the norm's input (``inputmat``, activation dtype) and its fp8
    output ``ln_out`` (uint8); ``LayerNormMLP`` the norm's input, fp8 ``ln_out``, ``fc1_out``
    (the activation's input, written in activation dtype) and the activation's fp8 output
    ``gelu_out`` (fc2's input); ``Linear`` (the attention projection) its fp8 ``inputmat``;
    attention runs in 16-bit (``fp8_dpa`` off by default) and keeps Q, K, V and its output.
    Per token: norm inputs 4D, QKV and MLP inputs D + D, Q / K / V 2D + 4·K·H, the attention
    output 2D (attention's) + D (the projection's fp8 copy), the MLP 4F + F gated (gate and up
    at 16 bits, their product in fp8) or 2F + F; masks and unfused scores as at 16 bits."""
    D, H, K = float(d_model), float(head_dim), float(n_kv_heads)
    F, s = float(d_ff), float(seq_len)
    mask = 1.0 if dropout else 0.0
    split = sp_split(tp, sequence_parallel, xp)
    gin = 1.0 if fp8 else 2.0  # bytes per element of a saved GEMM input
    # two norm inputs, QKV and MLP inputs, masks
    repl = 4 * D + gin * D + gin * D + 2 * mask * D
    mlp = (4 * F + gin * F) if gated_mlp else (2 * F + gin * F)
    shard = 2 * D + 4 * K * H + 2 * D + (D if fp8 else 0.0) + mlp
    scores = 0.0 if fused_attention else (2 + 3 * mask) * n_heads * s
    selective = repl / split + shard / tp
    return selective + scores / tp, selective


def op_sac_activation_bytes(*, d_model: float, n_heads: float, n_kv_heads: float,
                            head_dim: float, d_ff: float, gated_mlp: bool, fused_qkv: bool,
                            tp: Any = 1, sequence_parallel: Any = False,
                            xp: Any = np) -> Any:
    """Bytes per token (at 2-byte activations) a dense decoder layer keeps for its backward
    under op-level selective checkpointing (torchtitan's ``selective_ac_option = "op"``:
    ``graphs.training.op_recomputed``): the layer's input (the checkpoint's, 2D, split by TP
    only when sequence-parallel), the outputs of the odd-numbered linears in forward order
    (q, v, gate, down of a Llama block: 2·(N·H + K·H + F + D); qkv and up of a GPT block with
    a fused QKV: 2·((N + 2K)·H + F)), the fused attention's output (2·N·H) and its fp32
    log-sum-exp (4·N). Everything else is recomputed. Assumption: with TP every saved matmul
    output is taken as split by tp (a row-parallel output is only after its reduce-scatter)."""
    D, N, K, H, F = (float(x) for x in (d_model, n_heads, n_kv_heads, head_dim, d_ff))
    outs = [(N + 2 * K) * H] if fused_qkv else [N * H, K * H, K * H]
    outs += [D] + ([F, F] if gated_mlp else [F]) + [D]
    saved = sum(outs[0::2])  # the 1st, 3rd, ... linear of the block keep their outputs
    inp = 2 * D / sp_split(tp, sequence_parallel, xp)
    return inp + (2 * saved + 2 * N * H + 4 * N) / tp


#: how the router spreads a token's k experts (``moe_dispatch_ranks``)
MOE_ROUTINGS = ("random", "contiguous")
#: Megatron-Core's expert-parallel token dispatchers the library prices
#: (``--moe-token-dispatcher-type``; "flex" with its DeepEP backend), scenarios/training/folding.py
MOE_DISPATCHERS = ("flex", "alltoall")


def moe_mlp_activation_bytes(*, d_model: float, expert_d_ff: float, top_k: float,
                             n_shared: float, n_experts: float, gated_mlp: bool,
                             tp: Any = 1, sequence_parallel: Any = False,
                             xp: Any = np, fp8: bool = False, etp: Any = None) -> Any:
    """Bytes per token (at 2-byte activations) a mixture-of-experts MLP block keeps for its
    backward pass on one tensor-parallel rank, in place of a dense MLP's 4F (6F gated).
    ``fp8``: true bytes under Transformer Engine's fp8 recipe, the rule of
    ``layer_activation_terms``: a GEMM's saved input in fp8 (TE's ``GroupedLinear`` keeps its
    quantized ``inputmats``, d0067d0d pytorch/module/grouped_linear.py), the rest 16-bit: per
    expert row D (the permuted copy) + 4F_e (gate, up) + F_e (the SwiGLU output), the shared
    experts as the dense MLP (5F or 3F per F), the router's fp32 probabilities.

    Per token, Korthikanti et al. 2022 (arXiv:2205.05198, §4.1: every tensor a backward GEMM or
    activation needs) applied to the grouped-GEMM expert path as NeMo AutoModel's
    ``GroupedExpertsDeepEP`` runs it (permute → gate/up GEMM → weighted SwiGLU → down GEMM →
    unpermute): for each of the top-k expert rows the permuted input copy (2D: the gate/up
    weight gradient's input), the gate and up outputs (4F_e) and the SwiGLU output (2F_e: the
    down weight gradient's input), F_e split by TP (2F_e + 2F_e ungated); the routing weights
    are applied inside the SwiGLU, so the unpermute (a plain sum) keeps nothing; the shared
    experts as a dense MLP of width n_shared·F_e; the router's fp32 probabilities (4E). The
    permuted copies are what MoEBlaze (arXiv:2601.05296, §1) names the "token routing buffers"
    that make MoE activations large: k copies of every token. Expert parallelism does not
    shrink this: with balanced routing a rank runs as many expert rows as the tokens of its
    group send out (k each), whichever experts it holds. With the experts split ``etp`` ways
    (default: tp) a rank runs etp/tp × b·s·k rows (both of Megatron-Core's dispatchers: flex
    sends each token to every etp rank of each expert-parallel rank holding one of its experts,
    alltoall all-gathers the received copies over the etp ranks; token_dispatcher.py at
    NVIDIA/Megatron-LM d98e8a64; the graph's ``_fold_experts`` runs the same rows), so it keeps
    etp/tp × k D-wide copies per token of the micro-batch: at etp = tp all k, not split by tp
    (session 31; before, the copies were divided by tp under sequence parallelism, the rank's
    own b·s/tp tokens' copies only, an undercount wherever etp > 1). The experts' own tensors
    are etp/tp × the rows at F_e/etp width: split by tp whatever etp is. Megatron-Core refuses
    MoE training with tp > 1 and sequence parallelism off, so ``sequence_parallel`` does not
    change the copies."""
    D, F, k = float(d_model), float(expert_d_ff), float(top_k)
    gin = 1.0 if fp8 else 2.0  # bytes per element of a saved GEMM input
    mlp = (4.0 + gin) if gated_mlp else (2.0 + gin)
    copies = k * gin * D
    split = k * mlp * F + mlp * float(n_shared) * F + 4.0 * float(n_experts)
    if etp is not None and not bool(np.all(np.asarray(etp) >= 1)):
        raise SpecError(f"etp={etp!r}: the experts' tensor-parallel size is a count >= 1 "
                        "(None: tp)")
    rows = 1.0 if etp is None else etp / tp  # the rows the rank's experts run, per token·k
    return copies * rows + split / tp


@lru_cache(maxsize=256)
def moe_dispatch_ranks(n_experts: int, top_k: int, ep: int, routing: str = "random") -> float:
    """Expected distinct expert-parallel ranks one token is dispatched to. A token goes to a
    rank once however many of its k experts that rank holds (DeepEP's dispatch layout:
    ``num_tokens_per_rank`` / ``is_token_in_rank``, deepseek-ai/DeepEP README, "Example use in
    model training"; the received copy is then expanded to the rank's experts), each rank
    holding E/ep consecutive experts.

    ``routing="random"``: the k experts uniformly at random without repetition (balanced in
    expectation): ep · (1 − C(E − E/ep, k) / C(E, k)). ``"contiguous"``: NeMo AutoModel's
    ``FakeBalancedGate`` (token i → experts i·k … i·k + k − 1 mod E; its benchmark tables run
    it): the mean over tokens of the blocks of E/ep experts that window spans."""
    E, k, ep = int(n_experts), int(top_k), int(ep)
    if routing not in MOE_ROUTINGS:
        raise SpecError(f"moe_routing={routing!r}; allowed: {', '.join(MOE_ROUTINGS)}")
    if E <= 0 or k <= 0 or ep < 1 or E % ep or k > E:
        raise SpecError(f"moe_dispatch_ranks: needs 0 < top_k={k} <= n_experts={E} and ep={ep} "
                        f"dividing the experts")
    per = E // ep
    if routing == "contiguous":
        n = E // np.gcd(E, k)  # the window start t·k mod E repeats every E/gcd(E, k) tokens
        starts = (np.arange(n) * k) % E
        ranks = [len({((s + j) % E) // per for j in range(k)}) for s in starts]
        return float(np.mean(ranks))
    miss = 1.0  # C(E − per, k) / C(E, k) as a product
    for j in range(k):
        miss *= max(E - per - j, 0) / (E - j)
    return ep * (1.0 - miss)
