"""The collectives page's NIC figures (docs/validation/collectives.md): nodes with fewer NICs
than GPUs judged on AWS p4d, and NCCL's replayed NVLS graph search compared with the measured
NVLS rates (``roofline.validation.collectives.collectives_figures`` merges them)."""

from __future__ import annotations

from dataclasses import replace

from ..ops import collectives as coll
from ..ops.xp import SCALAR
from . import collectives as C

__all__ = ["nic_figures", "p5_figures", "nvls_search_figures"]


def nic_figures() -> dict[str, str]:
    """The AWS p4d rows (4 NICs for 8 GPUs, nccl #527): ours (``coll.p4d.<nodes>.err``), the
    same with a NIC per GPU at the NIC's own rate (``.naive``: the per-GPU pricing the NIC
    count replaces), and the 2-node row with the tree at the ring's bandwidth (``.ringtree``)."""
    from ..ops.nccl import nccl_best
    from ..scenarios.training.factors import cluster_links, training_factors
    from .holdout import fmt_pct

    out: dict[str, str] = {}
    for c in C.collective_cases():
        if c["cluster"] != "aws-p4d":
            continue
        cl = C.case_cluster(c)
        nodes = c["ranks"] // cl.devices_per_node
        out[f"coll.p4d.{nodes}.err"] = fmt_pct(C.predict(c) / c.value_si - 1, digits=1)
        # one NIC per GPU (nics_per_node None), each at the real NIC's rate
        naive = replace(cl, scale_out_bytes_per_s=cl.nic_bytes_per_s, nics_per_node=None)
        links = C.case_links(c)
        o, ring, _, _, tree = coll._nccl_bws(float(c["ranks"]), 1.0, links)
        nl = cluster_links(naive, training_factors(naive.device.kind, naive.device.key))
        t_naive = coll.group_all_reduce(float(c["bytes"]), c["ranks"], 1, nl, SCALAR)
        bus = coll.bus_factor("all_reduce", c["ranks"]) * c["bytes"]
        out[f"coll.p4d.{nodes}.naive"] = fmt_pct(bus / t_naive / c.value_si - 1)
        if o == 2 and links.nccl is not None:
            t = nccl_best("all_reduce", float(c["bytes"]), float(c["ranks"]), o, ring, links.nccl,
                          SCALAR)
            out[f"coll.p4d.{nodes}.ringtree"] = fmt_pct(bus / t / c.value_si - 1, digits=1)
            out[f"coll.p4d.{nodes}.treebw"] = f"{tree / ring:.1f}"
    return out


def p5_figures() -> dict[str, str]:
    """The AWS p5 rows (32 NICs for 8 GPUs, p5bench, 8 GiB): ours on 2 and 32 nodes
    (``coll.p5.<nodes>.err``), the span on 4 to 16 (``coll.p5.mid.err``), and the most a host
    CPU of the other vendor would move a row (``coll.p5.host``: NCCL's Intel constants; the
    p5's hosts are AMD, data/presets/nccl.toml [amd_hosts])."""
    from .holdout import fmt_pct, span_pct

    rows = {c["ranks"] // C.case_cluster(c).devices_per_node: c for c in C.collective_cases()
            if c["cluster"] == "aws-p5"}
    err = {n: C.predict(c) / c.value_si - 1 for n, c in rows.items()}
    host = max(abs(C.predict(replace(c, scenario={**c.scenario, "host": "intel"}))
                   / C.predict(c) - 1) for c in rows.values())
    return {"coll.p5.2.err": fmt_pct(err[2], digits=1),
            "coll.p5.32.err": fmt_pct(err[32], digits=1),
            "coll.p5.mid.err": span_pct([e for n, e in err.items() if 2 < n < 32]),
            "coll.p5.host": fmt_pct(host, digits=1, sign=False)}


def nvls_search_figures() -> dict[str, str]:
    """NCCL's own NVLS / NVLSTree rate from its replayed NVLS graph (``specs.nccl.
    nvls_search_for``, ``ops.nccl_search.nvls_tuner_bw``) against the measured peak algbw of
    three one-domain rows (``coll.nvlss.<name>``: its GB/s and error), and the 4-node 16 MiB
    row's pick with NCCL's NVLSTree rate instead of ours (``coll.nvlss.n4``)."""
    from ..ops.nccl import nccl_choice
    from ..ops.nccl_search import nvls_tuner_bw
    from ..specs.nccl import nvls_search_for
    from .holdout import fmt_pct

    by_id = {c.id: c for c in C.collective_cases()}
    out: dict[str, str] = {}
    for name, cid in (("h100", "H100 x8 all-reduce (NCCL default: NVLS)"),
                      ("b300", "B300 x8 all-reduce NVLS on"),
                      ("rack", "GB200 NVL72 x72 all-reduce 8 GiB")):
        c = by_id[cid]
        found = nvls_search_for(C.case_cluster(c))
        assert found is not None
        est = nvls_tuner_bw(found[0], 1)
        alg = c.value_si / coll.bus_factor("all_reduce", c["ranks"]) / 1e9  # measured algbw
        out[f"coll.nvlss.{name}"] = f"{est:.0f}"
        out[f"coll.nvlss.{name}.meas"] = f"{alg:.0f}"
        out[f"coll.nvlss.{name}.err"] = fmt_pct(est / alg - 1)
    c = by_id[C.NAMED_CASES["n4_16m"]]
    links = C.case_links(c)
    found = nvls_search_for(C.case_cluster(c))
    assert found is not None and links.nccl is not None
    o, ring, nv, nvt, tree = coll._nccl_bws(float(c["ranks"]), 1.0, links)
    theirs = nvls_tuner_bw(found[1], int(o)) * 1e9
    a, pr, _ = nccl_choice("all_reduce", float(c["bytes"]), c["ranks"], int(o), ring,
                                links.nccl, nv, theirs, tree)
    out["coll.nvlss.n4.ch"] = f"{found[1][0]} × min({found[1][1]:g}, {found[1][2]:g} / 2)"
    out["coll.nvlss.n4.theirs"] = f"{theirs / 1e9:.0f}"
    out["coll.nvlss.n4.ours"] = f"{nvt / 1e9:.0f}"
    out["coll.nvlss.n4.pick"] = f"{a} {pr}"
    return out
