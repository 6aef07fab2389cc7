"""Whole waves of output tiles: the GPU matmul model where the architecture's tiles are data.

A GPU runs a matmul as output tiles (``tm`` rows × ``tn`` columns, the K loop split ``s``
ways over more tiles where few tiles would leave SMs idle), ``slots`` of them at once (SM count
× tiles per SM). A wave is one round of ``slots`` tiles; a tile of a half-empty last wave takes
as long as a full one. So for an op of implicit-GEMM sizes (M, N, K) with
``T = ceil(M/tm)·ceil(N/tn)·s`` tiles (engine/core.py):

    waves  W = ceil(T / slots)
    t      = fill + min over the candidates (tm, tn, s) of
             W · slots · 2·tm·tn·(K/s) · (1 + a/tm + b/tn + c·s/K) / (peak · max)
             + (s > 1) · 2·s·M·N·4 bytes / (bandwidth · memory.max)   (the fp32 partials)

i.e. each wave costs one tile's time on one SM, a tile's efficiency is the matmul model of the
tile's own sizes, and the kernel picks the candidate that finishes first (cuBLAS / CUTLASS pick
per shape). ``fill`` is a fixed time per matmul kernel (prologue, epilogue, the first loads).
A set with ``stream_k`` adds one candidate per tile shape: the full waves data-parallel, the
``r`` tiles of a partial last wave as r·K loop iterations spread evenly over the slots (each
segment with its own K-loop fill) plus the fixup of every slot's partial fp32 tile
(``_stream_k``; Osama et al., PPoPP 2023, as CUTLASS / cuBLAS run it on Hopper).
The op's kernel time is the larger of that and its memory time; a set with ``memory`` (Hopper:
a tiled GEMM streams its bytes at 0.80 of the bandwidth, a copy at the preset's 0.88) prices a
matmul's memory time at that fraction (``mem_ratio``); convolutions keep the preset's.
Large matmuls tend to ``flops · (1 + a/tm + b/tn + c/K) / (peak · max)`` for the best tile; a
1024³ one on 132 SMs fills one wave and pays for the idle SMs. An op with fewer rows than the
smallest tile (a matrix-vector product: batch-1 decode) runs as a GEMV / split-K kernel, not as
tiles of the list, and keeps the smooth model (no measured shape there). Convolutions are
priced the same way, as the implicit GEMMs cuDNN / TensorRT run them (M = batch × output
pixels, N = output channels, K = input channels × kernel area: the graph's ``gemm`` sizes),
where N fills the smallest tile's columns: a depthwise conv (N = 1) and a grouped one whose
groups are narrower than that (N = C'/g) keep the smooth model; a grouped conv of wider groups
runs as one GEMM of its groups' rows (M = batch × output pixels × g).

Data: data/presets/tiles.toml (architectures, the parts of each with their SM counts, the
candidate tiles, the fitted a, b, c, max and fill); judged in docs/validation/gemm.md. Parts of
no listed architecture (CPUs, TPUs, SoCs, other GPUs) keep the smooth matmul model.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from ..errors import SpecError

__all__ = ["Tiles", "tiles_for", "with_tiles", "without_tiles", "wave_ops", "WaveOps",
           "WaveSplit", "wave_split", "mem_ratio", "streamed", "TILE_DTYPES"]

#: compute dtypes the 16-bit parameter set prices: the tensor-core matmuls it was fitted on
#: (bf16 dots; fp16 runs the same tiles). A narrow dtype is priced only where its architecture
#: has a parameter set of its own (``Tiles.narrow``: fp8 on Hopper, Blackwell, CDNA 3 / 4; int8
#: on Ampere and Hopper); the others and fp32 / tf32 / fp64 keep the smooth matmul model
TILE_DTYPES = ("fp16", "bf16")
#: narrow dtypes an architecture may give a parameter set of its own (``[arch.<name>.fp8]``)
NARROW_TILE_DTYPES = ("fp8", "fp4", "int8")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tiles:
    """One part's tile model (see the module docstring); a value, hashed into Efficiency."""

    arch: str  #: the architecture the parameters are of
    slots: int  #: tiles in flight at once (SM count × tiles per SM)
    shapes: tuple[tuple[int, int], ...]  #: candidate output tiles (rows, columns)
    splits: tuple[int, ...] = (1,)  #: candidate split-K factors
    max: float = 1.0  #: fraction of the (sustained) dense peak a tile's SM reaches at best
    a: float = 0.0  #: tile rows at which the row penalty halves a tile's efficiency
    b: float = 0.0  #: as ``a`` for tile columns
    c: float = 0.0  #: K at which the K-loop fill halves it (per split)
    fill: float = 0.0  #: seconds per matmul kernel (prologue, epilogue)
    #: the library may run a shape stream-K (a partial last wave's K loops spread evenly over
    #: every slot, the partial tiles summed in a fixup): one more candidate per tile shape
    stream_k: bool = False
    #: fraction of the main memory's bandwidth the tiled kernel streams its operands at (0:
    #: the preset's ``memory.max``, a copy's): the memory side of a matmul the tiles price is
    #: bytes / (bandwidth · memory); one value per architecture, shared by its narrow sets
    memory: float = 0.0
    #: (dtype, its own parameter set) for narrow dtypes fitted on their own: its max, a, b, c,
    #: fill (``max`` a fraction of that dtype's peak, replacing the end-to-end ``gemm_dtype``
    #: factor: the fit is of the kernel itself) and its candidate tiles (the architecture's
    #: unless ``[arch.<name>.<dtype>]`` lists its own ``shapes``); slots and splits are this set's
    narrow: tuple[tuple[str, Tiles], ...] = ()
    #: (dtype, the part's engine clock under long matmuls of that dtype / the clock of the part
    #: the set was fitted on), where two parts of one set sustain different clocks (measured:
    #: ``[arch.<name>.clock]``); a dtype not listed: 1
    clock: tuple[tuple[str, float], ...] = ()

    def clock_of(self, dtype: str) -> float:
        """The part's sustained-clock ratio for ``dtype`` (1 where none is measured)."""
        return dict(self.clock).get(dtype, 1.0)

    def for_dtype(self, dtype: str) -> Tiles | None:
        """The parameter set pricing ``dtype`` (None: the smooth model prices it)."""
        if dtype in TILE_DTYPES:
            return self
        for d, t in self.narrow:
            if d == dtype:
                return replace(t, arch=self.arch, slots=self.slots, shapes=t.shapes,
                               splits=self.splits, narrow=(), clock=self.clock,
                               memory=self.memory)
        return None

    def check(self, label: str) -> None:
        def bad(name: str, v: Any, allowed: str) -> SpecError:
            return SpecError(f"efficiency {label}: tiles.{name}={v!r} must be {allowed}")

        if not isinstance(self.slots, int) or self.slots < 1:
            raise bad("slots", self.slots, "an integer >= 1 (SMs x tiles per SM)")
        if not self.shapes or any(not (isinstance(x, int) and x >= 1) for s in self.shapes
                                  for x in s) or any(len(s) != 2 for s in self.shapes):
            raise bad("shapes", self.shapes, "a non-empty list of [rows, columns] integers >= 1")
        if not self.splits or any(not (isinstance(s, int) and s >= 1) for s in self.splits):
            raise bad("splits", self.splits, "a non-empty list of integers >= 1")
        if not (0.0 < self.max <= 1.0):
            raise bad("max", self.max, "in (0, 1]")
        for nm in ("a", "b", "c"):
            v = getattr(self, nm)
            if not (0.0 <= v < float("inf")):
                raise bad(nm, v, "finite and >= 0")
        if not (0.0 <= self.fill <= 1.0):
            raise bad("fill", self.fill, "in [0, 1] seconds per kernel")
        if not (0.0 <= self.memory <= 1.0):
            raise bad("memory", self.memory, "in (0, 1] (or 0: the preset's memory.max)")
        if not isinstance(self.stream_k, bool):
            raise bad("stream_k", self.stream_k, "true or false")
        best = 1.0 + self.a / max(r for r, _ in self.shapes) + self.b / max(
            c for _, c in self.shapes)
        for d, r in self.clock:
            # a faster clock than the fitted part's may not price a tile above the peak
            if d not in TILE_DTYPES + NARROW_TILE_DTYPES or not 0.0 < r < float("inf") or (
                    d in TILE_DTYPES and self.max * r / best > 1.0):
                raise bad(f"clock[{d}]", r, "a positive ratio of a tile dtype whose best tile "
                          "stays within the peak (max x ratio / (1 + a/tm + b/tn) <= 1)")
        for d, t in self.narrow:
            if d not in NARROW_TILE_DTYPES or t.narrow:
                raise bad(f"narrow[{d}]", d, f"one of {', '.join(NARROW_TILE_DTYPES)}, with "
                          "no narrow sets of its own")
            t.check(f"{label} [{d}]")
            best_d = 1.0 + t.a / max(r for r, _ in t.shapes) + t.b / max(
                c for _, c in t.shapes)
            if t.max * self.clock_of(d) / best_d > 1.0:
                raise bad(f"clock[{d}]", self.clock_of(d), "a ratio whose best tile stays "
                          "within the peak (max x ratio / (1 + a/tm + b/tn) <= 1)")


