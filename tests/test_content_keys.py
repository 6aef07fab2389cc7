"""Caches key on content, never on the id of a mutable object: the training context cache
(``training.context._context``, ``_CTX``) shares an entry between equal arguments and gives
edited ones their own."""

from __future__ import annotations

from dataclasses import replace

import pytest

import roofline as rl
from roofline.graphs.model import transformer_model
from roofline.scenarios.training import context as C
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
    assert _ctx(a, cl) is _ctx(b, cl)
    assert rl.train(a, cl, **KW).step_time == rl.train(b, cl, **KW).step_time


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


def test_a_custom_builder_keys_on_the_object() -> None:
    """A model whose builder is not determined by its content keys on the object, held by the
    entry: the same object hits, an equal-looking other object does not share."""
    cfg = gpt_model(4, 1024, 8).config
    cl = rl.cluster("dgx-h100")
    base = transformer_model(cfg, key="m")

    def build(**kw):  # type: ignore[no-untyped-def]
        return base.builder(**kw)

    a = replace(base, builder=build, _cache=type(base._cache)())
    b = replace(base, builder=build, _cache=type(base._cache)())
    assert C._model_key(a) == ("object", id(a))
    assert _ctx(a, cl) is _ctx(a, cl)
    assert _ctx(b, cl) is not _ctx(a, cl)


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
    assert len({C._freeze(v) for v in ([1], [1.0], [True], (1,), {"1": 1}, {1: 1})}) == 6
    with pytest.raises(TypeError):
        C._freeze([{1, 2}, {}])  # a set is frozen as itself: unhashable -> no key
