"""Caches key on content, never on the id of a mutable object: the training context cache
(``training.context._context``, ``_CTX``) shares an entry between equal arguments and gives
edited ones their own."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import roofline as rl
from roofline.graphs.model import transformer_model
from roofline.scenarios.training import context as C
from roofline.specs import keys as K
from roofline.validation.training import gpt_model

ARGS = (None, "bf16", 512, True, False, "default")
KW = dict(global_batch=64, seq_len=512, tp=2, pp=2, nodes=1)


def _ctx(model: object, cl: object) -> C._Ctx:
    return C._context(model, cl, *ARGS)


def test_equal_models_share_one_context() -> None:
    """Two Model objects built from one config (equal content, distinct ids) get one context;
    on an id key each got its own."""
    cfg = gpt_model(4, 1024, 8).config
    cl = rl.cluster("dgx-h100")
    a, b = transformer_model(cfg, key="m"), transformer_model(cfg, key="m")
    assert a is not b
    ca = _ctx(a, cl)
    n = len(C._CTX)
    cb = _ctx(b, cl)
    assert len(C._CTX) == n and cb.key is ca.key  # one entry: the graphs and timings shared
    assert ca.m is a and cb.m is b and _ctx(b, cl) is cb  # each call sees its own model
    assert rl.train(a, cl, **KW).step_time == rl.train(b, cl, **KW).step_time


def test_a_shared_context_reports_the_callers_model() -> None:
    """Model is mutable: a model renamed after its context was cached must not lend its new
    name to an equal model that still has the old one (the hit carries the caller's model)."""
    cfg = gpt_model(4, 1024, 8).config
    cl = rl.cluster("dgx-h100")
    a, b = transformer_model(cfg, key="m", name="x"), transformer_model(cfg, key="m", name="x")
    assert rl.train(a, cl, **KW).model == "x"
    a.name = "renamed"
    assert rl.train(b, cl, **KW).model == "x"
    assert rl.train(a, cl, **KW).model == "renamed"


def test_equal_clusters_and_names_share_one_context() -> None:
    """An equal copy of a Cluster (``replace`` with no change) and a name built at run time
    (not the interned literal) reuse the entry."""
    cfg = gpt_model(4, 1024, 8).config
    m = transformer_model(cfg, key="m")
    cl = rl.cluster("dgx-h100")
    cl2 = replace(cl)
    assert cl2 is not cl and _ctx(m, cl2) is _ctx(m, cl)
    name = "".join(["dgx-", "h100"])
    assert name is not "dgx-h100"  # noqa: F632 (the point: equal, not identical)
    assert _ctx(m, name) is _ctx(m, "dgx-h100")


def test_paths_are_not_cached(tmp_path: object) -> None:
    """A file or directory path is read again every call (the file may have changed): no key."""
    assert C._model_key(str(tmp_path)) is None
    assert C._model_key("x/llama.json") is None and C._cluster_key("my-cluster.toml") is None
    assert C._model_key("meta-llama/Llama-2-70b-hf") == ("str", "meta-llama/Llama-2-70b-hf")


def test_edited_arguments_get_their_own_context() -> None:
    """Content that differs keys differently: a model with another name (the result shows it),
    another config, a cluster with another scale-out bandwidth or node count."""
    cfg = gpt_model(4, 1024, 8).config
    cl = rl.cluster("dgx-h100")
    a = transformer_model(cfg, key="m")
    named = transformer_model(cfg, key="m", name="other")
    assert _ctx(named, cl) is not _ctx(a, cl)
    assert rl.train(named, cl, **KW).model == "other"
    assert rl.train(a, cl, **KW).model == "m"
    deeper = transformer_model(replace(cfg, n_layers=2 * cfg.n_layers), key="m")
    assert _ctx(deeper, cl).cfg.n_layers == 2 * cfg.n_layers
    assert _ctx(a, cl).cfg.n_layers == cfg.n_layers
    slow = replace(cl, scale_out_bytes_per_s=cl.scale_out_bytes_per_s / 4)
    assert _ctx(a, slow) is not _ctx(a, cl)
    assert _ctx(a, slow).cl.scale_out_bytes_per_s == cl.scale_out_bytes_per_s / 4
    assert _ctx(a, cl.with_nodes(2)).cl.nodes == 2


def test_a_mutated_model_is_keyed_on_its_new_content() -> None:
    """Model is a mutable dataclass: its key is taken every call, so a renamed model is not
    served the context (and result name) of its old content."""
    cfg = gpt_model(4, 1024, 8).config
    cl = rl.cluster("dgx-h100")
    m = transformer_model(cfg, key="m", name="before")
    assert rl.train(m, cl, **KW).model == "before"
    m.name = "after"
    assert rl.train(m, cl, **KW).model == "after"


def test_a_custom_builder_shares_the_context_but_counts_its_own_flops() -> None:
    """A model whose builder is not its config's keys on what the context reads (config, key,
    name), not on the object: two such models share the context's graphs and timings, and a
    hit carries the caller's own model, whose FLOPs come from its own builder (here one that
    doubles the graph's FLOPs, so a shared model object would report half the MFU)."""
    cfg = gpt_model(4, 1024, 8).config
    cl = rl.cluster("dgx-h100")
    base = transformer_model(cfg, key="m")

    def plain(**kw):  # type: ignore[no-untyped-def]
        return base.builder(**kw)

    def doubled(**kw):  # type: ignore[no-untyped-def]
        g = base.builder(**kw)
        return replace(g, c0=2 * g.c0, c1=2 * g.c1)

    a = replace(base, builder=plain)
    b = replace(base, builder=doubled)
    assert C._model_key(a) == C._model_key(b) and C._model_key(a)[0][0] == "custom"
    ca, cb = _ctx(a, cl), _ctx(b, cl)
    assert ca.key == cb.key and ca.m is a and cb.m is b
    ra, rb = rl.train(a, cl, **KW), rl.train(b, cl, **KW)
    assert rb.step_time == ra.step_time  # the training graphs come from the config
    assert rb.model_flops_per_step == pytest.approx(2 * ra.model_flops_per_step)
    assert rb.mfu == pytest.approx(2 * ra.mfu)


def test_frozen_key() -> None:
    """The content key of a frozen spec: equal for an equal copy (NaN fields included, as
    NaN != NaN), different for an edited one, taken once per object."""
    cl = rl.cluster("dgx-h100")
    k = C.frozen_key(cl)
    assert k is not None and C.frozen_key(cl) is k
    assert C.frozen_key(replace(cl)) == k
    assert C.frozen_key(replace(cl, name="x")) != k
    hw = cl.device
    assert C.frozen_key(replace(hw, tdp_w=float("nan"))) == C.frozen_key(
        replace(hw, tdp_w=float("nan")))
    # values that compare equal but are not the same spec key apart (float text, type tags)
    assert C.frozen_key(replace(hw, tdp_w=0.0)) != C.frozen_key(replace(hw, tdp_w=-0.0))
    assert C.frozen_key(replace(hw, tdp_w=700)) != C.frozen_key(replace(hw, tdp_w=700.0))
    assert len({K._freeze(v) for v in ([1], [1.0], [True], (1,), {"1": 1}, {1: 1})}) == 6
    with pytest.raises(TypeError):
        K._freeze([{1, 2}, {}])  # a set is frozen as itself: unhashable -> no key


def test_the_key_is_kept_on_the_spec() -> None:
    """Hardware, Cluster and TransformerConfig keep their content keys in a slot: taken once,
    not compared (equal specs stay equal), not shown, and a ``replace`` copy starts without
    it, so an edited spec gets its own key."""
    from roofline.specs.hardware import spec_key

    cl = rl.cluster("dgx-h100")
    hw, cfg = cl.device, gpt_model(4, 1024, 8).config
    for x in (hw, cl, cfg):
        k = C.frozen_key(x)
        assert x._frozen_key is k and C.frozen_key(x) is k
        assert replace(x)._frozen_key is None and C.frozen_key(replace(x)) == k
        assert "_frozen_key" not in repr(x)
    assert replace(cfg) == cfg and hash(replace(cfg)) == hash(cfg)  # the slot is not compared
    k = spec_key(hw)
    assert hw._spec_key is k and spec_key(hw) is k
    faster = replace(hw, memory=(replace(hw.memory[0], bytes_per_s=2 * hw.memory_bytes_per_s),
                                 *hw.memory[1:]))
    assert faster._spec_key is None and spec_key(faster) != k
    assert spec_key(replace(hw)) == k  # equal content from another object: one key
    assert C.frozen_key(replace(cfg, n_layers=2 * cfg.n_layers)) != C.frozen_key(cfg)
    with pytest.raises(ValueError):  # not an argument: a copy cannot be handed a stale key
        replace(hw, _spec_key=k)


def test_equal_specs_share_one_cache_entry() -> None:
    """Equal specs from different objects (the zoo file loaded twice, a pickled copy) give one
    key, so the caches keyed on it (here the engine's time models and the training context)
    hold one entry for them."""
    import pickle

    from roofline.engine import core
    from roofline.specs.cluster import load_cluster_file
    from roofline.specs.hardware import load_hardware_file, spec_key

    path = rl.cluster("dgx-h100").origin
    a, b = load_cluster_file(path), load_cluster_file(path)
    c = pickle.loads(pickle.dumps(a))
    hw = load_hardware_file(a.device.origin)
    assert a is not b and b is not c and a.device is not c.device and hw is not a.device
    assert C.frozen_key(a) == C.frozen_key(b) == C.frozen_key(c)
    assert spec_key(a.device) == spec_key(hw) == spec_key(c.device)
    m = transformer_model(gpt_model(4, 1024, 8).config, key="m")
    assert _ctx(m, a) is _ctx(m, b) is _ctx(m, c)
    eff = rl.engine.presets.efficiency_for(a.device, "default")
    g = m.graph(precision="bf16")
    assert core.time_model(g, a.device, eff) is core.time_model(g, c.device, eff)


_PICKLE = """
import pickle, sys
import roofline as rl
from roofline.scenarios.training.context import frozen_key
from roofline.specs.hardware import spec_key
cl = rl.cluster("dgx-h100")
cfg = rl.model("llama-3.1-8b").config
path = sys.argv[1]
if sys.argv[2] == "dump":
    keys = (spec_key(cl.device), frozen_key(cl), frozen_key(cfg))  # filled before pickling
    with open(path, "wb") as f:
        pickle.dump((cl, cfg, keys), f)
else:
    with open(path, "rb") as f:
        cl2, cfg2, keys = pickle.load(f)
    fresh = (spec_key(cl.device), frozen_key(cl), frozen_key(cfg))
    mine = (spec_key(cl2.device), frozen_key(cl2), frozen_key(cfg2))
    print(mine == fresh, keys == fresh, [hash(k) == hash(f) for k, f in zip(keys, fresh)],
          {f: i for i, f in enumerate(fresh)}.get(keys[0]))
print(hash("dgx-h100"))
"""


def test_a_pickled_spec_keys_the_same_in_another_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A Cluster, its Hardware and a config pickled (with their keys taken) in one process and
    loaded in another with another hash seed key as the same specs built there; the pickled
    keys themselves take their hash again (a stored hash of str and type values would differ)."""
    import os
    import subprocess
    import sys

    f = tmp_path / "specs.pkl"

    def run(seed: str, what: str) -> list[str]:
        env = {**os.environ, "PYTHONHASHSEED": seed}
        r = subprocess.run([sys.executable, "-c", _PICKLE, str(f), what], env=env,
                           capture_output=True, text=True, check=True)
        return r.stdout.split("\n")

    h1 = run("1", "dump")[0]
    out = run("2", "load")
    assert out[1] != h1  # the two processes really hash strings differently
    assert out[0] == "True True [True, True, True] 0"


def test_torch_models_of_one_class_key_on_their_graphs() -> None:
    """Imported models have no config: their FLOP counts key on a digest of the graph (ops,
    shapes, dtypes). Two modules of one class with other widths, or another op, never share an
    entry; the same module imported twice (two Model objects) does."""
    torch = pytest.importorskip("torch")
    from roofline.engine.core import time_model
    from roofline.engine.presets import efficiency_for

    nn = torch.nn

    class Tiny(nn.Module):  # type: ignore[misc]
        def __init__(self, d: int, act: bool = False) -> None:
            super().__init__()
            self.emb, self.lin = nn.Embedding(100, d), nn.Linear(d, d, bias=False)
            self.act = act

        def forward(self, x):  # type: ignore[no-untyped-def]
            y = self.lin(self.emb(x))
            return torch.relu(y) if self.act else y

    def imported(d: int, act: bool = False) -> object:
        return rl.model(Tiny(d, act), example_inputs=(torch.zeros(1, 16, dtype=torch.long),),
                        seq_dim=1)

    a, b, c, a2 = imported(64), imported(128), imported(64, act=True), imported(64)
    assert C._model_content(a) is None  # no config: keyed on the graph
    C._MODEL_FLOPS.clear()  # (a full cache would drop one entry for each one added)
    n = 0
    # 3 (fwd + bwd) x 2 x T x D x D for the one linear: 3 * 2 * 16 * 64 * 64 = 393,216
    assert C.flops_terms(a, 16)[0] == 393_216
    assert C.flops_terms(b, 16)[0] == 3 * 2 * 16 * 128 * 128  # 1,572,864: not a's entry
    assert C.flops_terms(c, 16)[0] == 393_216  # the same FLOPs, another graph (a relu op) ...
    assert len(C._MODEL_FLOPS) == n + 3  # ... so its own entry
    assert C.flops_terms(a2, 16)[0] == 393_216 and len(C._MODEL_FLOPS) == n + 3  # a's entry
    g = a.graph(precision="bf16", seq_len=16, fused_attention=False, logits="all")
    assert C.graph_digest(g) == C.graph_digest(
        a2.graph(precision="bf16", seq_len=16, fused_attention=False, logits="all"))
    assert C.graph_digest(g) != C.graph_digest(
        a.graph(precision="fp32", seq_len=16, fused_attention=False, logits="all"))
    d = C.graph_digest(g)
    hw = rl.hardware("H100")
    time_model(g, hw, efficiency_for(hw, "default"))
    assert "_time_models" in g.meta and C.graph_digest(g) == d  # timing it caches on the graph


def test_onnx_imports_key_on_their_graphs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ONNX imports too: two files of one layout with other widths never share a FLOP entry;
    the same file imported twice (two Model objects) does."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from roofline.graphs.importers.onnx_import import from_onnx

    def file(d: int, name: str) -> str:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])
        w = numpy_helper.from_array(np.zeros((d, d), np.float32), "w")
        g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mm", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [w])
        path = tmp_path / name
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
        return str(path)

    a, b = file(16, "a.onnx"), file(32, "b.onnx")
    ma, mb, ma2 = (from_onnx(p, seq_dim="seq", seq_len=8) for p in (a, b, a))
    C._MODEL_FLOPS.clear()  # (a full cache would drop one entry for each one added)
    n = 0
    # 3 (fwd + bwd) x 2 x T x D x D: 3 * 2 * 8 * 16 * 16 = 12,288 and 3 * 2 * 8 * 32 * 32 = 49,152
    assert C.flops_terms(ma, 8)[0] == 12_288
    assert C.flops_terms(mb, 8)[0] == 49_152
    assert C.flops_terms(ma2, 8)[0] == 12_288 and len(C._MODEL_FLOPS) == n + 2


def test_a_models_key_is_kept_until_a_field_is_assigned() -> None:
    """The training key of a Model is taken once and kept in its memo (a warm call reads it
    back); assigning any field empties the memo, and a field graphs read (builder, config,
    weight format, ...) the graph cache too, so an edited model never gets what its old fields
    gave. A pickle leaves the memo out."""
    import pickle

    cfg = gpt_model(4, 1024, 8).config
    m = transformer_model(cfg, key="m", name="a")
    k = C._model_key(m)
    assert k is not None and m._memo["train_key"] is k and C._model_key(m) is k
    g = m.graph(precision="bf16", seq_len=64)
    m.name = "b"  # shown by the result, read by no graph: memo emptied, graphs kept
    assert "train_key" not in m._memo and C._model_key(m) != k
    assert C._model_key(m)[2] == "b" and m.graph(precision="bf16", seq_len=64) is g
    wider = gpt_model(4, 2048, 8)
    m.builder, m.config = wider.builder, wider.config  # another model under the same name
    g2 = m.graph(precision="bf16", seq_len=64)
    assert g2 is not g and g2.params_total > g.params_total  # not the old graph
    assert C._model_key(m)[0][2] == K.frozen_key(wider.config)
    assert rl.train(m, rl.cluster("dgx-h100"), **KW).model == "b"
    copy = pickle.loads(pickle.dumps(m))
    assert m._memo and copy._memo == {} and C._model_key(copy) == C._model_key(m)


def test_a_replaced_model_has_its_own_memo_and_graphs() -> None:
    """``dataclasses.replace`` of a keyed Model starts with an empty memo and graph cache:
    sharing the original's would give the copy the original's training key (its name, its
    config's content) and the original's graphs."""
    m = transformer_model(gpt_model(4, 1024, 8).config, key="m", name="a")
    k, g = C._model_key(m), m.graph(precision="bf16", seq_len=64)
    assert C._model_content(m) is not None and m._memo
    r = replace(m, name="b")
    assert r._memo is not m._memo and r._cache is not m._cache
    assert C._model_key(r)[2] == "b" and C._model_key(m) is k
    wider = gpt_model(4, 2048, 8)
    w = replace(m, builder=wider.builder, config=wider.config)
    assert C._model_key(w)[0] == C._model_content(wider) != k[0]
    gw = w.graph(precision="bf16", seq_len=64)
    assert gw.params_total == wider.graph(precision="bf16", seq_len=64).params_total
    assert gw.params_total > g.params_total and m.graph(precision="bf16", seq_len=64) is g


def test_a_copied_model_has_its_own_graph_cache() -> None:
    """``copy.copy`` of a Model takes its own graph cache: editing the copy (which empties its
    cache) and building its graph must not hand the original the copy's graph."""
    import copy

    m = transformer_model(gpt_model(4, 1024, 8).config, key="m")
    g = m.graph(precision="bf16", seq_len=64)
    c = copy.copy(m)
    assert c._cache is not m._cache and c._memo is not m._memo
    assert c.graph(precision="bf16", seq_len=64) is g  # the graphs themselves are shared
    wider = gpt_model(4, 2048, 8)
    c.builder, c.config = wider.builder, wider.config
    assert c.graph(precision="bf16", seq_len=64).params_total > g.params_total
    assert m.graph(precision="bf16", seq_len=64) is g