def _mk(arch: str, slots: int, shapes: tuple[tuple[int, int], ...], splits: tuple[int, ...],
        v: dict[str, Any], narrow: tuple[tuple[str, Tiles], ...],
        clock: tuple[tuple[str, float], ...] = ()) -> Tiles:
    return Tiles(arch=arch, slots=slots, shapes=shapes, splits=splits, max=v["max"], a=v["a"],
                 b=v["b"], c=v["c"], fill=v["fill"], stream_k=v["stream_k"], narrow=narrow,
                 clock=clock, memory=v.get("memory", 0.0))


def _stream_k_flag(t: dict[str, Any], where: str, src: dict[str, Any]) -> bool:
    """A set's ``stream_k`` (default false; when given, with a ``stream_k_source``)."""
    v = t.get("stream_k", False)
    if not isinstance(v, bool):
        raise SpecError(f"{where}: stream_k={v!r} must be true or false")
    if "stream_k" in t and t.get("stream_k_source") not in src:
        raise SpecError(f"{where}: stream_k_source {t.get('stream_k_source')!r} is not in "
                        "[sources]")
    return v


def _clock_ratios(tbl: dict[str, Any], where: str, src: dict[str, Any],
                  origin: str) -> dict[str, tuple[tuple[str, float], ...]]:
    """``[arch.<name>.clock.<part>]``: per part and dtype the measured engine clock under long
    matmuls; each part's ratio to the ``clock_reference`` part's (the part the set's factors
    were fitted on), per dtype the reference lists too."""
    from ..specs.sourced import read_quantity

    raw = tbl.get("clock")
    if raw is None:
        return {}
    ref = tbl.get("clock_reference")
    if not isinstance(raw, dict) or ref not in raw:
        raise SpecError(f"{where}: clock_reference={ref!r} must name a part of [clock] "
                        f"({', '.join(raw) if isinstance(raw, dict) else raw!r})")
    mhz = {p: {d: read_quantity(v, field=f"{where}.clock.{p}.{d}", dimension="frequency",
                                sources=src, origin=origin)[0] for d, v in dts.items()}
           for p, dts in raw.items()}
    for p, dts in mhz.items():
        if set(dts) - set(mhz[ref]):
            raise SpecError(f"{where}: clock.{p} lists {sorted(set(dts) - set(mhz[ref]))}, "
                            f"which the reference part {ref!r} does not")
    return {p: tuple((d, float(v) / float(mhz[ref][d])) for d, v in sorted(dts.items()))
            for p, dts in mhz.items()}


