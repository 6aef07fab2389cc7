"""Hardware specifications: dense peaks per dtype, memory levels, links, power.

A ``Hardware`` is a frozen value; the zoo lives in ``data/hardware/**.toml`` (see
docs/hardware-data.md for the format) and every number carries a ``Provenance``.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._data import load_toml_file
from .._display import Display
from ..errors import SpecError, UnsupportedDtypeError
from .dtypes import DTYPES
from .keys import SpecKey, key_slot
from .sourced import Provenance, check_number, check_source_id, read_quantity

__all__ = [
    "MemoryLevel", "Link", "Hardware", "load_hardware_file", "parse_hardware", "KINDS",
    "SYNCHRONOUS_KINDS", "EXECUTIONS",
    "spec_key", "SpecKey",
]

#: mcu: a microcontroller (runs ops one after another on its core, kilobytes of SRAM); npu: an edge
#: neural accelerator beside a host (Coral Edge TPU), megabytes of on-chip memory
KINDS = ("gpu", "tpu", "accelerator", "cpu", "soc", "mcu", "npu")
#: how a part holds a model's weights: "resident" in main memory (every part), or
#: "weight_streaming": in an off-chip weight store, streamed into the chip layer by layer over
#: the store's link while activations and KV stay in main memory (Cerebras CS-3 with MemoryX)
EXECUTIONS = ("resident", "weight_streaming")
#: kinds whose ops run synchronously on the cores that issue them (no asynchronous launch)
SYNCHRONOUS_KINDS = ("cpu", "mcu")
_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")
#: a link's latency, at most (s), and a sparse/dense throughput ratio's range: the one bound
#: a spec file and a spec built in code are both held to
MAX_LINK_LATENCY_S = 1.0
SPARSITY_RATIO = (1.0, 8.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryLevel:
    """One level of the memory hierarchy."""

    name: str  #: e.g. "HBM3", "L2", "VMEM"
    capacity_bytes: float  #: bytes (binary-sized where the datasheet's "GB" is GiB)
    bytes_per_s: float = math.nan  #: peak bandwidth, decimal bytes/s; NaN where unpublished

    def __post_init__(self) -> None:
        where = f"memory level {self.name!r}"
        check_number(self.capacity_bytes, f"{where}: capacity_bytes", above=True, unit="B")
        check_number(self.bytes_per_s, f"{where}: bytes_per_s", above=True, nan_ok=True,
                     unit="B/s")


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A data link, bandwidth per direction."""

    name: str  #: e.g. "NVLink 4", "PCIe Gen5 x16"
    bytes_per_s: float  #: per direction, decimal bytes/s
    latency_s: float = math.nan  #: one-way latency where published
    #: devices one such link domain joins (an NVLink bridge: 2); 0: any number (a switch, a
    #: mesh). A tensor-parallel group larger than this leaves the link for the host link
    domain: int = 0

    def __post_init__(self) -> None:
        """A link built in code is checked as a spec file's ``[links]`` entry is: a bandwidth
        > 0, a latency in [0, 1] s (NaN: unpublished), a domain of 0 or an integer >= 2."""
        where = f"link {self.name!r}"
        check_number(self.bytes_per_s, f"{where}: bytes_per_s", above=True, unit="B/s")
        check_number(self.latency_s, f"{where}: latency_s", hi=MAX_LINK_LATENCY_S, nan_ok=True,
                     unit="s")
        d = self.domain
        if isinstance(d, bool) or not isinstance(d, int) or d == 1 or d < 0:
            raise SpecError(f"{where}: domain = {d!r} is the number of devices the link joins; "
                            "allowed: an integer >= 2 (0 for a switch or full mesh)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Hardware(Display):
    """A device: what it can compute per second, and how fast it moves bytes."""

    key: str  #: zoo key, e.g. "a100-sxm4-80gb"
    name: str  #: human name
    vendor: str = ""
    kind: str = "gpu"  #: one of KINDS
    year: int | None = None
    aliases: tuple[str, ...] = ()
    #: dense peak FLOP/s (OP/s for integer dtypes) per dtype; sparse figures never used
    peak_flops_per_s: Mapping[str, float] = field(default_factory=dict)
    #: memory hierarchy, main memory first, then inward (L2, SRAM...)
    memory: tuple[MemoryLevel, ...] = ()
    host_link: Link | None = None  #: to the host CPU, per direction
    scale_up_link: Link | None = None  #: chip-to-chip in a node/pod, per direction per device
    tdp_w: float = math.nan  #: thermal design power, W
    #: field path ("peak.fp16", "memory.0.bandwidth", "tdp") -> where the number came from
    provenance: Mapping[str, Provenance] = field(default_factory=dict)
    origin: str = ""  #: the file it was loaded from, or "" for one built in code
    #: a measured spec's fitted ``[efficiency]`` table (raw TOML entries, sources resolved);
    #: the engine's default preset uses it for this hardware (engine.presets.efficiency_for)
    efficiency_table: Mapping[str, Any] | None = None
    #: dtype -> fraction of the dense peak a long matmul sustains on this board when its power
    #: cap lowers the clock below the one the peak is quoted at (``[sustained]``; absent: 1).
    #: The default preset scales matmul-class ops by it; the bound preset keeps the datasheet peak
    sustained_fraction: Mapping[str, float] = field(default_factory=dict)
    #: the SM clock the dense peaks are quoted at ("peak") and the part's maximum boost clock
    #: ("max"), Hz (``[clock]``; absent: unknown). Their ratio prices a harness that lets the
    #: part run each kernel at its maximum clock (``clock_ratio``); solve, serve and train do
    #: not use it
    clock_hz: Mapping[str, float] = field(default_factory=dict)
    #: sparse tensor-core patterns the datasheet gives throughput for, pattern -> sparse/dense
    #: throughput ratio (e.g. {"2:4": 2.0}); the dense peak stays the value
    sparsity: Mapping[str, float] = field(default_factory=dict)
    #: bytes the runtime itself holds on the device beside the model (``[runtime] workspace``:
    #: context, library workspaces, allocator slack); None: the preset's per-kind figure
    workspace_bytes: float | None = None
    #: an off-chip weight store (``[weight_store]``: Cerebras MemoryX): its capacity and its
    #: bandwidth into the chip, per direction; None: the part has none
    weight_store: MemoryLevel | None = None
    execution: str = "resident"  #: one of EXECUTIONS; "weight_streaming" needs a weight_store
    #: the memoized content keys (``spec_key``, ``specs.keys.frozen_key``): no field of the spec
    _spec_key: SpecKey | None = key_slot()
    _frozen_key: SpecKey | bool | None = key_slot()

    def __post_init__(self) -> None:
        if self.execution not in EXECUTIONS:
            raise SpecError(f"hardware {self.key!r}: execution={self.execution!r}; allowed: "
                            f"{', '.join(EXECUTIONS)}")
        if self.execution == "weight_streaming" and self.weight_store is None:
            raise SpecError(f"hardware {self.key!r}: execution='weight_streaming' needs a "
                            "[weight_store] (capacity and bandwidth) to stream the weights from")
        if self.kind not in KINDS:
            raise SpecError(f"hardware {self.key!r}: kind={self.kind!r}; "
                            f"allowed: {', '.join(KINDS)}")
        if not self.peak_flops_per_s:
            raise SpecError(f"hardware {self.key!r}: needs at least one peak (peak.<dtype>)")
        for d, v in self.peak_flops_per_s.items():
            if d not in DTYPES:
                raise SpecError(f"hardware {self.key!r}: peak.{d} is not a dtype; allowed: "
                                f"{', '.join(DTYPES)}")
            if not (isinstance(v, int | float) and v > 0 and math.isfinite(v)):
                raise SpecError(f"hardware {self.key!r}: peak.{d}={v!r} must be a positive number")
        if not self.memory:
            raise SpecError(f"hardware {self.key!r}: needs a main memory level ([[memory]])")
        self._check_parts()
        if math.isnan(self.memory[0].bytes_per_s):
            raise SpecError(f"hardware {self.key!r}: the main memory level needs a bandwidth")
        for d, v in self.sustained_fraction.items():
            if d not in self.peak_flops_per_s:
                raise SpecError(f"hardware {self.key!r}: sustained.{d} names a dtype without a "
                                f"peak; it has {', '.join(self.dtypes)}")
            if not (isinstance(v, int | float) and 0 < v <= 1):
                raise SpecError(f"hardware {self.key!r}: sustained.{d}={v!r} must be in (0, 1]")
        object.__setattr__(self, "peak_flops_per_s", MappingProxyType(dict(self.peak_flops_per_s)))
        object.__setattr__(self, "sustained_fraction",
                           MappingProxyType(dict(self.sustained_fraction)))
        if set(self.clock_hz) not in (set(), {"peak", "max"}):
            raise SpecError(f"hardware {self.key!r}: clock needs both 'peak' and 'max'; "
                            f"got {', '.join(self.clock_hz)}")
        if self.clock_hz and not 0 < self.clock_hz["peak"] <= self.clock_hz["max"]:
            raise SpecError(f"hardware {self.key!r}: clock.max={self.clock_hz['max']!r} Hz must "
                            f"be at least clock.peak={self.clock_hz['peak']!r} Hz (> 0)")
        object.__setattr__(self, "clock_hz", MappingProxyType(dict(self.clock_hz)))
        object.__setattr__(self, "provenance", MappingProxyType(dict(self.provenance)))

    def _check_parts(self) -> None:
        """The parts and numbers a spec file's loader checks, for a Hardware built in code:
        memory levels and links of their types, a power, workspace, sparsity ratio and clock
        in the ranges the file allows (not the file's plausibility ranges: see
        ``sourced.check_number``)."""
        where = f"hardware {self.key!r}"
        for i, m in enumerate((*self.memory, self.weight_store)):
            if i < len(self.memory) or m is not None:
                if not isinstance(m, MemoryLevel):
                    name = "weight_store" if i == len(self.memory) else f"memory[{i}]"
                    raise SpecError(f"{where}: {name} must be a MemoryLevel, got {m!r}")
        for name in ("host_link", "scale_up_link"):
            ln = getattr(self, name)
            if ln is not None and not isinstance(ln, Link):
                raise SpecError(f"{where}: {name} must be a Link or None, got {ln!r}")
        check_number(self.tdp_w, f"{where}: tdp_w", nan_ok=True, unit="W")
        if self.workspace_bytes is not None:
            check_number(self.workspace_bytes, f"{where}: workspace_bytes", unit="B")
        for p, r in self.sparsity.items():
            check_number(r, f"{where}: sparsity[{p!r}]", lo=SPARSITY_RATIO[0], hi=SPARSITY_RATIO[1])
        for k, v in self.clock_hz.items():
            check_number(v, f"{where}: clock_hz[{k!r}]", above=True, unit="Hz")
        if self.year is not None and (isinstance(self.year, bool)
                                      or not isinstance(self.year, int)):
            raise SpecError(f"{where}: year={self.year!r} must be an integer year or None")

    # -- the numbers most code wants ---------------------------------------------------------
    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes this part has a peak for, in the canonical order."""
        return tuple(d for d in DTYPES if d in self.peak_flops_per_s)

    def has(self, dtype: str) -> bool:
        return dtype in self.peak_flops_per_s

    def sustained(self, dtype: str) -> float:
        """Fraction of the ``dtype`` peak a long matmul sustains (1 unless ``[sustained]``
        says otherwise, e.g. a power-capped board)."""
        return float(self.sustained_fraction.get(dtype, 1.0))

    def clock_ratio(self) -> float:
        """Maximum boost clock / the clock the peaks are quoted at (1 without ``[clock]``): the
        factor on the peaks of a kernel run at the maximum clock (no power cap binding)."""
        return self.clock_hz["max"] / self.clock_hz["peak"] if self.clock_hz else 1.0

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; an error naming the dtypes the part has if absent."""
        try:
            return self.peak_flops_per_s[dtype]
        except KeyError:
            raise UnsupportedDtypeError(
                f"{self.name} has no {dtype} peak; it has {', '.join(self.dtypes)}"
            ) from None

    @property
    def main_memory(self) -> MemoryLevel:
        return self.memory[0]

    @property
    def memory_bytes_per_s(self) -> float:
        """Main-memory (HBM/DRAM) bandwidth, bytes/s."""
        return self.memory[0].bytes_per_s

    @property
    def memory_capacity_bytes(self) -> float:
        return self.memory[0].capacity_bytes

    def with_execution(self, execution: str) -> Hardware:
        """This part in another execution mode (EXECUTIONS): ``"weight_streaming"`` keeps the
        weights in its weight store and streams them in over its link (a SpecError when the
        part has no weight store)."""
        if execution not in EXECUTIONS:
            raise SpecError(f"execution={execution!r}; allowed: {', '.join(EXECUTIONS)}")
        return self if execution == self.execution else replace(self, execution=execution)

    @property
    def weight_stream_bytes_per_s(self) -> float | None:
        """The bandwidth weights arrive at when streamed (weight_streaming), else None."""
        if self.execution != "weight_streaming" or self.weight_store is None:
            return None
        return self.weight_store.bytes_per_s

    def ridge_point(self, dtype: str) -> float:
        """Peak FLOP/s over main-memory bandwidth: the FLOP/byte where the roofs meet."""
        return self.peak(dtype) / self.memory_bytes_per_s

    def with_peak(self, dtype: str, flops_per_s: float, source: str) -> Hardware:
        """A copy with one peak replaced (and its provenance)."""
        peaks = dict(self.peak_flops_per_s)
        peaks[dtype] = flops_per_s
        prov = dict(self.provenance)
        prov[f"peak.{dtype}"] = Provenance(source=source)
        return replace(self, peak_flops_per_s=peaks, provenance=prov)

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Picklable (a Dask worker receives the spec): the read-only mappings travel as
        dicts and are frozen again by ``__post_init__``."""
        state = {}
        for f in fields(self):
            if not f.init:  # a memoized key: taken again where it is loaded
                continue
            v = getattr(self, f.name)
            state[f.name] = dict(v) if isinstance(v, MappingProxyType) else v
        return (_rebuild_hardware, (state,))

    def __repr__(self) -> str:
        return f"Hardware({self.key!r})"

    def __str__(self) -> str:
        peaks = ", ".join(f"{d} {v / 1e12:.4g} T" for d, v in self.peak_flops_per_s.items())
        m = self.main_memory
        return (f"{self.name} [{self.kind}]: {peaks} FLOP/s (dense); {m.name} "
                f"{m.capacity_bytes / 1e9:.4g} GB @ {m.bytes_per_s / 1e9:.4g} GB/s")


def spec_key(hw: Hardware) -> SpecKey:
    """A hashable value of everything in ``hw`` that a timing can depend on (not provenance):
    equal specs give equal keys, an edited copy (``with_peak``, a reloaded file) another one.
    Caches key on this, never on ``id()`` or ``hw.key``. Kept in the spec's ``_spec_key`` slot
    (``specs.keys``)."""
    k = hw._spec_key
    if k is None:
        k = _new_spec_key(hw)
        object.__setattr__(hw, "_spec_key", k)
    return k


def _new_spec_key(hw: Hardware) -> SpecKey:
    eff = hw.efficiency_table
    def num(v: float) -> float | None:  # NaN != NaN: a key must equal itself
        return None if v != v else v

    links = tuple(None if ln is None else (ln.name, num(ln.bytes_per_s), num(ln.latency_s),
                                           ln.domain)
                  for ln in (hw.host_link, hw.scale_up_link))
    k = SpecKey((hw.key, hw.kind, tuple(sorted(hw.peak_flops_per_s.items())),
         tuple((m.name, m.capacity_bytes, num(m.bytes_per_s)) for m in hw.memory), links,
         num(hw.tdp_w),
         tuple(sorted(hw.sustained_fraction.items())), tuple(sorted(hw.clock_hz.items())),
         hw.execution,
         None if hw.weight_store is None else (hw.weight_store.capacity_bytes,
                                               hw.weight_store.bytes_per_s),
         None if eff is None else repr(sorted((str(a), repr(b)) for a, b in eff.items()))))
    return k


# -- loading -------------------------------------------------------------------------------------

_TOP_KEYS = {"schema", "key", "name", "aliases", "vendor", "kind", "year", "sources", "peak",
             "weight_store", "execution",
             "memory", "links", "power", "notes", "measurement", "efficiency", "sustained",
             "sparsity", "runtime", "clock"}

#: [sparsity] keys -> the pattern name solve(sparsity=) takes
_SPARSITY_KEYS = {"structured_2_4": "2:4"}


def _rebuild_hardware(state: dict[str, Any]) -> Hardware:
    return Hardware(**state)


def parse_hardware(doc: Mapping[str, Any], origin: str = "<dict>") -> Hardware:
    """Build a Hardware from a parsed TOML document; every number must carry a source."""
    if not isinstance(doc, Mapping) or "peak" not in doc and "memory" not in doc:
        # not a hardware file at all: say so without echoing what it holds (it may be any
        # TOML a path pointed at)
        raise SpecError(f"{origin}: is not a hardware spec (it has neither [peak] nor "
                        "[[memory]]; see docs/hardware-data.md)")
    unknown_keys = set(doc) - _TOP_KEYS
    if unknown_keys:
        raise SpecError(f"{origin}: unknown top-level keys {sorted(unknown_keys)}; allowed: "
                        f"{', '.join(sorted(_TOP_KEYS))}")
    if doc.get("schema", 1) != 1:
        raise SpecError(f"{origin}: schema={doc.get('schema')!r}; this roofline reads schema 1")
    for req in ("key", "name"):
        if not isinstance(doc.get(req), str) or not doc[req]:
            raise SpecError(f"{origin}: '{req}' is required and must be a non-empty string")
    key = doc["key"]
    if not _KEY_RE.match(key):
        raise SpecError(f"{origin}: key={key!r} must be lowercase letters, digits, '.' and '-'")
    sources = doc.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise SpecError(f"{origin}: [sources] must map short ids to citation strings")
    prov: dict[str, Provenance] = {}

    def q(raw: Any, fld: str, dim: str, lo: float | None = None,
          hi: float | None = None) -> float:
        check_source_id(raw, fld, sources, origin)
        value, p = read_quantity(raw, field=fld, dimension=dim, sources=sources, origin=origin,
                                 lo=lo, hi=hi)
        prov[fld] = p
        return value

    peaks_raw = doc.get("peak")
    if not isinstance(peaks_raw, dict) or not peaks_raw:
        raise SpecError(f"{origin}: [peak] is required with at least one dtype "
                        f"({', '.join(DTYPES)})")
    peaks: dict[str, float] = {}
    for dtype, raw in peaks_raw.items():
        if dtype not in DTYPES:
            raise SpecError(f"{origin}: peak.{dtype} is not a dtype; allowed: {', '.join(DTYPES)}")
        peaks[dtype] = q(raw, f"peak.{dtype}", "compute")

    levels = _memory_levels(doc.get("memory"), origin, q)
    links = _links(doc.get("links") or {}, origin, q)

    sus_raw = doc.get("sustained") or {}
    if not isinstance(sus_raw, dict):
        raise SpecError(f"{origin}: [sustained] must map dtypes to sourced fractions")
    sustained: dict[str, float] = {}
    for dtype, raw in sus_raw.items():
        if dtype not in peaks:
            raise SpecError(f"{origin}: sustained.{dtype} needs a peak.{dtype}; this file has "
                            f"peaks for {', '.join(peaks)}")
        # a board that sustains under 5 % of its peak is a typo, not a power cap
        sustained[dtype] = q(raw, f"sustained.{dtype}", "ratio", lo=0.05, hi=1.0)

    clock = _clock(doc.get("clock"), origin, q)
    sparsity: dict[str, float] = {}
    sp_raw = doc.get("sparsity") or {}
    if not isinstance(sp_raw, dict):
        raise SpecError(f"{origin}: [sparsity] must map patterns to sourced speed-up ratios")
    for k, raw in sp_raw.items():
        if k not in _SPARSITY_KEYS:
            raise SpecError(f"{origin}: sparsity.{k}; allowed: {', '.join(_SPARSITY_KEYS)}")
        ratio = q(raw, f"sparsity.{k}", "ratio")
        lo, hi = SPARSITY_RATIO
        if not lo <= ratio <= hi:
            raise SpecError(f"{origin}: sparsity.{k} = {ratio!r} is the sparse/dense tensor "
                            f"throughput ratio; allowed: {lo:g} to {hi:g}")
        sparsity[_SPARSITY_KEYS[k]] = ratio

    tdp = math.nan
    power = doc.get("power") or {}
    if not isinstance(power, dict):
        raise SpecError(f"{origin}: [power] must be a table (tdp = {{ value, unit, source }})")
    if "tdp" in power:
        tdp = q(power["tdp"], "power.tdp", "power", lo=1e-3, hi=1e6)  # a microcontroller: mW

    workspace = _runtime_workspace(doc.get("runtime"), origin, q)
    store = _weight_store(doc.get("weight_store"), origin, q)
    execution = doc.get("execution", "resident")
    if not isinstance(execution, str):
        raise SpecError(f"{origin}: execution must be a string ({', '.join(EXECUTIONS)})")
    aliases = doc.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise SpecError(f"{origin}: aliases must be a list of strings")
    year = doc.get("year")
    if year is not None and (isinstance(year, bool) or not isinstance(year, int)
                             or not 1940 <= year <= 2100):
        raise SpecError(f"{origin}: year={year!r} must be an integer year in [1940, 2100]")
    for fld in ("vendor", "kind"):
        if not isinstance(doc.get(fld, ""), str):
            raise SpecError(f"{origin}: {fld} must be a string, got {type(doc[fld]).__name__}")
    eff_tbl = _efficiency_table(doc.get("efficiency"), sources, origin)
    return Hardware(
        key=key, name=doc["name"], vendor=str(doc.get("vendor", "")),
        kind=str(doc.get("kind", "gpu")), year=int(year) if year is not None else None,
        aliases=tuple(aliases), peak_flops_per_s=peaks, memory=tuple(levels),
        host_link=links.get("host"), scale_up_link=links.get("scale_up"), tdp_w=tdp,
        provenance=prov, origin=origin, efficiency_table=eff_tbl, sustained_fraction=sustained,
        sparsity=sparsity, workspace_bytes=workspace, weight_store=store, execution=execution,
        clock_hz=clock,
    )


def _clock(raw: Any, origin: str, q: Any) -> dict[str, float]:
    """``[clock]``: ``peak`` (the SM clock the datasheet peaks are quoted at) and ``max`` (the
    maximum boost clock), both sourced, both or neither."""
    if raw is None:
        return {}
    if not isinstance(raw, dict) or set(raw) != {"peak", "max"}:
        got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise SpecError(f"{origin}: [clock] needs exactly 'peak' and 'max' (sourced clocks, "
                        f"e.g. {{ value = 1830, unit = \"MHz\", source = \"...\" }}); got {got}")
    return {k: q(raw[k], f"clock.{k}", "frequency") for k in ("peak", "max")}


def _memory_levels(mem_raw: Any, origin: str, q: Any) -> list[MemoryLevel]:
    """``[[memory]]``: main memory first (it needs a bandwidth), then faster levels."""
    if not isinstance(mem_raw, list) or not mem_raw:
        raise SpecError(f"{origin}: at least one [[memory]] level (main memory first) is required")
    levels = []
    for i, lvl in enumerate(mem_raw):
        if not isinstance(lvl, dict) or not isinstance(lvl.get("name"), str):
            raise SpecError(f"{origin}: memory.{i} needs a 'name'")
        extra = set(lvl) - {"name", "capacity", "bandwidth", "note"}
        if extra:
            raise SpecError(f"{origin}: memory.{i} has unknown keys {sorted(extra)}; allowed: "
                            "name, capacity, bandwidth, note")
        if "capacity" not in lvl:
            raise SpecError(f"{origin}: memory.{i} ({lvl['name']}) needs a 'capacity'")
        cap = q(lvl["capacity"], f"memory.{i}.capacity", "bytes", lo=1024.0)
        bw = q(lvl["bandwidth"], f"memory.{i}.bandwidth", "bandwidth") if "bandwidth" in lvl \
            else math.nan
        if i == 0 and math.isnan(bw):
            raise SpecError(f"{origin}: memory.0 ({lvl['name']}) is main memory and needs a "
                            "'bandwidth'")
        levels.append(MemoryLevel(name=lvl["name"], capacity_bytes=cap, bytes_per_s=bw))
    return levels


def _links(links_raw: Any, origin: str, q: Any) -> dict[str, Link]:
    """``[links]``: host, scale_up, scale_out (bandwidth per direction, optional latency)."""
    if not isinstance(links_raw, dict):
        raise SpecError(f"{origin}: [links] must be a table of host / scale_up / scale_out "
                        f"links, got a {type(links_raw).__name__}")
    links: dict[str, Link] = {}
    for lk, raw in links_raw.items():
        if lk not in ("host", "scale_up", "scale_out"):
            raise SpecError(f"{origin}: links.{lk}; allowed: host, scale_up, scale_out")
        if not isinstance(raw, dict) or "bandwidth" not in raw:
            raise SpecError(f"{origin}: links.{lk} needs a 'bandwidth' (per direction)")
        bw = q(raw["bandwidth"], f"links.{lk}.bandwidth", "bandwidth")
        lat = (q(raw["latency"], f"links.{lk}.latency", "time", hi=MAX_LINK_LATENCY_S)
               if "latency" in raw else math.nan)
        dom = 0
        if "domain" in raw:
            dom = q(raw["domain"], f"links.{lk}.domain", "ratio")
            if dom != int(dom) or dom < 2:
                raise SpecError(f"{origin}: links.{lk}.domain = {dom!r} is the number of "
                                "devices the link joins; allowed: an integer >= 2 (omit it "
                                "for a switch or full mesh)")
        links[lk] = Link(name=str(raw.get("name", lk)), bytes_per_s=bw, latency_s=lat,
                         domain=int(dom))
    return links


def _efficiency_table(eff_raw: Any, sources: dict[str, str],
                      origin: str) -> dict[str, Any] | None:
    """``[efficiency]`` as given, each quantity's source id replaced by its citation, in flat
    keys and in the grouped sub-tables (``[efficiency.gemm]``, ``[efficiency.cpu.cold]``) alike;
    the one loader (engine/efficiency.py) reads and checks it."""
    if eff_raw is None:
        return None
    if not isinstance(eff_raw, dict):
        raise SpecError(f"{origin}: [efficiency] must be a table of sourced factors")

    def cite(v: Any, fld: str) -> Any:
        if isinstance(v, dict) and isinstance(v.get("source"), str) and "value" in v:
            check_source_id(v, fld, sources, origin)
            return {**v, "source": sources[v["source"]] if v["source"].strip() else v["source"]}
        if isinstance(v, dict):
            return {k: cite(x, f"{fld}.{k}") for k, x in v.items()}
        return v

    return {k: cite(v, f"efficiency.{k}") for k, v in eff_raw.items()}


def _weight_store(raw: Any, origin: str, q: Any) -> MemoryLevel | None:
    """``[weight_store]``: name, capacity and bandwidth (into the chip, per direction)."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"name", "capacity", "bandwidth", "note"} \
            or "capacity" not in raw or "bandwidth" not in raw:
        raise SpecError(f"{origin}: [weight_store] needs capacity and bandwidth (name, note "
                        "optional)")
    return MemoryLevel(name=str(raw.get("name", "weight store")),
                       capacity_bytes=q(raw["capacity"], "weight_store.capacity", "bytes",
                                        lo=1024.0),
                       bytes_per_s=q(raw["bandwidth"], "weight_store.bandwidth", "bandwidth"))


def _runtime_workspace(raw: Any, origin: str, q: Any) -> float | None:
    """``[runtime] workspace``: the part's own runtime footprint (bytes), or None."""
    if raw is None:
        return None
    if not isinstance(raw, dict) or set(raw) - {"workspace"}:
        raise SpecError(f"{origin}: [runtime] takes one key, workspace = {{ value, unit, "
                        "source, derivation }} (bytes the runtime holds beside the model)")
    if "workspace" not in raw:
        return None
    # a workspace larger than a terabyte is a unit slip
    return float(q(raw["workspace"], "runtime.workspace", "bytes", lo=0.0, hi=1e12))


def load_hardware_file(path: str | os.PathLike[str]) -> Hardware:
    """Load a user's hardware TOML (same format as the zoo)."""
    return parse_hardware(load_toml_file(path, "hardware"), origin=str(Path(path)))


def __getattr__(name: str) -> Any:
    # the zoo resolvers moved to specs/resolve.py; the old import path keeps working.
    if name in ("hardware", "list_hardware"):
        from . import resolve

        return getattr(resolve, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
