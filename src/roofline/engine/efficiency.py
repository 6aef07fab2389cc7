"""``Efficiency``: the factors that turn the pure roofline into an estimate, grouped by what they
act on, and the one loader every factor table goes through.

Groups (each a frozen value; a group or field that is ``None`` is *off* — it changes nothing):

- ``gemm``: the matmul model ``1/e = (1 + a/M + b/N + c/K) / max`` (implicit-GEMM sizes);
  ``gemm_bf16``: its own model for bf16 matmuls (measured CPUs), ``None``: use ``gemm``;
  ``gemm_dtype``: the dtype-aware part — per narrow compute dtype (fp8, fp4, int8, int4) a
  multiplier on the matmul model's ``max`` (of *that dtype's* peak), relative to the 16-bit
  model; ``None``: the same fraction as 16-bit matmuls. One factor for solve, serve and train:
  each scenario's own 16-bit model (a training fit, a serving engine's) is scaled by it;
- ``conv`` / ``attention``: multipliers on the matmul efficiency, and for convolutions their own
  ``a, b, c`` (``None``: the matmul model's);
- ``vector``: fraction of the fp32 peak elementwise math reaches, per class (``None``: ``max``);
- ``memory``: achievable fraction of each level's bandwidth, of main memory for weight/KV reads
  (``None``: ``max``), and the share of an on-chip level activations may use (``None``: no
  on-chip level);
- ``launch``: kernel gap, host dispatch (per op class where a table says so), and whether the
  device is synchronous (CPU: dispatch adds to the kernel instead of overlapping);
- ``cpu``: terms measured on CPUs only (page faults of fresh outputs, cold weights, evicted
  dispatch), each ``None`` when absent.

Tables (data/presets/*.toml, a measured spec's ``[efficiency]``) are read by ``read_efficiency``:
grouped sub-tables (``[gpu.gemm] max = ...``) or the flat keys of earlier files
(``gemm_max = ...``, ``cold_read_max = ...``; 0 where the old format meant "off" reads as off).
Serving and training profiles are ``dataclasses.replace`` of the base, read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from ..errors import SpecError
from ..ops.cost import OP_CLASSES
from ..specs.sourced import Provenance, read_quantity
from .tiles import Tiles

__all__ = ["Efficiency", "Gemm", "GemmDtype", "Conv", "Attention", "Vector", "Memory", "Launch",
           "Cpu", "PageFaults", "ColdWeights", "EvictedDispatch", "BOUND", "read_efficiency",
           "read_patch", "EfficiencyPatch", "flat_efficiency", "FLAT_KEYS"]


def _check(label: str, name: str, v: float | None, lo: float, hi: float, *,
           lo_open: bool = False, allowed: str = "") -> None:
    """SpecError unless ``v`` is None (off) or a finite number in the range."""
    if v is None:
        return
    ok = isinstance(v, int | float) and not isinstance(v, bool) and v == v and \
        (lo < v if lo_open else lo <= v) and v <= hi and v != float("inf")
    if not ok:
        rng = (f"{'(' if lo_open else '['}{lo:g}, {hi:g}]" if hi != float("inf") else
               f"finite and {'>' if lo_open else '>='} {lo:g}")
        flat = _FLAT_NAME.get(name)
        raise SpecError(f"efficiency {label}: {name}={v!r}"
                        + (f" (flat key {flat})" if flat else "") + f" must be {rng}"
                        + (f" ({allowed})" if allowed else ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class Gemm:
    """Matmul efficiency ``max / (1 + a/M + b/N + c/K)`` of the (sustained) dense peak."""

    max: float = 1.0  #: best achievable fraction of the dense matmul peak
    a: float = 0.0  #: rows at which the M penalty halves the efficiency
    b: float = 0.0  #: as ``a`` for N
    c: float = 0.0  #: as ``a`` for K
    #: floor of the efficiency: a matrix-vector product (M of a few rows, batch-1 decode) runs
    #: as a GEMV streaming its weights, not as padded tiles, so the M penalty never takes it
    #: below this fraction of the peak (0: no floor)
    gemv: float = 0.0

    def check(self, label: str, name: str, hi: float = 1.0) -> None:
        _check(label, f"{name}.max", self.max, 0.0, hi, lo_open=True)
        for f in ("a", "b", "c"):
            _check(label, f"{name}.{f}", getattr(self, f), 0.0, float("inf"))
        _check(label, f"{name}.gemv", self.gemv, 0.0, 1.0)


#: the compute dtypes ``GemmDtype`` has a factor for
NARROW_DTYPES = ("fp8", "fp4", "int8", "int4")


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmDtype:
    """Matmul efficiency of narrow compute dtypes relative to the 16-bit model: the fraction of
    its own (2x, 4x) peak an fp8 matmul reaches is ``fp8`` times the fraction a 16-bit matmul
    of the same shape reaches of the 16-bit peak. None: the same fraction (a factor of 1)."""

    fp8: float | None = None
    fp4: float | None = None
    int8: float | None = None
    int4: float | None = None

    def of(self, dtype: str) -> float:
        v = getattr(self, dtype) if dtype in NARROW_DTYPES else None
        return 1.0 if v is None else float(v)


@dataclass(frozen=True, slots=True, kw_only=True)
class Conv:
    """Convolutions: a multiplier on the matmul efficiency and their own a, b, c (None: the
    matmul model's)."""

    scale: float = 1.0
    a: float | None = None
    b: float | None = None
    c: float | None = None

    @property
    def has_shape(self) -> bool:
        return self.a is not None or self.b is not None or self.c is not None

    def abc(self, g: Gemm) -> tuple[float, float, float]:
        return (g.a if self.a is None else self.a, g.b if self.b is None else self.b,
                g.c if self.c is None else self.c)


@dataclass(frozen=True, slots=True, kw_only=True)
class Attention:
    """Fused attention: a multiplier on the matmul efficiency (1: same as a GEMM); or, with a
    measured kernel (``kernel`` != "gemm", data/presets/attention.toml), the fraction of the
    16-bit dense peak that kernel reaches forward (``fwd``) and backward (``bwd``), and of the
    fp8 peak forward (``fp8_fwd``; None: the kernel runs 16-bit even in an fp8 model); those
    are long-sequence rates, reached as ``1 / (1 + (x0 / x)^p)`` of them at ``x`` keys × head
    dim / 128 per query row (engine/attention.py ``length_factor``; ``x0`` None: none)."""

    scale: float = 1.0
    kernel: str = "gemm"  #: the attention implementation these numbers are of
    fwd: float | None = None
    bwd: float | None = None
    fp8_fwd: float | None = None
    x0: float | None = None  #: work per query row at which the kernel runs at half its rate
    p: float = 1.0  #: steepness of the rise with the keys per query row

    @property
    def measured(self) -> bool:
        return self.fwd is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class Vector:
    """Fraction of the fp32 peak non-matmul ops reach; per class where measured."""

    max: float = 1.0
    norm: float | None = None
    softmax: float | None = None
    pool: float | None = None

    @property
    def has_classes(self) -> bool:
        return self.norm is not None or self.softmax is not None or self.pool is not None

    def of(self, op_class: str) -> float:
        v = {"norm": self.norm, "softmax": self.softmax, "pool": self.pool}.get(op_class)
        return self.max if v is None else v


@dataclass(frozen=True, slots=True, kw_only=True)
class Memory:
    """Achievable fractions of bandwidth, and the on-chip share activations may use."""

    max: float = 1.0  #: of each level's bandwidth
    main_read: float | None = None  #: of main memory for weight/KV reads (None: ``max``)
    cache_fraction: float | None = None  #: share of an on-chip level for activations (None: off)

    @property
    def main_read_fraction(self) -> float:
        return self.max if self.main_read is None else self.main_read


@dataclass(frozen=True, slots=True, kw_only=True)
class Launch:
    """How kernels reach the device."""

    kernel_gap: float = 0.0  #: s between back-to-back kernels (device side)
    dispatch: float = 0.0  #: s of host time per op (framework dispatch)
    #: host time per op for particular op classes, e.g. a framework's norm costs more than an add
    by_class: tuple[tuple[str, float], ...] = ()
    synchronous: bool = False  #: CPU: dispatch adds to the kernel instead of overlapping


@dataclass(frozen=True, slots=True, kw_only=True)
class PageFaults:
    """Page faults of a freshly mapped op output (measured CPUs)."""

    seconds: float  #: per 4 KiB page
    fresh_min: float = 0.0  #: outputs of at least this many bytes are freshly mapped
    #: fresh memory a convolution maps per byte of output (output and temporaries; None: 1)
    conv_factor: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ColdWeights:
    """Weights a whole model evicts between two uses (measured CPUs): an op's weights are cold
    when the graph's other ops move more than ``after`` bytes per pass; cold weights are read at
    ``read_max`` of main-memory bandwidth (None: as other weights) and a matmul/conv with at
    least ``pack_min_rows`` rows repacks them at ``pack_max`` of it, in series (None: off)."""

    after: float = 0.0
    read_max: float | None = None
    pack_max: float | None = None
    pack_min_rows: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class EvictedDispatch:
    """Host time an op pays when earlier ops evicted the framework's code (measured CPUs): its
    predecessor moved more than ``after`` bytes: ``dispatch`` more; the ops since the last op of
    its kind did: ``kind_dispatch`` more."""

    dispatch: float = 0.0
    kind_dispatch: float = 0.0
    after: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Cpu:
    """Terms measured on CPUs; each None when the spec has none."""

    page_faults: PageFaults | None = None
    cold: ColdWeights | None = None
    evicted: EvictedDispatch | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """The factors of one preset on one hardware (kind). A value: equal factors compare and hash
    equal (provenance aside), so caches key on it."""

    gemm: Gemm = Gemm()
    gemm_bf16: Gemm | None = None  #: bf16 matmuls (measured CPUs: AMX tiles); None: ``gemm``
    gemm_dtype: GemmDtype = GemmDtype()  #: narrow dtypes relative to the 16-bit model
    conv: Conv = Conv()
    attention: Attention = Attention()
    vector: Vector = Vector()
    memory: Memory = Memory()
    launch: Launch = Launch()
    cpu: Cpu | None = None
    #: whole waves of output tiles for GPU matmuls (engine/tiles.py); None: the smooth model
    tiles: Tiles | None = None
    #: (dtype, the part's engine clock under long matmuls of that dtype / the clock of the part
    #: the factors were fitted at), where parts of one architecture sustain different clocks
    #: (data/presets/tiles.toml ``[arch.<name>.clock]``, the one table the tile sets read too;
    #: engine/tiles.py ``clock_ratios``): every compute rate of the matmul models (``gemm``,
    #: ``gemm_for``, its GEMV floor) and of the measured attention kernels (engine/attention.py
    #: ``attention_rates``) is scaled by it; a dtype not listed: 1
    clock: tuple[tuple[str, float], ...] = ()
    workspace: float = 0.0  #: bytes reserved by runtime/framework
    label: str = "bound"
    provenance: dict[str, Provenance] = field(default_factory=dict, compare=False, hash=False,
                                              repr=False)
    _hash: int = field(default=0, init=False, repr=False, compare=False, hash=False)

    def __hash__(self) -> int:  # computed once: caches look efficiencies up on every call
        return self._hash

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(tuple(
            getattr(self, f.name) for f in fields(self) if f.compare)))
        lb = self.label
        self.gemm.check(lb, "gemm")
        if self.tiles is not None:
            self.tiles.check(lb)
        if self.gemm_bf16 is not None:
            self.gemm_bf16.check(lb, "gemm_bf16", hi=2.0)  # vs the best measured bf16 rate
        for nm in ("fwd", "bwd", "fp8_fwd"):
            _check(lb, f"attention.{nm}", getattr(self.attention, nm), 0.0, 1.0, lo_open=True,
                   allowed="a fraction of the dense peak")
        if self.attention.measured and self.attention.bwd is None:
            raise SpecError(f"efficiency {lb}: attention kernel {self.attention.kernel!r} has "
                            "a forward fraction but no backward one")
        for d, r in self.clock:  # every rate the clock scales stays within the peak
            _check(lb, f"clock.{d}", r, 0.0, float("inf"), lo_open=True,
                   allowed="a ratio of two sustained clocks")
            a = self.attention  # its 16-bit fractions run at the fp16 / bf16 clock, fp8_fwd fp8's
            for what, f in (("matmul model's max", self.gemm_for(d).max),
                            ("attention.fwd", a.fwd if d in ("fp16", "bf16") else None),
                            ("attention.bwd", a.bwd if d in ("fp16", "bf16") else None),
                            ("attention.fp8_fwd", a.fp8_fwd if d == "fp8" else None)):
                if f is not None and f * r > 1.0:
                    raise SpecError(f"efficiency {lb}: clock.{d}={r!r} prices the {what} at "
                                    f"{f:g} x {r:g} > 1 of the peak (allowed: {what} x the "
                                    "clock ratio within the peak)")
        for nm in NARROW_DTYPES:
            _check(lb, f"gemm_dtype.{nm}", getattr(self.gemm_dtype, nm), 0.0, 2.0, lo_open=True,
                   allowed="a multiplier on the 16-bit matmul efficiency")
        for nm, v in (("conv.scale", self.conv.scale), ("attention.scale", self.attention.scale)):
            _check(lb, nm, v, 0.0, 4.0, lo_open=True, allowed="1: same as GEMM")
        for nm in ("a", "b", "c"):
            _check(lb, f"conv.{nm}", getattr(self.conv, nm), 0.0, float("inf"))
        _check(lb, "vector.max", self.vector.max, 0.0, 1.0, lo_open=True)
        for nm in ("norm", "softmax", "pool"):
            _check(lb, f"vector.{nm}", getattr(self.vector, nm), 0.0, 1.0)
        _check(lb, "memory.max", self.memory.max, 0.0, 1.0, lo_open=True)
        _check(lb, "memory.main_read", self.memory.main_read, 0.0, 1.0, lo_open=True)
        _check(lb, "memory.cache_fraction", self.memory.cache_fraction, 0.0, 1.0, lo_open=True)
        for nm in ("kernel_gap", "dispatch"):
            _check(lb, f"launch.{nm}", getattr(self.launch, nm), 0.0, 1.0,
                   allowed="seconds per op")
        for c, v in self.launch.by_class:
            _check(lb, f"launch.dispatch_{c}", v, 0.0, 1.0, allowed="seconds per op")
        _check(lb, "workspace", self.workspace, 0.0, 1e18, allowed="bytes")
        cpu = self.cpu
        if cpu is None:
            return
        if cpu.page_faults is not None:
            pf = cpu.page_faults
            _check(lb, "cpu.page_faults.seconds", pf.seconds, 0.0, 1.0, lo_open=True)
            _check(lb, "cpu.page_faults.fresh_min", pf.fresh_min, 0.0, float("inf"))
            _check(lb, "cpu.page_faults.conv_factor", pf.conv_factor, 0.0, float("inf"),
                   lo_open=True)
        if cpu.cold is not None:
            cw = cpu.cold
            _check(lb, "cpu.cold.after", cw.after, 0.0, float("inf"), allowed="bytes")
            _check(lb, "cpu.cold.read_max", cw.read_max, 0.0, 1.0, lo_open=True)
            _check(lb, "cpu.cold.pack_max", cw.pack_max, 0.0, 1.0, lo_open=True)
            _check(lb, "cpu.cold.pack_min_rows", cw.pack_min_rows, 1.0, float("inf"))
        if cpu.evicted is not None:
            ev = cpu.evicted
            for nm in ("dispatch", "kind_dispatch", "after"):
                _check(lb, f"cpu.evicted.{nm}", getattr(ev, nm), 0.0, float("inf"))

    # -- what the time model asks --------------------------------------------------------------
    @property
    def is_bound(self) -> bool:
        return self.label == "bound"

    @property
    def page_faults(self) -> PageFaults | None:
        return None if self.cpu is None else self.cpu.page_faults

    @property
    def cold(self) -> ColdWeights | None:
        return None if self.cpu is None else self.cpu.cold

    @property
    def evicted(self) -> EvictedDispatch | None:
        return None if self.cpu is None else self.cpu.evicted

    def gemm_for(self, dtype: str) -> Gemm:
        """The matmul model for matmuls in ``dtype``: the 16-bit model (``gemm_bf16`` for bf16
        where set), its ``max`` times ``gemm_dtype`` for a narrow dtype."""
        if dtype == "bf16" and self.gemm_bf16 is not None:
            return self.gemm_bf16
        k = self.gemm_dtype.of(dtype)
        if k == 1.0:
            return self.gemm
        return replace(self.gemm, max=self.gemm.max * k)

    def clock_of(self, dtype: str) -> float:
        """The part's sustained-clock ratio for ``dtype`` matmuls (1 where none is listed)."""
        return dict(self.clock).get(dtype, 1.0)

    def dispatch_per_op(self, classes: tuple[str, ...]) -> Any:
        """Host dispatch time of each op: a scalar when no class overrides it."""
        if not self.launch.by_class:
            return self.launch.dispatch
        import numpy as np

        by = dict(self.launch.by_class)
        return np.array([by.get(c, self.launch.dispatch) for c in classes])

    def ridge_fraction(self, dtype: str) -> float:
        """Effective-ridge factor: gemm max x the part's clock ratio / memory max (before the
        board's sustained fraction)."""
        return self.gemm_for(dtype).max * self.clock_of(dtype) / self.memory.max


