"""Clusters: many devices joined by a fast scale-up domain and a slower scale-out network.

A ``Cluster`` is a frozen value loaded from ``data/clusters/*.toml`` (every number with its
source). ``rl.cluster("dgx-h100", nodes=128)`` gives 1024 H100s: 8 per node on NVLink/NVSwitch,
one 400 Gb/s InfiniBand NIC per GPU between nodes.

Bandwidths are per device and per direction (what one rank can push while receiving as much):
``scale_up_bytes_per_s`` on the NVLink/ICI domain of ``scale_up_domain`` devices,
``scale_out_bytes_per_s`` through the device's share of the node's NICs. Latencies are the
per-step α of the α-β collective model (ops/collectives.py).

``nics_per_node``: the node's NICs on the scale-out network (None: one per device). A node with
fewer NICs than devices (AWS p4d: 4 × 100 Gb/s EFA for 8 A100) or more (AWS p5: 32 network
cards for 8 H100, source at ``MAX_NICS``) keeps ``scale_out_bytes_per_s`` as each device's
*share*, ``nics × NIC rate / devices``: what each rank gets while every rank of the node drives
the network at once, as training's collectives do (NCCL spreads its channels over all the
node's NICs, reaching a NIC on another GPU's PCIe switch through that GPU: PXN). The count
itself shapes NCCL's topology search (``specs.nccl.tuner_for``: the channels and their speed);
``nic_bytes_per_s`` is one NIC's rate.
A cluster file gives either ``[scale_out] bandwidth`` (per device) or ``nics`` and
``nic_bandwidth`` (per NIC), from which the share is derived.
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
from ..errors import SpecError
from .hardware import Hardware
from .keys import SpecKey, key_slot
from .sourced import Provenance, check_number, check_source_id, read_quantity

__all__ = ["Cluster", "parse_cluster", "load_cluster_file"]

_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.\-]*$")
#: the most NICs a node may have (a refusal of junk, not physics: AWS p5 has 32 network cards,
#: Amazon EC2 User Guide, "Maximize network bandwidth on Amazon EC2 instances with multiple
#: network cards", "EFA configuration for P5 and P5e instances": up to 32 cards, 3,200 Gb/s)
MAX_NICS = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster(Display):
    """``nodes`` × ``devices_per_node`` identical devices and the links between them."""

    key: str  #: zoo key, e.g. "dgx-h100"
    name: str  #: human name
    device: Hardware  #: the accelerator (from the hardware zoo)
    nodes: int  #: number of nodes (servers, trays, TPU hosts)
    devices_per_node: int  #: accelerators per node
    scale_up_domain: int  #: devices joined by the scale-up fabric (8 for DGX, 72 for NVL72, a pod)
    scale_up_bytes_per_s: float  #: scale-up bandwidth per device, per direction, bytes/s
    scale_up_latency_s: float  #: α per collective step inside the scale-up domain, s
    scale_out_bytes_per_s: float  #: scale-out (NIC) bandwidth per device, per direction, bytes/s
    scale_out_latency_s: float  #: α per collective step across the scale-out network, s
    node_overhead_w: float = 0.0  #: node power beyond the accelerators (CPUs, NICs, fans), W
    #: NVLS (NVLink SHARP, in-switch reduction) all-reduce algorithm bandwidth per device as a
    #: fraction of ``scale_up_bytes_per_s`` (measured, nccl-tests); 0: the scale-up fabric has
    #: no in-switch reduction
    scale_up_nvls_fraction: float = 0.0
    #: NICs per node on the scale-out network (None: one per device); with them each device's
    #: ``scale_out_bytes_per_s`` is its share, nics × NIC rate / devices_per_node
    nics_per_node: int | None = None
    max_nodes: int | None = None  #: largest published configuration (None: unbounded)
    aliases: tuple[str, ...] = ()
    provenance: Mapping[str, Provenance] = field(default_factory=dict)
    origin: str = ""
    #: the memoized content key (``specs.keys.frozen_key``): no field of the spec
    _frozen_key: SpecKey | bool | None = key_slot()

    def __post_init__(self) -> None:
        for f in ("nodes", "devices_per_node", "scale_up_domain"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise SpecError(f"cluster {self.key!r}: {f} must be a positive integer, got {v!r}")
        if not isinstance(self.device, Hardware):
            raise SpecError(f"cluster {self.key!r}: device must be a Hardware (rl.hardware(...)), "
                            f"got {self.device!r}")
        for f in ("scale_up_bytes_per_s", "scale_out_bytes_per_s"):
            check_number(getattr(self, f), f"cluster {self.key!r}: {f}", above=True, unit="B/s")
        n = self.nics_per_node
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not
                              1 <= n <= MAX_NICS):
            raise SpecError(f"cluster {self.key!r}: nics_per_node must be a whole number of NICs "
                            f"from 1 to {MAX_NICS} (None: one per device), got {n!r}")
        check_number(self.scale_up_nvls_fraction, f"cluster {self.key!r}: scale_up_nvls_fraction",
                     lo=-math.inf)  # a number; its range next, in the file's words
        if not 0.0 <= self.scale_up_nvls_fraction <= 1.0:
            raise SpecError(f"cluster {self.key!r}: scale_up.nvls must be in [0, 1] (a fraction "
                            f"of the scale-up bandwidth; 0: no in-switch reduction), got "
                            f"{self.scale_up_nvls_fraction!r}")
        for f in ("scale_up_latency_s", "scale_out_latency_s", "node_overhead_w"):
            check_number(getattr(self, f), f"cluster {self.key!r}: {f}")
        m = self.max_nodes
        if m is not None and (isinstance(m, bool) or not isinstance(m, int) or m < 1):
            raise SpecError(f"cluster {self.key!r}: max_nodes must be a positive integer or None "
                            f"(unbounded), got {m!r}")
        if self.scale_up_domain < self.devices_per_node or \
                self.scale_up_domain % self.devices_per_node:
            raise SpecError(f"cluster {self.key!r}: scale_up_domain={self.scale_up_domain} must "
                            f"be a multiple of devices_per_node={self.devices_per_node}")
        if self.max_nodes is not None and self.nodes > self.max_nodes:
            raise SpecError(f"cluster {self.key!r}: nodes={self.nodes} exceeds the largest "
                            f"published configuration ({self.max_nodes} nodes)")
        object.__setattr__(self, "provenance", MappingProxyType(dict(self.provenance)))

    @property
    def devices(self) -> int:
        """Total accelerators."""
        return self.nodes * self.devices_per_node

    @property
    def domain(self) -> int:
        """Devices one scale-up domain really holds in this cluster (capped by its size)."""
        return min(self.scale_up_domain, self.devices)

    @property
    def nics(self) -> int:
        """NICs per node on the scale-out network (one per device unless the spec says)."""
        return self.devices_per_node if self.nics_per_node is None else self.nics_per_node

    @property
    def nic_bytes_per_s(self) -> float:
        """One NIC's bandwidth per direction, bytes/s: the node's share over its NICs."""
        return self.scale_out_bytes_per_s * self.devices_per_node / self.nics

    def with_nodes(self, nodes: int) -> Cluster:
        return replace(self, nodes=nodes)

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Picklable: the read-only provenance travels as a dict and is frozen again by
        ``__post_init__``; the memoized key is taken again where the copy is used."""
        state = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        state["provenance"] = dict(self.provenance)
        return (_rebuild_cluster, (state,))

    def __repr__(self) -> str:
        return f"Cluster({self.key!r}, nodes={self.nodes})"

    def __str__(self) -> str:
        return (f"{self.name}: {self.nodes} × {self.devices_per_node} {self.device.name} = "
                f"{self.devices} devices; scale-up {self.scale_up_bytes_per_s / 1e9:.4g} GB/s per "
                f"device over {self.scale_up_domain}, scale-out "
                f"{self.scale_out_bytes_per_s / 1e9:.4g} GB/s per device"
                + ("" if self.nics_per_node is None else
                   f" ({self.nics} NICs of {self.nic_bytes_per_s / 1e9:.4g} GB/s per node)"))


