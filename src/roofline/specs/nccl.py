"""NCCL's tuner constants (data/presets/nccl.toml) for a cluster: ``tuner_for(cluster)``.

The table is chosen as NCCL chooses it: the GPU architecture (its compute-capability index:
the LL protocol's one-node ceiling), the intra-node link (NVLink or PCIe: the per-step
latencies, LL128 on or off) and the host CPU (Intel / other or AMD: the multi-node LL ceiling
and the network overhead per ring step). A cluster whose device is not listed under
``[arch]`` (TPUs, other vendors) gets None: its collectives keep the per-step α model.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from .._data import DATA, read_toml
from ..errors import SpecError
from ..ops.nccl import NCCL_ALGORITHMS, NcclTuner
from ..ops.nccl_search import comm_channels, search_nvls, search_ring
from .cluster import Cluster
from .sourced import read_quantity

__all__ = ["tuner_for", "nccl_version", "nvls_search_for"]

_ORIGIN = "data/presets/nccl.toml"
_UNIT = {"us": 1e-6, "1": 1.0, "GB/s": 1e9}


def _values(raw: Any, where: str, sources: dict[str, str], n: int | None = 3) -> tuple[float, ...]:
    """A sourced list ``{ values = [...], unit, source }`` in SI units."""
    if not isinstance(raw, dict) or set(raw) - {"values", "unit", "source", "note"}:
        raise SpecError(f"{_ORIGIN}: {where} must be {{ values = [...], unit = ..., source = ... "
                        f"}}, got {raw!r}")
    if raw.get("source") not in sources:
        raise SpecError(f"{_ORIGIN}: {where} source {raw.get('source')!r} is not in [sources]")
    if raw.get("unit") not in _UNIT:
        raise SpecError(f"{_ORIGIN}: {where} unit {raw.get('unit')!r}; allowed: "
                        f"{', '.join(_UNIT)}")
    vals = raw.get("values")
    if not isinstance(vals, list) or (n is not None and len(vals) != n) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in vals):
        raise SpecError(f"{_ORIGIN}: {where} values must be {n or 'some'} numbers >= 0, "
                        f"got {vals!r}")
    return tuple(float(v) * _UNIT[raw["unit"]] for v in vals)


@lru_cache(maxsize=1)
def _doc() -> dict[str, Any]:
    doc = read_toml(DATA / "presets" / "nccl.toml")
    src = doc.get("sources", {})
    out: dict[str, Any] = {"version": str(doc["version"]), "arch": dict(doc["arch"]),
                           "amd": tuple(doc["amd_hosts"]["clusters"])}
    cited = doc["amd_hosts"].get("source")
    cited = [cited] if isinstance(cited, str) else cited
    if not isinstance(cited, list) or not cited or any(s not in src for s in cited):
        raise SpecError(f"{_ORIGIN}: [amd_hosts] source {cited!r}: needs ids from [sources]")
    for row in ("base", "nvlink", "pci", "net"):
        tbl = doc[row]
        missing = [a for a in NCCL_ALGORITHMS if a not in tbl]
        if missing:
            raise SpecError(f"{_ORIGIN}: [{row}] lacks {', '.join(missing)}")
        out[row] = {a: _values(tbl[a], f"[{row}] {a}", src) for a in NCCL_ALGORITHMS}

    def q(raw: Any, field: str, dim: str) -> float:
        return read_quantity(raw, field=field, dimension=dim, sources=src, origin=_ORIGIN)[0]

    bw = doc["bandwidth"]
    out["bandwidth"] = {k: q(v, f"bandwidth.{k}", "time" if k.startswith("net_") else "ratio")
                        for k, v in bw.items()}
    out["ll_one"] = {k: q(v, f"ll_max.one_node.{k}", "bandwidth")
                     for k, v in doc["ll_max"]["one_node"].items()}
    out["ll_nodes"] = {k: q(v, f"ll_max.nodes.{k}", "bandwidth")
                       for k, v in doc["ll_max"]["nodes"].items()}
    out["tree_correction"] = tuple(_values(doc["tree_correction"][k], f"tree_correction.{k}",
                                           src, None) for k in ("ll", "ll128", "simple"))
    nv = doc["nvls"]
    out["nvls_channels"] = {k: q(v, f"nvls.channels.{k}", "ratio")
                            for k, v in nv["channels"].items()}
    out["nvls"] = {k: q(nv[k], f"nvls.{k}", dim) for k, dim in (
        ("chunk", "bytes"), ("tree_chunk_4_nodes", "bytes"), ("max_heads", "ratio"),
        ("fill_loops", "ratio"))}
    rc = doc["run_channels"]
    out["run_channels"] = {k: q(v, f"run_channels.{k}", "bytes" if k.startswith("threshold")
                                else "ratio") for k, v in rc.items()}
    rp = doc["ring_plateau"]
    out["ring_plateau"] = {k: q(v, f"ring_plateau.{k}", "ratio") for k, v in rp.items()}
    _search(doc, src, out)
    for a in out["arch"].values():
        if a not in out["search_arch"] or a not in out["ll_one"] or a not in out["nvls_channels"] \
                or a not in out["ring_plateau"]:
            raise SpecError(f"{_ORIGIN}: [arch] names {a!r}, which [ll_max.one_node] or "
                            "[nvls.channels] or [ring_plateau] lacks")
    return out


def _search(doc: dict[str, Any], src: dict[str, str], out: dict[str, Any]) -> None:
    """[search] (the speed arrays, GB/s), [search.arch] and [per_channel_caps] into ``out``."""
    sr = doc["search"]
    out["speeds"] = {k: tuple(v / 1e9 for v in _values(sr[k], f"search.{k}", src, None))
                     for k in sr if k.startswith(("intra_", "inter_"))}
    arch: dict[str, dict[str, Any]] = {}
    for a, row in sr["arch"].items():
        keys = {"cc", "speeds", "nvlink_link", "link_spec", "pcie", "source", "note"}
        if not isinstance(row, dict) or set(row) != keys - ({"note"} - set(row)) \
                or row["source"] not in src or f"intra_{row['speeds']}" not in out["speeds"] \
                or not all(isinstance(row[k], int | float) and row[k] > 0
                           for k in ("cc", "nvlink_link", "link_spec", "pcie")):
            raise SpecError(f"{_ORIGIN}: [search.arch] {a} must be {{ cc, speeds (a [search] "
                            f"suffix), nvlink_link, link_spec, pcie > 0, source }}, got {row!r}")
        arch[a] = row
    out["search_arch"] = arch
    pc = doc["per_channel_caps"]
    out["caps"] = {k: _values(v, f"per_channel_caps.{k}", src) for k, v in pc.items()}
    for a in arch:
        if any(f"{c}_{a}" not in out["caps"] for c in ("ring_ll128", "tree", "tree_ll128")):
            raise SpecError(f"{_ORIGIN}: [per_channel_caps] lacks a row for {a!r}")


def _on_nvlink(c: Cluster) -> bool:
    """Whether ``c``'s devices meet on NVLink (a switch or mesh; an NVLink bridge is a pair)."""
    link = c.device.scale_up_link
    return link is not None and "nvlink" in link.name.lower() and "bridge" not in \
        link.name.lower()