BOUND = Efficiency()


# -- the one loader ----------------------------------------------------------------------------

#: grouped field -> (dimension, None-means-off when 0 in a flat table)
_GROUPS: dict[str, dict[str, str]] = {
    "gemm": {"max": "ratio", "a": "ratio", "b": "ratio", "c": "ratio", "gemv": "ratio"},
    "gemm_bf16": {"max": "ratio", "a": "ratio", "b": "ratio", "c": "ratio", "gemv": "ratio"},
    "gemm_dtype": {d: "ratio" for d in NARROW_DTYPES},
    "conv": {"scale": "ratio", "a": "ratio", "b": "ratio", "c": "ratio"},
    "attention": {"scale": "ratio"},
    "vector": {"max": "ratio", "norm": "ratio", "softmax": "ratio", "pool": "ratio"},
    "memory": {"max": "ratio", "main_read": "ratio", "cache_fraction": "ratio"},
    "launch": {"kernel_gap": "time", "dispatch": "time"},
    "cpu.page_faults": {"seconds": "time", "fresh_min": "bytes", "conv_factor": "ratio"},
    "cpu.cold": {"after": "bytes", "read_max": "ratio", "pack_max": "ratio",
                 "pack_min_rows": "ratio"},
    "cpu.evicted": {"dispatch": "time", "kind_dispatch": "time", "after": "bytes"},
}

