"""HF config.json import of Mamba (model_type "mamba") and Llama 4 ("llama4" with its
text_config, or "llama4_text"): the zoo's bundled configs give the graphs the shapes built
directly give (op by op, parameters exact), small configs match transformers' own parameter
counts on the meta device, and malformed or unmodelled configs are refused (docs/import.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import roofline as rl
from roofline._data import DATA, read_toml
from roofline.errors import SpecError, UnknownNameError
from roofline.graphs.importers.hf_config import from_hf_config, mamba_from_hf
from roofline.graphs.importers.hf_families import SUPPORTED_MODEL_TYPES
from roofline.graphs.model import sequence_model, transformer_model
from roofline.graphs.ssm import MambaConfig, mamba_graph
from roofline.graphs.transformer import TransformerConfig


def _same_graph(a: rl.Model, b: rl.Model, **scenario) -> None:
    for phase in ("prefill", "decode"):
        ga = a.graph(precision="bf16", phase=phase, **scenario)
        gb = b.graph(precision="bf16", phase=phase, **scenario)
        assert ga.names == gb.names and ga.kinds == gb.kinds
        np.testing.assert_array_equal(ga.c0, gb.c0)
        np.testing.assert_array_equal(ga.c1, gb.c1)
        assert ga.params_total == gb.params_total
        assert ga.state_bytes_per_sample == gb.state_bytes_per_sample


def _config_json(tmp: Path, key: str) -> Path:
    """The zoo's bundled [config] written out as the config.json a user downloads."""
    d = tmp / key
    d.mkdir()
    (d / "config.json").write_text(json.dumps(read_toml(DATA / "models" / f"{key}.toml")["config"]))
    return d / "config.json"


@pytest.mark.parametrize("key,D,L,params", [("mamba-130m", 768, 24, 129_135_360),
                                            ("mamba-2.8b", 2560, 64, 2_768_345_600)])
def test_mamba_hf_config_equals_the_original_checkpoint_shape(tmp_path, key, D, L, params):
    # the original state-spaces config: d_model, n_layer, vocab 50,277 padded to a multiple of
    # 8, d_state 16, d_conv 4, expand 2, dt_rank ceil(D / 16) (48 and 160, as the -hf files say)
    ref = sequence_model("ref", "ref", "ssm", lambda p, **kw: mamba_graph(MambaConfig(
        d_model=D, n_layer=L, vocab_size=50_277), p, **kw))
    m = rl.model(_config_json(tmp_path, key))
    assert m.family == "ssm" and m.params == params  # tests/test_ssm_recsys.py counts by hand
    _same_graph(m, ref, seq_len=256)
    _same_graph(rl.model(key), ref, seq_len=256)  # the zoo entry is the bundled config
    assert rl.model(f"state-spaces/{key}-hf") is rl.model(key)


def _llama4_shape(E: int, every: int, max_pos: int) -> rl.Model:
    """The Llama 4 text model as a transformer shape given directly (how the zoo first held it)."""
    cfg = TransformerConfig(name="ref", arch="decoder", d_model=5120, n_layers=48, n_heads=40,
                            n_kv_heads=8, head_dim=128, d_ff=16384, moe_d_ff=8192, n_experts=E,
                            top_k=1, n_shared_experts=1, moe_every=every, vocab=202048,
                            max_positions=max_pos)
    return transformer_model(cfg, key="ref")


@pytest.mark.parametrize("key,E,every,max_pos,params", [
    ("llama-4-scout", 16, 1, 10_485_760, 107_769_861_120),
    ("llama-4-maverick", 128, 2, 1_048_576, 400_711_848_960)])
def test_llama4_hf_config_equals_the_zoo_shape(tmp_path, key, E, every, max_pos, params):
    m = rl.model(_config_json(tmp_path, key))
    assert m.params == params  # tests/test_llama4.py counts these by hand
    _same_graph(m, _llama4_shape(E, every, max_pos), seq_len=64, context=100, batch=2)
    assert rl.model(key).params == params
    # the wrapper's text_config, or a text config on its own, give the same shape
    raw = read_toml(DATA / "models" / f"{key}.toml")["config"]
    assert from_hf_config(raw["text_config"], name="t") == from_hf_config(raw, name="t")


def test_instruct_hub_ids_resolve_to_the_base() -> None:
    assert rl.model("meta-llama/Llama-4-Scout-17B-16E-Instruct") is rl.model("llama-4-scout")
    assert rl.model("meta-llama/Llama-4-Maverick-17B-128E-Instruct") is \
        rl.model("llama-4-maverick")


