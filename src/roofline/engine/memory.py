"""The memory-fit check: does a configuration's footprint fit one device, and if not, why.

One check and one message for ``solve``, ``sweep``, ``serve``, ``serve_sweep``, ``train`` and
``best_parallelism``: a configuration fits when the bytes it needs per device (every part —
weights, activations, KV cache, gradients, optimizer states, workspace) are at most the
device's memory capacity. Messages give bytes with **decimal prefixes** (GB = 10⁹ B, through
``units.fmt_bytes``), as every printout of the library does (docs/notation.md): an "80 GB" A100,
which holds 80 GiB, has 85.9 GB.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..units import fmt_bytes

__all__ = ["fits", "fit_reason", "memory_fit", "resident_weights", "streams_weights",
           "streamed_training", "store_reason", "STREAMED_OPTIMIZER_NOTE"]

_LABEL = {"kv_cache": "KV cache"}


def fits(total_bytes: Any, capacity_bytes: Any) -> Any:
    """True where ``total_bytes`` (per device, every part included) fit ``capacity_bytes``;
    scalars or numpy arrays (broadcast)."""
    return total_bytes <= capacity_bytes


def fit_reason(total_bytes: float, capacity_bytes: float, device: str,
               parts: Mapping[str, float] | None = None, *, tail: str = "") -> str:
    """Why a configuration does not fit: ``needs T per device, <device> has C (part a, part b,
    …)`` + ``tail``, sizes by ``fmt_bytes``; ``parts``: the non-zero parts to list."""
    shown = [(k, v) for k, v in (parts or {}).items() if v]
    listed = (" (" + ", ".join(f"{_LABEL.get(k, k.replace('_', ' '))} {fmt_bytes(v)}"
                               for k, v in shown) + ")") if shown else ""
    return (f"needs {fmt_bytes(total_bytes)} per device, {device} has {fmt_bytes(capacity_bytes)}"
            f"{listed}{tail}")


def memory_fit(breakdown: Mapping[str, float], capacity_bytes: float, device: str, *,
               shown: tuple[str, ...] | None = None, tail: str = "") -> tuple[bool, float, str]:
    """(fits, total bytes, reason — "" when it fits) of a per-device ``breakdown``; ``shown``:
    the parts the message lists (default all)."""
    total = sum(breakdown.values())
    ok = bool(fits(total, capacity_bytes))
    if ok:
        return True, total, ""
    parts = breakdown if shown is None else {k: breakdown[k] for k in shown}
    return False, total, fit_reason(total, capacity_bytes, device, parts, tail=tail)


def resident_weights(graph: Any, hw: Any) -> tuple[float, str]:
    """(weight bytes the device's main memory holds, why the weights do not fit the device's
    weight store or ""). Resident execution holds every weight; weight streaming
    (``Hardware.execution``) holds the largest single op's weights at a time (a lower bound on
    one layer's) and needs all of them in the weight store."""
    total = float(graph.weight_footprint_bytes)
    store = getattr(hw, "weight_store", None)
    if store is None or getattr(hw, "execution", "resident") != "weight_streaming":
        return total, ""
    from ..graphs.graph import Q  # here: solve calls this on every result, streaming is rare

    w = graph.c0[Q["weight_bytes_read"]] + graph.c1[Q["weight_bytes_read"]]
    held = float(w.max()) if len(w) else 0.0
    why = "" if total <= store.capacity_bytes else (
        f"weights of {fmt_bytes(total)} do not fit {hw.name}'s weight store ({store.name}, "
        f"{fmt_bytes(store.capacity_bytes)})")
    return held, why


def streams_weights(hw: Any) -> bool:
    """True when ``hw`` runs in weight-streaming execution (``Hardware.execution``)."""
    return (getattr(hw, "execution", "resident") == "weight_streaming"
            and getattr(hw, "weight_store", None) is not None)


#: what a weight-streaming training result says about the optimizer step it does not price
STREAMED_OPTIMIZER_NOTE = (
    "weight streaming: weights, gradients and optimizer states live in the weight store "
    "({store}); the optimizer update runs there and is not priced (no published compute or "
    "bandwidth figure for it: the step time is a lower bound by that much); weight reads and "
    "gradient traffic are priced over its link")


def streamed_training(mem: Mapping[str, Any], working_weights: Any, working_grads: Any,
                      xp: Any = None) -> dict[str, Any]:
    """Training memory under weight streaming: the weights, gradients and optimizer states of
    ``mem`` (per-device bytes as resident execution counts them) move to the weight store
    (``weight_store``: their sum), and the chip holds the activations, the workspace and the
    largest layer's working set (``working_weights`` + ``working_grads``) instead: ``total``
    is what the chip holds. Numbers or arrays (then ``xp``, ops/xp.py, unused for numbers)."""
    out = dict(mem)
    opt_key = "optimizer" if "optimizer" in mem else "opt"
    out["weight_store"] = mem["weights"] + mem["gradients"] + mem[opt_key]
    out["weights"], out["gradients"] = working_weights, working_grads
    out[opt_key] = 0.0 * mem[opt_key]
    out["total"] = mem["total"] - out["weight_store"] + working_weights + working_grads
    return out


def store_reason(store_bytes: float, hw: Any) -> str:
    """Why training state of ``store_bytes`` does not fit ``hw``'s weight store, or ""."""
    store = hw.weight_store
    if store_bytes <= store.capacity_bytes:
        return ""
    return (f"weights, gradients and optimizer states of {fmt_bytes(store_bytes)} do not fit "
            f"{hw.name}'s weight store ({store.name}, {fmt_bytes(store.capacity_bytes)})")
