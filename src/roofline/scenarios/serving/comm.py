"""Serving communication: tensor-parallel all-reduces and pipeline-stage sends, priced by
``ops.collectives`` with its per-call α convention (``latency="call"``: one fitted latency per
collective call, from published all-reduce microbenchmarks)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import SpecError
from ...ops import collectives
from ...specs.hardware import Hardware
from . import plan as sp


def _link(hw: Hardware) -> tuple[float, float]:
    lk = hw.scale_up_link or hw.host_link
    if lk is None:
        return math.nan, 0.0
    lat = lk.latency_s if math.isfinite(lk.latency_s) else 0.0
    return lk.bytes_per_s, lat


def _group(hw: Hardware, p: int, f: sp.ServingFactors) -> tuple[float, float, float, bool]:
    """(link bytes/s per direction, α per call, link efficiency, custom kernels) of an
    all-reduce over ``p`` devices.

    Inside the scale-up link's domain: that link, the engine's α(p) and kernels. A group larger
    than the domain (four PCIe cards bridged in pairs: ``[links.scale_up] domain = 2``) rings
    through the host link: NCCL over PCIe — the custom kernels need every peer on the fast
    link (vLLM disables its custom all-reduce past two PCIe-only GPUs) — at the engine's
    ``host_allreduce_alpha`` and ``host_allreduce_efficiency``.
    """
    su = hw.scale_up_link
    if su is not None and su.domain and p > su.domain and hw.host_link is not None \
            and f.host_allreduce_alpha > 0:
        lk = hw.host_link
        lat = lk.latency_s if math.isfinite(lk.latency_s) else 0.0
        return lk.bytes_per_s, max(lat, f.host_allreduce_alpha), \
            f.host_allreduce_efficiency, False
    bw, lat = _link(hw)
    if not math.isfinite(bw):
        raise SpecError(f"tp={p} needs a scale-up link on {hw.name}; its spec has none")
    alpha = max(lat, f.allreduce_alpha + f.allreduce_alpha_per_rank * (p - 2))
    return bw, alpha, f.allreduce_efficiency, f.allreduce_custom


def allreduce_time(nbytes: float, tp: int, hw: Hardware, f: sp.ServingFactors) -> float:
    """Seconds for ONE tensor-parallel all-reduce of ``nbytes`` over ``tp`` devices.

    The latency is paid once per collective call, α(p) = allreduce_alpha +
    allreduce_alpha_per_rank·(p − 2), not once per ring step. With custom kernels (TensorRT-LLM,
    vLLM on NVLink/NVSwitch) the engine takes the faster of a one-shot all-reduce
    (α + (p−1)·n/bw', latency-optimal for decode-sized messages) and a two-shot one
    (2α + 2(p−1)/p·n/bw', bandwidth-optimal for prefill-sized ones); with NCCL it is
    α + 2(p−1)/p·n/bw' (ring bytes). bw' = scale-up link bandwidth per direction ×
    allreduce_efficiency. The spec's link latency, when given, is a floor on α. A group larger
    than the scale-up link's ``domain`` runs NCCL over the host link (``_group``).
    """
    if tp == 1 or nbytes == 0:
        return 0.0
    bw, alpha, eff, custom = _group(hw, tp, f)
    if custom:
        return min(collectives.one_shot_all_reduce(nbytes, tp, bw, alpha, link_efficiency=eff),
                   collectives.two_shot_all_reduce(nbytes, tp, bw, alpha, link_efficiency=eff))
    return collectives.all_reduce(nbytes, tp, bw, alpha, link_efficiency=eff, latency="call")


def allreduce_times(nbytes: Any, tp: int, hw: Hardware, f: sp.ServingFactors) -> Any:
    """``allreduce_time`` over an array of sizes at once (serve_sweep, explore).

    Every collective of ops.collectives is affine in the bytes (α + n·β per algorithm), so
    each algorithm's line is read off the scalar formulas at 1 and 2 MiB and the lines are
    evaluated on the array; the faster algorithm wins per size, as in ``allreduce_time``.
    """
    n = np.asarray(nbytes, dtype=np.float64)
    if tp == 1:
        return np.zeros_like(n)
    bw, alpha, eff, custom = _group(hw, tp, f)
    algos: tuple[Callable[[Any], float], ...]
    if custom:
        algos = (lambda x: collectives.one_shot_all_reduce(x, tp, bw, alpha, link_efficiency=eff),
                 lambda x: collectives.two_shot_all_reduce(x, tp, bw, alpha, link_efficiency=eff))
    else:
        algos = (lambda x: collectives.all_reduce(x, tp, bw, alpha, link_efficiency=eff,
                                                  latency="call"),)
    out = np.full_like(n, np.inf)
    x1, x2 = 2.0**20, 2.0**21  # far enough apart that the slope keeps its digits
    for fn in algos:
        t1, t2 = fn(x1), fn(x2)
        slope = (t2 - t1) / (x2 - x1)
        out = np.minimum(out, (t1 - slope * x1) + slope * n)
    return np.where(n == 0, 0.0, out)


def _allreduce(nbytes: float, tp: int, hw: Hardware, f: sp.ServingFactors, count: int) -> float:
    return count * allreduce_time(nbytes, tp, hw, f)


def _host_fallback(hw: Hardware, f: sp.ServingFactors, ranks: int) -> bool:
    """True when ``ranks`` devices exceed the scale-up link's domain (PCIe cards bridged in
    pairs) and the traffic between domains goes over the host link (NCCL over PCIe, at the
    engine's host α and efficiency, as ``_group``)."""
    su = hw.scale_up_link
    return bool(su is not None and su.domain and ranks > su.domain
                and hw.host_link is not None and f.host_allreduce_alpha > 0)


def _host(hw: Hardware, f: sp.ServingFactors, alpha: float) -> tuple[float, float, float]:
    """(host link bytes/s, α, efficiency) of NCCL over PCIe (``_group``'s fallback)."""
    lk = hw.host_link
    assert lk is not None
    lat = lk.latency_s if math.isfinite(lk.latency_s) else 0.0
    return lk.bytes_per_s, max(lat, alpha, f.host_allreduce_alpha), f.host_allreduce_efficiency


def stage_crossings(pp: int, tp: int, domain: int) -> int:
    """How many of the pp − 1 stage boundaries send between scale-up domains: stage s holds
    devices s·tp … s·tp + tp − 1 (Megatron-LM's order: tensor-parallel ranks adjacent), and
    rank j of stage s sends to rank j of stage s + 1, so boundary s crosses when s·tp − 1 and
    s·tp lie in different domains of ``domain`` devices (0: one domain, none crosses)."""
    if pp <= 1 or domain <= 0:
        return 0
    return sum((s * tp - 1) // domain != (s * tp) // domain for s in range(1, pp))


def _p2p(nbytes: float, pp: int, hw: Hardware, f: sp.ServingFactors, tp: int = 1) -> float:
    """(pp − 1) pipeline-stage sends of ``nbytes``: α_p2p + n / (bw·efficiency) each, on the
    scale-up link; a send between domains (``stage_crossings``; four PCIe cards bridged in
    pairs run tp 2 × pp 2 across the pairs) goes over the host link as NCCL over PCIe
    (``_host_fallback``: the host α as a floor, the host efficiency — the 4-rank PCIe
    all-reduce's, applied to a send: assumed)."""
    if pp == 1:
        return 0.0
    bw, lat = _link(hw)
    if not math.isfinite(bw):
        raise SpecError(f"pp={pp} needs a scale-up link on {hw.name}; its spec has none")
    alpha = max(lat, f.p2p_latency)
    cross = stage_crossings(pp, tp, hw.scale_up_link.domain) \
        if _host_fallback(hw, f, pp * tp) and hw.scale_up_link is not None else 0
    t = (pp - 1 - cross) * collectives.send_recv(nbytes, bw, alpha,
                                                 link_efficiency=f.allreduce_efficiency)
    if cross:
        hb, ha, he = _host(hw, f, alpha)
        t += cross * collectives.send_recv(nbytes, hb, ha, link_efficiency=he)
    return t


def moe_all_to_all(tokens: float, ep: int, tp: int, cfg: Any, link_bytes: float, hw: Hardware,
                   f: sp.ServingFactors) -> float:
    """Expert parallelism over ``ep`` groups: seconds of the dispatch and combine all-to-alls a
    pass of ``tokens`` tokens per group meets in every MoE layer of the model (``cfg``: the
    full config; a token crosses all of them, on whichever pipeline stage).

    Each token's hidden state goes to its k experts and comes back: a rank holds
    n = tokens·k·D·bytes / tp (``link_bytes``: ``Precision.link_bytes``, 16-bit under fp8;
    the tp ranks of a group share their replicated tokens) and keeps 1/ep of it,
    α + (ep − 1)/ep · n/bw′ per call (``ops.collectives.all_to_all``, per-call α); 2 calls
    per MoE layer. α is the engine's all-reduce α at ep ranks (an all-to-all is one
    kernel launch and one handshake as the custom all-reduce is; no all-to-all microbenchmark
    is fitted: assumed), bw′ = scale-up link × allreduce_efficiency. Balanced routing assumed.
    When the ep × tp devices exceed the scale-up link's domain (PCIe cards bridged in pairs)
    the all-to-all crosses the host link — an all-to-all binds on the slowest link it spans —
    at the host α and efficiency (``_host_fallback``, as the tensor-parallel all-reduce).
    """
    if ep == 1 or tokens == 0:
        return 0.0
    bw, lat = _link(hw)
    if not math.isfinite(bw):
        raise SpecError(f"ep={ep} needs a scale-up link on {hw.name}; its spec has none")
    alpha = max(lat, f.allreduce_alpha + f.allreduce_alpha_per_rank * (ep - 2))
    eff = f.allreduce_efficiency
    if _host_fallback(hw, f, ep * tp):
        bw, alpha, eff = _host(hw, f, lat)
    n_moe = cfg.n_layers - cfg.first_dense_layers
    nbytes = tokens * cfg.top_k * cfg.d_model * link_bytes / tp
    return 2 * n_moe * collectives.all_to_all(nbytes, ep, bw, alpha, link_efficiency=eff,
                                              latency="call")
