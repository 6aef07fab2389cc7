"""Which fused-attention kernel prices attention ops: ``attention_kernel`` of solve, serve and
train, resolved per architecture against data/presets/attention.toml.

``"auto"``: the serving engine's kernel where the table lists one for the part's architecture
(``[engine.<name>]``: vLLM V0 and llama.cpp run FlashAttention-2-class kernels on Hopper),
else the architecture's default kernel (Hopper: FlashAttention-3; Blackwell: cuDNN) or, on a
part of no listed architecture, ``"gemm"``; ``"gemm"``: fused attention priced by the matmul
model (as before this table); ``"fa2"`` / ``"fa3"`` / ``"cudnn"``: the measured fractions of
the peak, forward and backward, each architecture with its own length curve
(``attention_rates``, called by engine/core.py; ``"fa1"``, the FlashAttention-1 class, derived
at half FA2's Hopper rates) — FlashAttention-2 on a part with no measured
entry is priced as ``"gemm"`` (its paper: 50–73 % of the A100's peak); ``"unfused"``: QKᵀ,
softmax and ·V as separate ops (the graph changes; solve, serve and train pass
``fused_attention=False``).
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
           "resolve_kernel", "kernel_note", "attention_rates", "curve", "length_factor", "row_work"]

ATTENTION_KERNELS = ("auto", "gemm", "fa2", "fa3", "cudnn", "unfused", "fa1")
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
    engines = _engine_table(doc, src, kernels, origin)
    curves: dict[str, tuple[float, float]] = {}
    for a, tbl in doc.get("curve", {}).items():
        if a != "all" and a not in doc.get("arch", {}):
            raise SpecError(f"{origin} [curve.{a}]: {a!r} is not an [arch] (nor 'all')")
        if set(tbl) != {"x0", "p"}:
            raise SpecError(f"{origin} [curve.{a}] needs exactly x0 and p, got {sorted(tbl)}")
        x0, _ = read_quantity(tbl["x0"], field=f"curve.{a}.x0", dimension="ratio", sources=src,
                              origin=origin, lo=1.0, hi=1e6)
        pp, _ = read_quantity(tbl["p"], field=f"curve.{a}.p", dimension="ratio", sources=src,
                              origin=origin, lo=0.1, hi=10.0)
        curves[a] = (x0, pp)
    return {"arch": arch, "default": default, "kernels": kernels, "curves": curves,
            "engines": engines, "default_notes": {a: str(t.get("note", ""))
                                                  for a, t in doc.get("default", {}).items()}}


def _engine_table(doc: dict[str, Any], src: dict[str, Any],
                  kernels: dict[tuple[str, str], dict[str, float]],
                  origin: str) -> dict[tuple[str, str], tuple[str, str]]:
    """{(engine, arch): (kernel, note)} from ``[engine.<name>]`` (each entry sourced, a fused
    kernel the architecture has a table for, or "gemm")."""
    out = {}
    for name, per in doc.get("engine", {}).items():
        for a, tbl in per.items():
            where = f"{origin} [engine.{name}] {a}"
            if a not in doc.get("arch", {}):
                raise SpecError(f"{where}: {a!r} is not an [arch]; allowed: "
                                f"{', '.join(doc.get('arch', {}))}")
            if not isinstance(tbl, dict) or tbl.get("source") not in src:
                raise SpecError(f"{where}: needs a kernel and a source from [sources]")
            k = tbl.get("kernel")
            if k != "gemm" and (k, a) not in kernels:
                have = sorted(kk for kk, aa in kernels if aa == a)
                raise SpecError(f"{where}: kernel {k!r} has no [kernel.{k}.{a}] table; "
                                f"allowed: gemm, {', '.join(have)}")
            out[(name, a)] = (str(k), str(tbl.get("note", "")))
    return out


def curve(arch: str | None) -> tuple[float, float] | None:
    """(x0, p) of the sequence-length curve for ``arch`` ([curve.<arch>], else [curve.all])."""
    c = _tables()["curves"]
    return c.get(arch or "", c.get("all"))


def length_factor(work: Any, x0: float, p: float) -> Any:
    """The fraction of a kernel's long-sequence rate at ``work`` per query row (``row_work``:
    keys walked × head dim / 128): ``1 / (1 + (x0 / x)^p)`` (x clamped to >= 1) — the
    per-tile start-up and epilogue spread over the key blocks each query tile walks (causal
    rows walk half the keys on average; a 64-wide head does half the work per key)."""
    x = np.maximum(np.asarray(work, dtype=np.float64), 1.0)
    return 1.0 / (1.0 + (x0 / x) ** p)


def architecture(hw: Hardware) -> str | None:
    """The architecture the attention table lists ``hw`` under (None: none)."""
    return _tables()["arch"].get(hw.key)


def resolve_kernel(hw: Hardware, kernel: str, engine: str | None = None) -> str:
    """The kernel ``kernel`` means on ``hw`` ("auto" -> ``engine``'s kernel on the part's
    architecture where [engine.<engine>] lists one, else the architecture's default)."""
    kernel = check_attention_kernel(kernel)
    if kernel != "auto":
        return kernel
    a = architecture(hw)
    if a is None:
        return "gemm"
    t = _tables()
    if engine is not None and (engine, a) in t["engines"]:
        return str(t["engines"][(engine, a)][0])
    return str(t["default"].get(a, "gemm"))


def kernel_note(hw: Hardware, kernel: str, engine: str | None = None) -> str | None:
    """What prices fused attention on ``hw`` when ``kernel`` is "auto", in words (None: the
    matmul model, no measured kernel): the kernel and why (the engine's or the architecture's
    default, from data/presets/attention.toml)."""
    if check_attention_kernel(kernel) != "auto":
        return None
    k = resolve_kernel(hw, kernel, engine)
    a = architecture(hw)
    if k == "gemm" or a is None:
        return None
    t = _tables()
    if engine is not None and (engine, a) in t["engines"]:
        why = f"engine {engine!r}: {t['engines'][(engine, a)][1]}"
    else:
        why = f"the {a} default: {t['default_notes'].get(a, '')}"
    return (f"attention priced as {k} (attention_kernel='auto' on {hw.name}; {why}; "
            "docs/validation/attention.md)")


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
    cv = curve(a)
    return _with(eff, k, vals.get("fwd"), vals.get("bwd"), vals.get("fp8_fwd"),
                 *(cv if cv is not None else (None, 1.0)))


@lru_cache(maxsize=256)
def _with(eff: Efficiency, kernel: str, fwd: float | None, bwd: float | None,
          fp8_fwd: float | None, x0: float | None, p: float) -> Efficiency:
    att = Attention(scale=eff.attention.scale, kernel=kernel, fwd=fwd, bwd=bwd, fp8_fwd=fp8_fwd,
                    x0=x0, p=p)
    return replace(eff, attention=att, label=f"{eff.label}/{kernel}")


def row_work(graph: Any) -> np.ndarray:
    """[n] the work each query row of an attention op does, in 128-wide key dot products: its
    FLOPs / (4 · query rows · 128) at B = 1, i.e. keys walked × head dim / 128 (the formula's
    4·N·P·H over the score GEMM's N·T rows; S keys, about S/2 causal, at most the window; a
    backward op's 2.5x FLOPs divided back out; with a value head dim unlike the key's (MLA),
    (H + Hv) / 2 stands for H). 0 for other ops."""
    from ..graphs.graph import Q

    f = graph.c0[Q["flops"]] + graph.c1[Q["flops"]]
    m = graph.gemm[0]
    att = np.array([c == "attention" for c in graph.classes])
    bwd = np.array([n.endswith(_BACKWARD) for n in graph.names])
    x = np.where(att & (m > 0), f / (512.0 * np.where(m > 0, m, 1.0)), 0.0)
    return np.where(bwd, x / 2.5, x)


#: name suffixes of backward ops (graphs/training.py: ``.grad``; graphs/backward.py: ``.bwd``)
_BACKWARD = (".grad", ".bwd")


def attention_rates(graph: Any, hw: Hardware, eff: Efficiency, dtype: str, peak: float,
                    gpk: Any, ga: Any, gb: Any, gc: Any) -> tuple[Any, Any, Any, Any]:
    """Fused attention ops priced at a measured kernel's rate (data/presets/attention.toml):
    the fraction ``fwd`` (backward ops, named ``*.grad`` / ``*.bwd``: ``bwd``) of the 16-bit
    dense peak, or ``fp8_fwd`` of the fp8 peak for an fp8-capable kernel's forward in an fp8
    model (an fp8 model's attention otherwise runs at the 16-bit peak), times the length
    factor of the op's work per query row (``length_factor``, ``row_work``; constant in
    the batch, so the time stays affine in it); no matmul shape penalty. Other dtypes (fp32,
    tf32) and other ops keep the matmul model.

    The part's clock ratio (``Efficiency.clock``: its sustained engine clock over the clock
    of the part the architecture's factors were fitted at) scales these rates as it scales
    the matmul models': an attention kernel runs on the same tensor cores at the same clock.
    Assumed: an architecture's attention fractions are fitted at its clock-reference part
    (today no architecture has both tables: the clocks are CDNA 3's, the measured kernels
    Hopper's and Blackwell's, so the factor is 1 wherever a kernel is measured)."""
    att = np.array([c == "attention" for c in graph.classes])
    if dtype not in ("fp16", "bf16", "fp8") or not att.any():
        return gpk, ga, gb, gc
    k = eff.attention
    assert k.fwd is not None and k.bwd is not None, "a measured kernel has both rates"
    d16 = dtype if dtype != "fp8" else ("bf16" if hw.has("bf16") else "fp16")
    if not hw.has(d16):
        return gpk, ga, gb, gc
    p16 = peak if d16 == dtype else hw.peak(d16)
    c16 = eff.clock_of(d16)  # the part's clock ratio, as the matmul models (core.py)
    rate_b = p16 * k.bwd * hw.sustained(d16) * c16
    rate_f = p16 * k.fwd * hw.sustained(d16) * c16
    if dtype == "fp8" and k.fp8_fwd is not None:
        rate_f = peak * k.fp8_fwd * hw.sustained("fp8") * eff.clock_of("fp8")
    bwd = np.array([n.endswith(_BACKWARD) for n in graph.names])
    rate = np.where(bwd, rate_b, rate_f)
    if k.x0 is not None:
        rate = rate * length_factor(row_work(graph), k.x0, k.p)
    gpk = np.where(att, rate, gpk)
    return gpk, np.where(att, 0.0, ga), np.where(att, 0.0, gb), np.where(att, 0.0, gc)
