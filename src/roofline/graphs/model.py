"""Models are recipes: a scenario (phase, lengths, precision, batch) turns one into a Graph.

``model(spec)`` resolves a zoo name or alias (case-insensitive), a HuggingFace
``config.json`` path, a model TOML, an ONNX path or a PyTorch module (the last two through
the optional importers).
"""

from __future__ import annotations

import os
import sys
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _args as A
from .._data import DATA, alias_index, load_toml_file, read_text, read_toml, zoo_key
from ..errors import SpecError, unknown
from ..specs.dtypes import Precision
from ..specs.dtypes import precision as make_precision
from ..specs.sourced import Provenance
from .graph import Graph

if TYPE_CHECKING:
    from .transformer import TransformerConfig

__all__ = ["Model", "model", "list_models", "transformer_model", "Published"]


@dataclass(frozen=True, slots=True)
class Published:
    """A published headline figure to test our counts against."""

    value: float
    provenance: Provenance
    convention: str = ""


@dataclass(eq=False)
class Model:
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
    _cache: OrderedDict[tuple[Any, ...], Graph] = field(default_factory=OrderedDict, repr=False)

    def graph(self, *, precision: str | Precision = "fp16", phase: str | None = None,
              seq_len: int | None = None, context: int | None = None, batch: int | None = None,
              fused_attention: bool = True, logits: str | None = None,
              fuse: bool = False) -> Graph:
        """The op graph for one scenario (cached). ``fuse=True`` folds activations, residual
        adds and batch norm into the preceding matmul/conv epilogue (graphs/fusion.py)."""
        p = make_precision(precision)
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
        key = (p, phase, seq_len, context or 0, batch if self.batch_dependent else None,
               fused_attention, logits, fuse)
        g = self._cache.get(key)
        if g is None:
            g = self.builder(precision=p, phase=phase, seq_len=seq_len, context=context or 0,
                             batch=batch if self.batch_dependent else None,
                             fused_attention=fused_attention, logits=logits)
            if fuse:
                from .fusion import fuse_epilogues

                g = fuse_epilogues(g)
            self._cache[key] = g
            if len(self._cache) > 64:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        return g

    @property
    def params(self) -> int:
        """Parameter count, summed over the ops of the graph (embeddings included)."""
        return self.graph(precision="fp16", batch=1).params_total

    def __repr__(self) -> str:
        return f"Model({self.key!r})"

    def __str__(self) -> str:
        return f"{self.name} [{self.family}], {self.params / 1e6:,.1f} M parameters"


# -- builders --------------------------------------------------------------------------------------

def _cnn_builder(fn: Callable[[Precision], Graph]) -> Callable[..., Graph]:
    def build(*, precision: Precision, phase: str, **_: Any) -> Graph:
        return fn(precision)
    return build


def transformer_model(cfg: TransformerConfig, *, key: str, name: str | None = None,
                      aliases: tuple[str, ...] = (), source: str = "",
                      published: Mapping[str, Published] | None = None) -> Model:
    """Wrap a TransformerConfig as a Model."""
    from .transformer import transformer_graph

    def build(*, precision: Precision, phase: str, seq_len: int | None, context: int,
              batch: int | None, fused_attention: bool, logits: str | None) -> Graph:
        return transformer_graph(cfg, precision, phase=phase, seq_len=seq_len or 1,
                                 context=context, fused_attention=fused_attention, batch=batch,
                                 logits=logits)

    decoder = cfg.arch == "decoder"
    seq = None if cfg.arch == "vision" else min(cfg.max_positions or 2048, 2048)
    return Model(
        key=key, name=name or key, family=cfg.arch, builder=build,
        phases=("forward", "prefill", "decode") if decoder else ("forward",),
        default_phase="forward", default_seq_len=seq, aliases=aliases, source=source,
        published=dict(published or {}), config=cfg, n_layers=cfg.n_layers,
        batch_dependent=cfg.n_experts > 0,
    )


def _cnn_registry() -> dict[str, Callable[[Precision], Graph]]:
    from . import cnn

    return {
        "resnet18": lambda p: cnn.resnet(18, p), "resnet34": lambda p: cnn.resnet(34, p),
        "resnet50": lambda p: cnn.resnet(50, p), "resnet101": lambda p: cnn.resnet(101, p),
        "resnet152": lambda p: cnn.resnet(152, p), "vgg16": cnn.vgg16,
        "mobilenet_v2": cnn.mobilenet_v2, "efficientnet_b0": cnn.efficientnet_b0,
    }


def _published(doc: Mapping[str, Any], origin: str) -> dict[str, Published]:
    out = {}
    for k, raw in (doc.get("published") or {}).items():
        if not isinstance(raw, dict) or "value" not in raw:
            raise SpecError(f"{origin}: published.{k} must be a table with 'value' and 'source'")
        if not isinstance(raw.get("source"), str) or not raw["source"].strip():
            raise SpecError(f"{origin}: published.{k} has no 'source'")
        out[k] = Published(float(raw["value"]), Provenance(
            source=raw["source"], derivation=str(raw.get("derivation", "")),
            note=str(raw.get("note", ""))), str(raw.get("convention", "")))
    return out


