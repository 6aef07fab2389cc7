"""``measure``: this machine's ceilings and a small fitted efficiency model, as a hardware spec.

What is measured (every benchmark: warm-up, repetitions until a minimum time, the median of
samples not disturbed by run-queue delay, and the p10–p90 spread):

- **peak FLOP/s per dtype**: the best median rate of large square GEMMs, through numpy's BLAS
  and through PyTorch (the faster counts; both are recorded); bf16/fp16 through PyTorch.
- **bandwidth per memory level**: STREAM copy/scale/add/triad (bytes read + written, outputs
  preallocated) over working sets from L1 to DRAM; the curve is cut into plateaus
  (``fit.fit_levels``), one memory level each (a hierarchical roofline).
- **fixed per-op cost**: one framework call on a one-element tensor.
- **the efficiency model** (``[efficiency]`` in the spec, used by the ``default`` preset):
  GEMM/convolution efficiency ``1/eff = (1 + a/M + b/N + c/K) / gemm_max`` fitted to a set of
  shapes; vector rates of elementwise (tanh-GELU, SiLU), norm (LayerNorm), softmax and pool
  (MaxPool) ops as fractions of the fp32 peak; page-fault cost of fresh outputs ≥ 32 MiB.

The spec is written atomically (temporary file + rename), so an interrupted run leaves no
half-written file.
"""

from __future__ import annotations

import os
import tomllib
from typing import TextIO

from .. import _args as A
from ..errors import SpecError
from ..progress import progress_stream
from ..specs.hardware import Hardware, parse_hardware
from .backends import Backend, NumpyBackend, TorchBackend
from .derive import Fitted, derive
from .plan import FRESH_ALLOC_MIN_BYTES, MeasurePlan, measure_plan, vector_cost
from .run import PARALLEL_MIN_ELEMS, Measurements, run_plan, vector_sizes
from .specfile import check_writable, spec_toml, write_atomic
from .timing import thread_limit

# The steps live in plan.py (what to run), run.py (running it), derive.py (the numbers) and
# specfile.py (the TOML); their names are re-exported here, the entry point.
__all__ = ["measure", "MeasurePlan", "measure_plan", "Measurements", "run_plan", "spec_toml",
           "write_atomic", "check_writable", "vector_cost", "FRESH_ALLOC_MIN_BYTES",
           "last_text", "default_backends", "derive", "Fitted", "vector_sizes",
           "PARALLEL_MIN_ELEMS"]


def default_backends(device: str = "auto", *, quick: bool = False,
                     notes: list[str] | None = None) -> list[Backend]:
    """PyTorch on ``device`` first (when installed), then numpy (GEMM peak candidates)."""
    plan_time = 0.005 if quick else 0.08
    out: list[Backend] = []
    try:
        import torch
    except ImportError:
        torch = None  # type: ignore[assignment]
        if notes is not None:
            notes.append("PyTorch is not installed: measured with numpy only; skipped bf16/fp16 "
                         "peaks, convolutions and vector-op rates (pip install "
                         "'roofline[torch]' to measure them)")
    if device not in ("auto", "cpu", "cuda"):
        raise SpecError(f"device={device!r}; allowed: auto, cpu, cuda")
    if device == "cuda" and (torch is None or not torch.cuda.is_available()):
        raise SpecError("device='cuda' but no CUDA device is visible to PyTorch")
    if torch is not None:
        dev = "cuda" if device == "cuda" or (device == "auto" and torch.cuda.is_available()) \
            else "cpu"
        out.append(TorchBackend(dev, min_time_s=plan_time, min_reps=3 if quick else 5))
        if dev == "cuda":
            return out
    out.append(NumpyBackend(min_time_s=plan_time, min_reps=3 if quick else 5))
    return out


_LAST = [""]


def last_text() -> str:
    """The TOML text of the latest ``measure`` in this process (what ``-o`` would write)."""
    return _LAST[0]


@A.checked(output=A.optional(A.path), device=A.choice("auto", "cpu", "cuda"), quick=A.flag,
           progress=A.progress, backends=A.optional(A.seq(A.anything, what="backends")),
           key=A.optional(A.text), name=A.optional(A.text), date=A.optional(A.iso_date),
           host=A.optional(A.text), threads=A.optional(A.count(1, 4096)))
def measure(output: str | os.PathLike[str] | None = None, *, device: str = "auto",
            quick: bool = False, progress: bool | TextIO = True,
            backends: list[Backend] | None = None, key: str | None = None,
            name: str | None = None, date: str | None = None,
            host: str | None = None, threads: int | None = None) -> Hardware:
    """Measure this machine and return its hardware spec (numbers carry "measured" provenance
    and the spec carries its fitted ``[efficiency]`` model for the default preset).

    ``output``: also write the spec there (atomically; checked for writability first).
    ``device``: "auto" (CUDA when PyTorch sees one, else CPU), "cpu" or "cuda".
    ``quick``: tiny sizes and few repetitions (seconds; for tests, not for predictions).
    ``progress``: True for lines with rate and time left on stderr when it is a terminal (a
    live bar too with the optional tqdm), False for silence, or a text stream for lines there.
    ``backends``: inject benchmark backends (e.g. ``FakeBackend``) instead of real ones.
    ``threads``: compute threads for PyTorch and the BLAS pools during the run (default: as
    configured); the spec records the count.
    """
    out = progress_stream(progress)  # type: ignore[arg-type]
    if output is not None:
        check_writable(output)
    notes: list[str] = []
    bes = backends if backends is not None else default_backends(device, quick=quick,
                                                                 notes=notes)
    for n in notes:
        if out is not None:
            print(f"roofline measure: {n}", file=out)
    plan = measure_plan(bes[0].kind, quick)
    with thread_limit(threads):
        ms = run_plan(plan, bes, out)
    ms.skipped[:0] = notes
    text = spec_toml(ms, key=key, name=name, date=date, host=host)
    _LAST[0] = text
    hw = parse_hardware(tomllib.loads(text), origin=str(output) if output else "<measured>")
    from ..engine.presets import spec_efficiency

    spec_efficiency(hw)  # validate the fitted table now, not at the first solve
    if output is not None:
        write_atomic(output, text)
        if out is not None:
            print(f"roofline measure: wrote {output}", file=out)
    return hw
