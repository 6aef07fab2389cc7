"""shard_config: one per-device split for serving and training (graphs/shard.py)."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.shard import allowed_tp, shard_config
from roofline.graphs.training import training_graph
from roofline.scenarios.serving.plan import device_plan

P = rl.precision("bf16")
FIELDS = ("n_heads", "n_kv_heads", "head_dim", "d_ff", "moe_d_ff", "vocab", "n_experts")


def test_hand_split() -> None:
    cfg = rl.model("llama-3.1-8b").config  # 32 heads, 8 KV heads, F 14336, V 128256, 32 layers
    s = shard_config(cfg, tp=16, pp=2)
    # 32/16 = 2 heads; 16 > 8 KV heads: one replicated KV head; 14336/16 = 896;
    # ceil(128256/16) = 8016; ceil(32/2) = 16 layers
    assert (s.n_heads, s.n_kv_heads, s.d_ff, s.vocab, s.n_layers) == (2, 1, 896, 8016, 16)
    assert shard_config(cfg, tp=4).n_kv_heads == 2  # 8/4
    assert shard_config(cfg) is cfg  # nothing split
    ds = rl.model("deepseek-v3").config  # expert width 2048: split by tp as the dense MLP is
    assert shard_config(ds, tp=8).moe_d_ff == 2048 // 8
    assert allowed_tp(cfg) == [1, 2, 4, 8, 16, 32]


@pytest.mark.parametrize("key", ["llama-3.1-8b", "llama-3.1-70b", "mixtral-8x7b", "gpt2",
                                 "deepseek-v3", "gemma-2-9b"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8, 16])
def test_serving_and_training_shard_alike(key: str, tp: int) -> None:
    cfg = rl.model(key).config
    try:
        want = shard_config(cfg, tp)
    except SpecError as e:  # both paths refuse the same split with the same message
        with pytest.raises(SpecError) as a:
            device_plan(cfg, P, tp=tp, pp=1, fuse=True, fused_attention=True)
        with pytest.raises(SpecError) as b:
            training_graph(cfg, P, seq_len=128, tp=tp, micro_batch=1)
        assert str(a.value) == str(b.value) == str(e)
        return
    served = device_plan(cfg, P, tp=tp, pp=1, fuse=True, fused_attention=True).cfg
    trained = training_graph(cfg, P, seq_len=128, tp=tp, micro_batch=1).local
    assert trained is not None
    for f in FIELDS:
        assert getattr(served, f) == getattr(trained, f) == getattr(want, f), f


def test_bad_degrees() -> None:
    cfg = rl.model("llama-3.1-8b").config
    with pytest.raises(SpecError, match=r"tp=3 must divide num_attention_heads=32.*allowed tp: "
                                        r"1, 2, 4, 8, 16, 32"):
        shard_config(cfg, tp=3)
    with pytest.raises(SpecError, match="ep=2: .* has no experts"):
        shard_config(cfg, ep=2)
    with pytest.raises(SpecError, match="pp=64 exceeds the 32 layers"):
        shard_config(cfg, pp=64)
    with pytest.raises(SpecError, match="tp must be a positive integer"):
        shard_config(cfg, tp=0)
