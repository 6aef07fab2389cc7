"""Llama 4 Scout and Maverick (text models) from their published configs: interleaved MoE with a
shared expert and top-1 routing (TransformerConfig.moe_every)."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.graphs.graph import Q

D, L, V, E_W, DENSE_W = 5120, 48, 202_048, 8192, 16_384
ATTN = 2 * D * D + 2 * D * 1024  # q, o: 5120 x 5120; k, v: 5120 x (8 x 128)
MLP = 3 * D * E_W  # one gated expert: gate, up, down


def test_scout_params_by_hand():
    m = rl.model("llama-4-scout")
    # per layer: attention 62,914,560 + router 5120 x 16 + 16 routed + 1 shared experts of
    # 125,829,120 + 2 RMSNorms; embeddings and the untied lm_head 202,048 x 5,120 each
    per_layer = ATTN + D * 16 + 17 * MLP + 2 * D
    assert m.params == L * per_layer + 2 * V * D + D  # 107,769,861,120
    # the published 109B counts the vision encoder too (this is the text model)
    assert m.params == pytest.approx(m.published["params"].value, rel=0.02)


def test_maverick_alternates_dense_and_moe_layers():
    m = rl.model("llama-4-maverick")
    moe = ATTN + D * 128 + 129 * MLP + 2 * D
    dense = ATTN + 3 * D * DENSE_W + 2 * D
    assert m.params == 24 * moe + 24 * dense + 2 * V * D + D  # 400,711,848,960
    assert m.params == pytest.approx(m.published["params"].value, rel=0.005)
    g = m.graph(precision="bf16", phase="decode", batch=1)
    assert "layers.0.mlp.down_proj" in g.names and "layers.1.moe.router" in g.names
    assert "layers.0.moe.router" not in g.names and "layers.1.mlp.down_proj" not in g.names


@pytest.mark.parametrize("key", ["llama-4-scout", "llama-4-maverick"])
def test_active_parameters_per_token(key):
    m = rl.model(key)
    g = m.graph(precision="bf16", phase="decode", batch=1, context=1)
    # the weights a token multiplies (MACs of every projection, router and expert it is routed
    # to, the lm_head: 16.14 B / 16.15 B) plus the input embedding table (1.03 B), which the
    # published 17B activated counts as active: 17.17 B / 17.18 B
    macs = sum(g.c1[Q["flops"], i] + g.c0[Q["flops"], i] for i, c in enumerate(g.classes)
               if c == "matmul") / 2
    assert macs + V * D == pytest.approx(m.published["active_params"].value, rel=0.02)


def test_scout_needs_more_than_one_h100_and_fits_a_b200_in_fp8():
    assert not rl.solve("llama-4-scout", "h100-sxm5", batch=1, phase="decode",
                        precision="fp8").feasible  # 108 GB of fp8 weights > 80 GiB
    assert rl.solve("llama-4-scout", "b200", batch=1, phase="decode",
                    precision="fp8").feasible  # ... < 180 GiB