def _shape_list(raw: Any, where: str) -> tuple[tuple[int, int], ...]:
    """``shapes`` as the data file gives them: a non-empty list of [rows, columns] integers
    >= 1. Anything else is refused, not converted (``int`` would truncate 64.5 to 64)."""
    if not isinstance(raw, list) or not raw or any(
            not isinstance(x, list) or len(x) != 2
            or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in x)
            for x in raw):
        raise SpecError(f"{where}: shapes={raw!r} must be a non-empty list of [rows, columns] "
                        "integers >= 1")
    return tuple((r, c) for r, c in raw)


def _own_shapes(t: dict[str, Any], where: str,
                src: dict[str, Any]) -> tuple[tuple[int, int], ...] | None:
    """A narrow set's own ``shapes`` (with a ``shapes_source`` in [sources]), None if it lists
    none."""
    if "shapes" not in t:
        return None
    if t.get("shapes_source") not in src:
        raise SpecError(f"{where}: shapes_source {t.get('shapes_source')!r} is not in [sources]")
    return _shape_list(t["shapes"], where)


@lru_cache(maxsize=1)
def _tables() -> dict[str, Any]:
    from .._data import DATA, read_toml
    from ..specs.sourced import read_quantity

    origin = "data/presets/tiles.toml"
    doc = read_toml(DATA / "presets" / "tiles.toml")
    src = doc.get("sources", {})
    parts: dict[str, Tiles] = {}
    for arch, tbl in doc.get("arch", {}).items():
        where = f"{origin} [arch.{arch}]"

        def q(key: str, dim: str, tbl: dict[str, Any] = tbl, where: str = where) -> float:
            if key not in tbl:
                raise SpecError(f"{where}: missing {key!r}")
            v, _ = read_quantity(tbl[key], field=f"{where}.{key}", dimension=dim, sources=src,
                                 origin=origin)
            return float(v)

        for key in ("shapes", "splits"):
            if tbl.get(f"{key}_source") not in src:
                raise SpecError(f"{where}: {key}_source {tbl.get(f'{key}_source')!r} is not "
                                "in [sources]")
        shapes = _shape_list(tbl.get("shapes"), where)
        # a narrow dtype's own candidate tiles (its library's kernels), else the architecture's
        narrow_shapes = {d: _own_shapes(tbl[d], f"{where}.{d}", src) or shapes
                         for d in NARROW_TILE_DTYPES if d in tbl}
        splits = tuple(int(s) for s in tbl.get("splits", (1,)))
        per_sm = int(q("tiles_per_sm", "ratio"))

        def fit(t: dict[str, Any], w: str) -> dict[str, Any]:
            return {**{k: q(k, "time" if k == "fill" else "ratio", t, w)
                       for k in ("max", "a", "b", "c", "fill")},
                    "stream_k": _stream_k_flag(t, w, src)}

        kw = fit(tbl, where)
        if "memory" in tbl:  # the architecture's streaming fraction (Tiles.memory)
            kw["memory"] = q("memory", "ratio")
        # a narrow dtype's own parameter set: [arch.<name>.<dtype>] (e.g. fp8)
        narrow_kw = {d: fit(tbl[d], f"{where}.{d}") for d in NARROW_TILE_DTYPES if d in tbl}
        clocks = _clock_ratios(tbl, where, src, origin)
        for key, raw in tbl.get("sm_count", {}).items():
            sms, _ = read_quantity(raw, field=f"{where}.sm_count.{key}", dimension="ratio",
                                   sources=src, origin=origin)
            where_t = (arch, int(sms) * per_sm, shapes, splits)
            t = _mk(*where_t, kw, tuple(
                (d, _mk(arch, where_t[1], narrow_shapes[d], splits, v, ()))
                for d, v in narrow_kw.items()), clocks.get(key, ()))
            t.check(where)
            parts[key] = t
    return parts