#: the flat keys of earlier tables (and of measured specs written before the grouping) ->
#: (group, field, whether 0 meant "off" there)
FLAT_KEYS: dict[str, tuple[str, str, bool]] = {
    "gemm_max": ("gemm", "max", False), "gemm_a": ("gemm", "a", False),
    "gemm_b": ("gemm", "b", False), "gemm_c": ("gemm", "c", False),
    "gemm_max_bf16": ("gemm_bf16", "max", True), "gemm_a_bf16": ("gemm_bf16", "a", False),
    "gemm_b_bf16": ("gemm_bf16", "b", False), "gemm_c_bf16": ("gemm_bf16", "c", False),
    "conv_scale": ("conv", "scale", False), "conv_a": ("conv", "a", False),
    "conv_b": ("conv", "b", False), "conv_c": ("conv", "c", False),
    "attention_scale": ("attention", "scale", False),
    "vector_max": ("vector", "max", False), "norm_max": ("vector", "norm", True),
    "softmax_max": ("vector", "softmax", True), "pool_max": ("vector", "pool", True),
    "memory_max": ("memory", "max", False), "main_read_max": ("memory", "main_read", True),
    "cache_fraction": ("memory", "cache_fraction", True),
    "kernel_gap": ("launch", "kernel_gap", False), "dispatch": ("launch", "dispatch", False),
    "page_fault": ("cpu.page_faults", "seconds", True),
    "fresh_alloc_min": ("cpu.page_faults", "fresh_min", False),
    "conv_fresh_factor": ("cpu.page_faults", "conv_factor", True),
    "cold_after": ("cpu.cold", "after", False), "cold_read_max": ("cpu.cold", "read_max", True),
    "cold_pack_max": ("cpu.cold", "pack_max", True),
    "pack_min_rows": ("cpu.cold", "pack_min_rows", False),
    "evicted_dispatch": ("cpu.evicted", "dispatch", True),
    "evicted_kind_dispatch": ("cpu.evicted", "kind_dispatch", True),
    "evict_after": ("cpu.evicted", "after", False),
}

