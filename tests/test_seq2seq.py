"""Encoder-decoder configs (T5, BART, Whisper): parameter counts, a hand-counted small T5,
the encoder once / decoder per token split, serving's KV cache with the cross-attention K/V."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.importers.hf_config import from_hf_config
from roofline.graphs.model import transformer_model

ZOO = ["t5-base", "flan-t5-base", "bart-large", "whisper-large-v3"]
#: the checkpoints' exact counts (transformers' num_parameters() on the meta device, checked
#: in test_counts_equal_transformers; Flan-T5-Base adds its untied 32,128 × 768 LM head)
EXACT = {"t5-base": 222_903_552, "flan-t5-base": 222_903_552 + 32128 * 768,
         "bart-large": 406_291_456, "whisper-large-v3": 1_543_490_560}
TINY_T5 = dict(model_type="t5", d_model=64, d_kv=16, num_heads=4, d_ff=128, num_layers=2,
               num_decoder_layers=2, vocab_size=100, n_positions=32,
               relative_attention_num_buckets=8)


@pytest.mark.parametrize("key", ZOO)
def test_zoo_counts(key: str) -> None:
    m = rl.model(key)
    assert m.params == EXACT[key]
    pub = m.published["params"].value
    # Whisper 1550M and Flan-T5 250M within 1 %; the T5 (220M) and BART (400M) figures are
    # rounded to two significant figures: 1.3 % and 1.6 % from the exact counts
    assert m.params == pytest.approx(pub, rel=0.01 if key in ("whisper-large-v3",
                                                               "flan-t5-base") else 0.02)


def test_counts_equal_transformers() -> None:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    import tomllib

    from roofline._data import DATA

    for key, cls in (("t5-base", tf.T5ForConditionalGeneration),
                     ("bart-large", tf.BartForConditionalGeneration),
                     ("whisper-large-v3", tf.WhisperForConditionalGeneration)):
        raw = tomllib.loads((DATA / "models" / f"{key}.toml").read_text())["config"]
        cfg_cls = {"t5": tf.T5Config, "bart": tf.BartConfig, "whisper": tf.WhisperConfig}
        config = cfg_cls[raw["model_type"]](**{k: v for k, v in raw.items()
                                                 if k != "model_type"})
        with torch.device("meta"):
            module = cls(config)
        assert rl.model(key).params == module.num_parameters(), key


def test_tiny_t5_forward_by_hand() -> None:
    m = transformer_model(from_hf_config(TINY_T5, name="tiny"), key="tiny")
    # embedding 100·64 = 6,400; encoder layer 4·64·64 + 2·64·128 + 2·64 = 32,896 (×2);
    # decoder layer 8·64·64 + 2·64·128 + 3·64 = 49,344 (×2); bias tables 2·8·4; final norms 2·64
    assert m.params == 6400 + 2 * 32896 + 2 * 49344 + 2 * 32 + 2 * 64
    g = m.graph(precision="bf16", phase="forward", seq_len=16)
    mm = sum(g.c1[0, i] for i, c in enumerate(g.classes) if c in ("matmul", "attention"))
    # encoder (Ts = 32) per layer: q,k,v,o 4·2·32·64·64 = 1,048,576; attention 4·4·32·32·16 =
    # 262,144; MLP 2·2·32·64·128 = 1,048,576  -> 2,359,296
    # decoder (T = 16) per layer: self q,k,v,o 524,288; causal attention 4·4·(16·17/2)·16 =
    # 34,816; cross q,o 262,144; cross k,v over the 32 encoder tokens 524,288; cross attention
    # 4·4·16·32·16 = 131,072; MLP 524,288  -> 2,000,896
    # LM head on all 16 tokens: 2·16·64·100 = 204,800
    assert mm == 2 * 2_359_296 + 2 * 2_000_896 + 204_800


def test_decode_reads_the_cached_cross_kv_and_runs_no_encoder() -> None:
    m = rl.model("whisper-large-v3")
    cfg = m.config
    g = m.graph(precision="fp16", phase="decode", context=10)
    assert not any(n.startswith("encoder.") for n in g.names)
    assert not any(".cross_attn.k_proj" in n or ".cross_attn.kv_cache" in n for n in g.names)
    i = g.names.index("layers.0.cross_attn.attention")
    # K and V of 1,500 source tokens, 20 heads × 64, 2 bytes: 2·1500·1280·2 per sample
    assert g.op_cost(i, 1).kv_bytes_read == 2 * 1500 * 1280 * 2
    pre = m.graph(precision="fp16", phase="prefill", seq_len=4)
    assert sum(n.startswith("encoder.layers.") and n.endswith("attention")
               for n in pre.names) == cfg.encoder_layers
    w = pre.names.index("layers.0.cross_attn.kv_cache_write")
    assert pre.op_cost(w, 1).kv_bytes_written == 2 * 1500 * 1280 * 2
    # the conv front-end: 3000 mel frames -> 1500 positions
    c2 = pre.names.index("encoder.conv2")
    assert pre.op_cost(c2, 1).flops == pytest.approx(2 * 1280 * 1500 * 1280 * 3 + 1280 * 1500)


def test_serve_kv_cache_holds_cross_and_self_kv() -> None:
    r = rl.serve("whisper-large-v3", "A100", batch=8, prompt_len=4, output_len=100,
                 precision="fp16")
    assert r.feasible
    # per sequence 2·32 layers·1280·(1500 cross + 104 self tokens)·2 B
    assert r.kv_cache_bytes == pytest.approx(8 * 2 * 32 * 1280 * (1500 + 104) * 2)
    assert r.ttft > r.tpot > 0
    with pytest.raises(SpecError, match="chunk_size"):
        rl.serve("t5-base", "A100", prompt_len=4, output_len=8, chunk_size=2)


def test_source_len_knob_and_limits() -> None:
    short = rl.model("bart-large", source_len=128)
    assert short.config.source_len == 128
    long = rl.model("bart-large")
    f = [x.graph(precision="bf16", seq_len=64).cost(1).flops for x in (short, long)]
    assert f[0] < f[1]
    with pytest.raises(SpecError, match="source_len=2000 exceeds"):
        rl.model("whisper-large-v3", source_len=2000)
    with pytest.raises(SpecError, match="max_target_positions"):
        rl.model("whisper-large-v3").graph(precision="fp16", seq_len=500)


def test_bad_seq2seq_configs_name_the_field() -> None:
    with pytest.raises(SpecError, match="num_heads"):
        from_hf_config({**TINY_T5, "num_heads": 0}, name="x")
    with pytest.raises(SpecError, match="feed_forward_proj"):
        from_hf_config({**TINY_T5, "feed_forward_proj": "gated-foo"}, name="x")
    bart = dict(model_type="bart", d_model=64, encoder_ffn_dim=128, decoder_ffn_dim=256)
    with pytest.raises(SpecError, match="encoder_ffn_dim=128 differs"):
        from_hf_config(bart, name="x")


def test_docs_example() -> None:
    """docs/import.md, 'Encoder-decoders': the worked example prints what the page shows."""
    import contextlib
    import io
    import pathlib
    import re

    page = (pathlib.Path(__file__).parents[1] / "docs" / "import.md").read_text()
    sec = page[page.index("### Encoder-decoders"):page.index("### Quantized checkpoints")]
    code, want = re.search(r"```python\n(.*?)```\n<!-- output -->\n```text\n(.*?)```", sec,
                           re.DOTALL).groups()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        exec(compile(code, "<doc>", "exec"), {})  # noqa: S102 - the page's own example
    assert buf.getvalue() == want
