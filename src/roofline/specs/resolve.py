"""The zoo resolvers: ``hardware(spec)`` and ``cluster(spec)`` turn a zoo name or alias
(case-insensitive), a TOML path or a spec object into a frozen ``Hardware`` / ``Cluster``; the
zoo files are read once, on first use. (``model(spec)`` is ``graphs/resolve.py``.)
"""

from __future__ import annotations

import os
from functools import lru_cache

from .. import _args as A
from .._data import DATA, alias_index, zoo_key
from ..errors import SpecError
from .cluster import Cluster, load_cluster_file
from .hardware import EXECUTIONS, Hardware, load_hardware_file

__all__ = ["hardware", "list_hardware", "cluster", "list_clusters"]


@lru_cache(maxsize=1)
def _zoo() -> tuple[dict[str, Hardware], dict[str, str]]:
    """Load every zoo file once: key -> Hardware, normalised alias -> key."""
    by_key: dict[str, Hardware] = {}
    root = DATA / "hardware"
    paths = sorted(root.rglob("*.toml"))
    for path in paths:
        hw = load_hardware_file(path)
        rel = path.relative_to(root)
        if hw.key != path.stem:
            raise SpecError(f"hardware zoo file {rel}: key {hw.key!r} must equal the file name")
        if hw.key in by_key:
            raise SpecError(f"hardware zoo: duplicate key {hw.key!r} ({rel})")
        by_key[hw.key] = hw
    alias = alias_index(((h.key, (h.name, *h.aliases)) for h in by_key.values()), "hardware")
    return by_key, alias


def list_hardware() -> list[str]:
    """Zoo keys, sorted."""
    return sorted(_zoo()[0])


@A.checked(spec=A.anything)
def hardware(spec: str | os.PathLike[str] | Hardware) -> Hardware:
    """A Hardware from a zoo name or alias (case-insensitive), a TOML path, or a Hardware."""
    if isinstance(spec, Hardware):
        return spec
    hit = _BY_NAME.get(spec) if isinstance(spec, str) else None
    if hit is not None:
        return hit
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and spec.lower().endswith(".toml")):
        return load_hardware_file(spec)
    if not isinstance(spec, str):
        raise SpecError(f"hardware must be a zoo name, a .toml path or a Hardware, got "
                        f"{type(spec).__name__}")
    if ":" in spec:  # "cerebras-cs3:weight-streaming": a zoo part in another execution mode
        base, _, mode = spec.rpartition(":")
        mode = mode.strip().lower().replace("-", "_")
        if mode not in EXECUTIONS:
            raise SpecError(f"hardware {spec!r}: execution mode {mode!r} after ':'; allowed: "
                            f"{', '.join(EXECUTIONS)}")
        hw = hardware(base).with_execution(mode)
        _BY_NAME[spec] = hw
        return hw
    by_key, alias = _zoo()
    key = zoo_key(spec, "hardware", alias,
                  [n for h in by_key.values() for n in (h.key, *h.aliases)])
    _BY_NAME[spec] = by_key[key]
    return by_key[key]


_BY_NAME: dict[str, Hardware] = {}  # exact strings already resolved (zoo entries are immutable)


@lru_cache(maxsize=1)
def _cluster_zoo() -> tuple[dict[str, Cluster], dict[str, str]]:
    by_key: dict[str, Cluster] = {}
    for path in sorted((DATA / "clusters").glob("*.toml")):
        c = load_cluster_file(path)
        if c.key != path.stem:
            raise SpecError(f"cluster zoo file {path.name}: key {c.key!r} must equal the file name")
        by_key[c.key] = c
    return by_key, alias_index(((c.key, (c.name, *c.aliases)) for c in by_key.values()),
                               "cluster")


def list_clusters() -> list[str]:
    """Cluster zoo keys, sorted."""
    return sorted(_cluster_zoo()[0])


@A.checked(spec=A.anything, nodes=A.optional(A.count(1, A.MAX_DEVICES)))
def cluster(spec: str | os.PathLike[str] | Cluster, nodes: int | None = None) -> Cluster:
    """A Cluster from a zoo name/alias (case-insensitive), a TOML path, or a Cluster.

    ``nodes`` sets the number of nodes (default 1 for a zoo/file cluster; unchanged for a
    Cluster passed in).
    """
    if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1):
        raise SpecError(f"nodes must be a positive integer, got {nodes!r}")
    if isinstance(spec, Cluster):
        return spec if nodes is None else spec.with_nodes(nodes)
    if isinstance(spec, Hardware):
        return single_device(spec, nodes)
    if isinstance(spec, os.PathLike) or (isinstance(spec, str) and spec.lower().endswith(".toml")):
        from .._data import load_toml_file

        if "peak" in load_toml_file(spec, "cluster"):  # a hardware spec (e.g. `roofline measure`)
            return single_device(load_hardware_file(spec), nodes)
        return load_cluster_file(spec, nodes=nodes or 1)
    if not isinstance(spec, str):
        raise SpecError(f"cluster must be a zoo name, a .toml path or a Cluster, got "
                        f"{type(spec).__name__}")
    if ":" in spec:  # "cerebras-cs3:weight-streaming": one zoo part in an execution mode
        return single_device(hardware(spec), nodes)
    by_key, alias = _cluster_zoo()
    base = by_key[zoo_key(spec, "cluster", alias,
                          [n for c in by_key.values() for n in (c.key, *c.aliases)])]
    return base.with_nodes(nodes or 1)


def single_device(hw: Hardware, nodes: int | None = None) -> Cluster:
    """One ``hw`` device as a cluster (a measured CPU, one GPU): no collectives run on it, so
    its link fields are placeholders (the device's memory bandwidth, zero latency) that no
    formula reads at dp = tp = pp = 1."""
    if nodes not in (None, 1):
        raise SpecError(f"nodes={nodes}: {hw.name} is one device (a hardware spec); for "
                        "several, describe their links in a cluster TOML")
    bw = hw.memory_bytes_per_s
    return Cluster(key=hw.key, name=f"one {hw.name}", device=hw, nodes=1, devices_per_node=1,
                   scale_up_domain=1, scale_up_bytes_per_s=bw, scale_up_latency_s=0.0,
                   scale_out_bytes_per_s=bw, scale_out_latency_s=0.0, origin=hw.origin)
