"""HF config.json activations: every transformers ACT2FN name the importer maps is priced by its
own arithmetic (plain and gated MLPs), the rest are refused by name; Nemotron / Minitron
(model_type "nemotron": relu2, a plain up/down MLP, RoPE on half of each head) builds from a
real config (tests/fixtures/hf/README.md gives its source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.importers.hf_config import from_hf_config, hf_config_model
from roofline.graphs.model import transformer_model

MINITRON = Path(__file__).parent / "fixtures" / "hf" / "minitron-4b-base" / "config.json"

BERT = {"model_type": "bert", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 100}
LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
         "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 100}

#: FLOPs per element, counted by hand from transformers' activations.py (5.24.0), one FLOP per
#: arithmetic op, comparison or transcendental (exp, log, tanh, erf, sqrt)
HAND = {
    "gelu": 5,               # x·0.5·(1 + erf(x/√2)): div, erf, add, mul, mul
    "gelu_python": 5,        # the same formula in Python
    "gelu_new": 9,           # 0.5·x·(1 + tanh(c·(x + 0.044715·x³))): x³ 2, mul, add, mul,
    "gelu_pytorch_tanh": 9,  #   tanh, add, mul, mul
    "gelu_python_tanh": 9,
    "gelu_accurate": 9,
    "gelu_fast": 9,          # 0.5·x·(1 + tanh(x·c·(1 + 0.044715·x·x))): x·x, mul, add, mul,
                             #   mul, tanh, add, mul, mul
    "gelu_10": 7,            # clip(erf-gelu, -10, 10): 5 + max + min
    "quick_gelu": 5,         # x·sigmoid(1.702·x): mul by -1.702, exp, add, div, mul
    "relu": 1,               # max(x, 0)
    "relu2": 2,              # max(x, 0), square
    "relu6": 2,              # max(x, 0), min(·, 6)
    "leaky_relu": 2,         # compare, multiply by the slope
    "silu": 4,               # x / (1 + exp(-x)): neg, exp, add, div
    "swish": 4,
    "sigmoid": 4,            # 1 / (1 + exp(-x)): neg, exp, add, div
    "tanh": 1,
    "hardswish": 5,          # x·min(max(x + 3, 0), 6)/6: add, max, min, mul, div
    "mish": 5,               # x·tanh(log(1 + exp(x))): exp, add, log, tanh, mul
    "laplace": 5,            # 0.5·(1 + erf((x − μ)/(σ√2))): sub, div, erf, add, mul
    "sqrtsoftplus": 4,       # √log(1 + exp(x)): exp, add, log, sqrt
    "linear": 0,             # identity
}


def _op(cfg: dict, name: str, T: int = 10):
    g = transformer_model(from_hf_config(cfg, name="x"), key="x").graph(precision="bf16",
                                                                       seq_len=T)
    return g.op_cost(g.names.index(name)) if name in g.names else None


@pytest.mark.parametrize("act", sorted(HAND))
def test_each_name_imports_with_its_hand_count(act: str) -> None:
    # plain MLP (BERT): act(up) on T·F elements; transformers' "linear" runs no kernel at all
    plain = _op({**BERT, "hidden_act": act}, "layers.0.mlp.act")
    if act == "linear":
        assert plain is None
    else:
        assert plain is not None and plain.flops == HAND[act] * 10 * 96
    # gated MLP (Llama family): act(gate)·up, one multiply more, two inputs read
    gated = _op({**LLAMA, "hidden_act": act}, "layers.0.mlp.act_mul")
    assert gated is not None and gated.flops == (HAND[act] + 1) * 10 * 96
    assert gated.act_bytes_read == 2 * 10 * 96 * 2  # gate and up, bf16


def test_gated_relu_was_priced_as_geglu() -> None:
    # a gated ReLU MLP (ReluLLaMA-style) cost GeGLU's 10 FLOPs per element; relu + mul is 2
    assert _op({**LLAMA, "hidden_act": "relu"}, "layers.0.mlp.act_mul").flops == 2 * 10 * 96
    assert _op({**LLAMA, "hidden_act": "gelu"}, "layers.0.mlp.act_mul").flops == 6 * 10 * 96
    # SwiGLU and GeGLU are unchanged
    assert _op(dict(LLAMA), "layers.0.mlp.act_mul").flops == 5 * 10 * 96
    assert _op({**LLAMA, "hidden_act": "gelu_new"}, "layers.0.mlp.act_mul").flops == 10 * 10 * 96


@pytest.mark.parametrize("act", ["prelu", "xielu", "fatrelu", "ReLU2"])
def test_unknown_name_is_refused_with_the_allowed_list(act: str) -> None:
    for cfg, field in (({**LLAMA, "hidden_act": act}, "hidden_act"),
                       ({**BERT, "hidden_act": act}, "hidden_act"),
                       ({"model_type": "gpt2", "n_embd": 64, "n_layer": 1, "n_head": 4,
                         "vocab_size": 100, "activation_function": act}, "activation_function")):
        with pytest.raises(SpecError) as e:
            hf_config_model(cfg, key="x", name="x")
        msg = str(e.value)
        assert f"{field}={act!r}" in msg
        assert "allowed: " in msg
        for known in ("relu2", "mish", "gelu_10", "linear", "silu"):
            assert known in msg.split("allowed: ")[1]


def test_minitron_builds_with_relu2_plain_mlp_and_half_rope() -> None:
    m = rl.model(str(MINITRON))
    cfg = m.config
    assert (cfg.gated_mlp, cfg.act, cfg.norm, cfg.head_dim, cfg.rotary_dim) == (
        False, "relu2", "layernorm", 128, 64)
    T, D, F = 10, 3072, 9216
    g = m.graph(precision="bf16", seq_len=T)
    cost = {n: g.op_cost(i) for i, n in enumerate(g.names) if n.startswith("layers.0.mlp.")}
    assert set(cost) == {"layers.0.mlp.up_proj", "layers.0.mlp.act", "layers.0.mlp.down_proj",
                         "layers.0.mlp.residual"}
    # by hand: up 2·T·D·F, relu2 2 per element of T·F, down 2·T·F·D (no biases)
    assert cost["layers.0.mlp.up_proj"].flops == 2 * 10 * 3072 * 9216
    assert cost["layers.0.mlp.act"].flops == 2 * 10 * 9216
    assert cost["layers.0.mlp.down_proj"].flops == 2 * 10 * 9216 * 3072
    mlp = sum(c.flops for n, c in cost.items() if n != "layers.0.mlp.residual")
    assert mlp == 4 * T * D * F + 2 * T * F == 1_132_646_400
    # RoPE on 64 of each head's 128: T·(24 + 8)·64 elements
    rope = g.op_cost(g.names.index("layers.0.attn.rope"))
    assert rope.flops == 3 * 10 * 32 * 64
    # parameters by hand: untied embedding and head 2·V·D; per layer q, o D·D each, k, v
    # D·8·128 each, up and down D·F each, two LayerNorm1P of weight and bias; the final norm
    per_layer = 2 * 3072 * 3072 + 2 * 3072 * 1024 + 2 * 3072 * 9216 + 2 * 2 * 3072
    assert m.params == 2 * 256_000 * 3072 + 32 * per_layer + 2 * 3072 == 4_190_509_056


def test_minitron_params_match_transformers() -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    raw = json.loads(MINITRON.read_text())
    hf = transformers.AutoConfig.for_model(**{k: v for k, v in raw.items() if k not in (
        "architectures", "transformers_version", "torch_dtype")})
    with torch.device("meta"):
        module = transformers.AutoModelForCausalLM.from_config(hf)
    assert type(module).__name__ == "NemotronForCausalLM"
    assert rl.model(str(MINITRON)).params == sum(p.numel() for p in module.parameters())


def test_partial_rotary_factor_is_checked_and_defaults_per_family() -> None:
    base = {**LLAMA, "model_type": "nemotron"}
    assert from_hf_config(base, name="n").rotary_dim == 8  # NemotronConfig's 0.5 of 16
    assert from_hf_config(dict(LLAMA), name="l").rotary_dim == 0  # all of the head
    # Phi-3's rotary embedding reads it (Phi-4-mini: 0.75); Llama's default RoPE ignores it
    assert from_hf_config({**LLAMA, "model_type": "phi3",
                           "rope_parameters": {"partial_rotary_factor": 0.25}},
                          name="p").rotary_dim == 4
    assert from_hf_config({**LLAMA, "partial_rotary_factor": 0.25}, name="l").rotary_dim == 0
    for bad in (0, 1.5, "half", True):
        with pytest.raises(SpecError, match="partial_rotary_factor=.*must be a number in"):
            from_hf_config({**base, "partial_rotary_factor": bad}, name="n")


def test_act_knob_takes_activations_only() -> None:
    # any ELEMENTWISE_FLOPS key was taken: act="add" priced a one-input add as the activation,
    # act="swiglu" a two-input product on a plain MLP
    from roofline.graphs.knobs import resize

    for m in (rl.model("gpt2"), rl.model("resnet18")):
        for bad in ("add", "swiglu", "relu_glu", "rope"):
            with pytest.raises(SpecError, match=f"act={bad!r}; allowed: silu, .*relu2"):
                resize(m, act=bad)
    g = resize(rl.model("llama-3.2-1b"), act="relu2").graph(precision="bf16", seq_len=4)
    i = g.names.index("layers.0.mlp.act_mul")
    assert g.op_cost(i).flops == 3 * 4 * 8192  # relu2 2 + the gate product 1, F = 8192