_FLAT_NAME = {f"{g}.{f}": k for k, (g, f, _) in FLAT_KEYS.items()}

_INF = float("inf")
#: the range of each factor where it is read (lo, hi, lo exclusive)
_RANGES: dict[str, tuple[float, float, bool]] = {
    "gemm.max": (0, 1, True), "gemm_bf16.max": (0, 2, True), "gemm_dtype.fp8": (0, 2, True),
    "gemm_dtype.fp4": (0, 2, True), "gemm_dtype.int8": (0, 2, True),
    "gemm_dtype.int4": (0, 2, True), "conv.scale": (0, 4, True),
    "attention.scale": (0, 4, True), "vector.max": (0, 1, True), "vector.norm": (0, 1, False),
    "vector.softmax": (0, 1, False), "vector.pool": (0, 1, False), "memory.max": (0, 1, True),
    "memory.main_read": (0, 1, False), "memory.cache_fraction": (0, 1, False),
    "launch.kernel_gap": (0, 1, False), "launch.dispatch": (0, 1, False),
    "cpu.page_faults.seconds": (0, 1, False), "cpu.cold.read_max": (0, 1, False),
    "cpu.cold.pack_max": (0, 1, False), "cpu.cold.pack_min_rows": (1, _INF, False),
}


def _range_check(label: str, name: str, v: float | None) -> None:
    lo, hi, lo_open = _RANGES.get(name, (0.0, _INF, False))
    _check(label, name, v, lo, hi, lo_open=lo_open)


