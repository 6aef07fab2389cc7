"""The spec file: a measured machine as hardware TOML (same format as the zoo), written
atomically."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import platform
import re
import socket
import tempfile
from pathlib import Path
from typing import Any

from ..engine.efficiency import FLAT_KEYS
from ..errors import SpecError
from .derive import Fitted, _num, _spread, derive
from .plan import FRESH_ALLOC_MIN_BYTES
from .run import Measurements

__all__ = ["spec_toml", "write_atomic", "check_writable"]


def _esc(s: str) -> str:
    """``s`` as the inside of a TOML basic string (between double quotes)."""
    from .._data import toml_escape

    return toml_escape(str(s))


def _q(value: float, unit: str, source: str, derivation: str = "", note: str = "") -> str:
    parts = [f"value = {_num(value)}", f'unit = "{unit}"', f'source = "{source}"']
    if derivation:
        parts.append(f'derivation = "{_esc(derivation)}"')
    if note:
        parts.append(f'note = "{_esc(note)}"')
    return "{ " + ", ".join(parts) + " }"


def _host() -> str:
    return socket.gethostname() or platform.node() or "unknown-host"


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "CPU"


def _sysfs_caches() -> list[tuple[str, float]]:
    """(name, total bytes over all instances) of the data/unified caches sysfs lists,
    innermost first; [] where unavailable."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    out = []
    try:
        ncpu = len([d for d in Path("/sys/devices/system/cpu").glob("cpu[0-9]*")])
        for d in sorted(root.glob("index*")):
            typ = (d / "type").read_text().strip()
            if typ == "Instruction":
                continue
            lvl = (d / "level").read_text().strip()
            size = (d / "size").read_text().strip()
            mult = {"K": 2**10, "M": 2**20, "G": 2**30}.get(size[-1:], 1)
            b = float(size.rstrip("KMG")) * mult
            shared = (d / "shared_cpu_list").read_text().strip()
            n_share = sum(int(r.split("-")[1]) - int(r.split("-")[0]) + 1 if "-" in r else 1
                          for r in shared.split(",") if r)
            out.append((f"L{lvl}{'d' if typ == 'Data' else ''}", b * max(1, ncpu // n_share)))
    except (OSError, ValueError, IndexError):
        return []
    return out


def _cache_name(largest_ws: float, caches: list[tuple[str, float]]) -> str:
    """The innermost cache whose total capacity holds this plateau's working sets."""
    for name, cap in caches:
        if largest_ws <= cap:
            return name
    return f"{caches[-1][0]} (beyond its size)"


def _mem_total_bytes() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 16 * 2**30


def _default_eff_rows(kind: str) -> dict[str, Any]:
    from ..engine.presets import default_tables

    e = default_tables()[kind]
    return {"gemm_max": e.gemm.max, "gemm_a": e.gemm.a, "gemm_b": e.gemm.b, "gemm_c": e.gemm.c,
            "vector_max": e.vector.max, "workspace": e.workspace}


def spec_toml(ms: Measurements, *, key: str | None = None, name: str | None = None,
              date: str | None = None, host: str | None = None,
              memory_bytes: float | None = None) -> str:
    """The hardware TOML text of a measured machine (same format as the zoo)."""
    fit = derive(ms)
    host = host or _host()
    date = date or _dt.date.today().isoformat()
    key = key or ("measured-" + (re.sub(r"[^a-z0-9.-]+", "-", host.lower()).strip("-.")
                                 or "host"))
    dev = ms.info.get("device") or (_cpu_name() if ms.kind == "cpu" else "GPU")
    name = name or f"{dev} (measured on {host})"
    mem_total = memory_bytes or float(ms.info.get("memory_bytes") or _mem_total_bytes())
    method = (f"roofline measure ({ms.info.get('framework', '?')}, "
              f"{ms.info.get('threads', '?')} threads)")
    mem_src = "/proc/meminfo MemTotal" if ms.kind == "cpu" else "device total memory"
    L: list[str] = [
        "# Measured by `roofline measure`: every number below is a median of repeated timings",
        "# on this machine (see each derivation); [efficiency] is the model fitted from them.",
        "schema = 1", f'key = "{_esc(key)}"', f'name = "{_esc(name)}"', 'vendor = "measured"',
        f'kind = "{ms.kind}"', f"year = {int(date[:4])}", "", "[sources]",
        f'm = "measured: {_esc(method)}, {_esc(date)}, {_esc(host)}; BLAS: '
        f'{_esc(ms.info.get("blas", "") or "n/a")}"',
        f'mem = "measured: {mem_src}, {_esc(date)}, {_esc(host)}"',
        'glibc = "Linux man-pages mallopt(3), M_MMAP_THRESHOLD: the dynamic threshold is capped at '
        'DEFAULT_MMAP_THRESHOLD_MAX = 4*1024*1024*sizeof(long) = 32 MiB on 64-bit systems; GNU C '
        'Library manual, Malloc Tunable Parameters (chunks above the threshold are mmapped)"',
        'default = "roofline data/presets/default.toml (per-kind default preset; not measured '
        'here)"',
        "", "[peak]",
    ]
    for dtype in ("fp64", "fp32", "tf32", "bf16", "fp16"):
        if dtype not in ms.peaks:
            continue
        rate, how, s = ms.peaks[dtype]
        others = "; ".join(f"{be} {sz}: {r / 1e9:.4g}" for d, be, sz, r in ms.peak_candidates
                           if d == dtype)
        L.append(f"{dtype} = " + _q(rate / 1e9, "GFLOP/s", "m",
                                    f"best GEMM rate, {how}: 2*n^3 / median time ({_spread(s)})",
                                    f"all candidates (GFLOP/s): {others}"))
    L += _memory_rows(ms, fit, mem_total)
    L += _efficiency_rows(ms, fit)
    L += _raw_rows(ms, fit, host, date, method)
    return "\n".join(L)


def _memory_rows(ms: Measurements, fit: Fitted, mem_total: float) -> list[str]:
    """The ``[[memory]]`` tables, main memory first, named after the caches they fit in."""
    L: list[str] = []
    names = {1: ["DRAM"], 2: ["DRAM", "cache"], 3: ["DRAM", "LLC", "L2"],
             4: ["DRAM", "LLC", "L2", "L1"]}
    if ms.kind == "gpu":
        names = {1: ["HBM"], 2: ["HBM", "L2"], 3: ["HBM", "L2", "L1/shared"],
                 4: ["HBM", "L2", "L1/shared", "registers"]}
    lv = list(reversed(fit.levels))  # main first
    nm = names[min(len(lv), 4)]
    caches = _sysfs_caches() if ms.kind == "cpu" and not ms.info.get("framework", "").startswith(
        "fake") else []
    if caches:
        nm = ["DRAM"] + [_cache_name(p.largest_bytes, caches) for p in lv[1:]]
    nm = [nm[i] if i < len(nm) else f"level {i}" for i in range(len(lv))]
    total = {n: nm.count(n) for n in nm}
    seen: dict[str, int] = {}
    for i, p in enumerate(lv):
        nme = nm[i]
        if total[nme] > 1:  # one cache, several plateaus (e.g. a large shared L3): outer first
            seen[nme] = seen.get(nme, 0) + 1
            nme = (f"{nme} (outer part)" if seen[nme] == 1 else f"{nme} (inner part)"
                   if seen[nme] == total[nme] else f"{nme} (part {seen[nme]})")
        L += ["", "[[memory]]", f'name = "{nme}"']
        der_bw = (f"median over STREAM {'/'.join(sorted({k for k, _, _ in ms.stream}))} of "
                  f"bytes read+written / (time - per-op cost) at {p.n} working sets "
                  f"{p.smallest_bytes / 2**10:,.0f}-{p.largest_bytes / 2**10:,.0f} KiB")
        if i == 0:
            L.append("capacity = " + _q(mem_total / 2**30, "GiB", "mem"))
        else:
            L.append("capacity = " + _q(p.capacity_bytes / 2**10, "KiB", "m",
                     "effective: geometric midpoint between the largest working set at this "
                     f"bandwidth ({p.largest_bytes / 2**10:,.0f} KiB) and the smallest at the next "
                     "level's"))
        L.append("bandwidth = " + _q(p.bytes_per_s / 1e9, "GB/s", "m", der_bw))
    return L


#: the sub-tables of ``[efficiency]`` the writer emits, in this order (engine/efficiency.py)
_GROUP_ORDER = ("gemm", "gemm_bf16", "conv", "attention", "vector", "memory", "launch",
                "cpu.page_faults", "cpu.cold", "cpu.evicted")


def _efficiency_rows(ms: Measurements, fit: Fitted) -> list[str]:
    """The ``[efficiency]`` table: the fitted model (defaults, named so, where not measured),
    written as the grouped sub-tables the one loader reads (``[efficiency.gemm]``, ...,
    ``[efficiency.cpu.cold]``); ``_grouped`` places each factor."""
    d = _default_eff_rows(ms.kind)
    rows: list[tuple[str, float, str]] = []  # (flat name, value, sourced quantity)

    def put(k: str, v: float, unit: str, src: str, der: str = "") -> None:
        shown = v * 1e6 if unit == "us" else v / 2**20 if unit == "MiB" else \
            v / 2**30 if unit == "GiB" else v
        rows.append((k, v, _q(shown, unit, src, der)))

    g = fit.gemm
    if g is not None:
        gd = (f"least-squares fit (relative residuals, a,b,c >= 0) of 1/eff = (1 + a/M + b/N + "
              f"c/K)/gemm_max to {fit.gemm_used} fp32 GEMM shapes; rms log error "
              f"{g.rms_log_error:.3f}")
        for k, v in (("gemm_max", g.gemm_max), ("gemm_a", g.a), ("gemm_b", g.b),
                     ("gemm_c", g.c)):
            put(k, v, "1", "m", gd)
    else:
        for k in ("gemm_max", "gemm_a", "gemm_b", "gemm_c"):
            put(k, d[k], "1", "default", "too few compute-bound GEMM shapes")
    for fld, (v, der) in fit.scales.items():
        put(fld, v, "1", "m", der)
    for fld in ("vector_max", "norm_max", "softmax_max", "pool_max"):
        if fld in fit.vector_frac:
            v, der = fit.vector_frac[fld]
            put(fld, v, "1", "m", der)
        elif fld == "vector_max":
            put("vector_max", d["vector_max"], "1", "default", "not measured")
    put("memory_max", 1.0, "1", "m", "the level bandwidths above are already measured "
        "achievable STREAM rates")
    put("cache_fraction", 1.0, "1", "m", "the level capacities above are measured effective "
        "working sets")
    put("dispatch", fit.dispatch_s, "us", "m",
        f"{fit.dispatch_note} ({_spread(ms.tiny)})" if ms.tiny else "")
    for k, (v, der) in sorted(fit.dispatch_class.items()):
        put(k, v, "us", "m", der)
    put("kernel_gap", 0.0, "us", "m", "synchronous CPU execution: the per-op cost is all in "
        "dispatch" if ms.kind == "cpu" else "not measured separately: back-to-back launch cost "
        "is in dispatch")
    if fit.page_fault_s is not None:
        put("page_fault", fit.page_fault_s, "us", "m", fit.page_derivation)
        put("fresh_alloc_min", FRESH_ALLOC_MIN_BYTES, "MiB", "glibc")
        if fit.conv_fresh is not None:
            put("conv_fresh_factor", fit.conv_fresh[0], "1", "m", fit.conv_fresh[1])
    for fld in ("cold_after", "cold_read_max", "cold_pack_max", "pack_min_rows"):
        if fld in fit.cold:
            v, der = fit.cold[fld]
            put(fld, v, "MiB" if fld == "cold_after" else "1", "m", der)
    if "evicted_dispatch" in fit.evicted:
        for fld in ("evicted_dispatch", "evicted_kind_dispatch"):
            v, der = fit.evicted[fld]
            put(fld, v, "us", "m", der)
        v, der = fit.evicted["evict_after"]
        put("evict_after", v, "MiB", "m", der)
    put("workspace", d["workspace"], "GiB", "default", "not measured")
    return _grouped(rows)


def _grouped(rows: list[tuple[str, float, str]]) -> list[str]:
    """``[efficiency]`` (the workspace) and its sub-tables from (flat name, value, quantity)
    rows: each flat name's group and field (``FLAT_KEYS``), ``dispatch_<op class>`` in
    ``launch``. A 0 where a flat file's 0 meant "off" (``norm_max``, ``page_fault``, ...) is
    left out, so the grouped file reads as the flat one did."""
    top: list[str] = []
    groups: dict[str, list[str]] = {}
    for k, v, text in rows:
        if k == "workspace":
            top.append(f"workspace = {text}")
        elif k.startswith("dispatch_"):
            groups.setdefault("launch", []).append(f"{k} = {text}")
        else:
            group, fld, zero_off = FLAT_KEYS[k]
            if not (zero_off and v == 0):
                groups.setdefault(group, []).append(f"{fld} = {text}")
    L = ["", "[efficiency]", *top]
    for group in _GROUP_ORDER:
        if group in groups:
            L += ["", f"[efficiency.{group}]", *groups[group]]
    return L


def _raw_rows(ms: Measurements, fit: Fitted, host: str, date: str, method: str) -> list[str]:
    """The ``[measurement]`` table: the raw timings (ignored by the loader)."""
    L: list[str] = []
    # -- raw data (ignored by the loader; kept for plots and audits)
    L += ["", "[measurement]", f'host = "{_esc(host)}"', f'date = "{_esc(date)}"',
          f'method = "{_esc(method)}"', f'blas = "{_esc(ms.info.get("blas", ""))}"',
          f"samples_dropped_for_runqueue_delay = {ms.discarded}",
          "skipped = [" + ", ".join(f'"{_esc(s)}"' for s in ms.skipped) + "]",
          "stream_working_set_bytes = [" + ", ".join(_num(w) for _, w, _ in ms.stream) + "]",
          "stream_kernel = [" + ", ".join(f'"{k}"' for k, _, _ in ms.stream) + "]",
          "stream_seconds = [" + ", ".join(_num(s.median_s) for _, _, s in ms.stream) + "]",
          "gemm_label = [" + ", ".join(f'"{lb}"' for lb, *_ in ms.gemm_points) + "]",
          "gemm_mnk = [" + ", ".join(f"[{_num(M)}, {_num(N)}, {_num(K)}]"
                                     for _, M, N, K, _, _ in ms.gemm_points) + "]",
          "gemm_seconds = [" + ", ".join(_num(s.median_s) for *_, s in ms.gemm_points) + "]",
          # one op reading cold weights: used as cold_read_max (weights a whole model evicts
          # between uses), not as main_read_max (a standalone op re-run reads them warm or as
          # one long stream; see docs/validation/cpu.md)
          "cold_read_bytes_per_s = [" + ", ".join(
              _num(4.0 * n * k / s.median_s) for n, k, s in ms.cold) + "]",
          f'cold_read_note = "{_esc(fit.main_read[1]) if fit.main_read else ""}"',
          "cold_gemm_rows = [" + ", ".join(str(r) for r, _ in ms.pack) + "]",
          "cold_gemm_seconds = [" + ", ".join(_num(x.median_s) for _, x in ms.pack) + "]",
          "vector_ops = [" + ", ".join(f'"{k}"' for k in ms.vector) + "]",
          f"vector_elements = [{ms.vector_sizes[0]}, {ms.vector_sizes[1]}]",
          "vector_seconds = [" + ", ".join(_num(v[3].median_s) for v in ms.vector.values()) + "]",
          "vector_small_seconds = [" + ", ".join(_num(v[3].median_s)
                                                 for v in ms.vector_small.values()) + "]",
          "evict_ops = [" + ", ".join(f'"{k}"' for k in ms.evict_hot) + "]",
          "evict_hot_seconds = [" + ", ".join(_num(v.median_s)
                                              for v in ms.evict_hot.values()) + "]",
          "evict_after_op = [" + ", ".join(f'"{op}"' for op, _, _ in ms.evict) + "]",
          "evict_flush_bytes = [" + ", ".join(_num(f) for _, f, _ in ms.evict) + "]",
          "evict_seconds = [" + ", ".join(_num(x.median_s) for _, _, x in ms.evict) + "]",
          "evict_other_seconds = [" + ", ".join(_num(x.median_s)
                                                for x in ms.evict_other.values()) + "]",
          ""]
    return L


def check_writable(path: str | os.PathLike[str]) -> Path:
    """Fail early (before minutes of measuring) if ``path`` cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise SpecError(f"output path {str(p)!r} is a directory; give a file name such as "
                        f"{str(p / 'my_machine.toml')!r}")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise SpecError(f"cannot write {str(p)!r}: directory {str(parent)!r} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".check")
    except OSError as e:
        raise SpecError(f"cannot write {str(p)!r}: {e.strerror}") from None
    os.close(fd)
    os.unlink(tmp)
    return p


def write_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same directory and a rename:
    readers see the old file or the complete new one, never half of it."""
    p = check_writable(path)
    fd, tmp = tempfile.mkstemp(dir=p.parent if str(p.parent) else ".", prefix=f".{p.name}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a spec is an ordinary file
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p