def _nvlink_total(row: Mapping[str, Any], up_gbps: float) -> float:
    """A GPU's NVLink bandwidth as NCCL's search counts it, GB/s: its links (the cluster's
    scale-up rate over the per-link spec, at least one) × ``SMxx_NVLINK_BW`` (``nvlink_link``)."""
    return max(1, round(up_gbps / row["link_spec"])) * row["nvlink_link"]


def _replay(arch: str, nvlink: bool, up_gbps: float, out_gbps: float,
            gpus: int, nics: int = 0) -> dict[str, Any]:
    """The replayed ring / tree search (``ops.nccl_search``) for one cluster: NcclTuner's
    search_one / search_nodes / comm_one / comm_nodes / per_channel (empty, the search not
    replayed, off NVLink, without a scale-up bandwidth, or with a NIC slower than the slowest
    speed NCCL's search tries). ``gpus``: GPUs per NCCL node, the NVLink domain (with MNNVL,
    an NVL72 rack, NCCL fuses the clique's topology into one: src/graph/topo.cc
    ncclTopoGetSystem at f44ac759); ``nics``: that node's NICs (0: one per GPU), each at
    ``out_gbps``."""
    d = _doc()
    row = d["search_arch"][arch]
    if not nvlink or up_gbps <= 0 or gpus < 2:
        return {}
    cc, sp = int(row["cc"]), str(row["speeds"])
    if 0 < out_gbps and min(row["pcie"], out_gbps) < min(d["speeds"][f"inter_{sp}"]):
        return {}
    total = _nvlink_total(row, up_gbps)
    one = search_ring(d["speeds"][f"intra_{sp}"], total, cc)
    out: dict[str, Any] = {"search_one": (one[0], one[1] * 1e9),
                           "comm_one": comm_channels(one[0], cc, 1, one[1])}
    if out_gbps > 0:
        nodes = search_ring(d["speeds"][f"inter_{sp}"], total, cc, nics=nics or gpus,
                            nic_path=min(row["pcie"], out_gbps), gpus=gpus, pcie=row["pcie"])
        out |= {"search_nodes": (nodes[0], nodes[1] * 1e9),
                "comm_nodes": comm_channels(nodes[0], cc, 2, nodes[1])}
        out["ring_plateau_channels"] = out["comm_nodes"]
    out["per_channel"] = tuple(d["caps"][f"{c}_{arch}"] for c in ("ring_ll128", "tree",
                                                                   "tree_ll128"))
    return out


def nccl_version() -> str:
    """The NCCL release the tuner constants are copied from."""
    return str(_doc()["version"])


def _row(tbl: dict[str, Any]) -> tuple[tuple[float, float, float], ...]:
    return tuple(tbl[a] for a in NCCL_ALGORITHMS)