#: groups that exist only when one of these fields is set (the others alone change nothing)
_SWITCHES = {"gemm_bf16": ("max",), "cpu.page_faults": ("seconds",),
             "cpu.cold": ("read_max", "pack_max"), "cpu.evicted": ("dispatch", "kind_dispatch")}


def _is_quantity(raw: Any) -> bool:
    return isinstance(raw, dict) and "value" in raw


@dataclass(frozen=True, slots=True)
class EfficiencyPatch:
    """The factors one table sets, to apply to any base: ``groups`` ((group, ((field, value),
    ...)), ...), per-class dispatch and workspace. A serving or training profile is a patch
    applied to the device's preset (``apply``: ``dataclasses.replace`` of the base's groups)."""

    groups: tuple[tuple[str, tuple[tuple[str, float | None], ...]], ...] = ()
    by_class: tuple[tuple[str, float], ...] = ()
    workspace: float | None = None
    provenance: dict[str, Provenance] = field(default_factory=dict, compare=False, hash=False,
                                              repr=False)

    def apply(self, base: Efficiency, *, label: str,
              synchronous: bool | None = None) -> Efficiency:
        vals = {g: dict(fv) for g, fv in self.groups}
        by = dict(base.launch.by_class) | dict(self.by_class)
        return _build(base, vals, by, base.workspace if self.workspace is None
                      else self.workspace, dict(base.provenance) | self.provenance, label,
                      synchronous)


