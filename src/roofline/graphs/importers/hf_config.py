"""HuggingFace ``config.json`` -> ``TransformerConfig`` (plain JSON; no transformers import).

``from_hf_config`` normalises the field names of the families we know (GPT-2, BERT/RoBERTa, ViT,
the Llama family: llama, mistral, mixtral, qwen2, gemma, gemma2, gemma3, deepseek_v2/v3, llama4,
nemotron; and the encoder-decoders T5/mT5, BART/mBART, Whisper in hf_seq2seq.py);
``mamba_from_hf`` reads a Mamba config into a ``MambaConfig``; ``hf_config_model`` builds the
``Model`` of any supported family and ``hf_model`` reads a ``config.json`` file into one.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..._data import read_text
from ...errors import SpecError
from ..model import Model, Published, sequence_model, transformer_model
from ..ssm import MambaConfig, mamba_graph
from ..transformer import TransformerConfig
from .hf_families import check_family, weight_format
from .hf_seq2seq import SEQ2SEQ_TYPES, seq2seq_config

__all__ = ["from_hf_config", "mamba_from_hf", "hf_config_model", "hf_model"]

#: config activation name -> the ELEMENTWISE_FLOPS op it computes: transformers' ACT2FN names
#: (src/transformers/activations.py, 5.24.0) and "gelu_tanh". gelu/gelu_python: x·Φ(x) by erf;
#: gelu_new/gelu_pytorch_tanh/gelu_python_tanh/gelu_accurate: the tanh form; gelu_fast: the tanh
#: form with x·(c + c'·x²) inside (the same 9 FLOPs); gelu_10: erf GELU clipped to [-10, 10];
#: relu2: relu squared; linear: identity; laplace: MEGA's 0.5·(1 + erf((x − μ)/(σ√2))).
#: Refused: prelu and xielu (learned slope / alpha parameters per layer the importer does not
#: count; xielu's fused kernel also computes one branch where the Python path computes both)
_ACT = {"gelu": "gelu_erf", "gelu_python": "gelu_erf", "gelu_new": "gelu_tanh",
        "gelu_pytorch_tanh": "gelu_tanh", "gelu_python_tanh": "gelu_tanh",
        "gelu_accurate": "gelu_tanh", "gelu_fast": "gelu_tanh", "gelu_tanh": "gelu_tanh",
        "gelu_10": "gelu_erf_clip", "quick_gelu": "quick_gelu", "relu": "relu", "relu2": "relu2",
        "relu6": "relu6", "leaky_relu": "leaky_relu", "silu": "silu", "swish": "silu",
        "sigmoid": "sigmoid", "tanh": "tanh", "hardswish": "hardswish", "mish": "mish",
        "laplace": "laplace", "sqrtsoftplus": "sqrt_softplus", "linear": "identity"}


def _req(cfg: dict[str, Any], *names: str, where: str) -> Any:
    for n in names:
        if n in cfg and cfg[n] is not None:
            return cfg[n]
    raise SpecError(f"{where}: config is missing required field {names[0]!r}"
                    + (f" (or {', '.join(repr(n) for n in names[1:])})" if len(names) > 1 else ""))


#: plausibility caps on config fields: far beyond any published model, small enough that a
#: typo or a fuzzed value (n_layer = 2**31) is refused at once instead of building for hours
MAX_WIDTH = 2**22  # hidden_size, intermediate_size
MAX_HEADS = 2**14  # attention heads, head_dim
MAX_LAYERS = 4096
MAX_VOCAB = 2**24
MAX_POSITIONS = 2**30
MAX_EXPERTS = 2**14
_REQUIRED = object()

#: transformers' Gemma3TextConfig defaults (models/gemma3/configuration_gemma3.py, transformers
#: 4.50+), applied where a gemma3_text config (or a gemma3 file's text_config) omits the field,
#: as transformers does: google/gemma-3-4b-it's text_config names only hidden_size,
#: intermediate_size, num_hidden_layers, rope_scaling and sliding_window
GEMMA3_TEXT_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "max_position_embeddings": 131_072, "sliding_window": 4096,
    "hidden_activation": "gelu_pytorch_tanh"}


#: transformers' default max_position_embeddings for each decoder model_type (the
#: ``max_position_embeddings=`` default of models/<type>/configuration_<type>.py's __init__,
#: read in transformers 5.24.0): the context transformers builds when a config.json omits it
DECODER_MAX_POSITIONS: dict[str, int] = {
    "llama": 2048, "mistral": 131_072, "mixtral": 131_072, "qwen2": 32_768,
    "qwen2_moe": 32_768, "qwen3": 32_768, "qwen3_moe": 32_768, "gemma": 8192, "gemma2": 8192,
    "gemma3_text": 131_072, "phi3": 4096, "deepseek_v2": 2048, "deepseek_v3": 4096,
    "llama4_text": 131_072, "nemotron": 4096}


class _Fields:
    """Strict readers of config.json fields: integers must be JSON integers (or integral
    floats such as 4096.0), never strings, booleans, fractions, Infinity or NaN; each within
    its plausible range. ``null`` counts as absent, as HuggingFace writes it."""

    def __init__(self, cfg: dict[str, Any], where: str) -> None:
        self.cfg, self.where = cfg, where

    def int(self, *names: str, default: Any = _REQUIRED, lo: int = 1,
            hi: int = MAX_WIDTH) -> int:
        for n in names:
            v = self.cfg.get(n)
            if v is None:
                continue
            ok = not isinstance(v, bool) and (isinstance(v, int) or (
                isinstance(v, float) and math.isfinite(v) and v.is_integer()))
            if not ok or not lo <= v <= hi:
                raise SpecError(f"{self.where}: {n}={_shown(v)} must be an integer in "
                                f"[{lo}, {hi:,}]")
            return int(v)
        if default is _REQUIRED:
            _req(self.cfg, *names, where=self.where)  # raises: names the missing field
        return int(default)

    def flag(self, name: str, default: bool) -> bool:
        v = self.cfg.get(name)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise SpecError(f"{self.where}: {name}={_shown(v)} must be true or false")
        return v

    def text(self, *names: str, default: str) -> str:
        for n in names:
            v = self.cfg.get(n)
            if v is None or v == "":
                continue
            if not isinstance(v, str):
                raise SpecError(f"{self.where}: {n}={_shown(v)} must be a string")
            return v
        return default

    def act(self, *names: str, default: str) -> str:
        """The activation the first present of ``names`` gives, as the op builder names it
        (``default`` when none is); a name not in ``_ACT`` is refused (it used to be priced as
        the family's usual activation without a word)."""
        v = self.text(*names, default=default)
        if v not in _ACT:
            n = next(n for n in names if self.cfg.get(n) not in (None, ""))
            raise SpecError(f"{self.where}: {n}={v!r} is not an activation the importer "
                            f"knows; allowed: {', '.join(_ACT)}")
        return _ACT[v]

    def number(self, name: str) -> float:
        """A float field where only 'set or not' matters (0.0 when absent)."""
        v = self.cfg.get(name)
        if v is None:
            return 0.0
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise SpecError(f"{self.where}: {name}={_shown(v)} must be a finite number")
        return float(v)


def _shown(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def from_hf_config(cfg: dict[str, Any], name: str = "model") -> TransformerConfig:
    """Normalise a HuggingFace ``config.json`` dict (read as plain JSON; no transformers import).
    Every field is type- and range-checked (``_Fields``)."""
    if not isinstance(cfg, dict):
        raise SpecError(f"{name}: a config must be a JSON object")
    f = _Fields(cfg, name)
    mt = check_family(cfg, name)
    if mt == "mamba":
        raise SpecError(f"{name}: model_type 'mamba' is a state-space model, not a transformer: "
                        "rl.model(config) builds it (mamba_from_hf gives its MambaConfig)")
    if mt in ("llama4", "gemma3"):  # the multimodal wrapper: its text model (no vision tower)
        text = cfg["text_config"]
        if not isinstance(text, dict):
            raise SpecError(f"{name}: a {mt!r} config's text_config must be an object, got "
                            f"{_shown(text)}")
        return from_hf_config({**text, "model_type": f"{mt}_text"}, name=name)
    if mt == "gemma3_text" and any(k not in cfg for k in GEMMA3_TEXT_DEFAULTS):
        # the published 4B/12B/27B files write only the fields that differ from these
        return from_hf_config({**GEMMA3_TEXT_DEFAULTS, **cfg}, name=name)
    if mt in SEQ2SEQ_TYPES:
        return seq2seq_config(f, mt, name)
    if mt in ("gpt2",) or "n_embd" in cfg:
        D = f.int("n_embd", "hidden_size")
        N = f.int("n_head", "num_attention_heads", hi=MAX_HEADS)
        _divides(name, D, N, "n_embd", "n_head")
        return TransformerConfig(
            name=name, arch="decoder", d_model=D, n_layers=f.int("n_layer", hi=MAX_LAYERS),
            n_heads=N, n_kv_heads=N, head_dim=D // N, d_ff=f.int("n_inner", default=4 * D),
            vocab=f.int("vocab_size", hi=MAX_VOCAB),
            max_positions=f.int("n_positions", "n_ctx", default=1024, hi=MAX_POSITIONS),
            norm="layernorm", gated_mlp=False,
            act=f.act("activation_function", default="gelu_new"),
            qkv_bias=True, o_bias=True, mlp_bias=True, fused_qkv=True, positions="learned",
            tied_embeddings=f.flag("tie_word_embeddings", True),
        )
    D = f.int("hidden_size")
    N = f.int("num_attention_heads", hi=MAX_HEADS)
    L = f.int("num_hidden_layers", hi=MAX_LAYERS)
    F = f.int("intermediate_size")
    if mt == "bert" or mt == "roberta":
        _divides(name, D, N, "hidden_size", "num_attention_heads")
        return TransformerConfig(
            name=name, arch="encoder", d_model=D, n_layers=L, n_heads=N, n_kv_heads=N,
            head_dim=D // N, d_ff=F, vocab=f.int("vocab_size", hi=MAX_VOCAB),
            max_positions=f.int("max_position_embeddings", default=512, hi=MAX_POSITIONS),
            norm="layernorm", gated_mlp=False,
            act=f.act("hidden_act", default="gelu"),
            qkv_bias=True, o_bias=True, mlp_bias=True, positions="learned", post_norm=True,
            type_vocab=f.int("type_vocab_size", default=2, lo=0, hi=2**16), pooler=True,
            tied_embeddings=True,
        )
    if mt == "vit":
        _divides(name, D, N, "hidden_size", "num_attention_heads")
        image = f.int("image_size", hi=2**16)
        return TransformerConfig(
            name=name, arch="vision", d_model=D, n_layers=L, n_heads=N, n_kv_heads=N,
            head_dim=D // N, d_ff=F, vocab=0, max_positions=0, norm="layernorm", gated_mlp=False,
            act=f.act("hidden_act", default="gelu"),
            qkv_bias=f.flag("qkv_bias", True), o_bias=True, mlp_bias=True, positions="learned",
            image_size=image, patch_size=f.int("patch_size", hi=image),
            channels=f.int("num_channels", default=3, hi=2**12),
            classes=f.int("num_labels", default=_labels(cfg), lo=0, hi=MAX_VOCAB),
        )
    return _decoder(f, mt, name, D, N, L, F)


def _divides(name: str, D: int, N: int, d_field: str, n_field: str) -> None:
    if D % N:
        raise SpecError(f"{name}: {d_field}={D} is not divisible by {n_field}={N}")


def _decoder(f: _Fields, mt: str, name: str, D: int, N: int, L: int,
             F: int) -> TransformerConfig:
    """Llama-family decoders: llama, mistral, mixtral, qwen2, gemma, gemma2, gemma3_text,
    deepseek_v2/v3, llama4_text, and nemotron (LayerNorm, a plain relu2 MLP, partial RoPE)."""
    cfg = f.cfg
    K = f.int("num_key_value_heads", default=N, hi=N)
    if cfg.get("head_dim") is None:
        _divides(name, D, N, "hidden_size", "num_attention_heads")
    H = f.int("head_dim", default=D // N, hi=MAX_HEADS)
    gemma = mt.startswith("gemma")
    llama4 = mt == "llama4_text"
    if llama4:  # intermediate_size is the experts' width; dense layers use intermediate_size_mlp
        moe_ff, F = F, f.int("intermediate_size_mlp")
    # Gemma's config names the activation hidden_activation (hidden_act is a legacy field)
    nemotron = mt == "nemotron"  # LayerNorm1P, a plain up/down MLP of relu2, partial RoPE
    act = f.act(*(("hidden_activation", "hidden_act") if gemma else
                  ("hidden_act", "hidden_activation")), default="relu2" if nemotron else "silu")
    E = f.int("num_local_experts", "num_experts", "n_routed_experts", default=0, lo=0,
              hi=MAX_EXPERTS)
    top_k = f.int("num_experts_per_tok", lo=1, hi=E) \
        if E else 0
    gemma3 = mt == "gemma3_text"
    # Gemma3TextConfig's default window is 4096 (the published checkpoints write theirs)
    sw = f.int("sliding_window", default=4096 if gemma3 else 0, hi=MAX_POSITIONS) \
        if f.flag("use_sliding_window", True) and cfg.get("sliding_window") != 0 else 0
    mla = f.int("kv_lora_rank", default=0, lo=0, hi=2**16) > 0
    if mla:
        for fld in ("qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            _req(cfg, fld, where=name)
    # Gemma/Gemma 2 tie the LM head to the embedding unless the file says otherwise
    # (GemmaConfig/Gemma2Config default tie_word_embeddings=True); others default to untied.
    tied = f.flag("tie_word_embeddings", gemma)
    return TransformerConfig(
        name=name, arch="decoder", d_model=D, n_layers=L, n_heads=N, n_kv_heads=K, head_dim=H,
        d_ff=F, vocab=f.int("vocab_size", hi=MAX_VOCAB),
        max_positions=f.int("max_position_embeddings", default=DECODER_MAX_POSITIONS[mt],
                            hi=MAX_POSITIONS),
        norm="layernorm" if nemotron else "rmsnorm", gated_mlp=not nemotron, act=act,
        qkv_bias=f.flag("attention_bias", mt.startswith("qwen2")),
        o_bias=nemotron and f.flag("attention_bias", False),
        mlp_bias=f.flag("mlp_bias", False), positions="rope",
        rotary_dim=_rotary_dim(f, H, 0.5 if nemotron else 1.0) if mt in _PARTIAL_ROPE else 0,
        tied_embeddings=tied,
        n_experts=E, top_k=top_k,
        sliding_window=sw or None, embed_scale=gemma,
        window_every=2 if mt == "gemma2" else 1, sandwich_norm=mt in ("gemma2", "gemma3_text"),
        window_layers=_gemma3_windows(f, L) if gemma3 and sw else (), qk_norm=gemma3,
        final_logit_softcap=bool(f.number("final_logit_softcapping")),
        moe_d_ff=moe_ff if llama4 else (f.int("moe_intermediate_size", default=0, lo=0)
                                        if E else 0),
        n_shared_experts=1 if llama4 else (f.int(
            "n_shared_experts", default=_shared_experts(f, cfg), lo=0, hi=2**10) if E else 0),
        moe_every=_moe_every(f, L) if llama4 else 1,
        first_dense_layers=f.int("first_k_dense_replace", default=0, lo=0, hi=L) if E else 0,
        router_bias=E > 0 and cfg.get("topk_method") == "noaux_tc",
        q_lora_rank=f.int("q_lora_rank", default=0, lo=0, hi=2**16) if mla else 0,
        kv_lora_rank=f.int("kv_lora_rank", default=0, lo=0, hi=2**16),
        qk_nope_head_dim=f.int("qk_nope_head_dim", lo=0, hi=MAX_HEADS) if mla else 0,
        qk_rope_head_dim=f.int("qk_rope_head_dim", lo=0, hi=MAX_HEADS) if mla else 0,
        v_head_dim=f.int("v_head_dim", lo=1, hi=MAX_HEADS) if mla else 0,
    )


#: the supported families whose transformers rotary embedding reads partial_rotary_factor
#: (modeling_nemotron.py, modeling_phi3.py, 5.24.0); Llama's, Mistral's, Qwen's, Gemma's
#: default RoPE ignore it and rotate the whole head
_PARTIAL_ROPE = ("nemotron", "phi3")


def _rotary_dim(f: _Fields, H: int, default: float) -> int:
    """RoPE's share of each head: int(head_dim · partial_rotary_factor), as transformers'
    rotary embedding takes it (top level, or in rope_parameters; NemotronConfig defaults it
    to 0.5, Phi3Config to 1); 0 when it is the whole head."""
    rp = f.cfg.get("rope_parameters")
    v = f.cfg.get("partial_rotary_factor")
    if v is None and isinstance(rp, dict):
        v = rp.get("partial_rotary_factor")
    v = default if v is None else v
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v <= 1:
        raise SpecError(f"{f.where}: partial_rotary_factor={_shown(v)} must be a number in "
                        "(0, 1]")
    d = int(H * v)
    if d < 1:
        raise SpecError(f"{f.where}: partial_rotary_factor={v} leaves no rotary dimension of "
                        f"head_dim={H}")
    return 0 if d == H else d


def _gemma3_windows(f: _Fields, L: int) -> tuple[bool, ...]:
    """Gemma 3's windowed layers: ``layer_types`` when the file has it (newer transformers
    write it), else every ``sliding_window_pattern``-th layer global (layers P-1, 2P-1, ...;
    transformers' default pattern 6: five local layers to one global)."""
    if f.flag("use_bidirectional_attention", False):
        raise SpecError(f"{f.where}: use_bidirectional_attention=true (EmbeddingGemma's "
                        "encoder) is not modelled; the importer builds causal decoders")
    types = f.cfg.get("layer_types")
    if types is None:
        P = f.int("sliding_window_pattern", default=6, hi=L + 1)
        return tuple(bool((i + 1) % P) for i in range(L))
    allowed = ("sliding_attention", "full_attention")
    if (not isinstance(types, list) or len(types) != L
            or any(t not in allowed for t in types)):
        raise SpecError(f"{f.where}: layer_types={_shown(types)} must list num_hidden_layers="
                        f"{L} entries, each one of {', '.join(allowed)}")
    return tuple(t == "sliding_attention" for t in types)


def _moe_every(f: _Fields, L: int) -> int:
    """Llama 4's interleave_moe_layer_step s: layers s-1, 2s-1, ... are MoE (transformers'
    default moe_layers); an explicit moe_layers list must be that pattern."""
    s = f.int("interleave_moe_layer_step", default=1, hi=L)
    moe_layers = f.cfg.get("moe_layers")
    if moe_layers is not None and moe_layers != list(range(s - 1, L, s)):
        raise SpecError(f"{f.where}: moe_layers={_shown(moe_layers)} is not every "
                        f"interleave_moe_layer_step={s}-th layer; only that pattern is modelled")
    return s


def mamba_from_hf(cfg: dict[str, Any], name: str = "model") -> MambaConfig:
    """A transformers ``MambaConfig`` dict (``state-spaces/mamba-*-hf``) as a ``MambaConfig``:
    hidden_size, num_hidden_layers (or n_layer), vocab_size (not padded: transformers builds
    the table it names), state_size, conv_kernel, expand, time_step_rank ("auto": ⌈D/16⌉),
    use_bias, use_conv_bias, tie_word_embeddings (transformers' defaults when absent)."""
    f = _Fields(cfg, name)
    if check_family(cfg, name) != "mamba":
        raise SpecError(f"{name}: mamba_from_hf reads model_type 'mamba', got "
                        f"{cfg.get('model_type')!r}")
    D = f.int("hidden_size")
    E = f.int("expand", default=2, hi=64)
    inner = f.int("intermediate_size", default=E * D)
    if inner != E * D:  # transformers recomputes it as expand * hidden_size
        raise SpecError(f"{name}: intermediate_size={inner} is not expand*hidden_size="
                        f"{E * D}; transformers builds expand*hidden_size")
    rank = 0 if cfg.get("time_step_rank") == "auto" else f.int(
        "time_step_rank", default=0, lo=1, hi=MAX_WIDTH)
    return MambaConfig(
        d_model=D, n_layer=f.int("num_hidden_layers", "n_layer", hi=MAX_LAYERS),
        vocab_size=f.int("vocab_size", hi=MAX_VOCAB), d_state=f.int("state_size", default=16,
                                                                    hi=2**12),
        d_conv=f.int("conv_kernel", default=4, hi=2**10), expand=E, pad_vocab_size_multiple=1,
        time_step_rank=rank, bias=f.flag("use_bias", False),
        conv_bias=f.flag("use_conv_bias", True),
        tie_embeddings=f.flag("tie_word_embeddings", True))


def hf_config_model(cfg: dict[str, Any], *, key: str, name: str, aliases: tuple[str, ...] = (),
                    source: str = "",
                    published: dict[str, Published] | None = None) -> Model:
    """The Model of a config.json dict of any supported family (Mamba as a sequence model,
    the others as transformers), with its checkpoint's weight format."""
    if not isinstance(cfg, dict):
        raise SpecError(f"{name}: a config must be a JSON object")
    if check_family(cfg, name) == "mamba":
        mcfg = mamba_from_hf(cfg, name)
        import functools

        m = sequence_model(key, name, "ssm", functools.partial(mamba_graph, mcfg),
                           aliases=aliases, source=source, published=published,
                           n_layers=mcfg.n_layer)
    else:
        m = transformer_model(from_hf_config(cfg, name=name), key=key, name=name,
                              aliases=aliases, source=source, published=published)
    m.weight_format = weight_format(cfg, name)
    return m


def _labels(cfg: dict[str, Any]) -> int:
    """Classifier width when num_labels is absent: the size of id2label (how config.json files
    store it: transformers writes id2label and derives num_labels), else ImageNet's 1000."""
    labels = cfg.get("id2label")
    return len(labels) if isinstance(labels, dict) and labels else 1000


def _shared_experts(f: _Fields, cfg: dict[str, Any]) -> int:
    """Qwen2-MoE's one shared expert of shared_expert_intermediate_size, priced as that many
    routed-width (moe_intermediate_size) experts (DeepSeek's n_shared_experts is read first)."""
    shared = f.int("shared_expert_intermediate_size", default=0, lo=0)
    if not shared:
        return 0
    moe = f.int("moe_intermediate_size", default=0, lo=0)
    if not moe or shared % moe:
        raise SpecError(f"{f.where}: shared_expert_intermediate_size={shared} must be a multiple "
                        f"of moe_intermediate_size={moe} (the shared expert is priced as that "
                        "many routed-width experts)")
    return shared // moe


def hf_model(path: Path) -> Model:
    """A Model from a HuggingFace ``config.json`` file (named after its folder)."""
    import json

    text = read_text(path, "model config")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"model config {str(path)!r} is not valid JSON: {e.msg} (line "
                        f"{e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise SpecError(f"model config {str(path)!r} nests too deeply to be a config.json"
                        ) from None
    name = path.parent.name if path.name == "config.json" else path.stem
    return hf_config_model(cfg, key=name, name=name, source=str(path))
