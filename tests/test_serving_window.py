"""KV-cache footprint of sliding-window layers: windowed layers hold at most their window
(kv_window="ring", the default), or every token (kv_window="full"); hand calculations."""

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.scenarios.serving import plan as sp
from roofline.scenarios.serving import serve_sweep

G = "gemma-2-9b"  # 42 layers, layers 0, 2, …, 40 windowed at 4096, K=8, H=256
# bf16 KV per layer per token: 2 (K, V) · 8 heads · 256 · 2 B = 8192 B
G_LAYER = 2 * 8 * 256 * 2
MI = "mistral-7b"  # 32 layers, all windowed at 4096, K=8, H=128
# bf16 KV per layer per token: 2 · 8 · 128 · 2 B = 4096 B
MI_LAYER = 2 * 8 * 128 * 2


def test_gemma2_kv_per_sequence_hand_calculation():
    cfg = rl.model(G).config
    assert cfg.n_layers == 42 and cfg.sliding_window == 4096 and cfg.window_every == 2
    assert sum(cfg.layer_window(i) is not None for i in range(42)) == 21
    # below the window every layer holds every token: 42 · 2048 · 8192 B = 704,643,072
    assert cfg.kv_bytes_per_sequence(2048, 2) == 42 * 2048 * G_LAYER == 704_643_072
    assert cfg.kv_bytes_per_sequence(2048, 2) == 2048 * cfg.kv_bytes_per_token(2)
    # at 8192 tokens: 21 global · 8192 + 21 local · 4096 = 258,048 token-layers
    # × 8192 B = 2,113,929,216 B (all layers at full length: 2,818,572,288 B, 4/3 of it)
    assert cfg.kv_bytes_per_sequence(8192, 2) == 2_113_929_216
    assert 8192 * cfg.kv_bytes_per_token(2) == 2_818_572_288
    # exactly at the window nothing is dropped yet
    assert cfg.kv_bytes_per_sequence(4096, 2) == 4096 * cfg.kv_bytes_per_token(2)
    # a layer range (pipeline stage): layers 21…41 hold 11 global (odd) + 10 local layers
    assert cfg.kv_bytes_per_sequence(8192, 2, layers=range(21, 42)) == \
        (11 * 8192 + 10 * 4096) * G_LAYER


def test_gemma2_serve_below_window_unchanged_above_window_smaller():
    # prompt 3000 + output 96 = 3096 tokens < 4096: ring and full agree exactly
    kw = dict(batch=8, prompt_len=3000, output_len=96)
    ring, full = rl.serve(G, "H100", **kw), rl.serve(G, "H100", kv_window="full", **kw)
    assert ring.kv_cache_bytes == full.kv_cache_bytes == 8 * 3096 * 42 * G_LAYER
    assert ring.max_batch == full.max_batch and ring.kv_window == "ring"
    # prompt 7936 + output 256 = 8192 tokens: 8 sequences × 2,113,929,216 B = 16.91 GB (ring)
    # vs 8 × 2,818,572,288 B = 22.55 GB (full)
    kw = dict(batch=8, prompt_len=7936, output_len=256)
    ring, full = rl.serve(G, "H100", **kw), rl.serve(G, "H100", kv_window="full", **kw)
    assert ring.kv_cache_bytes == 8 * 2_113_929_216 == ring.memory_breakdown["kv_cache"]
    assert full.kv_cache_bytes == 8 * 2_818_572_288 == full.memory_breakdown["kv_cache"]
    assert full.kv_window == "full"
    # the layout changes only the memory: latencies are the same (reads are windowed anyway)
    assert ring.tpot == full.tpot and ring.ttft == full.ttft
    # more sequences fit: max_batch = (capacity − weights − workspace) // (KV + activations
    # per sequence); 85.9 GB − 18.48 − 1.074 = 66.34 GB over 2.114 + 0.512 GB -> 25, over
    # 2.819 + 0.512 GB -> 19
    assert (ring.max_batch, full.max_batch) == (25, 19)
    mb = ring.max_batch
    assert rl.serve(G, "H100", **{**kw, "batch": mb}).feasible
    # the same batch does not fit when windowed layers keep every token
    tight = rl.serve(G, "H100", kv_window="full", **{**kw, "batch": mb})
    assert not tight.feasible and "largest batch that fits is 19" in tight.reason
    assert "sliding-window layers hold their window" in str(ring)


def test_mistral_all_layers_windowed_memory_stops_growing():
    cfg = rl.model(MI).config
    assert cfg.sliding_window == 4096 and cfg.window_every == 1
    # every layer holds at most 4096 tokens: 32 · 4096 · 4096 B = 536,870,912 B per sequence
    for tokens in (4096, 8192, 32768):
        assert cfg.kv_bytes_per_sequence(tokens, 2) == 32 * 4096 * MI_LAYER == 536_870_912
    assert cfg.kv_bytes_per_sequence(1000, 2) == 32 * 1000 * MI_LAYER
    s = rl.serve(MI, "H100", batch=8, prompt_len=30000, output_len=2000)
    f = rl.serve(MI, "H100", batch=8, prompt_len=30000, output_len=2000, kv_window="full")
    assert s.kv_cache_bytes == 8 * 536_870_912  # 4.295 GB
    assert f.kv_cache_bytes == 8 * 32000 * 32 * MI_LAYER  # 33.55 GB
    assert s.max_batch > f.max_batch