def read_efficiency(tbl: dict[str, Any], *, base: Efficiency = BOUND,
                    sources: dict[str, str], origin: str, label: str,
                    synchronous: bool | None = None) -> Efficiency:
    """``base`` with the factors ``tbl`` sets (``read_patch``)."""
    return read_patch(tbl, sources=sources, origin=origin, label=label).apply(
        base, label=label, synchronous=synchronous)


def read_patch(tbl: dict[str, Any], *, sources: dict[str, str], origin: str,
               label: str = "", ignore: tuple[str, ...] = ()) -> EfficiencyPatch:
    """The one loader of factor tables: grouped sub-tables (``gemm = {max = ...}``,
    ``cpu.cold = {...}``), flat keys of earlier files (``gemm_max``), ``dispatch_<op class>``
    (in ``launch`` or flat) and ``workspace``. Every number is a sourced quantity, range-checked
    here. ``ignore``: keys of ``tbl`` that belong to the caller."""
    label = label or origin
    vals: dict[str, dict[str, float | None]] = {}
    prov: dict[str, Provenance] = {}
    by_class: dict[str, float] = {}
    workspace: float | None = None
    def q(raw: Any, name: str, dim: str) -> float:
        v, p = read_quantity(raw, field=name, dimension=dim, sources=sources, origin=origin)
        prov[name] = p
        return v

    def put(group: str, fld: str, v: float | None) -> None:
        _range_check(label, f"{group}.{fld}", v)
        vals.setdefault(group, {})[fld] = v

    def dispatch_class(key: str, raw: Any, name: str) -> bool:
        cls = key.removeprefix("dispatch_")
        if key.startswith("dispatch_") and cls in OP_CLASSES:
            by_class[cls] = q(raw, name, "time")
            return True
        return False

    def group_table(group: str, sub: Any) -> None:
        if not isinstance(sub, dict) or _is_quantity(sub):
            raise SpecError(f"{origin}: [{group}] must be a table of factors")
        allowed = _GROUPS[group]
        for k, raw in sub.items():
            if group == "launch" and dispatch_class(k, raw, f"launch.{k}"):
                continue
            if k not in allowed:
                raise SpecError(f"{origin}: unknown factor {group}.{k}; allowed: "
                                f"{', '.join(allowed)}"
                                + (", dispatch_<op class>" if group == "launch" else ""))
            put(group, k, q(raw, f"{group}.{k}", allowed[k]))

    for k, raw in tbl.items():
        if k in ignore:
            continue
        if k == "workspace":
            workspace = q(raw, k, "bytes")
        elif k in _GROUPS:
            group_table(k, raw)
        elif k == "cpu" and isinstance(raw, dict) and not _is_quantity(raw):
            for sk, sub in raw.items():
                if f"cpu.{sk}" not in _GROUPS:
                    raise SpecError(f"{origin}: unknown group cpu.{sk}; allowed: page_faults, "
                                    "cold, evicted")
                group_table(f"cpu.{sk}", sub)
        elif k in FLAT_KEYS:
            group, fld, zero_off = FLAT_KEYS[k]
            v = q(raw, k, _GROUPS[group][fld])
            put(group, fld, None if (zero_off and v == 0) else v)
        elif not dispatch_class(k, raw, k):
            raise SpecError(f"{origin}: unknown efficiency factor {k!r}; allowed: groups "
                            f"{', '.join(g for g in _GROUPS if '.' not in g)}, cpu, workspace, "
                            f"the flat keys {', '.join(FLAT_KEYS)}, dispatch_<op class> "
                            f"({', '.join(OP_CLASSES)})")
    return EfficiencyPatch(groups=tuple((g, tuple(fv.items())) for g, fv in vals.items()),
                           by_class=tuple(sorted(by_class.items())), workspace=workspace,
                           provenance=prov)


