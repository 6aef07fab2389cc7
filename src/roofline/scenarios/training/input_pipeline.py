"""The host input pipeline as a ceiling on a training step: ``train(data_loader=(loader, w))``.

Image-classification training decodes and augments every sample on the host's CPU cores
before the device sees it. With ``w`` loader workers per device, each spending ``t`` seconds of
CPU time per sample, the host delivers ``w / t`` samples per second to each device, so a step
of ``B / dp`` samples per device cannot take less than ``(B / dp) · t / w``. The step time is
the larger of that and the device's own step; when the host binds, the result says so (a
warning naming both rates) and the difference is the breakdown's ``input_wait``.

``loader`` is a measured pipeline of data/presets/input_pipeline.toml (``"dali-cpu"``,
``"pytorch"``: each with its CPU, pipeline and the table row its time per sample is read from)
or a number, the user's own measured samples per second of one worker. Off by default
(``data_loader=None``): the devices are then assumed fed, as the roofline assumes its inputs.
It is not on by default because how many workers a run has, on which CPU, decoding what,
is the user's setup and not the model's: a default would put one machine's CPUs into every
prediction.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache
from typing import Any

from ...errors import SpecError
from ...units import fmt_time

__all__ = ["LoaderSpec", "loader_table", "parse_loader", "input_ceiling"]

#: (seconds of one worker per sample, workers per device, how to name it)
LoaderSpec = tuple[float, int, str]

MAX_WORKERS = 4096  #: workers per device: far beyond any host's core count


@lru_cache(maxsize=1)
def loader_table() -> dict[str, tuple[float, str]]:
    """{loader: (seconds of one worker per sample, pipeline)} from
    data/presets/input_pipeline.toml (every time sourced: specs.sourced.read_quantity)."""
    from ..._data import DATA, read_toml
    from ...specs.sourced import read_quantity

    origin = "data/presets/input_pipeline.toml"
    doc = read_toml(DATA / "presets" / "input_pipeline.toml")
    src = doc.get("sources", {})
    out = {}
    for name, tbl in doc.get("loader", {}).items():
        t = read_quantity(tbl["time_per_sample"], field=f"loader.{name}.time_per_sample",
                          dimension="time", sources=src, origin=origin)[0]
        out[name] = (float(t), str(tbl.get("pipeline", "")))
    return out


def parse_loader(v: Any) -> LoaderSpec | None:
    """``data_loader`` checked: None, or (a loader of input_pipeline.toml or a positive
    samples/s of one worker, workers per device >= 1)."""
    if v is None:
        return None
    if isinstance(v, str | bytes) or not hasattr(v, "__len__") or len(v) != 2:
        raise SpecError(f"data_loader={v!r}: give (loader, workers per device), e.g. "
                        f"('dali-cpu', 16); loaders: {', '.join(loader_table())}, or a number "
                        "(measured samples/s of one worker)")
    loader, workers = v
    if isinstance(workers, bool) or not isinstance(workers, numbers.Integral) or not (
            1 <= int(workers) <= MAX_WORKERS):
        raise SpecError(f"data_loader workers={workers!r}: an integer in [1, {MAX_WORKERS}] "
                        "(loader workers, or threads, per device)")
    if isinstance(loader, str):
        table = loader_table()
        if loader not in table:
            raise SpecError(f"data_loader loader={loader!r} is not a measured pipeline; "
                            f"allowed: {', '.join(table)}, or a number (samples/s of one "
                            "worker, measured on your host)")
        return table[loader][0], int(workers), f"{loader!r}"
    if isinstance(loader, bool) or not isinstance(loader, numbers.Real) or not (
            math.isfinite(float(loader)) and float(loader) > 0):
        raise SpecError(f"data_loader loader={loader!r}: a loader name "
                        f"({', '.join(loader_table())}) or a finite number > 0 (samples/s of "
                        "one worker)")
    return 1.0 / float(loader), int(workers), f"{float(loader):g} samples/s"


def input_ceiling(spec: LoaderSpec, samples: int, device_step: float) -> tuple[float, str]:
    """(seconds the device waits for its input in one step, the warning when it does) for a
    step of ``samples`` samples per device that the device alone runs in ``device_step`` s."""
    t, workers, label = spec
    host = samples * t / workers
    if not host > device_step:
        return 0.0, ""
    return host - device_step, (
        f"step bound by the host input pipeline (data_loader): {workers} {label} worker"
        f"{'s' if workers > 1 else ''} per device feed {workers / t:,.0f} samples/s, the "
        f"device alone would run {samples / device_step:,.0f}; step {fmt_time(host)}, device "
        f"{fmt_time(device_step)}")