@lru_cache(maxsize=64)
def _tuner(arch: str, nvlink: bool, amd: bool, up_gbps: float = 0.0, out_gbps: float = 0.0,
           gpus: int = 0, nics: int = 0) -> NcclTuner:
    d = _doc()
    b = d["bandwidth"]
    host = "amd" if amd else "intel"
    rc = d["run_channels"]
    return NcclTuner(
        version=d["version"], base=_row(d["base"]), intra=_row(d["nvlink" if nvlink else "pci"]),
        net=_row(d["net"]), nvlink=nvlink, ring_ll=b["ring_ll"], ring_ll128=b["ring_ll128"],
        tree=b["tree"], tree_ll=b["tree_ll"], tree_ll128_one_node=b["tree_ll128_one_node"],
        tree_ll128_nodes=b["tree_ll128_nodes"],
        net_overhead_s=b["net_overhead_amd" if amd else "net_overhead"],
        ll_max_one_node=d["ll_one"][arch], ll_max_two_nodes=d["ll_nodes"][f"{host}_two"],
        ll_max_more_nodes=d["ll_nodes"][f"{host}_more"], tree_correction=d["tree_correction"],
        nvls_channels=int(d["nvls_channels"][arch]), nvls_chunk_bytes=d["nvls"]["chunk"],
        nvls_tree_chunk_4_nodes=d["nvls"]["tree_chunk_4_nodes"],
        nvls_max_heads=int(d["nvls"]["max_heads"]), nvls_fill_loops=d["nvls"]["fill_loops"],
        ring_plateau=d["ring_plateau"][arch],
        tree_pattern=b["tree_pattern"] if d["search_arch"][arch]["cc"] >= 90 and nvlink
        else 1.0,
        run_threads=(int(rc["threads_ll"]), int(rc["threads_ll128"]),
                     int(rc["threads_simple"])),
        run_threshold=(rc["threshold_ll"], rc["threshold_ll128"], rc["threshold_simple"]),
        **({"ring_plateau_channels": int(d["ring_plateau"]["channels"])}
           | _replay(arch, nvlink, up_gbps, out_gbps, gpus, nics)))


def tuner_for(c: Cluster, host: str | None = None) -> NcclTuner | None:
    """NCCL's tuner for cluster ``c`` (None: its device is not one NCCL runs on, as listed in
    data/presets/nccl.toml ``[arch]``). NCCL's node is the NVLink domain (an NVL72 rack is one),
    holding ``c.nics`` NICs per cluster node, each at ``c.nic_bytes_per_s``. The tree-pattern
    factor (0.85) is NCCL's from Hopper on NVLink nodes only (``tree_pattern`` in
    data/presets/nccl.toml says why). ``host``: the host CPU's vendor, "amd" or "intel" (NCCL's
    net overhead and multi-node LL ceiling differ), where it is not the cluster's (None: AMD for
    the clusters of ``[amd_hosts]``, Intel / other for the rest)."""
    if host not in (None, "amd", "intel"):
        raise SpecError(f"tuner_for: host {host!r}; allowed: 'amd', 'intel' (or None: the "
                        f"cluster's, data/presets/nccl.toml [amd_hosts])")
    arch = _doc()["arch"].get(c.device.key.split("~", 1)[0])
    if arch is None:
        return None
    amd = c.key in _doc()["amd"] if host is None else host == "amd"
    return _tuner(arch, _on_nvlink(c), amd, c.scale_up_bytes_per_s / 1e9,
                  c.nic_bytes_per_s / 1e9, c.scale_up_domain,
                  c.nics * (c.scale_up_domain // c.devices_per_node))


def nvls_search_for(c: Cluster) -> tuple[tuple[int, float, float], tuple[int, float, float]] | None:
    """NCCL's NVLS graph (``ops.nccl_search.search_nvls``: channels, bwIntra, bwInter in
    GB/s) on one of ``c``'s NVLink domains and across domains (its NICs at their own rate);
    None where NCCL has no NVLS there (no NVLS fraction on the cluster, off NVLink, before
    Hopper, or a cluster NCCL does not run on). Compared on docs/validation/collectives.md,
    not priced (the NVLS rate stays the cluster's measured fraction)."""
    arch = _doc()["arch"].get(c.device.key.split("~", 1)[0])
    if arch is None or not c.scale_up_nvls_fraction:
        return None
    d = _doc()
    row = d["search_arch"][arch]
    if int(row["cc"]) < 90 or not _on_nvlink(c):
        return None
    sp = str(row["speeds"])
    total = _nvlink_total(row, c.scale_up_bytes_per_s / 1e9)
    gpus = c.scale_up_domain
    one = search_nvls(d["speeds"][f"intra_{sp}"], total, gpus)
    nodes = search_nvls(d["speeds"][f"inter_{sp}"], total, gpus,
                        nics=c.nics * (gpus // c.devices_per_node),
                        nic_path=min(row["pcie"], c.nic_bytes_per_s / 1e9))
    return one, nodes
