"""Presets: which factors turn the pure roofline into an estimate.

- ``"bound"``: the pure roofline, ``max(flops/peak, bytes/bandwidth)`` per op, summed; no
  efficiency, no overhead.
- ``"default"``: efficiency by op class and size plus per-op launch/dispatch costs, from
  ``data/presets/default.toml`` (each factor with its provenance), per hardware kind.
- ``"mlsysim"``: mlsysim 0.1.1's whole-model conventions (see engine/mlsysim.py).
- a measured hardware spec may carry its own fitted ``[efficiency]`` table; the default preset
  then uses it instead of the per-kind one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import SpecError, unknown
from ..ops.cost import OP_CLASSES
from ..specs.hardware import KINDS, Hardware
from ..specs.sourced import Provenance, read_quantity

__all__ = ["Efficiency", "PRESETS", "efficiency_for", "load_efficiency_table", "check_preset",
           "spec_efficiency", "class_vector_fractions", "fresh_output_seconds",
           "compute_class_scales", "gemm_coefficients", "cold_weight_seconds", "RUNTIMES",
           "evicted_dispatch_seconds", "previous_kernel",
           "check_runtime",
           "for_runtime"]

PRESETS = ("default", "bound", "mlsysim")
#: how kernels reach the device: "eager" launches every op from the host (each pays the
#: preset's ``dispatch``); "compiled" submits the whole graph at once (CUDA graph, XLA program):
#: no per-op host dispatch, the device-side ``kernel_gap`` stays
RUNTIMES = ("eager", "compiled")

_DIM = {"gemm_max": "ratio", "gemm_a": "ratio", "gemm_b": "ratio", "gemm_c": "ratio",
        "vector_max": "ratio", "memory_max": "ratio", "kernel_gap": "time", "dispatch": "time",
        "cache_fraction": "ratio", "workspace": "bytes",
        # optional terms (neutral when absent) used by measured specs (roofline.calibrate)
        "norm_max": "ratio", "softmax_max": "ratio", "pool_max": "ratio",
        "page_fault": "time", "fresh_alloc_min": "bytes", "conv_scale": "ratio",
        "attention_scale": "ratio", "main_read_max": "ratio", "conv_a": "ratio",
        "conv_b": "ratio", "conv_c": "ratio", "cold_after": "bytes", "cold_read_max": "ratio",
        "cold_pack_max": "ratio", "pack_min_rows": "ratio", "evicted_dispatch": "time",
        "evicted_kind_dispatch": "time", "evict_after": "bytes", "gemm_max_bf16": "ratio",
        "gemm_a_bf16": "ratio", "gemm_b_bf16": "ratio", "gemm_c_bf16": "ratio",
        "conv_fresh_factor": "ratio"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """The fitted/assumed factors of the default preset for one hardware (kind)."""

    gemm_max: float = 1.0  #: best achievable fraction of the dense matmul peak
    gemm_a: float = 0.0  #: rows at which the M-penalty halves efficiency (1/e ∝ 1 + a/M)
    gemm_b: float = 0.0  #: as gemm_a for N
    gemm_c: float = 0.0  #: as gemm_a for K
    vector_max: float = 1.0  #: fraction of the vector peak elementwise math reaches
    memory_max: float = 1.0  #: achievable fraction of each level's bandwidth
    kernel_gap: float = 0.0  #: s between back-to-back kernels (device side)
    dispatch: float = 0.0  #: s of host time per op (framework dispatch)
    cache_fraction: float = 0.0  #: share of an on-chip level usable for activations (0: off)
    workspace: float = 0.0  #: bytes reserved by runtime/framework
    synchronous: bool = False  #: CPU: dispatch adds to kernel time instead of overlapping
    #: per-class vector-rate fractions of the fp32 peak for norm / softmax / pool ops;
    #: 0 means "same as vector_max" (the neutral default)
    norm_max: float = 0.0
    softmax_max: float = 0.0
    pool_max: float = 0.0
    page_fault: float = 0.0  #: s per 4 KiB page of a freshly mapped op output (0: off)
    fresh_alloc_min: float = 0.0  #: outputs of at least this many bytes are freshly mapped
    #: fresh memory a convolution call maps per byte of output (its output and the
    #: framework's temporaries: oneDNN's blocked copy of it); 0: the output only
    conv_fresh_factor: float = 0.0
    #: multipliers on the GEMM efficiency for convolutions / fused attention (1: same as GEMM)
    conv_scale: float = 1.0
    attention_scale: float = 1.0
    #: a, b, c of the GEMM model for convolutions (implicit-GEMM M, N, K); -1: use gemm_a/b/c
    conv_a: float = -1.0
    conv_b: float = -1.0
    conv_c: float = -1.0
    #: fraction of main-memory bandwidth an op reaches reading weights/KV cache (cold, once per
    #: call); 0 means "same as memory_max" (the neutral default)
    main_read_max: float = 0.0
    #: cold weights (measured CPU specs; all neutral by default): an op's weights are "cold"
    #: when the graph's other ops move more than ``cold_after`` bytes per pass (0: never);
    #: cold weights are read at ``cold_read_max`` of main-memory bandwidth (0: as other
    #: weights), and a matmul/conv op with M >= ``pack_min_rows`` rows repacks them at
    #: ``cold_pack_max`` of main-memory bandwidth, in series with the kernel (0: off)
    cold_after: float = 0.0
    cold_read_max: float = 0.0
    cold_pack_max: float = 0.0
    pack_min_rows: float = 1.0
    #: evicted dispatch (measured CPU specs; neutral by default): an op whose predecessor in
    #: the graph moved more than ``evict_after`` bytes finds the framework's common code and
    #: data evicted from the private caches and pays ``evicted_dispatch`` more host time; one
    #: for which the ops since the last op of its kind moved more than that also finds its
    #: kind's own code evicted: ``evicted_kind_dispatch`` more (0: off)
    evicted_dispatch: float = 0.0
    evicted_kind_dispatch: float = 0.0
    evict_after: float = 0.0
    #: the GEMM model for bf16 matmuls, fitted to bf16 GEMMs (measured CPU specs: AMX tiles
    #: reach their peak at other sizes than fp32 FMAs); gemm_max_bf16 0: use the fp32 model;
    #: it may exceed 1 (the measured bf16 peak is the best rate seen, not the asymptote)
    gemm_max_bf16: float = 0.0
    gemm_a_bf16: float = 0.0
    gemm_b_bf16: float = 0.0
    gemm_c_bf16: float = 0.0
    #: host time per op for particular op classes (``dispatch_<class>`` in a table), e.g. a
    #: framework's norm or attention call costs more than an add; other classes: ``dispatch``
    dispatch_by_class: dict[str, float] = field(default_factory=dict)
    provenance: dict[str, Provenance] = field(default_factory=dict)
    label: str = "bound"

    def __post_init__(self) -> None:
        for f in ("gemm_max", "vector_max", "memory_max"):
            v = getattr(self, f)
            if not 0 < v <= 1:
                raise SpecError(f"efficiency {self.label}: {f}={v!r} must be in (0, 1]")
        for f in ("conv_scale", "attention_scale"):
            v = getattr(self, f)
            if not 0 < v <= 4:
                raise SpecError(f"efficiency {self.label}: {f}={v!r} must be in (0, 4] "
                                "(1: same as GEMM)")
        if not 0 <= self.main_read_max <= 1:
            raise SpecError(f"efficiency {self.label}: main_read_max={self.main_read_max!r} "
                            "must be in [0, 1] (0: same as memory_max)")
        for f in ("cold_read_max", "cold_pack_max"):
            v = getattr(self, f)
            if not 0 <= v <= 1:
                raise SpecError(f"efficiency {self.label}: {f}={v!r} must be in [0, 1] (0: off)")
        if not 0 <= self.gemm_max_bf16 <= 2:
            raise SpecError(f"efficiency {self.label}: gemm_max_bf16={self.gemm_max_bf16!r} "
                            "must be in [0, 2] (0: the fp32 GEMM model; above 1 when the bf16 "
                            "peak is the best measured rate, short of the asymptote)")
        for f in ("evicted_dispatch", "evicted_kind_dispatch", "evict_after", "gemm_a_bf16",
                  "gemm_b_bf16", "gemm_c_bf16", "conv_fresh_factor"):
            if getattr(self, f) < 0:
                raise SpecError(f"efficiency {self.label}: {f}={getattr(self, f)!r} must be "
                                ">= 0 (0: off)")
        if self.cold_after < 0 or self.pack_min_rows < 1:
            raise SpecError(f"efficiency {self.label}: cold_after={self.cold_after!r} must be "
                            f">= 0 bytes and pack_min_rows={self.pack_min_rows!r} >= 1")
        for f in ("norm_max", "softmax_max", "pool_max"):
            v = getattr(self, f)
            if not 0 <= v <= 1:
                raise SpecError(f"efficiency {self.label}: {f}={v!r} must be in [0, 1] "
                                "(0: same as vector_max)")

    def class_vector_max(self, op_class: str) -> float:
        """Fraction of the fp32 peak a non-matmul op of ``op_class`` reaches."""
        v = {"norm": self.norm_max, "softmax": self.softmax_max, "pool": self.pool_max}.get(
            op_class, 0.0)
        return v or self.vector_max

    @property
    def has_conv_shape(self) -> bool:
        return self.conv_a >= 0 or self.conv_b >= 0 or self.conv_c >= 0

    def conv_abc(self) -> tuple[float, float, float]:
        """(a, b, c) the efficiency model uses for convolutions."""
        return (self.conv_a if self.conv_a >= 0 else self.gemm_a,
                self.conv_b if self.conv_b >= 0 else self.gemm_b,
                self.conv_c if self.conv_c >= 0 else self.gemm_c)

    @property
    def main_read_fraction(self) -> float:
        """Achievable fraction of main-memory bandwidth for weight/KV reads."""
        return self.main_read_max or self.memory_max

    @property
    def has_cold(self) -> bool:
        """Whether cold-weight terms are active (measured CPU specs)."""
        return bool(self.cold_read_max or self.cold_pack_max)

    def gemm_model(self, dtype: str) -> tuple[float, float, float, float]:
        """(gemm_max, a, b, c) of the GEMM efficiency model for matmuls in ``dtype``."""
        if dtype == "bf16" and self.gemm_max_bf16:
            return self.gemm_max_bf16, self.gemm_a_bf16, self.gemm_b_bf16, self.gemm_c_bf16
        return self.gemm_max, self.gemm_a, self.gemm_b, self.gemm_c

    def dispatch_per_op(self, classes: tuple[str, ...]) -> float | np.ndarray:
        """Host dispatch time of each op: a scalar when no class overrides it."""
        if not self.dispatch_by_class:
            return self.dispatch
        return np.array([self.dispatch_by_class.get(c, self.dispatch) for c in classes])

    @property
    def has_class_rates(self) -> bool:
        return bool(self.norm_max or self.softmax_max or self.pool_max)

    @property
    def is_bound(self) -> bool:
        return self.label == "bound"


BOUND = Efficiency()


def load_efficiency_table(tbl: dict[str, Any], *, sources: dict[str, str], origin: str,
                          synchronous: bool, label: str) -> Efficiency:
    vals: dict[str, Any] = {}
    prov: dict[str, Provenance] = {}
    by_class: dict[str, float] = {}
    for k, raw in tbl.items():
        cls = k.removeprefix("dispatch_")
        if k.startswith("dispatch_") and cls in OP_CLASSES:
            v, p = read_quantity(raw, field=k, dimension="time", sources=sources, origin=origin)
            by_class[cls] = v
            prov[k] = p
            continue
        if k not in _DIM:
            raise SpecError(f"{origin}: unknown efficiency factor {k!r}; allowed: "
                            f"{', '.join(_DIM)}, dispatch_<op class> "
                            f"({', '.join(OP_CLASSES)})")
        v, p = read_quantity(raw, field=k, dimension=_DIM[k], sources=sources, origin=origin)
        vals[k] = v
        prov[k] = p
    return Efficiency(**vals, synchronous=synchronous, provenance=prov, label=label,
                      dispatch_by_class=by_class)


@lru_cache(maxsize=1)
def _default_tables() -> dict[str, Efficiency]:
    from .._data import DATA, read_toml

    doc = read_toml(DATA / "presets" / "default.toml")
    sources = doc.get("sources", {})
    out = {}
    for kind in KINDS:
        if kind not in doc:
            raise SpecError(f"data/presets/default.toml lacks a [{kind}] table")
        out[kind] = load_efficiency_table(doc[kind], sources=sources,
                                          origin=f"data/presets/default.toml [{kind}]",
                                          synchronous=(kind == "cpu"), label=f"default/{kind}")
    return out


_CUSTOM: dict[str, Efficiency] = {}


def register_efficiency(hw_key: str, eff: Efficiency) -> None:
    """Attach fitted factors to one hardware key (used for measured specs)."""
    _CUSTOM[hw_key] = eff


_FROM_SPEC: dict[tuple[str, str, int], Efficiency] = {}


def spec_efficiency(hw: Hardware) -> Efficiency | None:
    """The fitted ``[efficiency]`` table a (measured) hardware file carries, or None."""
    tbl = hw.efficiency_table
    if not tbl:
        return None
    ck = (hw.key, hw.origin, id(tbl))
    eff = _FROM_SPEC.get(ck)
    if eff is None:
        eff = load_efficiency_table(dict(tbl), sources={}, origin=f"{hw.origin or hw.key} "
                                    "[efficiency]", synchronous=(hw.kind == "cpu"),
                                    label=f"measured/{hw.key}")
        _FROM_SPEC[ck] = eff
    return eff


def efficiency_for(hw: Hardware, preset: str) -> Efficiency:
    """The factors ``preset`` applies on ``hw``: a registered table, else the spec's own
    fitted ``[efficiency]`` table, else the per-kind default."""
    if preset == "bound":
        return BOUND
    if preset == "default":
        if hw.key in _CUSTOM:
            return _CUSTOM[hw.key]
        own = spec_efficiency(hw)
        if own is not None:
            return own
        return _default_tables()[hw.kind]
    raise unknown("preset", preset, PRESETS)


def compute_class_scales(classes: tuple[str, ...],
                         effs: list[Efficiency] | tuple[Efficiency, ...]) -> np.ndarray | None:
    """[h, 1, n] multiplier on the GEMM efficiency per op (``conv_scale`` for convolutions,
    ``attention_scale`` for attention, 1 otherwise), or None when every efficiency leaves
    both at 1 (then nothing changes)."""
    if all(e.conv_scale == 1.0 and e.attention_scale == 1.0 for e in effs):
        return None
    conv = np.array([c == "conv" for c in classes])
    att = np.array([c == "attention" for c in classes])
    out = np.ones((len(effs), 1, len(classes)))
    for i, e in enumerate(effs):
        out[i, 0, conv] = e.conv_scale
        out[i, 0, att] = e.attention_scale
    return out


def gemm_coefficients(classes: tuple[str, ...], effs: list[Efficiency] | tuple[Efficiency, ...],
                      dtype: str = "fp32") -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per-op (a, b, c) arrays [h, 1, n] when an efficiency gives convolutions their own
    coefficients (measured specs), else None (every op uses the a, b, c of
    ``gemm_model(dtype)``)."""
    if not any(e.has_conv_shape for e in effs):
        return None
    conv = np.array([c == "conv" for c in classes])
    out = np.empty((3, len(effs), 1, len(classes)))
    for i, e in enumerate(effs):
        for j, (g, cv) in enumerate(zip(e.gemm_model(dtype)[1:], e.conv_abc())):
            out[j, i, 0] = np.where(conv, cv, g)
    return out[0], out[1], out[2]


