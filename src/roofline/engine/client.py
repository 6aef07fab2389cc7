"""The client-side end-to-end option (``client=True`` in ``solve`` / ``serve``): what a client
that times a request from send to receive sees beyond the device.

    t_client = B · (in + out) · (1 / host_link + 1 / transport) + floor

per request of B samples: ``in`` and ``out`` are the bytes per sample of the graph's input (the
first op's activation read) and output (the last op's activation write), copied over the
device's host link (the hardware file's ``[links.host]``, per direction; none on a part without
one, e.g. unified memory) and carried through the serving stack at ``transport_bandwidth``
(serialisation, a local client's network stack, input staging); ``floor`` is the fixed time per
request. Both factors are fitted on published Triton Inference Server runs
(data/presets/client.toml; docs/validation/client.md). Off by default: a device-side number is
what the rest of the library reports.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .._data import DATA, read_toml
from ..specs.sourced import Provenance, read_quantity

__all__ = ["ClientFactors", "client_factors", "client_time", "io_bytes_per_sample"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientFactors:
    floor_s: float  #: fixed time per request, s
    transport_bytes_per_s: float  #: request bytes through the serving stack, B/s
    provenance: dict[str, Provenance] = field(default_factory=dict, compare=False, hash=False)


@lru_cache(maxsize=1)
def _shipped() -> ClientFactors:
    doc = read_toml(DATA / "presets" / "client.toml")
    src = doc.get("sources", {})
    origin = "data/presets/client.toml"
    tbl = doc["client"]
    f, pf = read_quantity(tbl["floor"], field="floor", dimension="time", sources=src,
                          origin=origin)
    t, pt = read_quantity(tbl["transport_bandwidth"], field="transport_bandwidth",
                          dimension="bandwidth", sources=src, origin=origin, lo=1e6)
    return ClientFactors(floor_s=f, transport_bytes_per_s=t,
                         provenance={"floor": pf, "transport_bandwidth": pt})


def client_factors() -> ClientFactors:
    """The shipped client factors (data/presets/client.toml)."""
    return _shipped()


def io_bytes_per_sample(g: Any) -> tuple[float, float]:
    """(input, output) bytes per sample of a graph: the first op's activation read and the last
    op's activation write, per sample (their batch coefficients)."""
    from ..graphs.graph import Q

    return float(g.c1[Q["act_bytes_read"], 0]), float(g.c1[Q["act_bytes_written"], -1])


def client_time(g: Any, hw: Any, batch: int,
                factors: ClientFactors | None = None) -> dict[str, float]:
    """Seconds a client adds per request of ``batch`` samples: ``copies`` (host link),
    ``transport`` (serving stack), ``floor`` and their ``total``."""
    f = client_factors() if factors is None else factors
    i, o = io_bytes_per_sample(g)
    n = batch * (i + o)
    link = getattr(hw, "host_link", None)
    copies = n / link.bytes_per_s if link is not None and link.bytes_per_s > 0 else 0.0
    transport = n / f.transport_bytes_per_s
    return {"copies": copies, "transport": transport, "floor": f.floor_s,
            "total": copies + transport + f.floor_s}
