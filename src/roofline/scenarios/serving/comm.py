"""Serving communication: tensor-parallel all-reduces and pipeline-stage sends, priced by
``ops.collectives`` with its per-call α convention (``latency="call"``: one fitted latency per
collective call, from published all-reduce microbenchmarks)."""

from __future__ import annotations

import math

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


def allreduce_time(nbytes: float, tp: int, hw: Hardware, f: sp.ServingFactors) -> float:
    """Seconds for ONE tensor-parallel all-reduce of ``nbytes`` over ``tp`` devices.

    The latency is paid once per collective call, α(p) = allreduce_alpha +
    allreduce_alpha_per_rank·(p − 2), not once per ring step. With custom kernels (TensorRT-LLM,
    vLLM on NVLink/NVSwitch) the engine takes the faster of a one-shot all-reduce
    (α + (p−1)·n/bw', latency-optimal for decode-sized messages) and a two-shot one
    (2α + 2(p−1)/p·n/bw', bandwidth-optimal for prefill-sized ones); with NCCL it is
    α + 2(p−1)/p·n/bw' (ring bytes). bw' = scale-up link bandwidth per direction ×
    allreduce_efficiency. The spec's link latency, when given, is a floor on α.
    """
    if tp == 1 or nbytes == 0:
        return 0.0
    bw, lat = _link(hw)
    if not math.isfinite(bw):
        raise SpecError(f"tp={tp} needs a scale-up link on {hw.name}; its spec has none")
    alpha = max(lat, f.allreduce_alpha + f.allreduce_alpha_per_rank * (tp - 2))
    eff = f.allreduce_efficiency
    if f.allreduce_custom:
        return min(collectives.one_shot_all_reduce(nbytes, tp, bw, alpha, link_efficiency=eff),
                   collectives.two_shot_all_reduce(nbytes, tp, bw, alpha, link_efficiency=eff))
    return collectives.all_reduce(nbytes, tp, bw, alpha, link_efficiency=eff, latency="call")


def _allreduce(nbytes: float, tp: int, hw: Hardware, f: sp.ServingFactors, count: int) -> float:
    return count * allreduce_time(nbytes, tp, hw, f)


def _p2p(nbytes: float, pp: int, hw: Hardware, f: sp.ServingFactors) -> float:
    """(pp − 1) pipeline-stage sends of ``nbytes``: α_p2p + n / (bw·efficiency) each."""
    if pp == 1:
        return 0.0
    bw, lat = _link(hw)
    if not math.isfinite(bw):
        raise SpecError(f"pp={pp} needs a scale-up link on {hw.name}; its spec has none")
    return (pp - 1) * collectives.send_recv(nbytes, bw, max(lat, f.p2p_latency),
                                            link_efficiency=f.allreduce_efficiency)