def test_models_without_windows_are_unchanged():
    for name in ("llama-3.1-8b", "qwen2.5-7b"):  # qwen: use_sliding_window = false
        cfg = rl.model(name).config
        assert cfg.sliding_window is None
        for tokens in (1, 4096, 100_000):
            assert cfg.kv_bytes_per_sequence(tokens, 2) == tokens * cfg.kv_bytes_per_token(2)
    # Llama-3.1-8B fp8 KV: 8 × 2304 tokens × 2·32·8·128 values × 1 B, both layouts, all fields
    kw = dict(batch=8, prompt_len=2048, output_len=256, kv_precision="fp8")
    a = rl.serve("llama-3.1-8b", "H100", **kw)
    b = rl.serve("llama-3.1-8b", "H100", kv_window="full", **kw)
    assert a.kv_cache_bytes == 8 * 2304 * 2 * 32 * 8 * 128
    assert a.kv_window == "" and a.to_dict() == b.to_dict()
    assert "kv_window" not in str(a)
    # MLA (DeepSeek-V3, no windows): latent 512 + RoPE key 64 per layer, 61 layers, 1 B (fp8)
    ds = rl.model("deepseek-v3").config
    assert ds.kv_bytes_per_sequence(1000, 1) == 1000 * 61 * 576


def test_graph_state_and_solve_use_the_window():
    # decode at context 6000: 21 · 6000 + 21 · 4096 token-layers × 8192 B = 1,736,835,072 B
    g = rl.model(G).graph(precision="bf16", phase="decode", context=6000)
    assert g.state_bytes_per_sample == (21 * 6000 + 21 * 4096) * G_LAYER == 1_736_835_072
    r = rl.solve(G, "H100", batch=4, phase="decode", context=6000)
    assert r.memory_breakdown["kv_cache"] == 4 * 1_736_835_072
    g = rl.model("llama-3.1-8b").graph(precision="bf16", phase="decode", context=6000)
    assert g.state_bytes_per_sample == 6000 * 2 * 32 * 8 * 128 * 2


def test_tensor_and_pipeline_split_per_device():
    kw = dict(batch=8, prompt_len=7936, output_len=256)
    # tp=2: 4 of the 8 KV heads per device, half the bytes: 8 × 2,113,929,216 / 2
    t2 = rl.serve(G, "H100", tp=2, **kw)
    assert t2.memory_breakdown["kv_cache"] == 8 * 2_113_929_216 // 2
    assert t2.kv_cache_bytes == 8 * 2_113_929_216  # the whole cache, all devices
    # pp=2: 21 layers per stage; stage 0 (layers 0…20) has 10 global layers, stage 1
    # (21…41) has 11: the device footprint is the larger, for all 8 sequences (each of the
    # two micro-batches of 4 passes through both stages, which keep their layers' KV for it)
    p2 = rl.serve(G, "H100", pp=2, **kw)
    assert p2.memory_breakdown["kv_cache"] == 8 * (11 * 8192 + 10 * 4096) * G_LAYER
    plan = sp.device_plan(rl.model(G).config, rl.precision("bf16"), tp=1, pp=2, fuse=True,
                       fused_attention=True)
    assert plan.kv_bytes_per_sequence(8192, "full") == 21 * 8192 * G_LAYER
    # tp=16 > 8 KV heads: one (replicated) KV head per device
    t16 = sp.device_plan(rl.model(G).config, rl.precision("bf16"), tp=16, pp=1, fuse=True,
                      fused_attention=True)
    assert t16.kv_bytes_per_sequence(8192) == (21 * 8192 + 21 * 4096) * 2 * 1 * 256 * 2


def test_sweep_disaggregated_and_mlsysim():
    d = serve_sweep(G, "H100", batch=[1, 8], context=[2048, 8000])
    f = serve_sweep(G, "H100", batch=[1, 8], context=[2048, 8000], kv_window="full")
    kv, kvf = d["kv_cache_bytes"][0, 0], f["kv_cache_bytes"][0, 0]
    assert kv[1, 0] == kvf[1, 0] == 8 * 42 * 2048 * G_LAYER  # below the window
    assert kv[1, 1] == 8 * (21 * 8000 + 21 * 4096) * G_LAYER
    assert kvf[1, 1] == 8 * 42 * 8000 * G_LAYER
    assert (d["tpot"] == f["tpot"]).all()
    # disaggregated: the prompt's KV crosses the link as the prefill device holds it
    kw = dict(batch=4, prompt_len=7936, output_len=64, decode_hardware="H200",
              kv_link_bytes_per_s=50e9)
    r = rl.serve(G, "H100", **kw)
    fu = rl.serve(G, "H100", kv_window="full", **kw)
    assert r.phase_seconds["kv_transfer"] == pytest.approx(
        4 * (21 * 7936 + 21 * 4096) * G_LAYER / 50e9)
    assert fu.phase_seconds["kv_transfer"] == pytest.approx(4 * 42 * 7936 * G_LAYER / 50e9)
    # preset mlsysim keeps mlsysim's convention (every layer, every token) and says so
    m = rl.serve(G, "H100", batch=1, prompt_len=7936, output_len=256, preset="mlsysim")
    assert m.kv_window == "full"


@pytest.mark.parametrize("bad", ["rolling", "", None, 1])
def test_bad_kv_window_names_field_and_choices(bad):
    for call in (lambda: rl.serve(G, "H100", kv_window=bad),
                 lambda: serve_sweep(G, "H100", batch=[1], context=[10], kv_window=bad),
                 lambda: rl.serving_capacity(G, "H100", prompt_len=100, output_len=10,
                                             ttft_slo=1, tpot_slo=1, kv_window=bad)):
        with pytest.raises(SpecError, match=r"kv_window=.*allowed: 'ring', 'full'"):
            call()