def class_vector_fractions(classes: tuple[str, ...],
                           effs: list[Efficiency] | tuple[Efficiency, ...]) -> np.ndarray | None:
    """[h, 1, n] fraction of the fp32 peak each non-matmul op reaches (per-class rates of
    measured specs), or None when no efficiency sets a per-class rate (then ``vector_max``
    applies to every op, as before)."""
    if not any(e.has_class_rates for e in effs):
        return None
    names = sorted(set(classes))
    idx = np.array([names.index(c) for c in classes], dtype=np.intp)
    table = np.array([[e.class_vector_max(c) for c in names] for e in effs], dtype=np.float64)
    return table[:, idx][:, None, :]


#: bytes per page faulted in when an op writes a freshly mapped output
PAGE_BYTES = 4096


def fresh_output_seconds(act_bytes_written: np.ndarray,
                         effs: list[Efficiency] | tuple[Efficiency, ...],
                         conv: np.ndarray | None = None) -> np.ndarray | None:
    """Page-fault time of the fresh memory an op maps, ``page_fault · ceil(bytes / 4096)``,
    when it is at least ``fresh_alloc_min``: its output, and for convolutions (``conv``: a
    bool mask over the last axis) ``conv_fresh_factor`` times that (output + temporaries).
    Broadcasts to [h, ...]. None when no efficiency has a page-fault cost."""
    if not any(e.page_fault > 0 for e in effs):
        return None
    shape = (-1,) + (1,) * (act_bytes_written.ndim - 1)
    pf = np.array([e.page_fault for e in effs], dtype=np.float64).reshape(shape)
    lo = np.array([e.fresh_alloc_min for e in effs], dtype=np.float64).reshape(shape)
    fresh = act_bytes_written * np.ones_like(pf)
    if conv is not None:
        cf = np.array([e.conv_fresh_factor or 1.0 for e in effs]).reshape(shape)
        fresh = np.where(conv, fresh * cf, fresh)
    pages = np.ceil(fresh / PAGE_BYTES)
    return np.where((fresh >= lo) & (fresh > 0), pf * pages, 0.0)


