"""Encoder-decoder transformers (T5, BART, Whisper): the encoder once, the decoder per token.

A ``TransformerConfig`` with ``arch="seq2seq"`` describes both stacks: ``encoder_layers``
encoder blocks (self-attention + MLP) and ``n_layers`` decoder blocks (causal self-attention,
cross-attention over the encoder output, MLP). The encoder reads ``source_len`` tokens per
request (Whisper: the 1,500 positions of a 30 s window after its conv front-end). The phases
set the same two lengths as for a decoder LM, for the decoder:

| phase   | encoder           | decoder T | self-attention S | cross-attention K/V           |
|---------|-------------------|-----------|------------------|-------------------------------|
| forward | source_len tokens | seq_len   | seq_len          | projected from the encoder    |
| prefill | source_len tokens | seq_len   | prefix + seq_len | projected once, to the cache  |
| decode  | none (ran before) | 1         | context          | read from the cache           |

So a served request costs the encoder and the cross K/V projections once (in the prefill) and
per output token one decoder step whose cross-attention reads the cached ``source_len`` keys and
values of every decoder layer: the KV cache of a sequence is ``source_len`` cross tokens plus
the decoder's own tokens (``TransformerConfig.kv_bytes_per_sequence``).

What is counted per family (HF implementations: ``modeling_t5.py``, ``modeling_bart.py``,
``modeling_whisper.py``): T5 — RMSNorm pre-norm, no biases, a relative-position bias table of
``relative_buckets × N`` per stack (computed once per stack and added to the scores: one
elementwise op of N·T·S per stack), ReLU or gated-GELU MLP; BART — post-norm LayerNorm, biases,
learned positions with 2 offset rows, a LayerNorm on each stack's embeddings; Whisper — pre-norm
LayerNorm, no k_proj bias, two 1-D convolutions (k=3, the second with stride 2) and a stored
sinusoidal position table in the encoder. Assumptions: attention is fused (scores on chip; T5's
bias is added in the kernel), dropout is off, BART's ``final_logits_bias`` (a buffer) is not a
parameter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import SpecError
from ..ops.formulas import glu_op
from ..specs.dtypes import Precision
from .graph import Graph, GraphBuilder

if TYPE_CHECKING:
    from .transformer import TransformerConfig

__all__ = ["seq2seq_graph"]


def _norm(b: GraphBuilder, cfg: TransformerConfig, name: str, T: int) -> None:
    D = cfg.d_model
    b.add("norm", name, params=2 * D if cfg.norm == "layernorm" else D, elements=T * D,
          features=D, variant=cfg.norm)


def _linear(b: GraphBuilder, name: str, T: int, d_in: int, d_out: int, bias: bool) -> None:
    b.add("linear", name, params=d_in * d_out + (d_out if bias else 0), tokens=T, d_in=d_in,
          d_out=d_out, bias=bias)


def _attention(b: GraphBuilder, cfg: TransformerConfig, p: str, T: int, S: int, *,
               cross: bool, phase: str, kv_tokens: int, fused: bool) -> None:
    """One attention sub-layer through o_proj. ``kv_tokens``: tokens whose K/V are projected
    here (self: T; cross: the encoder's source_len in forward/prefill, 0 in decode)."""
    D, N, K, H = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    bias = cfg.qkv_bias
    _linear(b, f"{p}.q_proj", T, D, N * H, bias)
    if kv_tokens:
        _linear(b, f"{p}.k_proj", kv_tokens, D, K * H, bias and cfg.k_bias)
        _linear(b, f"{p}.v_proj", kv_tokens, D, K * H, bias)
    # self-attention writes the new tokens' K/V when cached; cross K/V are written once
    cached = phase in ("prefill", "decode")
    if cached and kv_tokens:
        b.add("kv_cache_write", f"{p}.kv_cache_write", tokens=kv_tokens, n_kv_heads=K,
              head_dim=H)
    causal = not cross
    from_cache = cached  # cross K/V: written in prefill, read back from the cache
    if fused:
        b.add("attention", f"{p}.attention", n_heads=N, n_kv_heads=K, head_dim=H, q_len=T,
              kv_len=S, causal=causal, kv_from_cache=from_cache)
    else:
        src = "kv" if from_cache else "act"
        kvb = b.precision.kv_bytes if from_cache else None
        b.add("matmul", f"{p}.scores", groups=N, m=T, k=H, n=S, b_groups=K, b_source=src,
              b_bytes=kvb)
        b.add("softmax", f"{p}.softmax", elements=N * T * S)
        b.add("matmul", f"{p}.context", groups=N, m=T, k=S, n=H, b_groups=K, b_source=src,
              b_bytes=kvb)
    _linear(b, f"{p}.o_proj", T, N * H, D, cfg.o_bias)


def _mlp(b: GraphBuilder, cfg: TransformerConfig, p: str, T: int) -> None:
    D, F, mb = cfg.d_model, cfg.d_ff, cfg.mlp_bias
    if cfg.gated_mlp:  # T5 v1.1 / Flan-T5 gated-GELU: wi_0, wi_1, wo
        _linear(b, f"{p}.gate_proj", T, D, F, mb)
        _linear(b, f"{p}.up_proj", T, D, F, mb)
        b.add("elementwise", f"{p}.act_mul", elements=T * F,
              op=glu_op(cfg.act))
    else:
        _linear(b, f"{p}.up_proj", T, D, F, mb)
        if cfg.act != "identity":  # transformers' "linear": no kernel, no traffic
            b.add("elementwise", f"{p}.act", elements=T * F, op=cfg.act)
    _linear(b, f"{p}.down_proj", T, F, D, mb)


def _sublayer(b: GraphBuilder, cfg: TransformerConfig, p: str, T: int, body: str,
              run: object) -> None:
    """Pre-norm (norm, body, residual) or post-norm (body, residual, norm)."""
    if not cfg.post_norm:
        _norm(b, cfg, f"{p}.{body}_norm", T)
    run()  # type: ignore[operator]
    b.add("elementwise", f"{p}.{body}.residual", elements=T * cfg.d_model, op="add")
    if cfg.post_norm:
        _norm(b, cfg, f"{p}.{body}_norm", T)


def _embed(b: GraphBuilder, cfg: TransformerConfig, stack: str, T: int, rows: int,
           tokens: bool) -> None:
    """Token embedding (shared table: counted once, in the decoder), positions, embed norm."""
    D = cfg.d_model
    if tokens:
        b.add("embedding", f"{stack}.embed_tokens",
              params=cfg.vocab * D if stack == "decoder" else 0, tokens=T, dim=D)
    if rows:  # learned (or stored sinusoidal) positions: T rows read, broadcast over the batch
        b.add("elementwise", f"{stack}.embed_positions", params=rows * D, elements=T * D,
              op="add", n_inputs=1, param_bytes=T * D * b.precision.weight_bytes)
    if cfg.embed_norm:
        _norm(b, cfg, f"{stack}.layernorm_embedding", T)


def _position_bias(b: GraphBuilder, cfg: TransformerConfig, stack: str, T: int, S: int) -> None:
    if cfg.relative_buckets:  # T5: one [N, T, S] bias per stack, shared by its layers
        N = cfg.n_heads
        b.add("elementwise", f"{stack}.relative_attention_bias", params=cfg.relative_buckets * N,
              elements=N * T * S, op="add", n_inputs=0,
              param_bytes=cfg.relative_buckets * N * b.precision.weight_bytes)


def _encoder(b: GraphBuilder, cfg: TransformerConfig, fused: bool) -> None:
    D, Ts = cfg.d_model, cfg.source_len
    if cfg.audio_mels:  # Whisper: conv1 (k3, pad 1) + GELU, conv2 (k3, stride 2, pad 1) + GELU
        frames = 2 * Ts
        b.add("conv", "encoder.conv1", params=cfg.audio_mels * D * 3 + D, c_in=cfg.audio_mels,
              spatial=(frames,), c_out=D, kernel=3, padding=1, bias=True)
        b.add("elementwise", "encoder.conv1.act", elements=frames * D, op=cfg.act)
        b.add("conv", "encoder.conv2", params=D * D * 3 + D, c_in=D, spatial=(frames,),
              c_out=D, kernel=3, stride=2, padding=1, bias=True)
        b.add("elementwise", "encoder.conv2.act", elements=Ts * D, op=cfg.act)
        _embed(b, cfg, "encoder", Ts, cfg.encoder_positions, tokens=False)
    else:
        rows = cfg.encoder_positions + cfg.position_offset if cfg.encoder_positions else 0
        _embed(b, cfg, "encoder", Ts, rows, tokens=True)
    _position_bias(b, cfg, "encoder", Ts, Ts)
    for i in range(cfg.encoder_layers):
        p = f"encoder.layers.{i}"
        _sublayer(b, cfg, p, Ts, "self_attn", lambda p=p: _enc_attn(b, cfg, p, Ts, fused))
        _sublayer(b, cfg, p, Ts, "mlp", lambda p=p: _mlp(b, cfg, f"{p}.mlp", Ts))
    if not cfg.post_norm:  # pre-norm stacks end with a norm (T5, Whisper, mBART)
        _norm(b, cfg, "encoder.final_norm", Ts)


def _enc_attn(b: GraphBuilder, cfg: TransformerConfig, p: str, T: int, fused: bool) -> None:
    """Bidirectional self-attention of the encoder (never cached)."""
    D, N, K, H = cfg.d_model, cfg.n_heads, cfg.n_kv_heads, cfg.head_dim
    bias = cfg.qkv_bias
    _linear(b, f"{p}.self_attn.q_proj", T, D, N * H, bias)
    _linear(b, f"{p}.self_attn.k_proj", T, D, K * H, bias and cfg.k_bias)
    _linear(b, f"{p}.self_attn.v_proj", T, D, K * H, bias)
    if fused:
        b.add("attention", f"{p}.self_attn.attention", n_heads=N, n_kv_heads=K, head_dim=H,
              q_len=T, kv_len=T, causal=False)
    else:
        b.add("matmul", f"{p}.self_attn.scores", groups=N, m=T, k=H, n=T, b_groups=K,
              b_source="act")
        b.add("softmax", f"{p}.self_attn.softmax", elements=N * T * T)
        b.add("matmul", f"{p}.self_attn.context", groups=N, m=T, k=T, n=H, b_groups=K,
              b_source="act")
    _linear(b, f"{p}.self_attn.o_proj", T, N * H, D, cfg.o_bias)


def seq2seq_graph(cfg: TransformerConfig, precision: Precision, *, phase: str, seq_len: int,
                  context: int, fused_attention: bool, logits: str | None) -> Graph:
    """The op graph of one encoder-decoder pass (see the module docstring for the phases)."""
    D, V, Ts = cfg.d_model, cfg.vocab, cfg.source_len
    if phase == "decode":
        if context < 1:
            raise SpecError(f"decode needs context >= 1 (decoder tokens in the KV cache), got "
                            f"{context!r}")
        T, S = 1, context
    else:
        if not isinstance(seq_len, int) or seq_len < 1:
            raise SpecError(f"seq_len must be a positive integer, got {seq_len!r}")
        T, S = seq_len, seq_len + (context if phase == "prefill" else 0)
    if cfg.max_positions and S > cfg.max_positions:
        raise SpecError(f"{cfg.name}: {S} decoder tokens exceed the decoder's "
                        f"max_target_positions/max_position_embeddings={cfg.max_positions}")
    logits = logits or ("all" if phase == "forward" else "last")
    b = GraphBuilder(cfg.name, phase, precision)
    b.meta.update(seq_len=T, kv_len=S, phase=phase, source_len=Ts)
    if phase != "decode":
        _encoder(b, cfg, fused_attention)
    _embed(b, cfg, "decoder", T, cfg.max_positions + cfg.position_offset
           if cfg.positions == "learned" else 0, tokens=True)
    _position_bias(b, cfg, "decoder", T, S)
    cross_kv = 0 if phase == "decode" else Ts
    for i in range(cfg.n_layers):
        p = f"layers.{i}"
        _sublayer(b, cfg, p, T, "self_attn", lambda p=p: _attention(
            b, cfg, f"{p}.self_attn", T, S, cross=False, phase=phase, kv_tokens=T,
            fused=fused_attention))
        _sublayer(b, cfg, p, T, "cross_attn", lambda p=p: _attention(
            b, cfg, f"{p}.cross_attn", T, Ts, cross=True, phase=phase, kv_tokens=cross_kv,
            fused=fused_attention))
        _sublayer(b, cfg, p, T, "mlp", lambda p=p: _mlp(b, cfg, f"{p}.mlp", T))
    if not cfg.post_norm:  # pre-norm stacks end with a norm (T5, Whisper, mBART)
        _norm(b, cfg, "decoder.final_norm", T)
    rows = T if logits == "all" else 1
    b.add("linear", "lm_head", params=0 if cfg.tied_embeddings else D * V, tokens=rows,
          d_in=D, d_out=V)
    if phase in ("prefill", "decode"):
        b.state_bytes_per_sample = float(cfg.kv_bytes_per_sequence(S, precision.kv_bytes))
    return b.build(tokens_per_sample=1 if phase == "decode" else T)