def test_small_configs_match_transformers_parameter_counts() -> None:
    """Parameters of small configs against transformers' own modules on the meta device:
    Llama 4 with dense and MoE layers alternating, Mamba with every optional weight on."""
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    l4 = dict(model_type="llama4_text", hidden_size=64, num_hidden_layers=4,
              num_attention_heads=4, num_key_value_heads=2, head_dim=16, intermediate_size=32,
              intermediate_size_mlp=96, num_local_experts=4, num_experts_per_tok=1,
              interleave_moe_layer_step=2, vocab_size=500, tie_word_embeddings=False)
    mb = dict(model_type="mamba", hidden_size=64, num_hidden_layers=3, state_size=8,
              conv_kernel=3, expand=3, time_step_rank=5, vocab_size=301, use_bias=True,
              use_conv_bias=False, tie_word_embeddings=False)
    with torch.device("meta"):
        n_l4 = tf.Llama4ForCausalLM(tf.Llama4TextConfig(
            **{k: v for k, v in l4.items() if k != "model_type"})).num_parameters()
        n_mb = tf.MambaForCausalLM(tf.MambaConfig(
            **{k: v for k, v in mb.items() if k != "model_type"})).num_parameters()
    from roofline.graphs.importers.hf_config import hf_config_model

    assert hf_config_model(l4, key="l4", name="l4").params == n_l4
    assert hf_config_model(mb, key="mb", name="mb").params == n_mb
    # by hand: embedding 301·64 + 3 layers of (norm 64, in_proj 64·384 + 384, conv 192·3,
    # x_proj 192·21, dt_proj 5·192 + 192, A and D 192·8 + 192, out_proj 192·64 + 64) + norm_f 64
    # + an untied head 301·64
    layer = 64 + 64 * 384 + 384 + 192 * 3 + 192 * 21 + 5 * 192 + 192 + 192 * 8 + 192 \
        + 192 * 64 + 64
    assert n_mb == 2 * 301 * 64 + 3 * layer + 64


def test_mamba_fields_and_refusals() -> None:
    base = dict(model_type="mamba", hidden_size=768, num_hidden_layers=24, vocab_size=50280)
    c = mamba_from_hf({**base, "time_step_rank": "auto"})
    assert (c.dt_rank, c.d_state, c.d_conv, c.expand, c.tie_embeddings) == (48, 16, 4, 2, True)
    with pytest.raises(SpecError, match="intermediate_size=1000 is not expand"):
        mamba_from_hf({**base, "intermediate_size": 1000})
    with pytest.raises(SpecError, match="state_size='16' must be an integer"):
        mamba_from_hf({**base, "state_size": "16"})
    with pytest.raises(SpecError, match="'mamba' config needs 'hidden_size'"):
        rl.graphs.importers.hf_config.hf_config_model(
            {"model_type": "mamba", "d_model": 768, "n_layer": 24, "vocab_size": 5},
            key="x", name="x")
    with pytest.raises(SpecError, match="not a transformer"):
        from_hf_config(base, name="x")


def test_llama4_refusals_and_the_family_list() -> None:
    text = read_toml(DATA / "models" / "llama-4-maverick.toml")["config"]["text_config"]
    with pytest.raises(SpecError, match=r"moe_layers=\[0, 2\] is not every"):
        from_hf_config({**text, "moe_layers": [0, 2]}, name="x")
    with pytest.raises(SpecError, match="'llama4' config needs 'text_config'"):
        from_hf_config({"model_type": "llama4"}, name="x")
    with pytest.raises(SpecError, match="'llama4_text' config needs 'intermediate_size_mlp'"):
        from_hf_config({k: v for k, v in text.items() if k != "intermediate_size_mlp"},
                       name="x")
    assert {"mamba", "llama4", "llama4_text"} <= set(SUPPORTED_MODEL_TYPES)
    with pytest.raises(UnknownNameError) as e:
        from_hf_config({"model_type": "rwkv"}, name="x")
    assert "mamba" in str(e.value) and "llama4" in str(e.value)
    # the documented list is the code's
    doc = (Path(__file__).parents[1] / "docs" / "import.md").read_text()
    for mt in ("mamba", "llama4", "llama4_text"):
        assert f"| `{mt}` |" in doc


def test_messages_use_the_right_article() -> None:
    with pytest.raises(SpecError, match="Mamba 130M is an SSM model"):
        rl.serve("mamba-130m", "h100-sxm5", batch=1, prompt_len=8, output_len=8)
    with pytest.raises(SpecError, match="is a CNN model"):
        rl.serve("resnet50", "h100-sxm5", batch=1, prompt_len=8, output_len=8)


def test_type_messages_use_the_right_article() -> None:
    from roofline.validation.cases import _check_type

    with pytest.raises(SpecError, match="must be an int$"):
        _check_type("3", int, "case x", "batch")
    with pytest.raises(SpecError, match="must be a str$"):
        _check_type(3, str, "case x", "model")
