"""Specs built in Python are checked as spec files are (stop 28: a ``Link`` built in code took a
negative or NaN bandwidth unchecked): ``Link``, ``MemoryLevel``, ``Hardware``, ``Cluster``,
``TransformerConfig`` and an engine profile (``ServingFactors``) refuse a negative, NaN or
mistyped number with a SpecError in the words a spec file's loader uses
(``specs.sourced.check_number``). Code-built specs are not held to the files' plausibility
ranges: ``scaled_hardware`` makes 1e6× copies, which must still build."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

import roofline as rl
from roofline.analysis.sensitivity import scaled_hardware
from roofline.errors import SpecError
from roofline.scenarios.serving.plan import ServingFactors, serving_factors
from roofline.specs.hardware import Link, MemoryLevel, parse_hardware

NAN, INF = math.nan, math.inf


def _doc(link: dict) -> dict:
    s = "s"
    return {"key": "x", "name": "X", "sources": {s: "a datasheet"},
            "peak": {"fp16": {"value": 100, "unit": "TFLOP/s", "source": s}},
            "memory": [{"name": "HBM", "capacity": {"value": 16, "unit": "GiB", "source": s},
                        "bandwidth": {"value": 1000, "unit": "GB/s", "source": s}}],
            "links": {"host": link}}


@pytest.mark.parametrize("value, words", [(-1.0, "must be >= 0, got -1"),
                                          (NAN, "must be a finite number, got nan"),
                                          (INF, "must be a finite number, got inf")])
def test_a_link_built_in_code_is_refused_as_the_file_refuses_it(value, words) -> None:
    """The same bandwidth in a spec file and in ``Link(...)``: the same SpecError wording."""
    bw = {"value": value, "unit": "GB/s", "source": "s"}
    with pytest.raises(SpecError, match=f"links.host.bandwidth.value {words}"):
        parse_hardware(_doc({"bandwidth": bw}))
    with pytest.raises(SpecError, match=f"link 'pcie': bytes_per_s {words}"):
        Link(name="pcie", bytes_per_s=value * 1e9)
    lat = {"value": value, "unit": "us", "source": "s"}
    good = {"value": 64, "unit": "GB/s", "source": "s"}
    with pytest.raises(SpecError, match=f"links.host.latency.value {words}"):
        parse_hardware(_doc({"bandwidth": good, "latency": lat}))
    if value == value:  # NaN is an unpublished latency, allowed
        with pytest.raises(SpecError, match=f"link 'pcie': latency_s {words}"):
            Link(name="pcie", bytes_per_s=64e9, latency_s=value * 1e-6)


def test_link_edges() -> None:
    assert math.isnan(Link(name="l", bytes_per_s=64e9).latency_s)  # unpublished
    Link(name="l", bytes_per_s=64e9, latency_s=0.0, domain=2)
    with pytest.raises(SpecError, match=r"bytes_per_s = 0 B/s is outside the plausible range "
                                        r"\(0, inf\) B/s"):
        Link(name="l", bytes_per_s=0.0)
    with pytest.raises(SpecError, match=r"latency_s = 2 s is outside .* \[0, 1\] s"):
        Link(name="l", bytes_per_s=1e9, latency_s=2.0)  # the file's hi = 1 s
    for d in (1, -2, 2.0, True):
        with pytest.raises(SpecError, match="domain = .* allowed: an integer >= 2"):
            Link(name="l", bytes_per_s=1e9, domain=d)
    with pytest.raises(SpecError, match="bytes_per_s must be a finite number, got '64e9'"):
        Link(name="l", bytes_per_s="64e9")  # type: ignore[arg-type]
    # an edited copy goes through the same check
    h100 = rl.hardware("h100-sxm")
    assert h100.host_link is not None
    with pytest.raises(SpecError, match="bytes_per_s must be >= 0"):
        replace(h100.host_link, bytes_per_s=-h100.host_link.bytes_per_s)


def test_memory_level_and_hardware_numbers() -> None:
    with pytest.raises(SpecError, match="capacity_bytes must be a finite number, got inf"):
        MemoryLevel(name="HBM", capacity_bytes=INF, bytes_per_s=1e12)
    with pytest.raises(SpecError, match="bytes_per_s must be a finite number, got inf"):
        MemoryLevel(name="HBM", capacity_bytes=1e9, bytes_per_s=INF)
    assert math.isnan(MemoryLevel(name="L2", capacity_bytes=5e7).bytes_per_s)  # unpublished
    h = rl.hardware("h100-sxm")
    for kw, words in [({"tdp_w": -700.0}, "tdp_w must be >= 0, got -700"),
                      ({"tdp_w": INF}, "tdp_w must be a finite number"),
                      ({"workspace_bytes": -1.0}, "workspace_bytes must be >= 0"),
                      ({"sparsity": {"2:4": 9.0}}, r"sparsity\['2:4'\] = 9 is outside the "
                                                   r"plausible range \[1, 8\]"),
                      ({"clock_hz": {"peak": NAN, "max": 1.98e9}},
                       r"clock_hz\['peak'\] must be a finite number, got nan"),
                      ({"host_link": 64e9}, "host_link must be a Link or None, got 64000000000"),
                      ({"memory": ("HBM",)}, r"memory\[0\] must be a MemoryLevel"),
                      ({"year": "2022"}, "year='2022' must be an integer year")]:
        with pytest.raises(SpecError, match=words):
            replace(h, **kw)
    assert math.isnan(replace(h, tdp_w=NAN).tdp_w)  # unpublished


def test_hypothetical_copies_still_build() -> None:
    """Not the files' plausibility ranges: the sensitivity study's 1e6× and 1e-6× copies."""
    h = rl.hardware("h100-sxm")
    big = scaled_hardware(h, memory={0: 1e6}, host=1e6, scale_up=1e6, tag="x")
    assert big.memory_bytes_per_s == pytest.approx(h.memory_bytes_per_s * 1e6)
    small = scaled_hardware(h, memory={0: 1e-6}, host=1e-6, scale_up=1e-6, tag="y")
    assert small.scale_up_link is not None and small.scale_up_link.bytes_per_s > 0


def test_cluster_built_in_code() -> None:
    c = rl.cluster("dgx-h100", nodes=2)
    for kw, words in [({"scale_out_latency_s": NAN}, "scale_out_latency_s must be a finite"),
                      ({"scale_up_latency_s": -1e-6}, "scale_up_latency_s must be >= 0"),
                      ({"scale_out_bytes_per_s": "50e9"}, "scale_out_bytes_per_s must be a "
                                                          "finite number, got '50e9'"),
                      ({"scale_up_bytes_per_s": 0.0}, r"= 0 B/s is outside .* \(0, inf\)"),
                      ({"scale_up_nvls_fraction": NAN}, "scale_up_nvls_fraction must be a"),
                      ({"device": "h100-sxm"}, "device must be a Hardware"),
                      ({"max_nodes": 0}, "max_nodes must be a positive integer or None")]:
        with pytest.raises(SpecError, match=words):
            replace(c, **kw)


def test_transformer_config_built_in_code() -> None:
    cfg = rl.model("llama-3.1-8b").config
    for kw, words in [({"vocab": -1}, "vocab=-1 must be an integer >= 0"),
                      ({"max_positions": 8192.0}, "max_positions=8192.0 must be an integer"),
                      ({"window_every": 0}, "window_every=0 must be an integer >= 1"),
                      ({"expert_groups": 0}, "expert_groups=0 must be an integer >= 1"),
                      ({"sliding_window": 0}, "sliding_window=0 must be an integer >= 1"),
                      ({"n_experts": 8, "top_k": 9}, r"top_k=9 must be an integer in \[1, "
                                                     r"n_experts=8\]"),
                      ({"n_experts": 8, "top_k": 0}, "top_k=0 must be an integer in")]:
        with pytest.raises(SpecError, match=words):
            replace(cfg, **kw)
    assert replace(cfg, n_experts=8, top_k=2).top_k == 2


def test_an_engine_profile_built_in_code() -> None:
    for kw, words in [({"step_overhead": -1e-6}, "step_overhead must be >= 0, got -1e-06"),
                      ({"layer_overhead": NAN}, "layer_overhead must be a finite number"),
                      ({"request_overhead": 100.0}, r"request_overhead = 100 s is outside the "
                                                    r"plausible range \[0, 60\] s"),
                      ({"scheduler_steps": 0.0}, r"scheduler_steps = 0 is outside .* \[1, inf\)"),
                      ({"allreduce_efficiency": 0.0}, r"allreduce_efficiency = 0 is outside"),
                      ({"gemm_dtype_fp8": -0.5}, "gemm_dtype_fp8 must be >= 0"),
                      ({"fuse": 1}, "fuse=1 must be true or false")]:
        with pytest.raises(SpecError, match=f"engine profile 'x': {words}"):
            ServingFactors(name="x", **kw)
    # every shipped profile passes, and an edited copy is checked again
    vllm = serving_factors("vllm")
    with pytest.raises(SpecError, match="engine profile 'vllm': seq_overhead must be >= 0"):
        replace(vllm, seq_overhead=-vllm.seq_overhead - 1e-6)
    # a profile a user would pass to rl.serve(engine=...) is refused where it is built
    with pytest.raises(SpecError, match="engine profile 'mine': layer_overhead must be >= 0"):
        replace(vllm, name="mine", layer_overhead=-1e-5)


def test_numpy_numbers_pass_as_the_arguments_checker_takes_them() -> None:
    """A spec built from numpy numbers (a pandas column, an ``np.arange``) is checked by value,
    as the API's argument checks take any real number: before 5d7780a a MemoryLevel or Cluster
    took them, and ``check_number`` refused np.int64 / np.float32 as "not a finite number"."""
    import numpy as np

    m = MemoryLevel(name="HBM", capacity_bytes=np.int64(80 * 2**30), bytes_per_s=np.float32(3e12))
    assert m.capacity_bytes == 80 * 2**30
    assert Link(name="l", bytes_per_s=np.float32(64e9), latency_s=np.float32(1e-6)).bytes_per_s > 0
    c = replace(rl.cluster("dgx-h100"), scale_out_bytes_per_s=np.int64(50 * 10**9))
    assert c.scale_out_bytes_per_s == 50e9
    with pytest.raises(SpecError, match="bytes_per_s must be >= 0"):
        Link(name="l", bytes_per_s=np.float32(-1.0))
    with pytest.raises(SpecError, match="capacity_bytes must be a finite number, got "):
        MemoryLevel(name="HBM", capacity_bytes=np.float64("nan"))
