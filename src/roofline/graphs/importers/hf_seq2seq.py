"""HuggingFace ``config.json`` of encoder-decoders (T5/mT5, BART/mBART, Whisper) ->
``TransformerConfig(arch="seq2seq")`` (built by graphs/seq2seq.py).

Field names follow each family's configuration class in transformers (``T5Config``,
``BartConfig``/``MBartConfig``, ``WhisperConfig``); defaults are those classes' defaults. The
encoder's input length ``source_len`` defaults to T5's ``n_positions`` (512, its pre-training
input length), BART's ``max_position_embeddings`` and Whisper's ``max_source_positions`` (1,500:
every input is padded to a 30 s window); ``rl.model(key, source_len=...)`` changes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...errors import SpecError
from ..transformer import TransformerConfig

if TYPE_CHECKING:
    from .hf_config import _Fields

__all__ = ["seq2seq_config", "SEQ2SEQ_TYPES"]

SEQ2SEQ_TYPES = ("t5", "mt5", "bart", "mbart", "whisper")


def seq2seq_config(f: _Fields, mt: str, name: str) -> TransformerConfig:
    from .hf_config import _ACT, MAX_HEADS, MAX_LAYERS, MAX_POSITIONS, MAX_VOCAB

    if mt in ("t5", "mt5"):
        N = f.int("num_heads", hi=MAX_HEADS)
        L_enc = f.int("num_layers", hi=MAX_LAYERS)
        proj = f.text("feed_forward_proj", default="relu")
        gated = proj.startswith("gated-")
        act = proj[len("gated-"):] if gated else proj
        if act not in ("relu", "gelu", "gelu_new", "silu"):
            raise SpecError(f"{name}: feed_forward_proj={proj!r}; supported: relu, gated-gelu, "
                            "gated-silu (T5Config)")
        act = f.act("dense_act_fn", default=act) if gated else _ACT[act]
        return TransformerConfig(
            name=name, arch="seq2seq", d_model=f.int("d_model"), n_layers=f.int(
                "num_decoder_layers", default=L_enc, hi=MAX_LAYERS),
            n_heads=N, n_kv_heads=N, head_dim=f.int("d_kv", hi=MAX_HEADS), d_ff=f.int("d_ff"),
            vocab=f.int("vocab_size", hi=MAX_VOCAB), max_positions=0, norm="rmsnorm",
            gated_mlp=gated, act=act, positions="none",
            # T5Config defaults to a tied LM head; mT5 and Flan-T5 files say false
            tied_embeddings=f.flag("tie_word_embeddings", mt == "t5"),
            encoder_layers=L_enc,
            source_len=f.int("n_positions", default=512, hi=MAX_POSITIONS),
            relative_buckets=f.int("relative_attention_num_buckets", default=32, hi=2**16),
        )
    D = f.int("d_model")
    heads = {s: f.int(f"{s}_attention_heads", default=16, hi=MAX_HEADS)
             for s in ("encoder", "decoder")}
    ffn = {s: f.int(f"{s}_ffn_dim", default=4096) for s in ("encoder", "decoder")}
    for what, v in (("attention_heads", heads), ("ffn_dim", ffn)):
        if v["encoder"] != v["decoder"]:
            raise SpecError(f"{name}: encoder_{what}={v['encoder']} differs from decoder_{what}="
                            f"{v['decoder']}; stacks of different widths are not modelled")
    N = heads["decoder"]
    if D % N:
        raise SpecError(f"{name}: d_model={D} is not divisible by decoder_attention_heads={N}")
    common: dict[str, Any] = dict(
        name=name, arch="seq2seq", d_model=D, n_heads=N, n_kv_heads=N, head_dim=D // N,
        d_ff=ffn["decoder"], vocab=f.int("vocab_size", hi=MAX_VOCAB), norm="layernorm",
        gated_mlp=False, act=f.act("activation_function", default="gelu"),
        qkv_bias=True, o_bias=True, mlp_bias=True, positions="learned",
        tied_embeddings=f.flag("tie_word_embeddings", True),
        encoder_layers=f.int("encoder_layers", default=12, hi=MAX_LAYERS),
        n_layers=f.int("decoder_layers", default=12, hi=MAX_LAYERS),
    )
    if mt == "whisper":
        src = f.int("max_source_positions", default=1500, hi=MAX_POSITIONS)
        return TransformerConfig(
            **common, max_positions=f.int("max_target_positions", default=448,
                                          hi=MAX_POSITIONS),
            source_len=src, encoder_positions=src, k_bias=False,
            audio_mels=f.int("num_mel_bins", default=80, hi=2**12))
    P = f.int("max_position_embeddings", default=1024, hi=MAX_POSITIONS)
    # BART's learned positions keep 2 offset rows (BartLearnedPositionalEmbedding); BART is
    # post-norm (normalize_before false), mBART pre-norm with a final LayerNorm per stack
    return TransformerConfig(
        **common, max_positions=P, source_len=P, encoder_positions=P, position_offset=2,
        post_norm=not f.flag("normalize_before", mt == "mbart"), embed_norm=True)