def tiles_for(hw: Any) -> Tiles | None:
    """The tile model of ``hw`` (None: its architecture has no tile data). Keyed on the zoo
    key: a part derived from a zoo entry under another key has none (a ``key~tag`` copy of
    ``analysis.sensitivity`` keeps its part's)."""
    if getattr(hw, "kind", None) != "gpu":
        return None
    # a hypothetical copy (analysis.sensitivity.scaled_hardware: "<key>~<tag>") keeps its SMs
    return _tables().get(hw.key.split("~", 1)[0])


def with_tiles(eff: Any, hw: Any) -> Any:
    """``eff`` with the tile model of ``hw`` (unchanged where it has none, or for the pure
    roofline), and the part's clock ratios of its set (``Tiles.clock``) as the efficiency's
    own (``Efficiency.clock``): the smooth matmul model, which ``without_tiles`` keeps for
    serve and train, prices the part at the same clock as its tiles."""
    t = tiles_for(hw)
    if t is None or eff.is_bound or eff.tiles == t:
        return eff
    return _with(eff, t)


@lru_cache(maxsize=256)
def _with(eff: Any, t: Tiles) -> Any:
    return replace(eff, tiles=t, clock=t.clock, label=f"{eff.label}/tiles")


class WaveOps:
    """The matmul ops of one (graph, hardware, efficiency) the tile model prices, with every
    batch-independent part precomputed once (engine/core.py builds it with the TimeModel):
    per op and candidate (tile, split) the column tiles ``ceil(N/tn)``, the seconds one wave
    costs and the split's reduction seconds per row; ``seconds(B)`` is then two ceilings, a
    product and a minimum per candidate."""

    __slots__ = ("idx", "m1", "tm", "cols", "splits", "per_wave", "per_row", "slots", "fill",
                 "rows_min", "inv", "sk", "mem", "mem_op")

    def __init__(self, idx: Any, m1: Any, n: Any, k: Any, rho: Any, gpk: float,
                 t: Tiles, inv_bw: float, mem: float = 1.0, is_mm: Any = None) -> None:
        import numpy as np

        # ops of one shape (a model's layers) are priced once: ``inv`` maps them back
        u, self.inv = np.unique(np.stack([m1, n, k, rho], 1), axis=0, return_inverse=True)
        self.inv = self.inv.ravel()
        m1, n, k, rho = u.T
        self.idx, self.m1, self.slots, self.fill = idx, m1, float(t.slots), t.fill
        #: the memory side of a tile-priced matmul × this (memory.max / Tiles.memory; 1: none),
        #: per op (``mem_op``): convolutions keep 1 (no measured conv stream; ``is_mm`` False)
        self.mem = float(mem)
        self.mem_op = np.where(np.ones(len(idx), dtype=bool) if is_mm is None else is_mm,
                               self.mem, 1.0)
        cand = [(tm, tn, s) for tm, tn in t.shapes for s in t.splits]
        tm = np.array([c[0] for c in cand], dtype=np.float64)
        tn = np.array([c[1] for c in cand], dtype=np.float64)
        s = np.array([c[2] for c in cand], dtype=np.float64)
        self.tm, self.splits, self.rows_min = tm, s, float(tm.min())
        N, K = n[:, None], k[:, None]
        self.cols = np.ceil(N / tn)
        # one wave: every slot runs one tile of 2·tm·tn·(K/s) FLOPs at the tile's efficiency
        pen = 1.0 + t.a / tm + t.b / tn + t.c * s / K
        self.per_wave = self.slots * 2.0 * tm * tn * (K / s) * pen / gpk * rho[:, None]
        # split K: the s partial outputs (fp32) are written and read back by the reduction
        self.per_row = np.where(s > 1, 2.0 * 4.0 * s * N * inv_bw, 0.0)
        self.sk = _stream_k(t, n, k, rho, gpk, inv_bw) if t.stream_k else None

    def scaled(self, peak: float, bandwidth: float = 1.0) -> WaveOps:
        """A copy for every peak × ``peak`` and the main memory's bandwidth × ``bandwidth``
        (the per-wave times and the reductions scale, the fill does not)."""
        w = object.__new__(WaveOps)
        for a in WaveOps.__slots__:
            object.__setattr__(w, a, getattr(self, a))
        w.per_wave = self.per_wave / peak
        w.per_row = self.per_row / bandwidth
        if self.sk is not None:
            tm, cols, full_wave, per_tile, seg, fixup = self.sk
            w.sk = (tm, cols, full_wave / peak, per_tile / peak, seg / peak, fixup / bandwidth)
        return w

    def seconds(self, Bc: Any, smooth: Any) -> Any:
        """Compute seconds of each wave op at batch ``Bc`` (a float, or [b, 1]): [nw] or
        [b, nw]. Ops with fewer rows than the smallest tile (matrix-vector products: a GEMV
        or split-K kernel, not tiles of the list) keep ``smooth``, the smooth model's."""
        import numpy as np

        t, M = self.per_shape(Bc)
        return np.where((M < self.rows_min)[..., self.inv], smooth, t[..., self.inv])

    def mem_scale(self, Bc: Any) -> Any:
        """The factor on each wave op's memory time at batch ``Bc``: ``mem_op`` where its tiles
        price it, 1 where the smooth model does (fewer rows than the smallest tile)."""
        import numpy as np

        M = np.maximum(self.m1 * Bc, 1.0)
        return np.where((M < self.rows_min)[..., self.inv], 1.0, self.mem_op)

    def fills(self, Bc: Any) -> Any:
        """The fixed fill in ``seconds(Bc)`` of each wave op: ``fill`` where its tiles price
        it, 0 where the smooth model does (fewer rows than the smallest tile)."""
        import numpy as np

        M = np.maximum(self.m1 * Bc, 1.0)
        return np.where(M < self.rows_min, 0.0, self.fill)[..., self.inv]

    def per_shape(self, Bc: Any) -> tuple[Any, Any]:
        """(tile-model seconds, rows M) of each distinct shape at batch ``Bc``."""
        import numpy as np

        M = np.maximum(self.m1 * Bc, 1.0)
        Mc = M[..., None]
        waves = np.ceil(np.ceil(Mc / self.tm) * self.cols * self.splits / self.slots)
        t = (waves * self.per_wave + Mc * self.per_row).min(-1)
        if self.sk is not None:
            tm, cols, full_wave, per_tile, seg, fixup = self.sk
            tiles = np.ceil(Mc / tm) * cols
            full = np.floor(tiles / self.slots)
            rest = tiles - full * self.slots
            t = np.minimum(t, (full * full_wave + np.where(
                rest > 0, rest * per_tile + seg + fixup, 0.0)).min(-1))
        return t + self.fill, M


