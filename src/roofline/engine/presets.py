"""Presets: which factors turn the pure roofline into an estimate.

- ``"bound"``: the pure roofline, ``max(flops/peak, bytes/bandwidth)`` per op, summed; no
  efficiency, no overhead.
- ``"default"``: efficiency by op class and size plus per-op launch/dispatch costs, from
  ``data/presets/default.toml`` (each factor with its provenance), per hardware kind.
- ``"mlsysim"``: mlsysim 0.1.1's whole-model conventions (see engine/mlsysim.py).
- ``"default"`` per architecture: a ``[<kind>-<arch>]`` table of default.toml with a ``devices``
  list (zoo keys) patches the kind's factors for those parts only (``arch_tables``), e.g. AMD
  CDNA 3 or Intel Gaudi with their own measured GEMM fraction.
- a measured hardware spec may carry its own fitted ``[efficiency]`` table; the default preset
  then uses it instead of the per-kind one.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

from .._cache import make_room
from ..errors import SpecError, unknown
from ..specs.hardware import KINDS, SYNCHRONOUS_KINDS, Hardware, spec_key
from .efficiency import BOUND, Efficiency, read_efficiency

__all__ = ["Efficiency", "BOUND", "PRESETS", "efficiency_for", "check_preset", "spec_efficiency",
           "RUNTIMES", "check_runtime", "for_runtime", "default_tables", "arch_tables",
           "read_arch_tables", "register_efficiency", "registered_epoch"]

PRESETS = ("default", "bound", "mlsysim")
#: how kernels reach the device: "eager" launches every op from the host (each pays the
#: preset's ``dispatch``); "compiled" submits the whole graph at once (CUDA graph, XLA program):
#: no per-op host dispatch, the device-side ``kernel_gap`` stays
RUNTIMES = ("eager", "compiled")


@lru_cache(maxsize=1)
def default_tables() -> dict[str, Efficiency]:
    """The default preset's factors per hardware kind (data/presets/default.toml)."""
    from .._data import DATA, read_toml

    doc = read_toml(DATA / "presets" / "default.toml")
    sources = doc.get("sources", {})
    out = {}
    for kind in KINDS:
        if kind not in doc:
            raise SpecError(f"data/presets/default.toml lacks a [{kind}] table")
        out[kind] = read_efficiency(doc[kind], sources=sources,
                                    origin=f"data/presets/default.toml [{kind}]",
                                    synchronous=(kind in SYNCHRONOUS_KINDS),
                                    label=f"default/{kind}")
    return out


@lru_cache(maxsize=1)
def arch_tables() -> dict[str, tuple[str, Efficiency]]:
    """The default preset's per-architecture factors (data/presets/default.toml tables named
    ``<kind>-<arch>`` with a ``devices`` list): device key -> (table name, the kind's factors
    patched by that table)."""
    from .._data import DATA, read_toml

    return read_arch_tables(read_toml(DATA / "presets" / "default.toml"), default_tables())


def read_arch_tables(doc: dict[str, Any], base: dict[str, Efficiency], *,
                     origin: str = "data/presets/default.toml"
                     ) -> dict[str, tuple[str, Efficiency]]:
    """``arch_tables`` of a parsed preset document ``doc`` over the per-kind tables ``base``. A
    table that is neither a kind nor ``<kind>-<arch>``, a missing or empty ``devices`` list and
    a device listed by two tables are refused (SpecError naming the table)."""
    from .efficiency import read_patch

    sources = doc.get("sources", {})
    out: dict[str, tuple[str, Efficiency]] = {}
    for name, tbl in doc.items():
        if name in KINDS or name in ("schema", "sources") or not isinstance(tbl, dict):
            continue
        kind = name.split("-", 1)[0]
        devices = tbl.get("devices")
        if kind not in KINDS or "-" not in name:
            raise SpecError(f"{origin}: table [{name}] is neither a hardware kind "
                            f"({', '.join(KINDS)}) nor '<kind>-<architecture>'")
        if (not isinstance(devices, list) or not devices
                or not all(isinstance(d, str) for d in devices)):
            raise SpecError(f"{origin} [{name}]: 'devices' must be a non-empty list of "
                            f"hardware keys, got {devices!r}")
        eff = read_patch(tbl, sources=sources, origin=f"{origin} [{name}]",
                         label=f"default/{name}", ignore=("devices",)).apply(
            base[kind], label=f"default/{name}", synchronous=(kind in SYNCHRONOUS_KINDS))
        for d in devices:
            if d in out:
                raise SpecError(f"{origin}: device {d!r} is listed in both [{out[d][0]}] and "
                                f"[{name}]")
            out[d] = (name, eff)
    return out


#: registered tables, keyed on the spec's content (``spec_key``), never on its name or key
_CUSTOM: dict[Any, Efficiency] = {}
_EPOCH = [0]  #: bumped on every change of _CUSTOM: caches above the preset key on it


def register_efficiency(hw: Hardware, eff: Efficiency | None) -> None:
    """Attach fitted factors to one hardware spec (its content: another spec that shares its
    ``key`` but not its numbers does not get them); the default preset then uses ``eff`` on
    it. ``register_efficiency(hw, None)`` removes the registration. A table that keeps tile sets
    (``eff.tiles``) prices GPU matmuls and dense convolutions by those sets, which do not read
    ``gemm.max``: to change the matmul rate of such a part, change its tile sets or register
    ``tiles=None`` (the smooth model)."""
    if not isinstance(hw, Hardware):
        raise SpecError(f"register_efficiency: hw must be a Hardware spec (rl.hardware(...)), "
                        f"got {type(hw).__name__} {hw!r}")
    _EPOCH[0] += 1
    if eff is None:
        _CUSTOM.pop(spec_key(hw), None)
        return
    if not isinstance(eff, Efficiency):
        raise SpecError(f"register_efficiency: eff must be an Efficiency, got "
                        f"{type(eff).__name__}")
    _CUSTOM[spec_key(hw)] = eff


