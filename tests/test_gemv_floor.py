"""Batch-1 decode on CPUs / SoCs (issue 18, bug 7): a matrix-vector product is not priced by the
padded-tile penalty 1 + a/M of a GEMM but never falls below its own floor ``gemm.gemv`` of the
peak, so it streams its weights (memory-bound). Published check: docs/validation/edge.md."""

from __future__ import annotations

from pathlib import Path

import pytest

import roofline as rl
from roofline.errors import RooflineError

DOC = Path(__file__).resolve().parents[1] / "docs" / "validation" / "edge.md"
Q4_0 = {"spec": "fp16", "weights": "int4", "group_size": 32}  # 4 bits + fp16 scale / 32
#: Geerling, geerlingguy/ai-benchmarks#7, Pi 5 16 GB, "Test 2 - No Tweaks" (tokens/s)
PUBLISHED = {"llama-3.2-3b": 4.51, "llama-3.1-8b": 2.05, "llama-2-13b": 1.35}


def _pi(model: str, batch: int = 1) -> rl.Result:
    return rl.solve(model, "raspberry-pi-5", batch=batch, phase="decode", context=512,
                    precision=rl.precision(**Q4_0))


def test_gemv_compute_at_its_floor_by_hand():
    """Pi 5 fp16 peak 307.2 GFLOP/s (datasheet), floor 0.4: a batch-1 projection's compute is
    flops / (307.2e9 × 0.4), where the GEMM penalty alone would give flops·(1 + 32)/(0.6·peak)
    (≈ 34× slower, the bug)."""
    r = _pi("llama-3.2-3b")
    ops = r.ops
    i = list(ops["name"]).index("layers.0.mlp.gate_proj")
    flops = float(ops["flops"][i])
    assert float(ops["t_compute"][i]) == pytest.approx(flops / (307.2e9 * 0.4), rel=1e-9)
    assert r.bottleneck == "memory"


def test_large_batch_keeps_the_gemm_model():
    """At M = 512 rows the tile model (1 + 32/512 + b/N + c/K)/0.6 beats the floor: unchanged."""
    r = rl.solve("llama-3.2-3b", "raspberry-pi-5", batch=1, seq_len=512,
                 precision=rl.precision(**Q4_0))
    ops = r.ops
    i = list(ops["name"]).index("layers.0.mlp.gate_proj")
    n, k = 8192, 3072  # Llama 3.2 3B: intermediate 8192, hidden 3072
    eff = 0.6 / (1 + 32 / 512 + 32 / n + 16 / k)
    assert float(ops["t_compute"][i]) == pytest.approx(float(ops["flops"][i]) /
                                                        (307.2e9 * eff), rel=1e-9)


def test_gpu_has_no_floor():
    """The GPU kinds set no gemv floor: a batch-1 decode matmul keeps the GEMM model."""
    r = rl.solve("llama-3.1-8b", "A100", batch=1, phase="decode", context=2048)
    ops = r.ops
    i = list(ops["name"]).index("layers.0.mlp.gate_proj")
    peak = rl.hardware("A100").peak_flops_per_s["fp16"] * rl.hardware("A100").sustained("fp16")
    eff = 0.8 / (1 + 32 / 1 + 32 / 14336 + 16 / 4096)
    assert float(ops["t_compute"][i]) == pytest.approx(float(ops["flops"][i]) / (peak * eff),
                                                        rel=1e-6)


def test_gemv_floor_checked():
    from roofline.engine.efficiency import Gemm

    with pytest.raises(RooflineError, match="gemv"):
        Gemm(max=0.8, gemv=1.5).check("x", "gemm")


def test_pi5_published_within_edge_target_and_doc():
    """Within ×1.5 of every published rate (the issue's edge target), and the doc shows it."""
    text = DOC.read_text(encoding="utf-8")
    for m, pub in PUBLISHED.items():
        ours = _pi(m).throughput
        assert 1 / 1.5 <= ours / pub <= 1.5, (m, ours, pub)
        row = next(x for x in text.splitlines() if x.startswith(f"| {m} |"))
        assert f"| {ours:.2f} | ×{ours / pub:.2f} |" in row, row