def _stream_k(t: Tiles, n: Any, k: Any, rho: Any, gpk: float, inv_bw: float) -> tuple[Any, ...]:
    """Stream-K candidates, one per tile shape (s = 1): the full waves as data-parallel tiles,
    then the ``r`` tiles of the partial last wave as r·K loop iterations spread evenly over the
    slots — each slot runs a segment of K·r/slots with its own K-loop fill (the ``c`` term) —
    and every slot's partial tile (fp32) written and read back in the fixup."""
    import numpy as np

    tm = np.array([x[0] for x in t.shapes], dtype=np.float64)
    tn = np.array([x[1] for x in t.shapes], dtype=np.float64)
    N, K, r = n[:, None], k[:, None], rho[:, None]
    cols = np.ceil(N / tn)
    flops_tile = 2.0 * tm * tn * K
    full_wave = t.slots * flops_tile * (1.0 + t.a / tm + t.b / tn + t.c / K) / gpk * r
    per_tile = flops_tile * (1.0 + t.a / tm + t.b / tn) / gpk * r
    seg = t.slots * 2.0 * tm * tn * t.c / gpk * r + 0.0 * K
    fixup = 2.0 * 4.0 * t.slots * tm * tn * inv_bw
    return tm, cols, full_wave, per_tile, seg, fixup


