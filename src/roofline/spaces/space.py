"""Design spaces: models × hardware × scenario axes, cut into chunks that the vectorised engine
evaluates in one call each.

A ``Space`` is a product of axes (or an explicit list of scenario points). Its ``kind`` says
what a point is:

- ``"decode"``: one LLM decode step (``serve_sweep``: TPOT, tokens/s, KV-cache fit) over
  model × hardware × precision × tp × batch × context — the fast path, vectorised over
  hardware × batch × context inside a chunk;
- ``"solve"``: one inference pass (``sweep``) over model × hardware × precision × batch and the
  other ``solve`` options;
- ``"serve"`` and ``"train"``: one ``rl.serve`` / ``rl.train`` call per point (microseconds
  each, no broadcast).

Hardware axes take zoo names, spec files, ``Hardware`` objects and ``hardware_grid``s — parts
derived from a base by scaling its peak, bandwidth and capacity, each marked hypothetical in
its key and name. A chunk carries only picklable recipes (names, paths, grid coordinates), so
a Dask worker rebuilds what it prices.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError

__all__ = ["Space", "hardware_grid", "HardwareGrid", "GridPart", "Chunk", "KINDS"]

KINDS = ("decode", "solve", "serve", "train")
#: axes each kind vectorises inside one chunk (the rest are one value per chunk)
_VECTOR_AXES = {"decode": ("batch", "context"), "solve": ("batch",), "serve": (),
                "train": ()}
#: scenario keys each kind takes (beyond model and hardware)
_SCENARIO_KEYS = {
    "decode": ("batch", "context", "precision", "tp", "kv_precision", "preset", "engine",
               "kv_window", "phase"),
    "solve": ("batch", "precision", "preset", "phase", "seq_len", "context", "fuse",
              "runtime", "fused_attention", "kv_precision", "weight_precision", "group_size"),
    "serve": ("batch", "prompt_len", "output_len", "precision", "kv_precision",
              "weight_precision", "group_size", "tp", "pp", "preset", "engine",
              "fused_attention", "chunk_size", "kv_window"),
    "train": ("global_batch", "seq_len", "micro_batch", "tp", "pp", "dp", "ep", "interleave",
              "recompute", "zero", "precision", "nodes", "preset"),
}


@dataclass(frozen=True, slots=True)
class GridPart:
    """A hypothetical part: ``base`` with its peak × ``peak_scale``, main-memory bandwidth ×
    ``bandwidth_scale``, capacity ``capacity_gib`` (None: the base's) and scale-up link ×
    ``link_scale``."""

    base: str
    peak_scale: float = 1.0
    bandwidth_scale: float = 1.0
    capacity_gib: float | None = None
    link_scale: float = 1.0

    @property
    def label(self) -> str:
        cap = "" if self.capacity_gib is None else f" {self.capacity_gib:g}GiB"
        return (f"{self.base} peak x{self.peak_scale:g} bw x{self.bandwidth_scale:g}{cap}"
                + (f" link x{self.link_scale:g}" if self.link_scale != 1 else ""))

    def build(self) -> Any:
        from dataclasses import replace

        from ..analysis.sensitivity import scaled_hardware
        from ..specs.resolve import hardware as resolve_hardware

        hw = resolve_hardware(self.base)
        tag = (f"p{self.peak_scale:g}-b{self.bandwidth_scale:g}"
               f"-c{'base' if self.capacity_gib is None else f'{self.capacity_gib:g}'}"
               f"-l{self.link_scale:g}")
        h = scaled_hardware(hw, peak=self.peak_scale, memory={0: self.bandwidth_scale},
                            scale_up=self.link_scale, tag=f"grid-{tag}")
        if self.capacity_gib is not None:
            main = h.memory[0]
            h = replace(h, memory=(replace(main, capacity_bytes=self.capacity_gib * 2**30),
                                   *h.memory[1:]))
        return replace(h, name=f"{self.label} (hypothetical)")  # the name says so


class HardwareGrid(Sequence[GridPart]):
    """Every combination of the scales: a product of hypothetical parts."""

    def __init__(self, parts: list[GridPart]) -> None:
        self._parts = parts

    def __len__(self) -> int:
        return len(self._parts)

    def __getitem__(self, i: Any) -> Any:
        return self._parts[i]

    def __repr__(self) -> str:
        return f"<HardwareGrid {len(self)} hypothetical parts from {self._parts[0].base}>"


def _scales(name: str, v: Any, allow_none: bool = False) -> list[Any]:
    vals = list(v) if isinstance(v, Iterable) and not isinstance(v, str) else [v]
    if not vals:
        raise SpecError(f"hardware_grid: {name} is empty; give at least one value")
    for x in vals:
        if x is None and allow_none:
            continue
        if isinstance(x, bool) or not isinstance(x, int | float) or not math.isfinite(x) \
                or x <= 0:
            raise SpecError(f"hardware_grid: {name} values must be positive numbers, got {x!r}")
    return vals


def hardware_grid(*, base: str, peak_scale: Any = (1.0,), bandwidth_scale: Any = (1.0,),
                  capacity_gib: Any = (None,), link_scale: Any = (1.0,)) -> HardwareGrid:
    """Hypothetical parts derived from the zoo part ``base`` (every combination)."""
    if not isinstance(base, str):
        raise SpecError(f"hardware_grid: base must be a zoo name, got {base!r}")
    from ..specs.resolve import hardware as resolve_hardware

    resolve_hardware(base)  # an unknown base fails here, before any work
    parts = [GridPart(base, p, b, c, lk) for p, b, c, lk in itertools.product(
        _scales("peak_scale", peak_scale), _scales("bandwidth_scale", bandwidth_scale),
        _scales("capacity_gib", capacity_gib, allow_none=True), _scales("link_scale", link_scale))]
    return HardwareGrid(parts)


def _axis(name: str, v: Any) -> list[Any]:
    vals: list[Any]
    if isinstance(v, range):
        vals = list(v)
    elif isinstance(v, str | bytes) or not isinstance(v, Iterable) or isinstance(v, Mapping):
        vals = [v]
    else:
        vals = list(v)
    if not vals:
        raise SpecError(f"Space: axis {name!r} is empty; give at least one value")
    return vals


@dataclass(frozen=True, slots=True)
class Chunk:
    """One task: fixed values for the scalar axes, value lists for the vectorised ones."""

    index: int
    kind: str
    model: Any
    hardware: tuple[Any, ...]  #: zoo names, paths, GridParts or Hardware objects
    fixed: dict[str, Any]
    vector: dict[str, list[Any]]

    @property
    def size(self) -> int:
        return len(self.hardware) * math.prod(len(v) for v in self.vector.values())

    def coordinates(self) -> dict[str, Any]:
        """Where in the space this chunk sits (for error reports)."""
        return {"chunk": self.index, "model": _name(self.model),
                "hardware": [_name(h) for h in self.hardware], **self.fixed,
                **{k: f"{len(v)} values {v[0]!r}..{v[-1]!r}" for k, v in self.vector.items()}}


def _name(x: Any) -> str:
    if isinstance(x, str):
        return x
    if isinstance(x, GridPart):
        return x.label
    return str(getattr(x, "key", None) or getattr(x, "name", None) or type(x).__name__)


@dataclass(frozen=True, slots=True)
class Space:
    """models × hardware × scenario axes (see the module docstring).

    ``scenario`` maps each option of the kind to one value or a list (``range`` works);
    ``points`` (instead of a product) is an explicit list of scenario dicts.
    ``hw_per_chunk`` bounds how many parts one chunk prices together (memory per task).
    """

    model: Any
    hardware: Any
    scenario: Mapping[str, Any] = field(default_factory=dict)
    kind: str | None = None
    points: Sequence[Mapping[str, Any]] | None = None
    hw_per_chunk: int = 64

    def __post_init__(self) -> None:
        kind = self.kind or _infer_kind(self.scenario, self.points)
        if kind not in KINDS:
            raise SpecError(f"Space: kind={kind!r}; allowed: {', '.join(KINDS)}")
        object.__setattr__(self, "kind", kind)
        models = _axis("model", self.model)
        hws = _flatten_hw(self.hardware)
        if not hws:
            raise SpecError("Space: axis 'hardware' is empty; give at least one part")
        object.__setattr__(self, "model", tuple(models))
        object.__setattr__(self, "hardware", tuple(hws))
        allowed = _SCENARIO_KEYS[kind]
        rows = [dict(self.scenario)] if self.points is None else [dict(p) for p in self.points]
        if self.points is not None and not rows:
            raise SpecError("Space: points is empty; give at least one scenario point")
        for r in rows:
            for k in r:
                if k not in allowed:
                    from ..errors import closest

                    raise SpecError(f"Space: {kind} spaces take no scenario option {k!r}."
                                    f"{closest(k, allowed)} Options: {', '.join(allowed)}")
        if kind == "decode" and self.points is None:
            ph = self.scenario.get("phase", "decode")
            if ph != "decode":
                raise SpecError(f"Space: kind 'decode' prices decode steps; phase={ph!r}")
            for req in ("batch", "context"):
                if req not in self.scenario:
                    raise SpecError(f"Space: a decode space needs a {req!r} axis")
        if kind == "train":
            for r in rows:
                for req in ("global_batch", "seq_len"):
                    if req not in r:
                        raise SpecError(f"Space: a train space needs {req!r}")
        if self.points is None:
            for k, v in self.scenario.items():
                _axis(k, v)
        if isinstance(self.hw_per_chunk, bool) or not isinstance(self.hw_per_chunk, int) or \
                self.hw_per_chunk < 1:
            raise SpecError(f"Space: hw_per_chunk must be a positive integer, got "
                            f"{self.hw_per_chunk!r}")

    @property
    def size(self) -> int:
        """Points in the space (every combination)."""
        return sum(c.size for c in self.chunks())

    def chunks(self) -> Iterator[Chunk]:
        """The tasks, in a fixed order (chunk indices are stable)."""
        kind = str(self.kind)
        vec_names = _VECTOR_AXES[kind]
        rows = ([dict(p) for p in self.points] if self.points is not None else None)
        if rows is None:
            scal = {k: _axis(k, v) for k, v in self.scenario.items() if k not in vec_names}
            vec = {k: _axis(k, self.scenario[k]) for k in vec_names if k in self.scenario}
            if kind == "decode":  # precision is vectorised by serve_sweep too
                scal.pop("precision", None)
                vec["precision"] = _axis("precision", self.scenario.get("precision", "bf16"))
            combos = [dict(zip(scal, vals)) for vals in itertools.product(*scal.values())]
            groups = [(c, vec) for c in combos]
        else:
            groups = [({k: v for k, v in r.items() if k not in vec_names},
                       {k: [r[k]] for k in vec_names if k in r}) for r in rows]
        i = 0
        step = self.hw_per_chunk if kind in ("decode", "solve") else 1
        for m in self.model:
            for fixed, vec in groups:
                for h0 in range(0, len(self.hardware), step):
                    yield Chunk(i, kind, m, tuple(self.hardware[h0:h0 + step]), dict(fixed),
                                {k: list(v) for k, v in vec.items()})
                    i += 1

    def __repr__(self) -> str:
        return (f"<Space {self.kind}: {len(self.model)} models x {len(self.hardware)} parts, "
                f"{self.size:,} points>")


def _infer_kind(scenario: Mapping[str, Any], points: Any) -> str:
    keys = set(scenario) if points is None else set().union(*(set(p) for p in points or [{}]))
    if "global_batch" in keys:
        return "train"
    if "prompt_len" in keys or "output_len" in keys:
        return "serve"
    if scenario.get("phase") == "decode" and "tp" in keys:
        return "decode"
    return "solve"


def _flatten_hw(hw: Any) -> list[Any]:
    if isinstance(hw, str | GridPart) or hasattr(hw, "peak_flops_per_s") or \
            hasattr(hw, "device"):
        return [hw]
    out: list[Any] = []
    for h in _axis("hardware", hw):
        out += list(h) if isinstance(h, HardwareGrid) else [h]
    return out
