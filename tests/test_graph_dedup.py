"""GraphBuilder.add evaluates each formula once per distinct (kind, shape) in a graph (a model's
repeated layers): every graph must equal the one built with every formula evaluated."""

from __future__ import annotations

import numpy as np
import pytest

import roofline as rl
from roofline.graphs import graph as G
from roofline.graphs.resolve import model as resolve_model
from roofline.graphs.training import training_graph


def _same(a: G.Graph, b: G.Graph) -> None:
    assert a.names == b.names and a.kinds == b.kinds and a.classes == b.classes
    for f in ("c0", "c1", "gemm", "params", "fusible"):
        x, y = getattr(a, f), getattr(b, f)
        if x is None or y is None:
            assert x is None and y is None, f
            continue
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes(), f
    assert a.weight_footprint_bytes == b.weight_footprint_bytes
    assert a.state_bytes_per_sample == b.state_bytes_per_sample
    assert a.fixed_batch == b.fixed_batch and a.tokens_per_sample == b.tokens_per_sample
    assert a.meta.keys() == b.meta.keys()
    for k, v in a.meta.items():
        w = b.meta[k]
        assert (np.array_equal(v, w) if isinstance(v, np.ndarray) else v == w), k


def _both(build):  # type: ignore[no-untyped-def]
    G.GraphBuilder.dedup = False
    try:
        ref = build()
    finally:
        G.GraphBuilder.dedup = True
    return build(), ref


def _scenarios(m):  # type: ignore[no-untyped-def]
    out = [dict(phase=ph) for ph in m.phases]
    if "decode" in m.phases:
        out.append(dict(phase="decode", context=333, batch=4 if m.batch_dependent else None))
    if "prefill" in m.phases:
        out.append(dict(phase="prefill", seq_len=100, context=50, fused_attention=False))
    return out


@pytest.mark.parametrize("name", rl.list_models())
def test_every_zoo_graph_equals_the_one_without_dedup(name: str) -> None:
    m = resolve_model(name)
    for kw in _scenarios(m):
        for prec in ("fp16", "fp8"):
            def build(kw=kw, prec=prec):  # type: ignore[no-untyped-def]
                m._cache.clear()
                try:
                    return m.graph(precision=prec, **kw)
                except rl.RooflineError:
                    return None
            new, ref = _both(build)
            assert (new is None) == (ref is None), (name, kw, prec)
            if new is not None:
                _same(new, ref)


@pytest.mark.parametrize("name", ["gpt3-175b", "mixtral-8x7b", "llama-3.1-8b"])
def test_training_graphs_equal_the_ones_without_dedup(name: str) -> None:
    cfg = resolve_model(name).config
    p = rl.precision("bf16")
    for tp, sp in ((1, False), (8, True)):
        new, ref = _both(lambda tp=tp, sp=sp: training_graph(
            cfg, p, seq_len=2048, tp=tp, sequence_parallel=sp, micro_batch=2))
        _same(new.graph, ref.graph)


def test_the_key_keeps_apart_what_a_formula_can_tell_apart() -> None:
    assert G._shape_key("k", {"a": 1}) != G._shape_key("k", {"a": 1.0})
    assert G._shape_key("k", {"a": 1}) != G._shape_key("k", {"a": True})
    assert G._shape_key("k", {"a": 1.5}) == G._shape_key("k", {"a": 1.5})
    for v in (0.0, -0.0, float("nan"), (1, 2), np.float64(2.0)):
        assert G._shape_key("k", {"a": v}) is None