def wave_ops(graph: Any, hw: Any, eff: Any, dtype: str, peak: float) -> WaveOps | None:
    """The WaveOps of ``graph`` on (hw, eff), or None where the tile model does not apply
    (no tile data, the pure roofline, a dtype with no parameter set, no matmul op)."""
    import numpy as np

    t = None if eff.tiles is None else eff.tiles.for_dtype(dtype)
    if t is None or eff.is_bound:
        return None
    m1, n, k = graph.gemm
    f1 = graph.c1[0]
    # matmuls, and convolutions as implicit GEMMs whose columns fill the smallest tile: a
    # grouped / depthwise conv (N = C'/g, 1 for depthwise) is not a tensor-core GEMM
    mm = np.array([c == "matmul" for c in graph.classes], dtype=bool)
    cv = np.array([c == "conv" for c in graph.classes], dtype=bool)
    cv &= n >= min(tn for _, tn in t.shapes)
    ok = (mm | cv) & (m1 > 0) & (n >= 1) & (k >= 1) & (f1 > 0)
    idx = np.flatnonzero(ok)
    if len(idx) == 0:
        return None
    # a narrow dtype's own set is a fraction of its own peak (no end-to-end gemm_dtype factor)
    k_dtype = eff.gemm_dtype.of(dtype) if dtype in TILE_DTYPES else 1.0
    gpk = peak * t.max * k_dtype * hw.sustained(dtype) * t.clock_of(dtype)
    m1, n, k = m1[idx], n[idx], k[idx]
    rho = f1[idx] / (2.0 * m1 * n * k)  # the op's FLOPs per 2·M·N·K (bias adds: ~1)
    return WaveOps(idx, m1, n, k, rho, gpk, t, 1.0 / (hw.memory_bytes_per_s * eff.memory.max),
                   mem_ratio(t, eff), mm[idx])