def _build(base: Efficiency, vals: dict[str, dict[str, float | None]],
           by_class: dict[str, float], workspace: float, prov: dict[str, Provenance],
           label: str, synchronous: bool | None) -> Efficiency:
    def merged(group: str, cur: Any, cls: type) -> Any:
        new = vals.get(group)
        if not new:
            return cur
        sw = _SWITCHES.get(group)
        if sw and all(new.get(f, None if cur is None else getattr(cur, f)) is None for f in sw):
            return None  # the group's switch is off: its other fields change nothing
        kw = {} if cur is None else {f.name: getattr(cur, f.name) for f in fields(cls)}
        kw.update({k: v for k, v in new.items() if v is not None or _nullable(cls, k)})
        return cls(**kw)

    launch = merged("launch", base.launch, Launch)
    launch = replace(launch, by_class=tuple(sorted(by_class.items())),
                     synchronous=launch.synchronous if synchronous is None else synchronous)
    cpu = base.cpu or Cpu()
    cpu = Cpu(page_faults=merged("cpu.page_faults", cpu.page_faults, PageFaults),
              cold=merged("cpu.cold", cpu.cold, ColdWeights),
              evicted=merged("cpu.evicted", cpu.evicted, EvictedDispatch))
    return Efficiency(
        gemm=merged("gemm", base.gemm, Gemm), gemm_bf16=merged("gemm_bf16", base.gemm_bf16, Gemm),
        gemm_dtype=merged("gemm_dtype", base.gemm_dtype, GemmDtype),
        conv=merged("conv", base.conv, Conv), attention=merged("attention", base.attention,
                                                               Attention),
        vector=merged("vector", base.vector, Vector), memory=merged("memory", base.memory, Memory),
        launch=launch, cpu=None if cpu == Cpu() else cpu, tiles=base.tiles, clock=base.clock,
        workspace=workspace, label=label, provenance=prov)


def _nullable(cls: type, name: str) -> bool:
    for f in fields(cls):
        if f.name == name:
            return "None" in str(f.type)
    return False


def flat_efficiency(*, label: str, synchronous: bool | None = None, base: Efficiency = BOUND,
                    dispatch_by_class: dict[str, float] | None = None,
                    workspace: float | None = None, **flat: float) -> Efficiency:
    """``base`` with factors given by their flat names in SI units (``gemm_max=0.8``,
    ``cold_read_max=0.5``; 0 where the flat format meant "off" is off) — the spelling of
    measured spec files and of the calibration code's results."""
    vals: dict[str, dict[str, float | None]] = {}
    for k, v in flat.items():
        if k not in FLAT_KEYS:
            raise SpecError(f"efficiency {label}: unknown factor {k!r}; allowed: "
                            f"{', '.join(FLAT_KEYS)}")
        group, fld, zero_off = FLAT_KEYS[k]
        _range_check(label, f"{group}.{fld}", v)
        vals.setdefault(group, {})[fld] = None if (zero_off and v == 0) else float(v)
    by = dict(base.launch.by_class) | dict(dispatch_by_class or {})
    return _build(base, vals, by, base.workspace if workspace is None else workspace,
                  dict(base.provenance), label, synchronous)