def registered_epoch() -> int:
    """A counter that changes whenever ``register_efficiency`` does: a cache of results that
    depend on ``efficiency_for`` keys on it."""
    return _EPOCH[0]


_FROM_SPEC: dict[Any, Efficiency] = {}  # spec_key(hw) -> the spec's own table


def spec_efficiency(hw: Hardware) -> Efficiency | None:
    """The fitted ``[efficiency]`` table a (measured) hardware file carries, or None (cached on
    the spec's content)."""
    tbl = hw.efficiency_table
    if not tbl:
        return None
    ck = spec_key(hw)
    eff = _FROM_SPEC.get(ck)
    if eff is None:
        eff = read_efficiency(dict(tbl), sources={}, origin=f"{hw.origin or hw.key} "
                              "[efficiency]", synchronous=(hw.kind in SYNCHRONOUS_KINDS),
                              label=f"measured/{hw.key}")
        make_room(_FROM_SPEC, 256)
        _FROM_SPEC[ck] = eff
    return eff


def efficiency_for(hw: Hardware, preset: str, attention_kernel: str = "auto") -> Efficiency:
    """The factors ``preset`` applies on ``hw``: a registered table, else the spec's own
    fitted ``[efficiency]`` table, else the per-kind default; fused attention priced as
    ``attention_kernel`` (engine/attention.py: "auto" is the architecture's default)."""
    if preset == "bound":
        return BOUND
    if preset == "default":
        # solve asks this on every call: keyed on the spec's content (spec_key, plus the
        # workspace, which timings do not read but the factors carry) and the registry epoch
        ck = (spec_key(hw), hw.workspace_bytes, attention_kernel, _EPOCH[0])
        eff = _FOR_HW.get(ck)
        if eff is None:
            eff = _default_for(hw, attention_kernel)
            make_room(_FOR_HW, 256)
            _FOR_HW[ck] = eff
        return eff
    raise unknown("preset", preset, PRESETS)


_FOR_HW: dict[tuple[object, ...], Efficiency] = {}


def _default_for(hw: Hardware, attention_kernel: str) -> Efficiency:
    """The default preset's factors on ``hw`` (efficiency_for without its cache)."""
    from .attention import with_attention
    from .tiles import with_tiles

    hit = _CUSTOM.get(spec_key(hw)) if _CUSTOM else None
    own = hit if hit is not None else spec_efficiency(hw)
    eff = own or _kind_default(hw)
    if hw.workspace_bytes is not None and hw.workspace_bytes != eff.workspace:
        eff = _with_workspace(eff, hw.workspace_bytes, hw.provenance.get("runtime.workspace"))
    eff = with_attention(eff, hw, attention_kernel)
    # whole waves of tiles replace the kind's matmul model; a registered or measured table
    # keeps its own
    return eff if own is not None else with_tiles(eff, hw)


def _kind_default(hw: Hardware) -> Efficiency:
    """The default table of ``hw``'s architecture (``arch_tables``, by its key, when it is of
    that table's kind), else of its kind. A hypothetical variant (key ``<key>~<tag>``, as
    analysis.sensitivity.scaled_hardware makes) keeps its part's architecture."""
    arch = arch_tables().get(hw.key.split("~", 1)[0])
    if arch is not None and arch[0].split("-", 1)[0] == hw.kind:
        return arch[1]
    return default_tables()[hw.kind]


@lru_cache(maxsize=256)
def _with_workspace(eff: Efficiency, workspace: float, prov: Any) -> Efficiency:
    """``eff`` with the part's own runtime workspace (``[runtime] workspace`` of its file)."""
    extra = {"workspace": prov} if prov is not None else {}
    return replace(eff, workspace=workspace, provenance=dict(eff.provenance) | extra)


def check_preset(preset: str) -> str:
    if not isinstance(preset, str) or preset not in PRESETS:
        raise unknown("preset", str(preset), PRESETS)
    return preset


def check_runtime(runtime: str, preset: str = "default") -> str:
    """``runtime`` if it is one of RUNTIMES (and ``preset`` can honour it), else SpecError."""
    if not isinstance(runtime, str) or runtime not in RUNTIMES:
        raise unknown("runtime", str(runtime), RUNTIMES)
    if runtime != "eager" and preset == "mlsysim":
        raise SpecError(f"runtime={runtime!r} needs preset 'default' or 'bound'; preset "
                        "'mlsysim' keeps mlsysim's own overhead convention (use runtime='eager')")
    return runtime


@lru_cache(maxsize=256)
def for_runtime(eff: Efficiency, runtime: str) -> Efficiency:
    """The factors ``eff`` applies under ``runtime``: itself for "eager"; for "compiled" the
    same factors with no host dispatch (``dispatch`` 0, per-class and evicted dispatch
    cleared). Cached on the efficiency's value."""
    if runtime == "eager" or eff.is_bound:
        return eff
    cpu = eff.cpu if eff.cpu is None else replace(eff.cpu, evicted=None)
    return replace(eff, launch=replace(eff.launch, dispatch=0.0, by_class=()),
                   cpu=None if cpu is not None and cpu == type(cpu)() else cpu,
                   label=f"{eff.label}/compiled")
