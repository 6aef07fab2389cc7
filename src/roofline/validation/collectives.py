"""The collectives model against published NCCL bus bandwidths
(docs/validation/collectives.md).

Cases: src/roofline/data/validation/collectives.toml (nccl-tests ``all_reduce_perf`` and
``reduce_scatter_perf`` on 8-GPU H100 / H200 / H800 / B300 NVSwitch nodes and a full GB200 NVL72
rack, the peak at large messages and a message-size sweep). Each is priced by training's
collectives (``ops.collectives`` on ``scenarios.training.factors.cluster_links``, the ``default``
preset's link efficiencies): ``algorithm="auto"`` takes the faster of the ring and NVLS as NCCL
does, ``"nvls"`` / ``"ring"`` the one the run forced; a reduce-scatter / all-gather is
``group_reduce_scatter`` (the ring, as NCCL runs it) or, forced, ``nvls_one_pass``. Our busbw is
nccl-tests' ``bus_factor · n / t``.

Fitted here: the NVLS fraction of the cluster specs (``[scale_up] nvls``: NVLS algorithm
bandwidth / link bandwidth per direction), one per NVLink generation — ``nvls`` for NVLink 4
(dgx-h100, hgx-h200), ``nvls5`` for NVLink 5 (gb200-nvl72) — as the median of measured algbw /
link over the NVLS cases of that generation at 4 GiB and more (the peak; the smaller sizes are
the sweep, judged, not fitted). The leave-one-source-out report says how each fraction does on
the sources it was not fitted on. The forced-ring cases judge the training preset's ring
efficiency (fitted on A100 training runs, data/presets/training.toml), not fitted here.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import lru_cache, partial

from ..ops import collectives as coll
from ..ops.xp import SCALAR
from .cases import Case, load_cases
from .holdout import FitReport, Refit, golden_bracket, holdout_tables, leave_one_source_out

__all__ = ["collective_cases", "predict", "predict_time", "predict_busbw", "collective_errors",
           "fit_nvls", "shipped_nvls", "collectives_holdout", "collectives_case_table",
           "collectives_holdout_table", "collectives_ramp_table", "collectives_figures",
           "collectives_ring_tree_table", "collectives_search_table", "search_busbw",
           "ring_tree_alternative", "case_cluster", "case_links", "NAMED_CASES"]

PARAMS = ("nvls", "nvls5", "nvls_fill")
#: the NVLS fractions (per NVLink generation) among PARAMS; the rest is the tuner's NVLS fill
FRACTIONS = ("nvls", "nvls5")
#: which fraction a cluster's NVLS rate is (its NVLink generation)
PARAM_OF = {"dgx-h100": "nvls", "hgx-h200": "nvls", "gb200-nvl72": "nvls5"}
#: the fit's cases: the peak (nccl-tests' busbw flattens out from here)
PEAK_BYTES = 2**32


def collective_cases() -> tuple[Case, ...]:
    return load_cases("collectives").cases


def _collective(case: Case) -> str:
    return str(case.get("collective", "all_reduce"))


def _nvls_cases(cases: Sequence[Case]) -> list[Case]:
    """The all-reduce cases NVLS ran (forced, or NCCL's default on these NVSwitch nodes)."""
    return [c for c in cases if c["algorithm"] in ("nvls", "auto")
            and _collective(c) == "all_reduce"]


def _fit_cases(cases: Sequence[Case]) -> list[Case]:
    """The NVLS fraction's cases: the peak, inside one NVSwitch domain."""
    return [c for c in _nvls_cases(cases) if c["bytes"] >= PEAK_BYTES
            and c["ranks"] <= _cluster(c["cluster"], None, c["ranks"]).scale_up_domain]


@lru_cache(maxsize=32)
def _cluster(key: str, scale_up_gbps: float | None, ranks: int = 1,
             scale_out_gbps: float | None = None, nics: int | None = None):
    """The cluster with enough nodes for ``ranks`` (an NVL72 tray holds 4 of its 72), with the
    case's link bandwidths (``scale_out_gbps``: each GPU's share of its node's NICs) and NIC
    count where they differ from the cluster file's."""
    from ..specs.resolve import cluster

    c = cluster(key)
    c = cluster(key, nodes=-(-ranks // c.devices_per_node))
    if scale_up_gbps is not None:
        c = replace(c, scale_up_bytes_per_s=scale_up_gbps * 1e9)
    if scale_out_gbps is not None:
        c = replace(c, scale_out_bytes_per_s=scale_out_gbps * 1e9)
    if nics is not None:
        c = replace(c, nics_per_node=nics)
    return c


def case_cluster(case: Case):
    """The cluster a collective case ran on: its zoo cluster with the case's scale-up and
    scale-out rates, rank count and NICs per node where it states them."""
    return _cluster(case["cluster"], case.get("scale_up_gbps"), case["ranks"],
                    case.get("scale_out_gbps"), case.get("nics"))


def case_links(case: Case, nvls: Mapping[str, float] | float | None = None,
               tuner: bool = True) -> coll.Links:
    """The case's links as training prices them, with the factor values given (``predict``)."""
    from ..scenarios.training.factors import cluster_links, training_factors

    c = case_cluster(case)
    fill = nvls.get("nvls_fill") if isinstance(nvls, Mapping) else None
    plateau = nvls.get("ring_plateau") if isinstance(nvls, Mapping) else None
    search = nvls.get("search") if isinstance(nvls, Mapping) else None
    out_e = nvls.get("scale_out") if isinstance(nvls, Mapping) else None
    if isinstance(nvls, Mapping):
        key = PARAM_OF.get(case["cluster"])
        nvls = nvls[key] if key else None
    if case.get("nvls_disabled"):
        nvls = 0.0
    if nvls is not None:
        c = replace(c, scale_up_nvls_fraction=nvls)
    f = training_factors(c.device.kind, c.device.key)
    if out_e is not None:  # a scale-out efficiency other than training's (collectives_fabric)
        f = replace(f, scale_out_efficiency=out_e)
    links = cluster_links(c, f)
    if not tuner:
        return replace(links, nccl=None)
    if case.get("host") is not None and links.nccl is not None:  # the source's host CPU
        from ..specs.nccl import tuner_for

        links = replace(links, nccl=tuner_for(c, case["host"]))
    if fill is not None and links.nccl is not None:
        links = replace(links, nccl=replace(links.nccl, nvls_fill_loops=fill))
    if plateau is not None and links.nccl is not None:
        links = replace(links, nccl=replace(links.nccl, ring_plateau=plateau))
    if search == 0.0 and links.nccl is not None:  # the replayed search off: the model before
        links = replace(links, nccl=replace(links.nccl, per_channel=(), ring_plateau_channels=64,
                                            tree_pattern=1.0))
    return links


def predict_time(case: Case, nvls: Mapping[str, float] | float | None = None,
                 tuner: bool = True) -> float:
    """Our seconds for ``case``'s collective; ``nvls``: the factors to use (by ``PARAMS``
    name: the NVLS fractions and the tuner's NVLS fill, or one number for this case's NVLS
    fraction; None: the shipped ones; ``scale_out``: the NIC efficiency instead of training's,
    ``validation.collectives_fabric``); ``tuner``: False prices it with the cluster's per-step
    α instead of NCCL's tuner latencies (the model before them, the page's "per-step α"
    column)."""
    links = case_links(case, nvls, tuner)
    n, p, algo, coll_ = float(case["bytes"]), case["ranks"], case["algorithm"], _collective(case)
    if coll_ != "all_reduce":
        if algo == "nvls" and links.nccl is not None:
            t = coll.group_nccl(coll_, n, p, 1, links, SCALAR, ("nvls",))
        elif algo == "nvls":
            t = coll.nvls_one_pass(n, p, links.nvls_bw, links.up_alpha)
        else:  # the ring, NCCL's choice (ops.collectives: group_reduce_scatter)
            half = coll.group_reduce_scatter if coll_ == "reduce_scatter" else \
                coll.group_all_gather
            t = half(n, p, 1, links, SCALAR)
    elif algo == "ring":
        t = coll.group_ring_all_reduce(n, p, 1, links, SCALAR)
    elif algo == "nvls":
        t = coll.group_nvls_all_reduce(n, p, 1, links, SCALAR)
    else:
        t = coll.group_all_reduce(n, p, 1, links, SCALAR)
    return float(t)


def predict_busbw(case: Case, nvls: Mapping[str, float] | float | None = None,
                  tuner: bool = True) -> float:
    """Our busbw (bytes/s) for ``case`` (nccl-tests' bus_factor · n / t)."""
    return float(coll.bus_factor(_collective(case), case["ranks"]) * case["bytes"]
                 / predict_time(case, nvls, tuner))


def predict(case: Case, nvls: Mapping[str, float] | float | None = None,
            tuner: bool = True) -> float:
    """Ours in the case's metric, SI: busbw (bytes/s) or time (s)."""
    if case.metric == "time":
        return predict_time(case, nvls, tuner)
    return predict_busbw(case, nvls, tuner)


def _log_errors(values: Mapping[str, float] | None, cases: Sequence[Case]) -> list[float]:
    return [math.log(predict(c, values) / c.value_si) for c in cases]


def shipped_nvls() -> dict[str, float]:
    """The factors the data ship, by ``PARAMS`` name: the cluster specs' NVLS fractions and
    the tuner's NVLS fill (data/presets/nccl.toml ``[nvls] fill_loops``)."""
    from ..specs.nccl import tuner_for
    from ..specs.resolve import cluster

    t = tuner_for(cluster("dgx-h100"))
    return {"nvls": cluster("dgx-h100").scale_up_nvls_fraction,
            "nvls5": cluster("gb200-nvl72").scale_up_nvls_fraction,
            "nvls_fill": t.nvls_fill_loops if t is not None else 0.0}


def _fill_bytes(case: Case, fill: float) -> float:
    """The NVLS pipeline's fill bytes of a peak (one-domain) case with ``fill`` loops."""
    from ..ops.nccl import nvls_fill_bytes

    t = case_links(case).nccl
    if t is None:
        return 0.0
    return float(nvls_fill_bytes("nvls", float(case["bytes"]), float(case["ranks"]), 1.0,
                                 replace(t, nvls_fill_loops=fill), SCALAR))


def _ramp_cases(cases: Sequence[Case]) -> list[Case]:
    """The fill's cases: the NVLS / NVLSTree all-reduces below the peak whose number one loop
    of fill moves by more than 0.1 % (NCCL's tuner picks NVLS or NVLSTree for them in ours)."""
    out = []
    for c in _nvls_cases(cases):
        if c["bytes"] >= PEAK_BYTES or c.get("nvls_disabled"):
            continue
        base = shipped_nvls()
        moved = predict(c, base | {"nvls_fill": 1.0}) / predict(c, base | {"nvls_fill": 0.0})
        if abs(moved - 1) > 1e-3:  # more than rounding: the fill is a part of the number
            out.append(c)
    return out


#: the range the fill is searched in (loop-times) and the search's resolution
FILL_RANGE = (0.0, 8.0)


def _fill_sse(d: float, at: Mapping[str, float], ramp: Sequence[Case]) -> float:
    """The fill fit's objective: the sum of squared log errors over ``ramp`` with fill ``d``."""
    return sum(e * e for e in _log_errors({**at, "nvls_fill": d}, ramp))


def fit_nvls(cases: Sequence[Case]) -> Refit:
    """The NVLS fractions and the NVLS fill. Fractions: per NVLink generation, the median of
    (n + the fill's bytes) / measured time / link bandwidth over the peak NVLS all-reduce cases
    (the run's algorithm bandwidth without its fill); a generation without such cases keeps its
    shipped value. Fill: the loop-times that minimise the RMS log error over the mid-size NVLS
    / NVLSTree cases (golden section on ``FILL_RANGE``); none left: the shipped value. Twice,
    each with the other's latest values."""
    shipped = shipped_nvls()
    vals = dict(shipped)
    ramp = [c for c in cases if c.id in {r.id for r in _ramp_cases(cases)}]
    kept = [k for k in FRACTIONS if not any(PARAM_OF[c["cluster"]] == k
                                           for c in _fit_cases(cases))]
    kept += [] if ramp else ["nvls_fill"]
    for _ in range(2):
        r: dict[str, list[float]] = {k: [] for k in FRACTIONS}
        for c in _fit_cases(cases):
            cl = case_cluster(c)
            t_meas = coll.bus_factor("all_reduce", c["ranks"]) * c["bytes"] / c.value_si
            algbw = (c["bytes"] + _fill_bytes(c, vals["nvls_fill"])) / t_meas
            r[PARAM_OF[c["cluster"]]].append(algbw / cl.scale_up_bytes_per_s)
        vals |= {k: round(statistics.median(v), 3) for k, v in r.items() if v}
        if ramp:
            lo, hi = golden_bracket(partial(_fill_sse, at=dict(vals), ramp=ramp), *FILL_RANGE,
                                    tol=0.01)
            vals["nvls_fill"] = round((lo + hi) / 2, 2)
    return Refit(values=vals, note=f"no case constrains {', '.join(kept)}: shipped value kept"
                 if kept else "")


def collective_errors() -> list[tuple[Case, float, float]]:
    """(case, ours in the case's metric (SI), ours / measured − 1) for every case."""
    out = []
    for c in collective_cases():
        b = predict(c)
        out.append((c, b, b / c.value_si - 1))
    return out


@lru_cache(maxsize=1)
def collectives_holdout() -> FitReport:
    """In-sample and leave-one-source-out error of the NVLS fractions and the NVLS fill, on the
    NVLS all-reduce cases at the peak (4 GiB and more) and the mid-size NVLS / NVLSTree
    all-reduce cases below it."""
    every = collective_cases()
    ramp = {c.id for c in _ramp_cases(every)}
    peak = {c.id for c in _fit_cases(every)}
    cs = [c for c in every if c.id in ramp or c.id in peak]
    return leave_one_source_out("collectives nvls", cs, PARAMS, shipped_nvls(), fit_nvls,
                                _log_errors)


def _previous(case: Case) -> float:
    """Ours in the case's metric with the model this page started from (issue 18 item 5's
    first step): NVLS inside a domain only, and across domains the ring's three phases one
    after the other (reduce-scatter + ring all-reduce of n/i across + all-gather), no tree."""
    from ..scenarios.training.factors import cluster_links, training_factors

    c = case_cluster(case)
    if case.get("nvls_disabled") or case["algorithm"] == "ring":
        c = replace(c, scale_up_nvls_fraction=0.0)
    lk = replace(cluster_links(c, training_factors(c.device.kind, c.device.key)), nccl=None)
    n, p = float(case["bytes"]), case["ranks"]
    i = min(p, lk.domain)
    o = p // i
    ring_in = 2 * (i - 1) * lk.up_alpha + 2 * (i - 1) / i * n / lk.up_bw
    inside = min(ring_in, 2 * lk.up_alpha + n / lk.nvls_bw) if lk.nvls_bw else ring_in
    across = 2 * (o - 1) * lk.out_alpha + 2 * (o - 1) / o * (n / i) / lk.out_bw
    t = (inside + across) * (0.5 if _collective(case) != "all_reduce" else 1.0)
    if _collective(case) != "all_reduce" and case["algorithm"] == "nvls":
        t = predict_time(case, tuner=False)
    if case.metric == "time":
        return t
    return float(coll.bus_factor(_collective(case), p) * n / t)


def _size(n: int) -> str:
    if n >= 2**30:
        return f"{n / 2**30:g} GiB"
    if n >= 2**20:
        return f"{n / 2**20:g} MiB"
    return f"{n / 2**10:g} KiB" if n >= 2**10 else f"{n} B"


def _fmt(c: Case, v_si: float) -> str:
    return f"{v_si * 1e6:.1f} µs" if c.metric == "time" else f"{v_si / 1e9:.0f} GB/s"


def collectives_case_table() -> str:
    """The markdown case table of docs/validation/collectives.md (generated; a test checks it)."""
    rows = ["| case | ranks | size | algorithm | published | ours | error "
            "| per-step α | error | first model | error | source |",
            "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c, b, e in collective_errors():
        r = _previous(c)
        a = predict(c, tuner=False)
        algo = c["algorithm"] + (" (NVLS off)" if c.get("nvls_disabled") else "")
        rows.append(f"| {c.id} | {c['ranks']} | {_size(c['bytes'])} | {algo} | "
                    f"{c.measured:g} {c.unit} | {_fmt(c, b)} | {e:+.1%} | {_fmt(c, a)} | "
                    f"{a / c.value_si - 1:+.1%} | {_fmt(c, r)} | "
                    f"{r / c.value_si - 1:+.1%} | {c.source} |")
    return "\n".join(rows)


def collectives_holdout_table(rep: FitReport | None = None) -> str:
    """The markdown hold-out tables of docs/validation/collectives.md."""
    return holdout_tables(collectives_holdout() if rep is None else rep,
                          lambda k, v: f"{v:.3f}")


def collectives_ramp_table(rep: FitReport | None = None) -> str:
    """The mid-size table of docs/validation/collectives.md: each case the NVLS fill moves,
    without the fill, with the shipped fill (2 loops, the kernel's stages) and with the fill
    fitted without the case's source (leave-one-source-out)."""
    rep = collectives_holdout() if rep is None else rep
    without = {p.source: p.fitted_without.values for p in rep.per_source}
    ship = shipped_nvls()
    rows = ["| case | size | published | no fill | error | ours (fill 2) | error "
            "| fill fitted without the source | held out | error | source |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in _ramp_cases(collective_cases()):
        z, o, w = (predict(c, v) for v in (ship | {"nvls_fill": 0.0}, ship, without[c.source]))
        rows.append(f"| {c.id} | {_size(c['bytes'])} | {c.measured:g} {c.unit} | {_fmt(c, z)} | "
                    f"{z / c.value_si - 1:+.1%} | {_fmt(c, o)} | {o / c.value_si - 1:+.1%} | "
                    f"{without[c.source]['nvls_fill']:.2f} | {_fmt(c, w)} | "
                    f"{w / c.value_si - 1:+.1%} | {c.source} |")
    return "\n".join(rows)


#: the cases docs/validation/collectives.md's prose names, by the short key of their figures
NAMED_CASES = {"x4": "H100 x4 NVLS", "b300": "B300 x8 all-reduce NVLS on",
               "rack512": "GB200 NVL72 x72 all-reduce 512 MiB",
               "n2_16m": "H100 x16 (2 nodes) all-reduce 16 MiB",
               "n2_256m": "H100 x16 (2 nodes) all-reduce 256 MiB",
               "n2_64b": "H100 x16 (2 nodes) all-reduce 64 B",
               "n4_64b": "H100 x32 (4 nodes) all-reduce 64 B",
               "n2_64k": "H100 x16 (2 nodes) all-reduce 64 KiB",
               "n4_64k": "H100 x32 (4 nodes) all-reduce 64 KiB",
               "n8_1m": "H100 x64 (8 nodes) all-reduce 1 MiB",
               "n4_16m": "H100 x32 (4 nodes) all-reduce 16 MiB",
               "n2_nvls": "H100 x16 (2 nodes) all-reduce, NVLS on",
               "rs4": "H100 x32 (4 nodes) reduce-scatter",
               "rs128": "H100 x1024 (128 nodes) reduce-scatter",
               "ag32": "H100 x256 (32 nodes) all-gather 2 GiB",
               "h20": "H20 x16 (2 nodes) NVLS-tree all-reduce, 8 B",
               "a100": "A100 x256 (32 nodes, 4 HDR) all-reduce, 8 B"}


def _ring_tree_cases() -> list[tuple[Case, str, str]]:
    """The cases below 256 MiB whose call NCCL's tuner (ours) runs as a ring or a tree, with
    the (algorithm, protocol) it picks."""
    out = []
    for c in collective_cases():
        links = case_links(c)
        if c["bytes"] >= 2**28 or c["algorithm"] != "auto" or links.nccl is None:
            continue
        a, pr, _ = coll.group_nccl_choice(_collective(c), float(c["bytes"]), c["ranks"], 1,
                                          links)
        if a in ("ring", "tree"):
            out.append((c, a, pr))
    return out


def collectives_ring_tree_table() -> str:
    """The ring / tree mid-size table of docs/validation/collectives.md: each case below
    256 MiB NCCL's tuner (ours) runs as a ring or a tree, with the channels NCCL's run takes
    at that size of the communicator's (``ops.nccl.nccl_channels``; the communicator's from the
    replayed topology search, ``ops.nccl_search``), the tuner latency's share of our time, our
    error, and the error before the replayed search (no per-channel caps, no tree-pattern
    factor, the plateau at MAXCHANNELS)."""
    from ..ops.nccl import nccl_channels, nccl_latency

    rows = ["| case | size | NCCL's pick (ours) | channels run at this size, of the "
            "communicator's | latency share | published | ours | error | before the replayed "
            "search | source |",
            "|---|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    for c, a, pr in _ring_tree_cases():
        links = case_links(c)
        t_ = links.nccl
        assert t_ is not None  # _ring_tree_cases keeps the cases NCCL's tuner prices
        o = coll.group_split(float(c["ranks"]), 1.0, links.domain, SCALAR)[1]
        comm = t_.comm_nodes if o > 1 else t_.comm_one
        ch = nccl_channels(a, pr, float(c["bytes"]), c["ranks"], comm or 64, t_)
        lat = float(nccl_latency(_collective(c), a, pr, c["ranks"], o, t_, SCALAR))
        t = predict_time(c)
        ours = predict(c)
        before = predict(c, shipped_nvls() | {"search": 0.0})
        rows.append(f"| {c.id} | {_size(c['bytes'])} | {a} / {pr} | "
                    f"{ch} of {comm or 'at most 64'} | {lat / t:.0%} | {c.measured:g} {c.unit} | "
                    f"{_fmt(c, ours)} | {ours / c.value_si - 1:+.1%} | "
                    f"{before / c.value_si - 1:+.1%} | {c.source} |")
    return "\n".join(rows)


def _ring_peak_cases() -> list[Case]:
    """The cases NCCL ran as a ring at 128 MiB and more: forced, NVLS off, or a reduce-scatter /
    all-gather (NCCL's ring on these nodes)."""
    return [c for c in collective_cases() if c["bytes"] >= 2**27 and (
        c["algorithm"] == "ring" or c.get("nvls_disabled") or _collective(c) != "all_reduce")]


def search_busbw(case: Case) -> float:
    """nccl-tests' busbw for ``case`` with NCCL's *own* ring bandwidth: the replayed topology
    search's channels × per-channel speed (``ops.nccl_search``; what ``ncclTopoTuneModel``
    takes as the ring's Simple bus bandwidth) and the tuner's latency, instead of the link
    times training's fitted efficiency. Nothing fitted."""
    from ..ops.nccl import nccl_time

    links = case_links(case)
    t = links.nccl
    if t is None or not t.search_one[0]:
        raise ValueError(f"{case.id}: no replayed search for its cluster")
    o = coll.group_split(float(case["ranks"]), 1.0, links.domain, SCALAR)[1]
    ch, speed = t.search_nodes if o > 1 else t.search_one
    sec = float(nccl_time(_collective(case), "ring", "Simple", float(case["bytes"]),
                          case["ranks"], o, ch * speed, t, SCALAR))
    return coll.bus_factor(_collective(case), case["ranks"]) * case["bytes"] / sec


def collectives_search_table() -> str:
    """docs/validation/collectives.md's comparison of the ring's bandwidth: ours (the link
    times training's efficiency) against NCCL's own (``search_busbw``), on the ring cases."""
    rows = ["| case | ranks | size | published | ours | error | NCCL's ring bandwidth "
            "(channels × GB/s) | with it | error | source |",
            "|---|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for c in _ring_peak_cases():
        links = case_links(c)
        assert links.nccl is not None
        o = coll.group_split(float(c["ranks"]), 1.0, links.domain, SCALAR)[1]
        ch, speed = links.nccl.search_nodes if o > 1 else links.nccl.search_one
        ours, nccl = predict(c), search_busbw(c)
        rows.append(f"| {c.id} | {c['ranks']} | {_size(c['bytes'])} | {c.measured:g} {c.unit} | "
                    f"{_fmt(c, ours)} | {ours / c.value_si - 1:+.1%} | {ch} × {speed / 1e9:g} | "
                    f"{_fmt(c, nccl)} | {nccl / c.value_si - 1:+.1%} | {c.source} |")
    return "\n".join(rows)


def _search_figures() -> dict[str, str]:
    from .holdout import fmt_pct, span_pct

    cs = _ring_peak_cases()
    ours = [predict(c) / c.value_si - 1 for c in cs]
    nccl = [search_busbw(c) / c.value_si - 1 for c in cs]
    one = [e for c, e in zip(cs, nccl, strict=True) if "nodes" not in c.id]
    multi = [e for c, e in zip(cs, nccl, strict=True) if "nodes" in c.id]
    return {"coll.searchbw.n": str(len(cs)),
            "coll.searchbw.median": fmt_pct(statistics.median(map(abs, nccl)), 1, sign=False),
            "coll.searchbw.ours": fmt_pct(statistics.median(map(abs, ours)), 1, sign=False),
            "coll.searchbw.one": span_pct(one), "coll.searchbw.multi": span_pct(multi)}


def ring_tree_alternative(case: Case) -> tuple[str, str, float, float]:
    """For a case our tuner runs as NVLS / NVLSTree: the fastest ring or tree (algorithm,
    protocol) by the tuner's own time, that time (s), and the NVLS-side algorithm bandwidth
    (bytes/s) above which the tuner prefers NVLS / NVLSTree ((n / (t − its latency)); the pick
    flips below it). Which NCCL ran is not published for these rows."""
    from ..ops.nccl import NCCL_PROTOCOLS, nccl_latency, nccl_time

    links = case_links(case)
    t = links.nccl
    assert t is not None
    n, p = float(case["bytes"]), case["ranks"]
    o = coll.group_split(float(p), 1.0, links.domain, SCALAR)[1]
    bws = coll._nccl_bws(float(p), 1.0, links)
    sec, a, pr = min((float(nccl_time(_collective(case), a, pr, n, p, o,
                                      bws[4] if a == "tree" else bws[1], t, SCALAR)), a, pr)
                     for a in ("ring", "tree") for pr in NCCL_PROTOCOLS)
    lat = float(nccl_latency(_collective(case), "nvls_tree" if o > 1 else "nvls", "Simple", p,
                             o, t, SCALAR))
    return a, pr, sec, n / (sec - lat)


def collectives_figures(rep: FitReport | None = None) -> dict[str, str]:
    """The figures docs/validation/collectives.md's prose quotes (inline ``<!--v:KEY-->``
    markers), by the code the tables use: named cases' ours / error (``coll.<name>.*``: with
    NCCL's latencies, the per-step α model, the first model, without the NVLS fill), the
    mid-size ramp's and the multi-node cases' medians, the fill and fractions the fit gives."""
    from .holdout import fmt_pct, span_pct

    rep = collectives_holdout() if rep is None else rep
    ship = shipped_nvls()
    without = {p.source: p.fitted_without.values for p in rep.per_source}
    by_id = {c.id: c for c in collective_cases()}

    def val(c: Case, v_si: float) -> str:
        return _fmt(c, v_si).split(" ")[0]

    out: dict[str, str] = {"coll.nvls": f"{ship['nvls']:g}", "coll.nvls5": f"{ship['nvls5']:.3f}",
                           "coll.nvls5_without_rack": f"{without['coreweave43']['nvls5']:.3f}",
                           "coll.fill_all": f"{rep.refit.values['nvls_fill']:.2f}"}
    for src, v in without.items():
        out[f"coll.fill_without.{src}"] = f"{v['nvls_fill']:.2f}"
    for name, cid in NAMED_CASES.items():
        c = by_id[cid]
        nofill = predict(c, ship | {"nvls_fill": 0.0})
        for tag, ours in (("", predict(c)), (".step", predict(c, tuner=False)),
                          (".first", _previous(c)), (".nofill", nofill)):
            out[f"coll.{name}{tag}"] = val(c, ours)
            out[f"coll.{name}{tag}.err"] = fmt_pct(ours / c.value_si - 1)
            out[f"coll.{name}{tag}.err1"] = fmt_pct(ours / c.value_si - 1, digits=1)
    ramp = _ramp_cases(collective_cases())
    for tag, vals in (("", lambda c: ship), (".loso", lambda c: without[c.source])):
        le = [math.log(predict(c, vals(c)) / c.value_si) for c in ramp]
        out[f"coll.ramp{tag}.median"] = fmt_pct(statistics.median(abs(math.expm1(x)) for x in le),
                                                sign=False, digits=1)
        out[f"coll.ramp{tag}.rms"] = f"{math.sqrt(sum(x * x for x in le) / len(le)):.3f}"
    rack = [c for c in collective_cases() if c.source == "coreweave43"]
    out["coll.rack_held_out"] = span_pct([predict(c, without["coreweave43"]) / c.value_si - 1
                                          for c in rack], signed=False)
    rs = [c for c in collective_cases() if c.source == "nccl1047"]
    out["coll.rs_ring_ours"] = "–".join(val(c, predict(c)) for c in (rs[0], rs[-1]))
    ring = [c for c in collective_cases() if c["algorithm"] == "ring" and c["ranks"] == 8
            and c["bytes"] == 2**32 and _collective(c) == "all_reduce"]
    out["coll.ring_below"] = span_pct([predict(c) / c.value_si - 1 for c in ring], signed=False)
    multi = [c for c in collective_cases() if "nodes" in c.id and c.metric != "time"
             and c["bytes"] >= 2**28]
    for tag, tuner in (("", True), (".step", False)):
        e = [predict(c, tuner=tuner) / c.value_si - 1 for c in multi]
        out[f"coll.multi{tag}.median"] = fmt_pct(statistics.median(map(abs, e)), sign=False)
        out[f"coll.multi{tag}.worst"] = fmt_pct(max(e, key=abs))
        out[f"coll.multi{tag}.within"] = fmt_pct(max(map(abs, e)), sign=False)
    off = ship | {"search": 0.0}  # the replayed search off: what it moves
    shift = [abs(predict(c) - predict(c, off)) / c.value_si for c in collective_cases()]
    out["coll.search.n"] = str(sum(m > 1e-9 for m in shift))
    out["coll.search.max"] = f"{max(shift) * 100:.1f}"
    flat = ship | {"ring_plateau": 1.0}  # the ring's plateau off: what it moves
    moved = [abs(predict(c) - predict(c, flat)) / c.value_si for c in collective_cases()]
    out["coll.plateau.n"] = str(sum(m > 1e-9 for m in moved))
    out["coll.plateau.max"] = f"{max(moved) * 100:.1f}"
    from .collectives_fabric import fabric_figures
    from .collectives_nics import nic_figures, nvls_search_figures, p5_figures

    out |= _search_figures() | nic_figures() | p5_figures() | nvls_search_figures() \
        | fabric_figures()
    c = by_id[NAMED_CASES["n4_16m"]]
    a, pr, sec, flip = ring_tree_alternative(c)
    out["coll.n4_16m.alt"] = f"{a} {pr}"
    out["coll.n4_16m.alt.us"] = f"{sec * 1e6:.1f}"
    out["coll.n4_16m.alt.err"] = fmt_pct(sec / c.value_si - 1, digits=1)
    out["coll.n4_16m.flip"] = f"{flip / 1e9:.0f}"
    small = [c for c in collective_cases() if c.source == "nccltests309" and c["bytes"] <= 2**20]
    for tag, tuner in (("", True), (".step", False)):
        e = [predict(c, tuner=tuner) / c.value_si - 1 for c in small]
        out[f"coll.small{tag}.median"] = fmt_pct(statistics.median(map(abs, e)), sign=False)
        out[f"coll.small{tag}.range"] = span_pct(e, signed=False)
        out[f"coll.small{tag}.within"] = fmt_pct(max(map(abs, e)), sign=False)
    return out
