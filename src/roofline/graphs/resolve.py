"""``model(spec)``: a zoo name or alias (case-insensitive), a HuggingFace ``config.json`` path, a
model TOML, an ONNX path or a PyTorch module, resolved to a ``Model`` (the last two through the
optional importers in ``graphs/importers/``).
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import _args as A
from .._data import DATA, alias_index, load_toml_file, read_toml, zoo_key
from ..errors import SpecError, unknown
from ..specs.sourced import Provenance
from .model import Model, Published, _cnn_builder, _cnn_registry, transformer_model

__all__ = ["model", "list_models"]


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
    if doc.get("builder") == "mamba":
        from .model import sequence_model
        from .ssm import MambaConfig, mamba_graph

        raw = doc.get("config")
        if not isinstance(raw, dict):
            raise SpecError(f"{origin}: a Mamba model needs [config] (its config.json fields)")
        known = {f for f in MambaConfig.__dataclass_fields__}
        mcfg = MambaConfig(**{k: v for k, v in raw.items() if k in known})
        return sequence_model(key, name, "ssm", functools.partial(mamba_graph, mcfg),
                              aliases=aliases, source=source, published=pub,
                              n_layers=mcfg.n_layer)
    if "transformer" in doc:  # a transformer shape given directly (no HF family importer)
        from dataclasses import fields

        from .transformer import TransformerConfig

        raw = doc["transformer"]
        known = {f.name for f in fields(TransformerConfig) if f.init}
        if not isinstance(raw, dict) or set(raw) - known:
            bad = sorted(set(raw) - known) if isinstance(raw, dict) else raw
            raise SpecError(f"{origin}: [transformer] takes TransformerConfig fields; unknown "
                            f"{bad}")
        return transformer_model(TransformerConfig(name=name, **raw), key=key, name=name,
                                 aliases=aliases, source=source, published=pub)
    if "builder" in doc:
        reg = _cnn_registry()
        b = doc["builder"]
        if b not in reg:
            raise unknown("CNN builder", b, reg)
        args = doc.get("builder_args") or {}
        if not isinstance(args, dict):
            raise SpecError(f"{origin}: builder_args must be a table of keyword arguments")
        graph_fn = functools.partial(reg[b], **args) if args else reg[b]
        m = Model(key=key, name=name, family=str(doc.get("family", "cnn")),
                  builder=_cnn_builder(graph_fn), aliases=aliases, source=source, published=pub)
        g = m.graph(precision="fp16")
        m.n_layers = sum(1 for c in g.classes if c in ("conv", "matmul"))
        return m
    if "config" not in doc:
        raise SpecError(f"{origin}: a model file needs [config] (HF config.json fields) or "
                        "'builder'")
    from .importers.hf_config import hf_config_model

    return hf_config_model(dict(doc["config"]), key=key, name=name, aliases=aliases,
                           source=source, published=pub)


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
        from .importers.torch_import import from_torch  # type: ignore[import-not-found]

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
            from .importers.onnx_import import from_onnx  # type: ignore[import-not-found]

            return from_onnx(path, **kwargs)  # type: ignore[no-any-return]
        try:
            if path.is_dir() and (path / "config.json").exists():
                path = path / "config.json"
        except (OSError, ValueError) as e:
            raise SpecError(f"cannot read model path {str(path)[:200]!r}: {e}") from None
        if suffix == ".toml":
            return _model_from_doc(load_toml_file(path, "model"), str(path), path.stem)
        from .importers.hf_config import hf_model

        return hf_model(path)
    if not isinstance(spec, str):
        raise SpecError(f"model must be a zoo name, a config.json/.onnx path or a torch "
                        f"nn.Module, got {type(spec).__name__}")
    files, alias = _zoo()
    m = _zoo_model(zoo_key(spec, "model", alias, list(files)))
    if kwargs:  # size knobs: width, depth, d_model, layers, ... (graphs/knobs.py)
        from .knobs import resize

        return resize(m, **kwargs)
    _LOADED_BY_NAME[spec] = m
    return m


_LOADED_BY_NAME: dict[str, Model] = {}  # exact zoo strings already resolved