_TOP = {"schema", "key", "name", "aliases", "device", "devices_per_node", "scale_up_domain",
        "max_nodes", "sources", "scale_up", "scale_out", "power", "notes"}


def _rebuild_cluster(state: dict[str, Any]) -> Cluster:
    return Cluster(**state)


def _resolve_hardware(spec: Any) -> Hardware:
    from .resolve import hardware

    return hardware(spec)


def parse_cluster(doc: Mapping[str, Any], origin: str = "<dict>", *, nodes: int = 1) -> Cluster:
    """Build a Cluster from a parsed TOML document (every number needs a source)."""
    if not isinstance(doc, Mapping) or "device" not in doc and "devices_per_node" not in doc:
        # not a cluster file: say so without echoing what it holds
        raise SpecError(f"{origin}: is not a cluster spec (it has neither 'device' nor "
                        "'devices_per_node')")
    extra = set(doc) - _TOP
    if extra:
        raise SpecError(f"{origin}: unknown top-level keys {sorted(extra)}; allowed: "
                        f"{', '.join(sorted(_TOP))}")
    if doc.get("schema", 1) != 1:
        raise SpecError(f"{origin}: schema={doc.get('schema')!r}; this roofline reads schema 1")
    for req in ("key", "name", "device"):
        if not isinstance(doc.get(req), str) or not doc[req]:
            raise SpecError(f"{origin}: '{req}' is required and must be a non-empty string")
    if not _KEY_RE.match(doc["key"]):
        raise SpecError(f"{origin}: key={doc['key']!r} must be lowercase letters, digits, '.', '-'")
    sources = doc.get("sources", {})
    if not isinstance(sources, dict) or not all(isinstance(v, str) for v in sources.values()):
        raise SpecError(f"{origin}: [sources] must map short ids to citation strings")
    prov: dict[str, Provenance] = {}

    def q(raw: Any, fld: str, dim: str, hi: float | None = None) -> float:
        check_source_id(raw, fld, sources, origin)
        v, p = read_quantity(raw, field=fld, dimension=dim, sources=sources, origin=origin,
                             hi=hi)
        prov[fld] = p
        return v

    def count(fld: str) -> int:
        raw = doc.get(fld)
        if raw is None:
            raise SpecError(f"{origin}: '{fld}' is required")
        return _count(q(raw, fld, "ratio", hi=1e6), fld, origin)

    dpn = count("devices_per_node")
    links: dict[str, tuple[float, float]] = {}
    nics: int | None = None
    for lk, more in (("scale_up", ("nvls",)), ("scale_out", ("nics", "nic_bandwidth"))):
        raw = doc.get(lk)
        if not isinstance(raw, dict) or "latency" not in raw or "bandwidth" not in raw and (
                lk == "scale_up" or "nic_bandwidth" not in raw):
            raise SpecError(f"{origin}: [{lk}] needs 'bandwidth' (per device, per direction"
                            + ("; or 'nics' and 'nic_bandwidth', per NIC" if lk == "scale_out"
                               else "") + ") and 'latency'")
        extra_keys = set(raw) - {"name", "bandwidth", "latency", *more}
        if extra_keys:
            raise SpecError(f"{origin}: unknown keys {sorted(extra_keys)} in [{lk}]; allowed: "
                            f"name, bandwidth, latency, {', '.join(more)}")
        if lk == "scale_out" and "nics" in raw:
            nics = _count(q(raw["nics"], "scale_out.nics", "ratio", hi=MAX_NICS),
                          "scale_out.nics", origin)
        if lk == "scale_out" and "nic_bandwidth" in raw:
            bw = _nic_share(raw, nics, dpn, q(raw["nic_bandwidth"], "scale_out.nic_bandwidth",
                                              "bandwidth"), origin, prov)
        else:
            bw = q(raw["bandwidth"], f"{lk}.bandwidth", "bandwidth")
        links[lk] = (bw, q(raw["latency"], f"{lk}.latency", "time", hi=1.0))
    nvls = q(doc["scale_up"]["nvls"], "scale_up.nvls", "ratio", hi=1.0) \
        if "nvls" in doc["scale_up"] else 0.0
    power = doc.get("power") or {}
    if not isinstance(power, dict):
        raise SpecError(f"{origin}: [power] must be a table (node_overhead = {{ value, unit, "
                        "source }})")
    overhead = q(power["node_overhead"], "power.node_overhead", "power") \
        if "node_overhead" in power else 0.0
    dom = count("scale_up_domain") if "scale_up_domain" in doc else dpn
    max_nodes = count("max_nodes") if "max_nodes" in doc else None
    aliases = doc.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise SpecError(f"{origin}: aliases must be a list of strings")
    return Cluster(
        key=doc["key"], name=doc["name"], device=_resolve_hardware(device_path(doc["device"],
                                                                               origin)),
        nodes=nodes,
        devices_per_node=dpn, scale_up_domain=dom, scale_up_bytes_per_s=links["scale_up"][0],
        scale_up_latency_s=links["scale_up"][1], scale_out_bytes_per_s=links["scale_out"][0],
        scale_out_latency_s=links["scale_out"][1], node_overhead_w=overhead, max_nodes=max_nodes,
        scale_up_nvls_fraction=nvls, nics_per_node=nics,
        aliases=tuple(aliases), provenance=prov, origin=origin)


