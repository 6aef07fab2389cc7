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

``serve(client=True)`` (``serve_client``) prices an LLM request the same way: its prompt goes in
and its output comes back as text through the serving stack (``text_bytes_per_token`` at
``transport_bandwidth``) and as token ids over the host link (``token_id_bytes``), for the
batch's B requests; each request pays the floor once (the requests of a batch run side by
side). The prompt's terms and the floor land on the time to first token, the output's on the
decode steps. ``simulate_serving`` / ``plan_serving(client=True)`` (``request_client``) price
each request of the mix as ``serve(client=True)`` prices a batch of one: its requests arrive
one by one, so each pays its own prompt and output bytes (a static batch's B requests, all
sent at once, queue theirs in ``serve``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .._data import DATA, read_toml
from ..specs.sourced import Provenance, read_quantity

__all__ = ["ClientFactors", "client_factors", "client_time", "io_bytes_per_sample",
           "serve_client", "request_client"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientFactors:
    floor_s: float  #: fixed time per request, s
    transport_bytes_per_s: float  #: request bytes through the serving stack, B/s
    text_bytes_per_token: float = 4.0  #: an LLM request's text per token (serve)
    token_id_bytes: float = 4.0  #: one token id on the host link (serve)
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
    llm = tbl["llm"]
    tb, ptb = read_quantity(llm["text_bytes_per_token"], field="text_bytes_per_token",
                            dimension="bytes", sources=src, origin=origin, lo=0.0)
    ib, pib = read_quantity(llm["token_id_bytes"], field="token_id_bytes", dimension="bytes",
                            sources=src, origin=origin, lo=0.0)
    return ClientFactors(floor_s=f, transport_bytes_per_s=t, text_bytes_per_token=tb,
                         token_id_bytes=ib,
                         provenance={"floor": pf, "transport_bandwidth": pt,
                                     "text_bytes_per_token": ptb, "token_id_bytes": pib})


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


def _llm_bytes_time(tokens: float, hw: Any, f: ClientFactors) -> tuple[float, float]:
    """(host-link copies, serving-stack transport) seconds of ``tokens`` tokens."""
    link = getattr(hw, "host_link", None)
    copies = tokens * f.token_id_bytes / link.bytes_per_s \
        if link is not None and link.bytes_per_s > 0 else 0.0
    return copies, tokens * f.text_bytes_per_token / f.transport_bytes_per_s


def decode_step_client(batch: Any, hw: Any, factors: ClientFactors | None = None) -> Any:
    """Seconds a client sees added to one decode step of ``batch`` sequences (a number or an
    array): the step's ``batch`` output tokens out — ids over the host link, text through the
    serving stack (``serve_sweep(client=True)``; ``serve`` spreads a generation's B·n tokens
    over its n − 1 steps, B·n/(n − 1) per step)."""
    f = client_factors() if factors is None else factors
    copies, transport = _llm_bytes_time(batch, hw, f)
    return copies + transport


def serve_client(r: Any, hw: Any, factors: ClientFactors | None = None) -> Any:
    """A ``ServeResult`` as a client timing each request sees it (``serve(client=True)``):

    TTFT + floor + the batch's prompts in (B·P tokens: ids over the host link, text through the
    stack); each decode step + the batch's tokens out (B ids and B tokens of text, spread over
    the n − 1 steps), so e2e = TTFT + (n − 1)·TPOT still holds; throughput and MFU follow e2e;
    the continuous-batching steady state is unchanged (the host work overlaps other requests'
    steps). The added seconds are ``r.client_time`` and ``phase_seconds["client"]``.
    """
    from dataclasses import replace

    if r.e2e_latency != r.e2e_latency:  # cannot run at all: nothing to add to
        return r
    f = client_factors() if factors is None else factors
    B, P, n = r.batch, r.prompt_len, r.output_len
    in_c, in_t = _llm_bytes_time(B * P, hw, f)
    out_c, out_t = _llm_bytes_time(B * n, hw, f)
    ttft = r.ttft + f.floor_s + in_c + in_t
    steps = n - 1
    if steps:
        tpot = r.tpot + (out_c + out_t) / steps
    else:  # the one output token comes with the prefill
        ttft, tpot = ttft + out_c + out_t, r.tpot
    e2e = ttft + steps * tpot
    added = e2e - r.e2e_latency
    note = (f"end to end as a client measures each request (client=True): + {added * 1e3:.3g} ms"
            f" (per-request floor {f.floor_s * 1e3:.3g} ms, host-link copies "
            f"{(in_c + out_c) * 1e3:.3g} ms, serving-stack transport {(in_t + out_t) * 1e3:.3g}"
            f" ms; floor and prompt on TTFT, output on the decode steps; the continuous-batching"
            f" steady state is device-side)")
    tps = B * n / e2e
    return replace(r, ttft=ttft, tpot=tpot, e2e_latency=e2e, tokens_per_s=tps,
                   tokens_per_s_per_device=tps / r.devices, mfu=r.mfu * r.e2e_latency / e2e,
                   phase_seconds={**r.phase_seconds, "client": added}, client_time=added,
                   notes=r.notes + (note,))


def request_client(prompt: Any, output: Any, hw: Any,
                   factors: ClientFactors | None = None) -> tuple[Any, Any]:
    """(TTFT added, TPOT added) s per request of ``prompt`` tokens in and ``output`` tokens out
    (numbers or arrays) as a client timing it sees them: ``serve_client`` at batch 1 — TTFT +
    floor + the prompt in (+ the output token when ``output`` is 1: it comes with the prefill);
    TPOT + the output out spread over its ``output`` − 1 steps (0 when ``output`` is 1)."""
    import numpy as np

    f = client_factors() if factors is None else factors
    c = sum(_llm_bytes_time(1.0, hw, f))  # s per token, in or out (both terms are linear)
    P, n = np.asarray(prompt, dtype=float), np.asarray(output, dtype=float)
    ttft = f.floor_s + P * c + np.where(n > 1, 0.0, n * c)
    tpot = np.where(n > 1, n * c / np.maximum(n - 1, 1), 0.0)
    if ttft.ndim == 0:
        return float(ttft), float(tpot)
    return ttft, tpot