def check_preset(preset: str) -> str:
    if not isinstance(preset, str) or preset not in PRESETS:
        raise unknown("preset", str(preset), PRESETS)
    return preset


def check_runtime(runtime: str, preset: str = "default") -> str:
    """``runtime`` if it is one of RUNTIMES (and ``preset`` can honour it), else SpecError."""
    if not isinstance(runtime, str) or runtime not in RUNTIMES:
        raise unknown("runtime", str(runtime), RUNTIMES)
    if runtime != "eager" and preset == "mlsysim":
        raise SpecError(f"runtime={runtime!r} needs preset 'default' or 'bound'; preset "
                        "'mlsysim' keeps mlsysim's own overhead convention (use runtime='eager')")
    return runtime


#: base Efficiency (by identity) -> (base, its compiled-runtime variant); the base is kept so
#: its id cannot be reused while the entry lives
_COMPILED: dict[int, tuple[Efficiency, Efficiency]] = {}


def for_runtime(eff: Efficiency, runtime: str) -> Efficiency:
    """The factors ``eff`` applies under ``runtime``: itself for "eager"; for "compiled" the
    same factors with no host dispatch (``dispatch`` 0, per-class dispatch cleared). The
    variant is built once per base object, so the plan cache (keyed on identity) keeps hitting."""
    if runtime == "eager" or eff.is_bound:
        return eff
    hit = _COMPILED.get(id(eff))
    if hit is not None and hit[0] is eff:
        return hit[1]
    out = replace(eff, dispatch=0.0, dispatch_by_class={}, evicted_dispatch=0.0,
                  evicted_kind_dispatch=0.0, label=f"{eff.label}/compiled")
    _COMPILED[id(eff)] = (eff, out)
    return out