def streamed(tm: Any, w: WaveOps | None, Bc: Any) -> Any:
    """The per-op memory times ``tm`` ([.., n], a fresh array) with each tile-priced matmul's
    at its set's streaming fraction (``WaveOps.mem_scale``; engine/core.py)."""
    if w is not None and w.mem != 1.0:
        tm[..., w.idx] *= w.mem_scale(Bc)
    return tm


def mem_ratio(t: Tiles, eff: Any) -> float:
    """The factor on a tile-priced op's memory time: ``memory.max / Tiles.memory`` (1 where
    the set gives no streaming fraction of its own)."""
    return float(eff.memory.max) / t.memory if t.memory > 0 else 1.0


@lru_cache(maxsize=256)
def without_tiles(eff: Any) -> Any:
    """``eff`` without the tile model: the serving and training profiles were fitted on the
    smooth matmul model and patch its factors; they keep it until refitted with waves. The
    part's clock ratios (``Efficiency.clock``) stay: they are the part's, not the tiles'."""
    if eff.tiles is None:
        return eff
    return replace(eff, tiles=None, label=eff.label.removesuffix("/tiles"))


def smooth_fill(*effs: Any) -> float:
    """The per-kernel fill (s) of a pricing path that sums whole-graph times without a fill
    row (serving's closed form, training's step): 0 where every efficiency it prices with is
    the smooth matmul model (``without_tiles``: no whole waves, so no fill), NaN where one
    keeps tile sets (a fill that path does not sum: NaN, never a silent 0)."""
    return 0.0 if all(e.tiles is None for e in effs) else float("nan")