def _count(v: float, fld: str, origin: str) -> int:
    if v != int(v) or v < 1:
        raise SpecError(f"{origin}: {fld} must be a positive integer, got {v!r}")
    return int(v)


def _nic_share(raw: Mapping[str, Any], nics: int | None, dpn: int, per_nic: float,
               origin: str, prov: dict[str, Provenance]) -> float:
    """``[scale_out]`` given per NIC: each device's share, nics × nic_bandwidth / devices per
    node (``bandwidth`` must then be absent: one figure, not two that could disagree)."""
    if "bandwidth" in raw or nics is None:
        raise SpecError(f"{origin}: [scale_out] gives 'bandwidth' (per device) or 'nics' with "
                        "'nic_bandwidth' (per NIC), not both and not 'nic_bandwidth' alone")
    p = prov["scale_out.nic_bandwidth"]
    prov["scale_out.bandwidth"] = Provenance(
        source=p.source, unit="GB/s", value=nics * per_nic / dpn / 1e9,
        derivation=f"{nics} NICs x {per_nic / 1e9:.6g} GB/s / {dpn} devices per node (the "
                   "device's share of its node's NICs)")
    return nics * per_nic / dpn


def device_path(device: str, origin: str) -> str:
    """A cluster's ``device``: a zoo name as it is; a ``.toml`` path relative to the cluster
    file that names it (not to the current directory), absolute paths as they are."""
    if not device.lower().endswith(".toml") or origin.startswith("<"):
        return device
    p = Path(device)
    return str(p if p.is_absolute() else Path(origin).parent / p)


def load_cluster_file(path: str | os.PathLike[str], *, nodes: int = 1) -> Cluster:
    return parse_cluster(load_toml_file(path, "cluster"), origin=str(Path(path)), nodes=nodes)


def __getattr__(name: str) -> Any:
    # the zoo resolvers moved to specs/resolve.py; the old import path keeps working.
    if name in ("cluster", "list_clusters"):
        from . import resolve

        return getattr(resolve, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