_PACKED = ("matmul", "conv")


def cold_weight_seconds(classes: tuple[str, ...], weight_bytes: np.ndarray,
                        op_bytes: np.ndarray, rows: np.ndarray, bw: np.ndarray,
                        effs: list[Efficiency] | tuple[Efficiency, ...]
                        ) -> tuple[np.ndarray, np.ndarray] | None:
    """Extra seconds per op for cold weights, or None when no efficiency has cold terms.

    ``weight_bytes``, ``op_bytes`` (all bytes an op moves) and ``rows`` (GEMM M) are [1, b, n],
    ``bw`` is [h, 1, 1] main-memory bandwidth. An op's weights are cold when the other ops
    move more than ``cold_after`` bytes per pass (they evict them between two uses). Returns
    (extra read seconds, added to t_memory: w/(bw·cold_read) − w/(bw·main_read); packing
    seconds, added to the kernel: w/(bw·cold_pack) for matmul/conv with M >= pack_min_rows).
    """
    if not any(e.has_cold for e in effs):
        return None
    other = op_bytes.sum(-1, keepdims=True) - op_bytes
    packed = np.array([c in _PACKED for c in classes])[None, None, :]
    read = np.zeros((len(effs),) + weight_bytes.shape[1:])
    pack = np.zeros_like(read)
    for i, e in enumerate(effs):
        if not e.has_cold:
            continue
        cold = (other[0] > e.cold_after) & (weight_bytes[0] > 0)
        b = float(np.asarray(bw).reshape(-1)[i])
        if e.cold_read_max:
            read[i] = np.where(cold, weight_bytes[0] * (1.0 / (b * e.cold_read_max)
                                                         - 1.0 / (b * e.main_read_fraction)), 0.0)
        if e.cold_pack_max:
            pk = cold & packed[0] & (rows[0] >= e.pack_min_rows)
            pack[i] = np.where(pk, weight_bytes[0] / (b * e.cold_pack_max), 0.0)
    return read, pack


