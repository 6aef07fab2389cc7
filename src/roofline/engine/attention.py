"""Which fused-attention kernel prices attention ops: ``attention_kernel`` of solve, serve and
train, resolved per architecture against data/presets/attention.toml.

``"auto"``: the architecture's default kernel (Hopper: FlashAttention-3) or, on a part of no
listed architecture, ``"gemm"``; ``"gemm"``: fused attention priced by the matmul model (as
before this table); ``"fa2"`` / ``"fa3"`` / ``"cudnn"``: the measured fractions of the peak,
forward and backward (``attention_rates``, called by engine/core.py) — FlashAttention-2 on a
part with no measured entry is priced as ``"gemm"`` (its paper: 50–73 % of the A100's peak, what the
matmul model gives); ``"unfused"``: QKᵀ, softmax and ·V as separate ops (the graph changes;
solve, serve and train pass ``fused_attention=False``).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import SpecError, unknown
from ..specs.hardware import Hardware
from ..specs.sourced import read_quantity
from .efficiency import Attention, Efficiency

__all__ = ["ATTENTION_KERNELS", "check_attention_kernel", "with_attention", "architecture",
           "resolve_kernel", "attention_rates"]

ATTENTION_KERNELS = ("auto", "gemm", "fa2", "fa3", "cudnn", "unfused")
#: kernels priced as the matmul model where the table has no entry for the architecture
_AS_GEMM_ELSEWHERE = ("fa2",)


def check_attention_kernel(kernel: Any) -> str:
    if not isinstance(kernel, str) or kernel not in ATTENTION_KERNELS:
        raise unknown("attention_kernel", str(kernel), ATTENTION_KERNELS)
    return kernel


@lru_cache(maxsize=1)
def _tables() -> dict[str, Any]:
    from .._data import DATA, read_toml

    doc = read_toml(DATA / "presets" / "attention.toml")
    src = doc.get("sources", {})
    origin = "data/presets/attention.toml"
    arch = {}
    for name, tbl in doc.get("arch", {}).items():
        if tbl.get("source") not in src:
            raise SpecError(f"{origin} [arch] {name}: source {tbl.get('source')!r} is not in "
                            "[sources]")
        for key in tbl["hardware"]:
            arch[key] = name
    default = {a: t["kernel"] for a, t in doc.get("default", {}).items()}
    kernels: dict[tuple[str, str], dict[str, float]] = {}
    for kname, per in doc.get("kernel", {}).items():
        for a, tbl in per.items():
            vals = {}
            for f, raw in tbl.items():
                if f not in ("fwd", "bwd", "fp8_fwd"):
                    raise SpecError(f"{origin} [kernel.{kname}.{a}]: unknown field {f!r}; "
                                    "allowed: fwd, bwd, fp8_fwd")
                vals[f], _ = read_quantity(raw, field=f"kernel.{kname}.{a}.{f}",
                                           dimension="ratio", sources=src, origin=origin)
            kernels[(kname, a)] = vals
    for a, k in default.items():
        if (k, a) not in kernels and k != "gemm":
            raise SpecError(f"{origin} [default] {a} = {k!r} has no [kernel.{k}.{a}] table")
    return {"arch": arch, "default": default, "kernels": kernels}


def architecture(hw: Hardware) -> str | None:
    """The architecture the attention table lists ``hw`` under (None: none)."""
    return _tables()["arch"].get(hw.key)


def resolve_kernel(hw: Hardware, kernel: str) -> str:
    """The kernel ``kernel`` means on ``hw`` ("auto" -> the architecture's default)."""
    kernel = check_attention_kernel(kernel)
    if kernel != "auto":
        return kernel
    a = architecture(hw)
    return _tables()["default"].get(a, "gemm") if a else "gemm"


def with_attention(eff: Efficiency, hw: Hardware, kernel: str) -> Efficiency:
    """``eff`` with fused attention priced as ``kernel`` on ``hw`` (the pure roofline and
    "gemm" / "unfused" leave it as it is). A measured kernel the architecture has no entry for
    is a SpecError naming the ones it has."""
    k = resolve_kernel(hw, kernel)
    if eff.is_bound or k in ("gemm", "unfused"):
        return eff
    a = architecture(hw)
    vals = _tables()["kernels"].get((k, a)) if a else None
    if vals is None:
        if k in _AS_GEMM_ELSEWHERE:
            return eff
        have = sorted(kk for kk, aa in _tables()["kernels"] if aa == a)
        raise SpecError(f"attention_kernel={k!r} has no measured entry for {hw.name} "
                        f"(architecture {a or 'not listed'}) in data/presets/attention.toml; "
                        f"allowed here: auto, gemm, unfused"
                        + (", fa2" if k != "fa2" else "") + "".join(f", {x}" for x in have))
    return _with(eff, k, vals.get("fwd"), vals.get("bwd"), vals.get("fp8_fwd"))


@lru_cache(maxsize=256)
def _with(eff: Efficiency, kernel: str, fwd: float | None, bwd: float | None,
          fp8_fwd: float | None) -> Efficiency:
    att = Attention(scale=eff.attention.scale, kernel=kernel, fwd=fwd, bwd=bwd, fp8_fwd=fp8_fwd)
    return replace(eff, attention=att, label=f"{eff.label}/{kernel}")


#: name suffixes of backward ops (graphs/training.py: ``.grad``; graphs/backward.py: ``.bwd``)
_BACKWARD = (".grad", ".bwd")


def attention_rates(graph: Any, hw: Hardware, eff: Efficiency, dtype: str, peak: float,
                    gpk: Any, ga: Any, gb: Any, gc: Any) -> tuple[Any, Any, Any, Any]:
    """Fused attention ops priced at a measured kernel's rate (data/presets/attention.toml):
    the fraction ``fwd`` (backward ops, named ``*.grad`` / ``*.bwd``: ``bwd``) of the 16-bit
    dense peak, or ``fp8_fwd`` of the fp8 peak for an fp8-capable kernel's forward in an fp8
    model (an fp8 model's attention otherwise runs at the 16-bit peak); no shape
    penalty (the fractions are the kernel's own at its measured sizes). Other dtypes (fp32,
    tf32) and other ops keep the matmul model."""
    att = np.array([c == "attention" for c in graph.classes])
    if dtype not in ("fp16", "bf16", "fp8") or not att.any():
        return gpk, ga, gb, gc
    k = eff.attention
    assert k.fwd is not None and k.bwd is not None, "a measured kernel has both rates"
    d16 = dtype if dtype != "fp8" else ("bf16" if hw.has("bf16") else "fp16")
    if not hw.has(d16):
        return gpk, ga, gb, gc
    p16 = peak if d16 == dtype else hw.peak(d16)
    rate_b = p16 * k.bwd * hw.sustained(d16)
    rate_f = p16 * k.fwd * hw.sustained(d16)
    if dtype == "fp8" and k.fp8_fwd is not None:
        rate_f = peak * k.fp8_fwd * hw.sustained("fp8")
    bwd = np.array([n.endswith(_BACKWARD) for n in graph.names])
    gpk = np.where(att, np.where(bwd, rate_b, rate_f), gpk)
    return gpk, np.where(att, 0.0, ga), np.where(att, 0.0, gb), np.where(att, 0.0, gc)
