"""graphs/backward.py: the backward of any forward graph, checked against hand counts."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import SpecError
from roofline.graphs.backward import BACKWARD_RULES, backward_graph
from roofline.graphs.graph import GraphBuilder
from roofline.ops import known_kinds
from roofline.specs.dtypes import precision


def test_every_kind_has_a_rule() -> None:
    assert set(known_kinds()) <= set(BACKWARD_RULES)


def _small() -> rl.graphs.graph.Graph:
    """linear -> relu -> (attention) -> softmax, per-sample shapes, fp16/bf16."""
    b = GraphBuilder("small", "forward", precision("bf16"))
    b.add("linear", "fc", params=64 * 32, tokens=8, d_in=64, d_out=32)
    b.add("elementwise", "relu", elements=8 * 32, op="relu")
    b.add("attention", "attn", n_heads=2, n_kv_heads=2, head_dim=16, q_len=8, kv_len=8,
          causal=False)
    b.add("softmax", "sm", elements=8 * 32)
    b.add("view", "v")
    return b.build()


def test_rules_by_hand() -> None:
    tg = backward_graph(_small())
    g = tg.graph
    assert g.names == ("fc", "relu", "attn", "sm", "v", "sm.bwd", "attn.bwd", "relu.bwd",
                       "fc.bwd", "fc.bwd_dw")
    c = {n: g.op_cost(i, 4) for i, n in enumerate(g.names)}
    # linear forward 2·B·T·D·F = 2·4·8·64·32 = 131,072; dX and dW the same each
    assert c["fc"].flops == c["fc.bwd"].flops == c["fc.bwd_dw"].flops == 131_072
    # dX reads W (64·32·2 B) and dY (4·8·32·2 B), writes dX (4·8·64·2 B)
    assert c["fc.bwd"].weight_bytes_read == 64 * 32 * 2
    assert c["fc.bwd"].act_bytes_read == 4 * 8 * 32 * 2
    assert c["fc.bwd"].act_bytes_written == 4 * 8 * 64 * 2
    # dW reads X and dY, reads and writes the fp32 gradient (4 B per weight)
    assert c["fc.bwd_dw"].act_bytes_read == 4 * 8 * (64 + 32) * 2
    assert c["fc.bwd_dw"].weight_bytes_read == c["fc.bwd_dw"].weight_bytes_written == 64 * 32 * 4
    # attention 4·B·N·T·S·H = 4·4·2·8·8·16 = 32,768; backward 2.5×
    assert c["attn"].flops == 32_768 and c["attn.bwd"].flops == 2.5 * 32_768
    # relu: 1 FLOP per element forward, 2× backward; reads x and dY, writes dX
    assert c["relu.bwd"].flops == 2 * 4 * 8 * 32
    assert c["relu.bwd"].act_bytes_read == 2 * 4 * 8 * 32 * 2
    # saved: fc's input X, relu's input, attention's Q,K,V (read) and O, softmax's output
    per_sample = (8 * 64 + 8 * 32 + (8 * 32 * 3 + 8 * 32) + 8 * 32) * 2
    assert tg.saved_bytes(4) == 4 * per_sample


def test_resnet50_train_is_three_forwards() -> None:
    g = rl.model("resnet50").graph(precision="fp16")
    tg = backward_graph(g)
    mm = g.is_compute
    fwd_mm = float((g.c1[0] * 32)[mm].sum())
    train_mm = float((tg.graph.c1[0] * 32)[tg.graph.is_compute].sum())
    assert train_mm == pytest.approx(3 * fwd_mm, rel=1e-12)  # dX + dW = 2× forward
    # every weight gets a gradient: the fp32 grad bytes written = 4 B × parameters
    # (batch-norm γ/β included; running statistics are not parameters but are read)
    ww = float(tg.graph.c0[6].sum())
    assert ww >= 4 * g.params_total * 0.999


def test_fixed_batch_graph_refused() -> None:
    g = rl.model("mixtral-8x7b").graph(precision="bf16", seq_len=16, batch=2)
    with pytest.raises(SpecError, match="built for batch"):
        backward_graph(g)