def previous_kernel(kinds: tuple[str, ...], has_kernel: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Where each op's evicted-dispatch terms look back to, as indices into the graph's ops
    repeated twice (a graph runs pass after pass, so the first op follows the last), with op
    i at ``i + n``: (its predecessor, the last earlier op of its kind). Ops without a kernel
    (views) are skipped; an op alone of its kind looks back one whole pass, to itself."""
    n = len(kinds)
    idx = np.flatnonzero(has_kernel)
    if len(idx) == 0:
        return np.arange(n), np.arange(n)
    pos = np.searchsorted(idx, np.arange(n), side="left") - 1  # -1 wraps to the last one
    before = idx[pos]
    prev = np.where(before < np.arange(n), before + n, before)
    j = np.arange(n)
    last: dict[str, int] = {}
    for i in np.concatenate([idx, idx]).tolist():  # the second pass sees the first's last op
        if kinds[i] in last:
            j[i] = last[kinds[i]]
        last[kinds[i]] = i
    same = np.where(j < np.arange(n), j + n, j)
    return prev, same


def evicted_dispatch_seconds(op_bytes: np.ndarray, look: tuple[np.ndarray, np.ndarray],
                             effs: list[Efficiency] | tuple[Efficiency, ...]
                             ) -> np.ndarray | None:
    """Extra host seconds per op whose framework code other ops evicted, or None when no
    efficiency has the terms: ``evicted_dispatch`` when its predecessor (another op) moved
    more than ``evict_after`` bytes, ``evicted_kind_dispatch`` when the ops since the last op
    of its kind (that op excluded) did. An op re-run back to back (a one-op graph) pays
    neither: its own traffic does not evict its code (measured: docs/validation/cpu.md).
    ``op_bytes`` is [1, b, n] (all bytes each op moves), ``look`` from ``previous_kernel``;
    returns [h, b, n]."""
    if not any(e.evicted_dispatch > 0 or e.evicted_kind_dispatch > 0 for e in effs):
        return None
    n = op_bytes.shape[-1]
    S = np.concatenate([np.zeros(op_bytes.shape[:-1] + (1,)),
                        np.cumsum(np.concatenate([op_bytes, op_bytes], -1), -1)], -1)
    end = S[..., n:2 * n]  # bytes before op i of the second pass
    prev, same = look
    itself = (prev % n) == np.arange(n)
    moved_prev = np.where(itself, 0.0, end - S[..., prev])
    moved_kind = end - S[..., same + 1]
    out = np.zeros((len(effs),) + op_bytes.shape[1:])
    for i, e in enumerate(effs):
        out[i] = (np.where(moved_prev[0] > e.evict_after, e.evicted_dispatch, 0.0)
                  + np.where(moved_kind[0] > e.evict_after, e.evicted_kind_dispatch, 0.0))
    return out
