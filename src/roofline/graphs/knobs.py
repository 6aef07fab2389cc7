"""Size knobs on zoo models: the width and depth (and activation) levers.

``resize(model, **knobs)`` returns a variant Model:

- ResNets (``resnet18`` ... ``resnet152``): ``width`` (channel multiplier, rounded to a
  multiple of 8), ``depth`` (block-count multiplier, rounded, >= 1 per stage), ``act``.
- transformers (every zoo model built from a config): ``d_model`` (heads follow at the same
  head dim; KV heads keep their ratio), ``layers``, ``heads``, ``ffn_mult`` (d_ff multiplier,
  rounded to a multiple of 128), ``act``, ``gated_mlp``; encoder-decoders also ``source_len``
  (encoder tokens per request, within the encoder's position table).
- ``act`` is one of ``ops.formulas.ACTIVATIONS`` (a gated MLP prices act(gate)·up as the
  activation + 1 multiply).

``rl.model("resnet50", width=0.5)`` and ``rl.model("llama-3.1-8b", layers=16)`` call it.
A knob a model does not take, or a value <= 0, is a SpecError naming it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace
from typing import Any

from .._text import a_family
from ..errors import SpecError
from .model import Model, _cnn_builder, transformer_model

__all__ = ["resize", "CNN_KNOBS", "TRANSFORMER_KNOBS"]

CNN_KNOBS = ("width", "depth", "act")
TRANSFORMER_KNOBS = ("d_model", "layers", "heads", "ffn_mult", "act", "gated_mlp", "source_len")
_RESNETS = {"resnet18": 18, "resnet34": 34, "resnet50": 50, "resnet101": 101,
            "resnet152": 152}


def _positive(name: str, v: Any, integer: bool = False) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise SpecError(f"{name} must be a positive {'integer' if integer else 'number'}, "
                        f"got {v!r}")
    if integer and (not float(v).is_integer()):
        raise SpecError(f"{name} must be a positive integer, got {v!r}")
    return float(v)


def _act(v: Any) -> str:
    """An activation function's name (formulas.ACTIVATIONS): any ELEMENTWISE_FLOPS key was
    taken, so act="add" or act="swiglu" priced an add or a two-input product as the
    activation."""
    from ..ops.formulas import ACTIVATIONS

    if not isinstance(v, str) or v not in ACTIVATIONS:
        raise SpecError(f"act={v!r}; allowed: {', '.join(ACTIVATIONS)}")
    return v


_VARIANTS: dict[Any, Model] = {}  # (recipe content, knobs) -> the variant built once


def variant_of(cfg: Any, *, key: str, name: str, source: str = "") -> Model:
    """A transformer Model for ``cfg``, built once per (config, key, name)."""
    k = ("cfg", cfg, key, name)
    v = _VARIANTS.get(k)
    if v is None:
        if len(_VARIANTS) > 256:
            _VARIANTS.clear()
        v = _VARIANTS[k] = transformer_model(cfg, key=key, name=name, source=source)
    return v


def resize(m: Model, **knobs: Any) -> Model:
    """A variant of zoo model ``m`` with the given size knobs (see the module docstring)."""
    if not knobs:
        return m
    if m.config is not None:
        return _transformer(m, knobs)
    ck = ("cnn", m.key, m.builder, tuple(sorted((k, repr(v)) for k, v in knobs.items())))
    if ck in _VARIANTS:
        return _VARIANTS[ck]
    if m.key in _RESNETS:
        bad = set(knobs) - set(CNN_KNOBS)
        if bad:
            raise SpecError(f"{m.name} takes size knobs {', '.join(CNN_KNOBS)}; got "
                            f"{', '.join(sorted(bad))}")
        w = _positive("width", knobs.get("width", 1.0))
        d = _positive("depth", knobs.get("depth", 1.0))
        a = _act(knobs.get("act", "relu"))
        from . import cnn

        depth = _RESNETS[m.key]
        label = ", ".join(f"{k}={v}" for k, v in knobs.items())
        v = Model(key=m.key, name=f"{m.name} ({label})", family=m.family,
                  builder=_cnn_builder(functools.partial(cnn.resnet, depth, width=w,
                                                         depth_mult=d, act=a)),
                  source=m.source)
        g = v.graph(precision="fp16")
        v.n_layers = sum(1 for c in g.classes if c in ("conv", "matmul"))
        _VARIANTS[ck] = v
        return v
    raise SpecError(f"{m.name} has no size knobs (ResNets take {', '.join(CNN_KNOBS)}; "
                    f"transformers take {', '.join(TRANSFORMER_KNOBS)})")


def _transformer(m: Model, knobs: dict[str, Any]) -> Model:
    bad = set(knobs) - set(TRANSFORMER_KNOBS)
    if bad:
        raise SpecError(f"{m.name} takes size knobs {', '.join(TRANSFORMER_KNOBS)}; got "
                        f"{', '.join(sorted(bad))}")
    cfg = m.config
    assert cfg is not None
    ch: dict[str, Any] = {}
    if "d_model" in knobs:
        D = int(_positive("d_model", knobs["d_model"], integer=True))
        if D % cfg.head_dim:
            raise SpecError(f"d_model={D} must be a multiple of the head dim {cfg.head_dim}")
        N = D // cfg.head_dim
        ratio = cfg.n_heads // cfg.n_kv_heads
        ch.update(d_model=D, n_heads=N, n_kv_heads=max(1, N // ratio) if N % ratio == 0 else N)
    if "heads" in knobs:
        N = int(_positive("heads", knobs["heads"], integer=True))
        K = ch.get("n_kv_heads", cfg.n_kv_heads)
        if N % min(K, N):
            raise SpecError(f"heads={N} must be a multiple of the KV heads {K}")
        ch.update(n_heads=N, n_kv_heads=min(K, N))
    if "layers" in knobs:
        ch["n_layers"] = int(_positive("layers", knobs["layers"], integer=True))
    if "ffn_mult" in knobs:
        f = _positive("ffn_mult", knobs["ffn_mult"])
        ch["d_ff"] = max(128, int(round(cfg.d_ff * f / 128.0)) * 128)
    if "act" in knobs:
        ch["act"] = _act(knobs["act"])
    if "gated_mlp" in knobs:
        if not isinstance(knobs["gated_mlp"], bool):
            raise SpecError(f"gated_mlp must be True or False, got {knobs['gated_mlp']!r}")
        ch["gated_mlp"] = knobs["gated_mlp"]
    if "source_len" in knobs:
        if cfg.arch != "seq2seq":
            raise SpecError(f"source_len applies to encoder-decoders; {m.name} is "
                            f"{a_family(cfg.arch)} model (use seq_len=)")
        ch["source_len"] = int(_positive("source_len", knobs["source_len"], integer=True))
    label = ", ".join(f"{k}={v}" for k, v in knobs.items())
    return variant_of(replace(cfg, **ch), key=m.key, name=f"{m.name} ({label})",
                      source=m.source)