class WaveSplit:
    """A solve's totals at one batch without summing every op (engine/core.py ``_direct``):
    the ops the tile model does not price through the closed form of a time model of their
    own (``rest``), the matmuls it prices evaluated once per distinct op (a model's layers
    repeat them) and weighted by how often each occurs. Equal to summing every op (tested)."""

    __slots__ = ("rest", "X0", "X1", "ic0", "ic1", "icap", "ibound", "disp", "counts", "shape",
                 "mem", "waves", "tm", "_rows")

    def __init__(self, tm: Any, rest: Any) -> None:
        import numpy as np

        w = tm.waves
        wi = w.idx
        disp = np.broadcast_to(np.asarray(tm.disp, dtype=np.float64), tm.C0[0].shape)[wi]
        cols = np.vstack([tm.C0[:, wi], tm.C1[:, wi], tm.moved[0][wi], tm.moved[1][wi],
                          tm.inv_c0[wi], tm.inv_c1[wi], tm.inv_cap[wi], tm.inv_bound[wi],
                          disp, w.inv.astype(np.float64), w.mem_op])
        u, counts = np.unique(cols.T, axis=0, return_counts=True)
        u = u.T
        self.rest, self.waves, self.tm = rest, w, tm
        self.X0 = np.vstack([u[0:3], u[6:7]])  # flops, main bytes, act bytes, moved bytes
        self.X1 = np.vstack([u[3:6], u[7:8]])
        self.ic0, self.ic1, self.icap, self.ibound, self.disp = u[8], u[9], u[10], u[11], u[12]
        self.shape = u[13].astype(np.intp)
        self.mem = u[14]  # each distinct op's memory factor where its tiles price it
        self.counts = counts.astype(np.float64)
        # the same columns as Python floats, one tuple per distinct op: ``totals`` at one batch
        # runs over a handful of ops, where a float operation costs a tenth of a numpy call
        self._rows = list(zip(*(x.tolist() for x in (*self.X0, *self.X1, self.ic0, self.ic1,
                                                     self.icap, self.ibound)),
                              self.shape.tolist(), self.mem.tolist(), strict=True))

    def totals(self, B: float) -> Any:
        """The totals at batch ``B`` (a float): the engine's per-op rules (core.py
        ``TimeModel.evaluate``) over the distinct wave ops in Python floats, the launch rule
        once over them (lines.launch), weighted by the op counts, plus the rest's closed form."""
        import numpy as np

        from .core import Totals
        from .lines import launch

        tm, w = self.tm, self.waves
        ts_a, M_a = w.per_shape(B)
        ts, M, rows_min = ts_a.tolist(), M_a.tolist(), w.rows_min
        inv_act, bw, inv_main, levels = tm.inv_act, tm.bw, tm.inv_main, tm.levels
        inv_bw = 1.0 / bw
        tks: list[float] = []
        cols: list[tuple[float, ...]] = []
        live = 0.0
        for f0, mb0, ab0, tb0, f1, mb1, ab1, tb1, ic0, ic1, icap, ibound, sh, mf in self._rows:
            f, mb, ab, tb = f0 + f1 * B, mb0 + mb1 * B, ab0 + ab1 * B, tb0 + tb1 * B
            # rows below the smallest tile keep the smooth model (WaveOps.seconds)
            smooth = M[sh] < rows_min
            tc = f * (min(ic1 / B, icap) + ic0) if smooth else ts[sh]
            fl = 0.0 if smooth else w.fill
            inv_a, inv_ab = inv_act, inv_bw
            for cap, lbw in levels:  # the smallest on-chip level the activations fit in
                if ab <= cap:
                    inv_a, inv_ab = inv_act * bw / lbw, 1.0 / lbw
            t_m = (mb * inv_main + ab * inv_a) * (1.0 if smooth else mf)
            tk = max(tc, t_m)
            tks.append(tk)
            fs = tk - max(tc - fl, t_m)  # the fill's share (core.fill_share)
            cols.append((max(f * ibound, mb / bw + ab * inv_ab), tc, t_m, f, tb,
                         tk - fs if tc - fl >= t_m else 0.0, fs))
            live = max(live, ab)
        t_op = launch(np.array(tks), tm.gap, self.disp, tm.sync).tolist()
        s = [0.0] * 9
        for t, tk, (bound, tc, t_m, f, tb, tcb, fs), n in zip(t_op, tks, cols,
                                                               self.counts.tolist(), strict=True):
            for k, v in enumerate((t, bound, tc, t_m, t - tk, f, tb, tcb, fs)):
                s[k] += v * n
        r = self.rest.totals_at(B)
        return Totals(r.latency + s[0], r.latency_bound + s[1], r.t_compute + s[2],
                      r.t_memory + s[3], r.t_overhead + s[4], r.flops + s[5], r.bytes + s[6],
                      r.t_compute_bound_ops + s[7], max(r.live_activation_bytes, live),
                      r.t_fill + s[8])


def wave_split(tm: Any) -> WaveSplit | None:
    """The WaveSplit of a TimeModel whose only term off the closed form is whole waves (and
    whose other ops have a closed form of their own), else None."""
    from dataclasses import replace as _replace

    import numpy as np

    from .core import TimeModel

    if tm.waves is None or len(tm.nonlinear) != 1 or not tm.all_have:
        return None
    g = tm.graph
    keep = np.setdiff1d(np.arange(len(g.names)), tm.waves.idx)
    if len(keep) == 0:
        return None
    sub = _replace(g, names=tuple(g.names[i] for i in keep),
                   kinds=tuple(g.kinds[i] for i in keep),
                   classes=tuple(g.classes[i] for i in keep), c0=g.c0[:, keep],
                   c1=g.c1[:, keep], gemm=g.gemm[:, keep], params=g.params[keep],
                   fusible=None if g.fusible is None else g.fusible[keep],
                   saves=None if g.saves is None else g.saves[keep],
                   meta={k: v for k, v in g.meta.items() if k not in ("_time_models",
                                                                         "_is_compute")})
    rest = TimeModel(sub, tm.hw, tm.eff)
    if not rest.envelope_ok or rest.waves is not None:
        return None
    return WaveSplit(tm, rest)