def _model_from_doc(doc: Mapping[str, Any], origin: str, default_key: str) -> Model:
    key = str(doc.get("key", default_key))
    name = str(doc.get("name", key))
    aliases = tuple(doc.get("aliases", ()))
    source = str(doc.get("source", ""))
    if not source:
        raise SpecError(f"{origin}: a model file needs a 'source' (model card, config.json, paper)")
    pub = _published(doc, origin)
    if "builder" in doc:
        reg = _cnn_registry()
        b = doc["builder"]
        if b not in reg:
            raise unknown("CNN builder", b, reg)
        graph_fn = reg[b]
        m = Model(key=key, name=name, family=str(doc.get("family", "cnn")),
                  builder=_cnn_builder(graph_fn), aliases=aliases, source=source, published=pub)
        g = m.graph(precision="fp16")
        m.n_layers = sum(1 for c in g.classes if c in ("conv", "matmul"))
        return m
    if "config" not in doc:
        raise SpecError(f"{origin}: a model file needs [config] (HF config.json fields) or "
                        "'builder'")
    from .transformer import from_hf_config

    cfg = from_hf_config(dict(doc["config"]), name=name)
    return transformer_model(cfg, key=key, name=name, aliases=aliases, source=source,
                             published=pub)


@lru_cache(maxsize=1)
def _zoo() -> tuple[dict[str, Path], dict[str, str]]:
    """key -> file, normalised alias -> key (models are built lazily on first use)."""
    files: dict[str, Path] = {}
    names: list[tuple[str, tuple[str, ...]]] = []
    for path in sorted((DATA / "models").glob("*.toml")):
        doc = read_toml(path)
        key = str(doc.get("key", path.stem))
        if key != path.stem:
            raise SpecError(f"model zoo file {path.name}: key {key!r} must equal the file name")
        files[key] = path
        names.append((key, (str(doc.get("name", key)), *doc.get("aliases", ()))))
    return files, alias_index(names, "model")


_LOADED: dict[str, Model] = {}


def list_models() -> list[str]:
    """Zoo keys, sorted."""
    return sorted(_zoo()[0])


def _zoo_model(key: str) -> Model:
    m = _LOADED.get(key)
    if m is None:
        path = _zoo()[0][key]
        doc = read_toml(path)
        m = _model_from_doc(doc, f"data/models/{path.name}", key)
        _LOADED[key] = m
    return m


def _load_json_config(path: Path) -> Model:
    import json

    text = read_text(path, "model config")
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise SpecError(f"model config {str(path)!r} is not valid JSON: {e.msg} (line "
                        f"{e.lineno}, column {e.colno})") from None
    except RecursionError:
        raise SpecError(f"model config {str(path)!r} nests too deeply to be a config.json"
                        ) from None
    name = path.parent.name if path.name == "config.json" else path.stem
    from .transformer import from_hf_config

    return transformer_model(from_hf_config(cfg, name=name), key=name, name=name,
                             source=str(path))


@A.checked(spec=A.anything)
def model(spec: Any, **kwargs: Any) -> Model:
    """A Model from a zoo name/alias, a config.json/.toml/.onnx path, or a torch module."""
    if isinstance(spec, Model):
        return spec
    if isinstance(spec, str) and spec in _LOADED_BY_NAME and not kwargs:
        return _LOADED_BY_NAME[spec]
    mod = type(spec).__module__
    torch = sys.modules.get("torch")  # a user's nn.Module subclass lives in the user's module
    if not isinstance(spec, str | os.PathLike) and (mod.startswith("torch") or (
            torch is not None and isinstance(spec, torch.nn.Module))):
        from .torch_import import from_torch  # type: ignore[import-not-found]

        return from_torch(spec, **kwargs)  # type: ignore[no-any-return]
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and (
            spec.lower().endswith((".json", ".toml", ".onnx", ".pt", ".pth", ".bin"))
            or os.sep in spec and os.path.exists(spec))):
        path = Path(spec)
        suffix = path.suffix.lower()
        if suffix in (".pt", ".pth", ".bin"):
            raise SpecError(f"{str(path)!r}: pickled checkpoints are refused (loading one runs "
                            "arbitrary code); pass the nn.Module itself, or an ONNX export")
        if suffix == ".onnx":
            from .onnx_import import from_onnx  # type: ignore[import-not-found]

            return from_onnx(path, **kwargs)  # type: ignore[no-any-return]
        try:
            if path.is_dir() and (path / "config.json").exists():
                path = path / "config.json"
        except (OSError, ValueError) as e:
            raise SpecError(f"cannot read model path {str(path)[:200]!r}: {e}") from None
        if suffix == ".toml":
            return _model_from_doc(load_toml_file(path, "model"), str(path), path.stem)
        return _load_json_config(path)
    if not isinstance(spec, str):
        raise SpecError(f"model must be a zoo name, a config.json/.onnx path or a torch "
                        f"nn.Module, got {type(spec).__name__}")
    files, alias = _zoo()
    m = _zoo_model(zoo_key(spec, "model", alias, list(files)))
    _LOADED_BY_NAME[spec] = m
    return m


_LOADED_BY_NAME: dict[str, Model] = {}  # exact zoo strings already resolved
