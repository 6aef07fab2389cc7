"""Transformer graphs (encoders, decoders, ViT) from one set of per-op formulas.

A phase only sets the two lengths the formulas take: T query tokens and S key/value tokens.

| phase      | T        | S               | KV cache                  | logits      |
|------------|----------|-----------------|---------------------------|-------------|
| forward    | seq_len  | seq_len         | none                      | every token |
| prefill    | seq_len  | prefix+seq_len  | written (T new tokens)    | last token  |
| decode     | 1        | context         | read (S), written (1)     | one token   |

Decode is the same attention formula with T = 1 and S = context; causal attention is counted
causally (``ops.causal_pairs``). Dimension letters follow scaling-book: B batch, T, S, D model
width, F MLP width, N query heads, K KV heads, H head dim, V vocabulary, E experts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpecError
from ..ops.formulas import glu_op
from ..specs.dtypes import Precision
from ..specs.keys import SpecKey, key_slot, state_without_keys
from .graph import Graph, GraphBuilder

__all__ = ["PHASES", "TransformerConfig", "transformer_graph"]


def __getattr__(name: str) -> Any:
    # from_hf_config moved to graphs/importers/hf_config.py (the importers live together);
    # the old import path keeps working.
    if name == "from_hf_config":
        from .importers.hf_config import from_hf_config

        return from_hf_config
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

PHASES = ("forward", "prefill", "decode")
#: TransformerConfig's integer fields that may be 0 (absent); the widths, depths and head
#: counts must be >= 1, window_every / moe_every / expert_groups too
_COUNTS = ("vocab", "max_positions", "type_vocab", "n_experts", "top_k", "classes", "image_size",
           "patch_size", "channels", "moe_d_ff", "n_shared_experts", "first_dense_layers",
           "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
           "encoder_layers", "source_len", "encoder_positions", "position_offset", "audio_mels",
           "relative_buckets", "rotary_dim")


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformerConfig:
    """The shape of a transformer, normalised from a HuggingFace config."""

    name: str
    arch: str  #: "decoder" (causal LM), "encoder" (BERT-like), "vision" (ViT)
    d_model: int  #: D
    n_layers: int  #: L
    n_heads: int  #: N
    n_kv_heads: int  #: K (= N for MHA, 1 for MQA)
    head_dim: int  #: H
    d_ff: int  #: F, MLP hidden width (per expert for MoE)
    vocab: int  #: V (0 for ViT)
    max_positions: int
    norm: str = "rmsnorm"  #: "rmsnorm" | "layernorm"
    gated_mlp: bool = True  #: SwiGLU/GeGLU (three matrices) vs plain two-matrix MLP
    act: str = "silu"  #: elementwise activation name (ops.ELEMENTWISE_FLOPS)
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    fused_qkv: bool = False  #: one [D, (N+2K)H] matmul (GPT-2 c_attn) instead of three
    positions: str = "rope"  #: "rope" | "learned" | "none"
    #: RoPE on the first rotary_dim of each head's head_dim (0: all of it; Nemotron's
    #: partial_rotary_factor 0.5 rotates half)
    rotary_dim: int = 0
    tied_embeddings: bool = False
    post_norm: bool = False  #: BERT's post-LN (norm after the residual add)
    type_vocab: int = 0  #: BERT token-type embeddings
    n_experts: int = 0  #: E, routed experts (0: dense MLP)
    top_k: int = 0  #: experts per token
    sliding_window: int | None = None
    embed_scale: bool = False  #: Gemma multiplies embeddings by √D
    pooler: bool = False  #: BERT pooler (dense + tanh on the [CLS] token)
    classes: int = 0  #: classifier head width (ViT ImageNet head)
    image_size: int = 0
    patch_size: int = 0
    channels: int = 3
    #: Gemma 2: sliding window on every ``window_every``-th layer only (layers i % n == 0);
    #: 1 = every layer (Mistral). The other layers attend globally.
    window_every: int = 1
    #: Gemma 3: which layers are windowed, one flag per layer (from layer_types or every
    #: sliding_window_pattern-th layer global); overrides window_every when given. A config
    #: with fewer layers (a pipeline stage, a lever's shrunk copy) reads its prefix; one with
    #: more repeats it
    window_layers: tuple[bool, ...] = ()
    qk_norm: bool = False  #: Gemma 3: per-head RMSNorm on queries and keys (weights [H] each)
    sandwich_norm: bool = False  #: Gemma 2: extra RMSNorms after attention and after the MLP
    final_logit_softcap: bool = False  #: Gemma 2: tanh soft-capping of the logits
    # -- mixture of experts, DeepSeek style
    moe_d_ff: int = 0  #: routed-expert MLP width (0: d_ff)
    n_shared_experts: int = 0  #: always-on experts of width moe_d_ff each (DeepSeek, Qwen-MoE)
    #: first k layers use a dense MLP of width d_ff (first_k_dense_replace)
    first_dense_layers: int = 0
    #: every n-th layer is MoE (layers n-1, 2n-1, ...; Llama 4's interleave_moe_layer_step), the
    #: others dense of width d_ff; 1: every layer past first_dense_layers
    moe_every: int = 1
    router_bias: bool = False  #: per-expert score-correction bias (DeepSeek-V3 noaux_tc)
    #: expert parallelism as serving runs it (attention data-parallel over this many groups,
    #: the routed experts split among them): the device holds E/expert_groups experts and
    #: receives, with balanced routing, the token rows of every group routed to them (1: none)
    expert_groups: int = 1
    # -- multi-head latent attention (DeepSeek-V2/V3); kv_lora_rank > 0 switches it on
    q_lora_rank: int = 0  #: query down-projection rank (0: a plain [D, N·(nope+rope)] q_proj)
    kv_lora_rank: int = 0  #: compressed KV latent width (cached per token with the RoPE key)
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # -- encoder-decoder (arch "seq2seq": T5, BART, Whisper; graphs/seq2seq.py). n_layers is
    #    the decoder's depth, max_positions the decoder's position limit (0: none, as T5's)
    encoder_layers: int = 0  #: encoder blocks
    source_len: int = 0  #: encoder tokens per request, the cross-attention S (Whisper 1500)
    encoder_positions: int = 0  #: rows of the encoder's position table (0: none, T5)
    position_offset: int = 0  #: BART: extra rows in each learned position table (2)
    audio_mels: int = 0  #: Whisper: mel bins into the conv front-end (0: a token encoder)
    relative_buckets: int = 0  #: T5: relative-position buckets (a bias table per stack)
    k_bias: bool = True  #: with qkv_bias: whether k_proj has one (Whisper: no)
    embed_norm: bool = False  #: BART: a LayerNorm on each stack's embeddings
    #: the memoized content key (``specs.keys.frozen_key``): no field of the config
    _frozen_key: SpecKey | bool | None = key_slot()
    __getstate__ = state_without_keys  # a pickle leaves the key out (hashes differ per process)

    def __post_init__(self) -> None:
        for f in ("d_model", "n_layers", "n_heads", "n_kv_heads", "head_dim", "d_ff"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise SpecError(f"{self.name}: {f} must be a positive integer, got {v!r}")
        for f in _COUNTS:
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise SpecError(f"{self.name}: {f}={v!r} must be an integer >= 0")
        for f in ("window_every", "moe_every", "expert_groups"):
            v = getattr(self, f)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise SpecError(f"{self.name}: {f}={v!r} must be an integer >= 1")
        w = self.sliding_window
        if w is not None and (not isinstance(w, int) or isinstance(w, bool) or w < 1):
            raise SpecError(f"{self.name}: sliding_window={w!r} must be an integer >= 1 (None: "
                            "global attention)")
        if self.n_experts and not 1 <= self.top_k <= self.n_experts:
            raise SpecError(f"{self.name}: top_k={self.top_k} must be an integer in [1, "
                            f"n_experts={self.n_experts}]")
        if self.rotary_dim > self.head_dim:
            raise SpecError(f"{self.name}: rotary_dim={self.rotary_dim} exceeds head_dim="
                            f"{self.head_dim}")
        if self.n_heads % self.n_kv_heads:
            raise SpecError(f"{self.name}: num_key_value_heads={self.n_kv_heads} must divide "
                            f"num_attention_heads={self.n_heads}")
        if self.arch not in ("decoder", "encoder", "vision", "seq2seq"):
            raise SpecError(f"{self.name}: arch={self.arch!r}; allowed: decoder, encoder, "
                            "vision, seq2seq")
        if self.arch == "seq2seq":
            for f in ("encoder_layers", "source_len"):
                v = getattr(self, f)
                if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                    raise SpecError(f"{self.name}: an encoder-decoder needs {f} >= 1, got "
                                    f"{v!r}")
            if self.encoder_positions and self.source_len > self.encoder_positions:
                raise SpecError(f"{self.name}: source_len={self.source_len} exceeds the "
                                f"encoder's {self.encoder_positions} positions")
        if self.arch == "vision" and self.image_size % max(self.patch_size, 1):
            raise SpecError(f"{self.name}: patch_size={self.patch_size} must divide "
                            f"image_size={self.image_size}")

    @property
    def causal(self) -> bool:
        return self.arch in ("decoder", "seq2seq")

    @property
    def generates(self) -> bool:
        """Autoregressive (prefill/decode phases): decoder LMs and encoder-decoders."""
        return self.arch in ("decoder", "seq2seq")

    def cross_kv_bytes(self, kv_bytes: float, *, layers: range | None = None) -> float:
        """Encoder-decoder: the cross-attention K/V one sequence caches, source_len tokens in
        every decoder layer (2 · L · K · H · source_len elements); 0 for other models."""
        if self.arch != "seq2seq":
            return 0.0
        n = self.n_layers if layers is None else len(layers)
        return 2.0 * n * self.n_kv_heads * self.head_dim * self.source_len * kv_bytes

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (DeepSeek): kv_lora_rank + rope dims cached per token."""
        return self.kv_lora_rank > 0

    def layer_window(self, i: int) -> int | None:
        """Sliding window of layer ``i`` (None: global attention)."""
        if self.sliding_window is None:
            return None
        if self.window_layers:
            flag = self.window_layers[i % len(self.window_layers)]
            return self.sliding_window if flag else None
        if i % self.window_every:
            return None
        return self.sliding_window

    def layer_is_moe(self, i: int) -> bool:
        return (self.n_experts > 0 and i >= self.first_dense_layers
                and (i + 1) % max(self.moe_every, 1) == 0)

    @property
    def image_tokens(self) -> int:
        """ViT sequence: patches + [CLS]."""
        return (self.image_size // self.patch_size) ** 2 + 1 if self.arch == "vision" else 0

    def kv_bytes_per_token(self, kv_bytes: float) -> float:
        """KV cache per token over all layers: 2 (K and V) · L · K · H elements; with MLA, the
        latent L · (kv_lora_rank + qk_rope_head_dim) elements (K and V share it)."""
        if self.mla:
            return self.n_layers * (self.kv_lora_rank + self.qk_rope_head_dim) * kv_bytes
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim * kv_bytes

    def kv_bytes_per_sequence(self, tokens: Any, kv_bytes: float, *,
                              layers: range | None = None) -> Any:
        """KV cache one sequence holds at ``tokens`` tokens (a number or a numpy array):
        Σ over layers of min(tokens, window of the layer) × the layer's bytes per token; global
        layers hold every token. ``layers``: the layer indices counted (a pipeline stage);
        default all.

        Sliding-window layers keep only their window, as serving engines store them:
        TensorRT-LLM's cyclic (rolling-buffer) KV cache and its per-window-size pools
        (variable sliding-window attention, ``max_attention_window`` per layer); vLLM V1's
        hybrid KV-cache manager, which reserves sliding-window layers' slots for the most
        recent ``sliding_window`` tokens only; Hugging Face's ``HybridCache`` for Gemma 2
        (sources in docs/serving.md, "Sliding-window layers"). Without a window (and without
        ``layers``) this is exactly ``tokens × kv_bytes_per_token`` (plus, for an
        encoder-decoder, the cross-attention K/V of its source: ``cross_kv_bytes``).
        """
        cross = self.cross_kv_bytes(kv_bytes, layers=layers)
        if layers is None:
            if self.sliding_window is None:
                return tokens * self.kv_bytes_per_token(kv_bytes) + cross
            layers = range(self.n_layers)
        if self.mla:  # latent + RoPE key, shared by K and V
            per_layer = (self.kv_lora_rank + self.qk_rope_head_dim) * kv_bytes
        else:
            per_layer = 2 * self.n_kv_heads * self.head_dim * kv_bytes
        n_win = sum(1 for i in layers if self.layer_window(i) is not None)
        held = (len(layers) - n_win) * tokens
        if n_win and self.sliding_window is not None:
            held = held + n_win * np.minimum(tokens, self.sliding_window)
        return per_layer * held + cross


def _mla_attention(b: GraphBuilder, cfg: TransformerConfig, p: str, T: int, S: int, *,
                   phase: str, prefix: int) -> None:
    """Multi-head latent attention (DeepSeek-V2/V3), projections through o_proj.

    Letters: N heads, R = kv_lora_rank (latent), P = qk_rope_head_dim, Hn = qk_nope_head_dim,
    Hv = v_head_dim, Q = q_lora_rank. Per token the cache holds the latent plus the RoPE key:
    R + P values per layer, which serve as both keys and values.

    - forward/prefill ("naive" form, as serving engines run prefill): the latent of all S
      tokens is up-projected by kv_b_proj [R, N·(Hn+Hv)] to per-head keys and values, then
      ordinary attention with N = K heads, qk dim Hn+P, v dim Hv.
    - decode ("absorbed" form, DeepSeek-V2 paper §2.1.3, as FlashMLA runs it): W_UK is folded
      into the query (q_nope·W_UK per head: [T, Hn] · [Hn, R]) and W_UV applied after
      attention ([T, R] · [R, Hv] per head); the attention itself is multi-query over the
      cached latent, qk dim R+P, v dim R. The latent is read once for K and V:
      ``kv_bytes`` is scaled by (R+P)/((R+P)+R) so the formula's K-plus-V read counts it once.
    """
    D, N = cfg.d_model, cfg.n_heads
    R, P, Hn, Hv, Qr = (cfg.kv_lora_rank, cfg.qk_rope_head_dim, cfg.qk_nope_head_dim,
                        cfg.v_head_dim, cfg.q_lora_rank)
    Hq = Hn + P
    if Qr:
        b.add("linear", f"{p}.attn.q_a_proj", params=D * Qr, tokens=T, d_in=D, d_out=Qr)
        b.add("norm", f"{p}.attn.q_a_layernorm", params=Qr, elements=T * Qr, features=Qr,
              variant="rmsnorm")
        b.add("linear", f"{p}.attn.q_b_proj", params=Qr * N * Hq, tokens=T, d_in=Qr,
              d_out=N * Hq)
    else:
        b.add("linear", f"{p}.attn.q_proj", params=D * N * Hq, tokens=T, d_in=D, d_out=N * Hq)
    b.add("linear", f"{p}.attn.kv_a_proj_with_mqa", params=D * (R + P), tokens=T, d_in=D,
          d_out=R + P)
    b.add("norm", f"{p}.attn.kv_a_layernorm", params=R, elements=T * R, features=R,
          variant="rmsnorm")
    b.add("elementwise", f"{p}.attn.rope", elements=T * (N + 1) * P, op="rope")
    cached = phase in ("prefill", "decode")
    if cached:  # the latent and the RoPE key: (R + P) values = 2 · (R + P)/2
        b.add("kv_cache_write", f"{p}.attn.kv_cache_write", tokens=T, n_kv_heads=1,
              head_dim=(R + P) // 2 if (R + P) % 2 == 0 else R + P)
    if phase == "decode":
        b.add("matmul", f"{p}.attn.q_absorb_w_uk", params=N * Hn * R, groups=N, m=T, k=Hn,
              n=R, b_source="weight")
        kvb = b.precision.kv_bytes * (R + P) / (2 * R + P)
        b.add("attention", f"{p}.attn.attention", n_heads=N, n_kv_heads=1, head_dim=R + P,
              v_head_dim=R, q_len=T, kv_len=S, causal=True, kv_from_cache=True, kv_bytes=kvb)
        b.add("matmul", f"{p}.attn.v_up_w_uv", params=N * R * Hv, groups=N, m=T, k=R, n=Hv,
              b_source="weight")
    else:
        # up-project the latent of every key position (prefix latents come from the cache)
        b.add("linear", f"{p}.attn.kv_b_proj", params=R * N * (Hn + Hv), tokens=T + prefix,
              d_in=R, d_out=N * (Hn + Hv))
        b.add("attention", f"{p}.attn.attention", n_heads=N, n_kv_heads=N, head_dim=Hq,
              v_head_dim=Hv, q_len=T, kv_len=S, causal=True, kv_from_cache=False)
    b.add("linear", f"{p}.attn.o_proj", params=N * Hv * D, tokens=T, d_in=N * Hv, d_out=D)


def _expected_experts(E: int, k: int, tokens: float) -> float:
    """Expected distinct experts hit by ``tokens`` tokens each routed to k of E experts,
    assuming uniform independent routing: E·(1 − (1 − k/E)^tokens)."""
    return E * (1.0 - (1.0 - k / E) ** tokens)


def transformer_graph(
    cfg: TransformerConfig, precision: Precision, *, phase: str = "forward", seq_len: int = 1,
    context: int = 0, fused_attention: bool = True, batch: int | None = None,
    logits: str | None = None,
) -> Graph:
    """Build the op graph of one pass.

    ``seq_len`` is T for forward/prefill; ``context`` is S for decode (tokens in the cache,
    the new one included) or the cached prefix for prefill. ``fused_attention=False`` emits the
    unfused QKᵀ → softmax → ·V sequence with scores in memory. ``batch`` is needed only for MoE
    (the number of distinct experts read depends on it). ``logits``: "all" or "last".
    """
    if phase not in PHASES:
        raise SpecError(f"phase={phase!r}; allowed: {', '.join(PHASES)}")
    if cfg.arch == "seq2seq":
        from .seq2seq import seq2seq_graph

        return seq2seq_graph(cfg, precision, phase=phase, seq_len=seq_len, context=context,
                             fused_attention=fused_attention, logits=logits)
    if cfg.arch != "decoder" and phase != "forward":
        raise SpecError(f"{cfg.name} is an {cfg.arch} model: phase must be 'forward', "
                        f"got {phase!r}")
    D, L, F = cfg.d_model, cfg.n_layers, cfg.d_ff
    if cfg.arch == "vision":
        T = S = cfg.image_tokens
    elif phase == "decode":
        if context < 1:
            raise SpecError(f"decode needs context >= 1 (tokens in the KV cache), got {context!r}")
        T, S = 1, context
    else:
        if not isinstance(seq_len, int) or seq_len < 1:
            raise SpecError(f"seq_len must be a positive integer, got {seq_len!r}")
        T = seq_len
        S = seq_len + (context if phase == "prefill" else 0)
    if cfg.max_positions and S > cfg.max_positions:
        raise SpecError(f"{cfg.name}: sequence of {S} tokens exceeds max_position_embeddings="
                        f"{cfg.max_positions}")
    if logits is None:
        logits = "all" if phase == "forward" else "last"
    cached = phase in ("prefill", "decode")
    b = GraphBuilder(cfg.name, phase, precision)
    b.meta.update(seq_len=T, kv_len=S, phase=phase)

    _embeddings(b, cfg, T, precision)

    n_norm_par = 2 * D if cfg.norm == "layernorm" else D
    n_tokens = (batch or 1) * T
    for i in range(L):
        p = f"layers.{i}"
        window = cfg.layer_window(i)

        def norm(name: str) -> None:
            b.add("norm", f"{p}.{name}", params=n_norm_par, elements=T * D, features=D,  # noqa: B023
                  variant=cfg.norm)

        if not cfg.post_norm:
            norm("input_norm")
        if cfg.mla:
            _mla_attention(b, cfg, p, T, S, phase=phase, prefix=S - T)
        else:
            _attention(b, cfg, p, T, S, cached, fused_attention, precision, window)
        if cfg.sandwich_norm:
            norm("attn_out_norm")
        b.add("elementwise", f"{p}.attn.residual", elements=T * D, op="add")
        if cfg.post_norm:
            norm("attn_norm")
        else:
            norm("post_attn_norm")

        if cfg.layer_is_moe(i):
            _moe_layer(b, cfg, p, T, n_tokens, batch)
            if cfg.n_shared_experts:
                _mlp(b, cfg, f"{p}.moe.shared_experts", cfg.n_shared_experts * (cfg.moe_d_ff or F),
                     T)
        else:
            _mlp(b, cfg, f"{p}.mlp", F, T)
        if cfg.sandwich_norm:
            norm("mlp_out_norm")
        b.add("elementwise", f"{p}.mlp.residual", elements=T * D, op="add")
        if cfg.post_norm:
            norm("mlp_norm")

    _heads(b, cfg, T, logits, n_norm_par)
    if cached:
        b.state_bytes_per_sample = float(cfg.kv_bytes_per_sequence(S, precision.kv_bytes))
    tokens = 1 if phase == "decode" else T
    return b.build(tokens_per_sample=tokens, fixed_batch=batch if cfg.n_experts else None)


def _embeddings(b: GraphBuilder, cfg: TransformerConfig, T: int, precision: Precision) -> None:
    """Token (or patch) embeddings, learned positions, token types, the encoder's norm."""
    D, V = cfg.d_model, cfg.vocab
    if cfg.arch == "vision":
        P, C = cfg.patch_size, cfg.channels
        b.add("conv2d", "embeddings.patch_embeddings", params=D * C * P * P + D, c_in=C,
              h=cfg.image_size, w=cfg.image_size, c_out=D, kernel=P, stride=P, bias=True)
        b.add("copy", "embeddings.cls_concat", params=D, elements=T * D)
    else:
        b.add("embedding", "embed_tokens", params=V * D, tokens=T, dim=D)
        if cfg.embed_scale:
            b.add("elementwise", "embed_scale", elements=T * D, op="scale")
    if cfg.positions == "learned":
        n_pos = T if cfg.arch == "vision" else cfg.max_positions
        # the T position rows are read once per call and broadcast-added over the batch
        b.add("elementwise", "embed_positions", params=n_pos * D, elements=T * D, op="add",
              n_inputs=1, param_bytes=T * D * precision.weight_bytes)
    if cfg.type_vocab:
        b.add("elementwise", "embed_token_types", params=cfg.type_vocab * D, elements=T * D,
              op="add", n_inputs=1, param_bytes=T * D * precision.weight_bytes)
    if cfg.arch == "encoder":
        b.add("norm", "embeddings.norm", params=2 * D, elements=T * D, features=D,
              variant="layernorm")


def _attention(b: GraphBuilder, cfg: TransformerConfig, p: str, T: int, S: int, cached: bool,
               fused_attention: bool, precision: Precision, window: int | None) -> None:
    """One layer's (non-MLA) attention: QKV projections, RoPE, the KV-cache write, the fused
    kernel or the unfused QKᵀ → mask → softmax → ·V sequence, the output projection."""
    D, N, K, H = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    if cfg.fused_qkv:
        b.add("linear", f"{p}.attn.qkv_proj", params=D * (N + 2 * K) * H +
              ((N + 2 * K) * H if cfg.qkv_bias else 0), tokens=T, d_in=D,
              d_out=(N + 2 * K) * H, bias=cfg.qkv_bias)
    else:
        for nm, heads in (("q_proj", N), ("k_proj", K), ("v_proj", K)):
            b.add("linear", f"{p}.attn.{nm}", params=D * heads * H +
                  (heads * H if cfg.qkv_bias else 0), tokens=T, d_in=D,
                  d_out=heads * H, bias=cfg.qkv_bias)
    if cfg.qk_norm:  # RMSNorm over each head's H features, one [H] weight for all heads
        for nm, heads in (("q_norm", N), ("k_norm", K)):
            b.add("norm", f"{p}.attn.{nm}", params=H, elements=T * heads * H, features=H,
                  variant="rmsnorm")
    if cfg.positions == "rope":  # on rotary_dim of each head's H (Nemotron: half)
        b.add("elementwise", f"{p}.attn.rope", elements=T * (N + K) * (cfg.rotary_dim or H),
              op="rope")
    if cached:
        b.add("kv_cache_write", f"{p}.attn.kv_cache_write", tokens=T, n_kv_heads=K,
              head_dim=H)
    if fused_attention:
        b.add("attention", f"{p}.attn.attention", n_heads=N, n_kv_heads=K, head_dim=H,
              q_len=T, kv_len=S, causal=cfg.causal, kv_from_cache=cached,
              window=window)
    else:
        kv_src = "kv" if cached else "act"
        b.add("matmul", f"{p}.attn.scores", groups=N, m=T, k=H, n=S, b_groups=K,
              b_source=kv_src, b_bytes=precision.kv_bytes if cached else None)
        b.add("elementwise", f"{p}.attn.scale_mask", elements=N * T * S, op="mask")
        b.add("softmax", f"{p}.attn.softmax", elements=N * T * S)
        b.add("matmul", f"{p}.attn.context", groups=N, m=T, k=S, n=H, b_groups=K,
              b_source=kv_src, b_bytes=precision.kv_bytes if cached else None)
    b.add("linear", f"{p}.attn.o_proj", params=N * H * D + (D if cfg.o_bias else 0),
          tokens=T, d_in=N * H, d_out=D, bias=cfg.o_bias)


def _mlp(b: GraphBuilder, cfg: TransformerConfig, prefix: str, width: int, T: int) -> None:
    """A dense MLP of ``width`` (gated: gate and up projections and their product)."""
    D = cfg.d_model
    mb = cfg.mlp_bias
    if cfg.gated_mlp:
        for nm in ("gate_proj", "up_proj"):
            b.add("linear", f"{prefix}.{nm}", params=D * width + (width if mb else 0),
                  tokens=T, d_in=D, d_out=width, bias=mb)
        b.add("elementwise", f"{prefix}.act_mul", elements=T * width,
              op=glu_op(cfg.act))
    else:
        b.add("linear", f"{prefix}.up_proj", params=D * width + (width if mb else 0),
              tokens=T, d_in=D, d_out=width, bias=mb)
        if cfg.act != "identity":  # transformers' "linear": no kernel, no traffic
            b.add("elementwise", f"{prefix}.act", elements=T * width, op=cfg.act)
    b.add("linear", f"{prefix}.down_proj", params=width * D + (D if mb else 0),
          tokens=T, d_in=width, d_out=D, bias=mb)


def _heads(b: GraphBuilder, cfg: TransformerConfig, T: int, logits: str, n_norm_par: int) -> None:
    """The final norm and the head: LM logits (all tokens or the last), pooler, classifier."""
    D, V = cfg.d_model, cfg.vocab
    if not cfg.post_norm:
        b.add("norm", "final_norm", params=n_norm_par, elements=T * D, features=D,
              variant=cfg.norm)
    if cfg.arch == "decoder":
        rows = T if logits == "all" else 1
        b.add("linear", "lm_head", params=0 if cfg.tied_embeddings else D * V, tokens=rows,
              d_in=D, d_out=V)
        if cfg.final_logit_softcap:  # logits = c·tanh(logits / c): scale, tanh, scale
            b.add("elementwise", "logit_softcap", elements=rows * V, op="tanh")
    elif cfg.arch == "encoder" and cfg.pooler:
        b.add("linear", "pooler.dense", params=D * D + D, tokens=1, d_in=D, d_out=D, bias=True)
        b.add("elementwise", "pooler.act", elements=D, op="tanh")
    elif cfg.arch == "vision" and cfg.classes:
        b.add("linear", "classifier", params=D * cfg.classes + cfg.classes, tokens=1, d_in=D,
              d_out=cfg.classes, bias=True)


def _moe_layer(b: GraphBuilder, cfg: TransformerConfig, p: str, T: int, n_tokens: int,
               batch: int | None) -> None:
    """Mixture of experts: router, then each token through top-k of E expert MLPs.

    FLOPs: k expert MLPs per token. Weight bytes: the expected number of distinct experts the
    batch's B·T tokens touch (uniform routing), each read once. Built for one batch.
    """
    if batch is None:
        raise SpecError(f"{cfg.name}: a mixture-of-experts graph needs the batch to count the "
                        "experts it reads")
    D, F, E, k = cfg.d_model, cfg.moe_d_ff or cfg.d_ff, cfg.n_experts, cfg.top_k
    G = cfg.expert_groups
    b.add("linear", f"{p}.moe.router", params=D * E + (E if cfg.router_bias else 0), tokens=T,
          d_in=D, d_out=E)
    b.add("softmax", f"{p}.moe.router_softmax", elements=T * E)
    # expert parallelism over G groups (each with n_tokens tokens): this device holds E/G
    # experts, hit by the G·n_tokens tokens of all groups — touched/G of them on average — and,
    # balanced, receives G·n_tokens·k/G = n_tokens·k rows: the same rows as without EP
    touched = _expected_experts(E, k, n_tokens * G) / G
    n_mats = 3 if cfg.gated_mlp else 2
    wb = b.precision.weight_bytes
    mats = (("gate_proj", D, F), ("up_proj", D, F), ("down_proj", F, D))[3 - n_mats:]
    for nm, d_in, d_out in mats:
        # T·k rows per sample through [d_in, d_out]; the touched experts' weights read once.
        # Each expert's GEMM sees about B·T·k/touched rows: that is the M the efficiency sees.
        b.add("matmul", f"{p}.moe.experts.{nm}", params=E // G * d_in * d_out, m=T * k, k=d_in,
              n=d_out, b_source="weight", b_bytes=wb * touched,
              gemm=(T * k / max(touched, 1.0), d_out, d_in))
    b.add("elementwise", f"{p}.moe.act_mul", elements=T * k * F,
          op=glu_op(cfg.act))
    b.add("elementwise", f"{p}.moe.combine", elements=T * k * D, op="mul", n_inputs=1)
