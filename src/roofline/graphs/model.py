"""Models are recipes: a scenario (phase, lengths, precision, batch) turns one into a Graph.

This module holds the recipe only; ``model(spec)`` — a zoo name, a config.json/TOML/ONNX path or
a torch module resolved to a Model — lives in ``graphs/resolve.py`` (the importers build Models,
so the resolver sits above both).
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .._display import Display
from ..errors import SpecError
from ..specs.dtypes import Precision, known_precision
from ..specs.dtypes import precision as make_precision
from ..specs.sourced import Provenance
from .graph import Graph

if TYPE_CHECKING:
    from .transformer import TransformerConfig

__all__ = ["Model", "transformer_model", "sequence_model", "Published"]


def __getattr__(name: str) -> Any:
    # model() and list_models() moved to graphs/resolve.py; the old import path keeps working.
    if name in ("model", "list_models"):
        from . import resolve

        return getattr(resolve, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True, slots=True)
class Published:
    """A published headline figure to test our counts against."""

    value: float
    provenance: Provenance
    convention: str = ""


#: Model fields no graph reads: assigning one keeps the graph cache (not the memo)
_NOT_IN_GRAPHS = frozenset({"key", "name", "aliases", "source", "published", "n_layers",
                            "family", "unsupported_ops"})


@dataclass(eq=False)
class Model(Display):
    """A model recipe. ``graph(...)`` builds (and caches) the op graph for one scenario."""

    key: str  #: zoo key or file stem
    name: str
    family: str  #: "cnn", "decoder", "encoder", "vision", "imported"
    builder: Callable[..., Graph]  #: builder(precision=, phase=, seq_len=, context=, batch=, ...)
    phases: tuple[str, ...] = ("forward",)
    default_phase: str = "forward"
    default_seq_len: int | None = None  #: None: the model has no sequence dimension
    aliases: tuple[str, ...] = ()
    source: str = ""
    published: Mapping[str, Published] = field(default_factory=dict)
    config: TransformerConfig | None = None
    n_layers: int | None = None  #: blocks (transformer layers); CNN: conv + linear layers
    batch_dependent: bool = False  #: graph costs not affine in batch (MoE): built per batch
    unsupported_ops: tuple[Any, ...] = ()  #: ops an importer could not price (never zero)
    #: a checkpoint's stored weight format (quantization_config; graphs/quantization.py),
    #: applied unless the precision asked chooses the weights itself
    weight_format: Any = None
    #: not init fields: a ``dataclasses.replace`` builds its own, never the original's (its
    #: graphs and keys are the old fields')
    _cache: OrderedDict[tuple[Any, ...], Graph] = field(default_factory=OrderedDict, repr=False,
                                                        init=False)
    #: values derived from the fields (the training context's content key), kept until a field
    #: is assigned: ``__setattr__`` empties it (and the graph cache), so a renamed or edited
    #: model is never served what its old fields gave. Left out of pickles
    _memo: dict[str, Any] = field(default_factory=dict, repr=False, init=False)

    def __setattr__(self, name: str, value: Any) -> None:
        """Every field assignment (``m.name = ...``, an importer's ``m.n_layers = ...``) drops
        what was derived from the old fields: the memo, and the graph cache unless the field
        is one no graph reads (a name, a count shown, the published figures)."""
        d = self.__dict__
        d[name] = value
        if name in ("_cache", "_memo"):
            return
        memo = d.get("_memo")
        if memo:
            memo.clear()
        if name not in _NOT_IN_GRAPHS:
            cache = d.get("_cache")
            if cache:
                cache.clear()

    def __getstate__(self) -> dict[str, Any]:
        """A pickle or ``copy.copy`` leaves the memo out and takes its own graph cache: a
        shared one would hand the original the graphs of an edited copy."""
        state = dict(self.__dict__)
        state["_memo"] = {}
        state["_cache"] = OrderedDict(self._cache)
        return state

    def graph(self, *, precision: str | Precision = "fp16", phase: str | None = None,
              seq_len: int | None = None, context: int | None = None, batch: int | None = None,
              fused_attention: bool = True, logits: str | None = None,
              fuse: Any = False, sparsity: tuple[Any, float] | None = None) -> Graph:
        """The op graph for one scenario (cached). ``fuse=True`` folds activations, residual
        adds and batch norm into the preceding matmul/conv epilogue (graphs/fusion.py)."""
        p = known_precision(precision) or make_precision(precision)
        phase = phase or self.default_phase
        if phase not in self.phases:
            raise SpecError(f"{self.name} has no phase {phase!r}; "
                            f"allowed: {', '.join(self.phases)}")
        if self.default_seq_len is None:
            if seq_len not in (None,) or context not in (None, 0):
                raise SpecError(f"{self.name} has no sequence dimension: seq_len/context do not "
                                "apply")
        else:
            if seq_len is None:
                seq_len = 1 if phase == "decode" else self.default_seq_len
            if phase == "decode" and context is None:
                context = self.default_seq_len
        if fuse is not False and fuse is not True:  # a set of fusion kinds (graphs/fusion.py)
            from .fusion import check_fuse

            kinds = check_fuse(fuse)
            if "attention" in kinds:
                fused_attention = True
            if "qkv" in kinds:
                return self._fused_qkv().graph(
                    precision=p, phase=phase, seq_len=seq_len, context=context, batch=batch,
                    fused_attention=fused_attention, logits=logits, fuse=kinds - {"qkv"},
                    sparsity=sparsity)
            fuse = kinds
        key = (p, phase, seq_len, context or 0, batch if self.batch_dependent else None,
               fused_attention, logits, fuse, sparsity)
        g = self._cache.get(key)
        if g is None:
            g = self.builder(precision=p, phase=phase, seq_len=seq_len, context=context or 0,
                             batch=batch if self.batch_dependent else None,
                             fused_attention=fused_attention, logits=logits)
            if self.weight_format is not None:
                g = self.weight_format.apply(g)
            if fuse:
                from .fusion import EPILOGUE_KINDS, fuse_epilogues

                g = fuse_epilogues(g, EPILOGUE_KINDS if fuse is True else fuse)
            if sparsity is not None:  # (pattern or density, sparse/dense throughput ratio)
                from .sparsity import sparsify

                g = sparsify(g, sparsity[0], sparsity[1])
            self._cache[key] = g
            if len(self._cache) > 64:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return g

    def _fused_qkv(self) -> Model:
        """This transformer with one [D, (N+2K)·H] QKV projection instead of three."""
        if self.config is None:
            raise SpecError(f"fuse: 'qkv' needs a transformer; {self.name} has no q/k/v "
                            "projections")
        if self.config.fused_qkv:
            return self
        v: Any = self._cache.get(("_fused_qkv",))
        if v is None:
            from dataclasses import replace as _replace

            v = transformer_model(_replace(self.config, fused_qkv=True), key=self.key,
                                  name=self.name)
            self._cache[("_fused_qkv",)] = v
        return v  # type: ignore[return-value]

    @property
    def params(self) -> int:
        """Parameter count, summed over the ops of the graph (embeddings included)."""
        return self.graph(precision="fp16", batch=1).params_total

    def __repr__(self) -> str:
        return f"Model({self.key!r})"

    def __str__(self) -> str:
        return f"{self.name} [{self.family}], {self.params / 1e6:,.1f} M parameters"


# -- builders --------------------------------------------------------------------------------------

def sequence_model(key: str, name: str, family: str, graph_fn: Callable[..., Graph], *,
                   aliases: tuple[str, ...] = (), source: str = "",
                   published: Mapping[str, Published] | None = None,
                   default_seq_len: int = 2048, n_layers: int | None = None) -> Model:
    """A language model that is not a transformer (Mamba): ``graph_fn(precision, phase=,
    seq_len=)`` builds each scenario; forward/prefill over seq_len tokens, or a decode step."""
    return Model(key=key, name=name, family=family,
                 builder=functools.partial(_sequence_build, graph_fn, default_seq_len),
                 phases=("forward", "prefill", "decode"), default_phase="forward",
                 default_seq_len=default_seq_len, aliases=aliases, source=source,
                 published=dict(published or {}), n_layers=n_layers)


# The builders are partials of module functions, not closures, so that a Model pickles (a
# result keeps the call that made it, and multiprocessing / Dask ship results between processes);
# an imported model's builder holds the traced module and does not.

def _sequence_build(graph_fn: Callable[..., Graph], default_seq_len: int, *,
                    precision: Precision, phase: str, seq_len: int | None, **_: Any) -> Graph:
    return graph_fn(precision, phase=phase, seq_len=seq_len or default_seq_len)


def _cnn_build(fn: Callable[[Precision], Graph], *, precision: Precision, phase: str,
               **_: Any) -> Graph:
    return fn(precision)


def _cnn_builder(fn: Callable[[Precision], Graph]) -> Callable[..., Graph]:
    """The builder of a CNN-style model whose graph depends on the precision only."""
    return functools.partial(_cnn_build, fn)


def _transformer_build(cfg: TransformerConfig, *, precision: Precision, phase: str,
                       seq_len: int | None, context: int, batch: int | None,
                       fused_attention: bool, logits: str | None) -> Graph:
    from .transformer import transformer_graph

    return transformer_graph(cfg, precision, phase=phase, seq_len=seq_len or 1,
                             context=context, fused_attention=fused_attention, batch=batch,
                             logits=logits)


def transformer_model(cfg: TransformerConfig, *, key: str, name: str | None = None,
                      aliases: tuple[str, ...] = (), source: str = "",
                      published: Mapping[str, Published] | None = None) -> Model:
    """Wrap a TransformerConfig as a Model."""
    decoder = cfg.generates
    seq = None if cfg.arch == "vision" else min(cfg.max_positions or 2048, 2048)
    if cfg.arch == "seq2seq":  # decoder tokens: the source length, within the decoder's limit
        seq = min(cfg.source_len, cfg.max_positions or cfg.source_len)
    return Model(
        key=key, name=name or key, family=cfg.arch,
        builder=functools.partial(_transformer_build, cfg),
        phases=("forward", "prefill", "decode") if decoder else ("forward",),
        default_phase="forward", default_seq_len=seq, aliases=aliases, source=source,
        published=dict(published or {}), config=cfg, n_layers=cfg.n_layers,
        batch_dependent=cfg.n_experts > 0,
    )


def _cnn_registry() -> dict[str, Callable[..., Graph]]:
    """Builder name -> fn(precision, **builder_args) for the models a zoo TOML names by
    ``builder`` (its optional ``[builder_args]`` table gives the keyword arguments)."""
    from . import cnn, diffusion, recsys, tiny, yolo

    return {
        "resnet18": functools.partial(cnn.resnet, 18),
        "resnet34": functools.partial(cnn.resnet, 34),
        "resnet50": functools.partial(cnn.resnet, 50),
        "resnet101": functools.partial(cnn.resnet, 101),
        "resnet152": functools.partial(cnn.resnet, 152), "vgg16": cnn.vgg16,
        "mobilenet_v2": cnn.mobilenet_v2, "efficientnet_b0": cnn.efficientnet_b0,
        "alexnet": cnn.alexnet, "mobilenet_v1": tiny.mobilenet_v1, "ds_cnn": tiny.ds_cnn,
        "resnet8": tiny.resnet8, "yolov8": yolo.yolov8, "dlrm": recsys.dlrm,
        "dit": diffusion.dit, "sd_unet": diffusion.sd_unet,
    }
