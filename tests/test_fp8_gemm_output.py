"""An fp8 GEMM writes a 16-bit result (Precision.matmul_out_bytes): the thin Azure row by hand."""

from __future__ import annotations

import pytest

from roofline.graphs.graph import GraphBuilder
from roofline.ops.registry import cost
from roofline.specs.dtypes import precision


def test_matmul_out_bytes_per_precision() -> None:
    assert precision("fp8").matmul_out_bytes == 2.0  # 1-byte activations, 16-bit D
    assert precision("fp8", activations="bf16").matmul_out_bytes == 2.0
    assert precision("fp8", activations="fp32").matmul_out_bytes == 4.0
    assert precision("bf16").matmul_out_bytes == 2.0
    assert precision("int8").matmul_out_bytes == 1.0  # int8 left at its activation dtype
    assert precision("fp32").matmul_out_bytes == 4.0


def test_formulas_take_out_bytes() -> None:
    c = cost("linear", batch=2, tokens=3, d_in=4, d_out=5, act_bytes=1, weight_bytes=1,
             out_bytes=2)
    assert (c.act_bytes_read, c.act_bytes_written, c.weight_bytes_read) == (24, 60, 20)
    d = cost("linear", batch=2, tokens=3, d_in=4, d_out=5, act_bytes=1, weight_bytes=1)
    assert d.act_bytes_written == 30  # default: the activation dtype
    m = cost("matmul", batch=1, m=3, k=4, n=5, act_bytes=1, out_bytes=2)
    assert (m.act_bytes_read, m.act_bytes_written) == (3 * 4 + 4 * 5, 3 * 5 * 2)


def test_thin_fp8_dot_bytes_by_hand() -> None:
    """Azure's 802816 x 192 x 768 fp8 row (A e4m3, B e4m3, D fp16): A 802816·768 B,
    B 768·192 B, D 802816·192·2 B = 616,562,688 + 147,456 + 308,281,344 = 924,991,488 B."""
    m, n, k = 802816, 192, 768
    hand = m * k * 1 + k * n * 1 + m * n * 2
    assert hand == 924_991_488
    b = GraphBuilder("dot", "forward", precision("fp8"))
    b.add("matmul", "dot", m=m, k=k, n=n)
    b.add("linear", "lin", tokens=m, d_in=k, d_out=n)
    g = b.build()
    for i in range(2):
        c = g.op_cost(i)
        assert c.act_bytes_read + c.weight_bytes_read + c.act_bytes_written == pytest.approx(hand)
    # an explicit act_bytes (a caller's own width) writes at that width, as before
    b2 = GraphBuilder("dot", "forward", precision("fp8"))
    b2.add("matmul", "dot", m=m, k=k, n=n, act_bytes=1)
    assert b2.build().op_cost(0).act_bytes_written == m * n


def test_thin_fp8_row_on_h100_is_its_memory_time() -> None:
    """The H100 row is memory-bound, streamed at Hopper's tiled-GEMM fraction 0.80 of the
    bandwidth (tiles.toml [arch.hopper] memory): 924,991,488 B / (3.35 TB/s · 0.80) = 345.1 µs,
    i.e. 2·802816·192·768 / 345.1 µs = 686.0 TFLOP/s (663.8 measured: +3.3 %; at the copy's
    0.88 it was 754.6: +13.7 %; with a 1-byte D, 771 MB, 905.5: +36.4 %)."""
    from roofline.validation import gemm as g

    c = next(x for x in g.hopper_fp8_cases() if x.id == "azure ND H100 v5 fp8 802816x192x768")
    hand = 2 * 802816 * 192 * 768 / (924_991_488 / (3.35e12 * 0.80))
    assert hand == pytest.approx(685.97e12, rel=1e-4)
    assert g.predict_gemm(c) == pytest.approx(hand, rel=1e-9)
    assert g.predict_gemm(c) / c.value_si - 1 == pytest.approx(0.033, abs=5e-4)


def test_fp8_epilogue_folds_by_elements() -> None:
    """A linear of an fp8 graph writes 3·5 elements at 2 B (30 B); the ReLU after it reads and
    writes 15 elements at 1 B. Same element count: it folds into the linear's epilogue (the
    producer keeps its 30 B written, the ReLU's 5·3 FLOPs join it), as in a bf16 graph."""
    from roofline.graphs.fusion import fuse_epilogues

    for p in ("fp8", "bf16"):
        b = GraphBuilder("mlp", "forward", precision(p))
        b.add("linear", "fc", params=20, tokens=3, d_in=4, d_out=5)
        b.add("elementwise", "relu", elements=15, op="relu")
        g = fuse_epilogues(b.build(), ["activation"])
        assert g.names == ("fc+relu",), p
        c = g.op_cost(0)
        w = 2.0 if p == "fp8" else precision(p).act_bytes
        assert c.act_bytes_written == 15 * w
        assert c.flops == 2 * 3 * 4 * 5 + 15
    # a different element count does not fold
    b = GraphBuilder("mlp", "forward", precision("fp8"))
    b.add("linear", "fc", params=20, tokens=3, d_in=4, d_out=5)
    b.add("elementwise", "relu", elements=30, op="relu")
    assert fuse_epilogues(b.build(), ["activation"]).names == ("fc", "relu")


def test_thin_fp8_row_on_h200_is_its_compute_side() -> None:
    """On the H200 (4.8 TB/s) the same bytes take 924,991,488 / (4.8e12 · 0.80) = 240.9 µs
    (Hopper's tiled-GEMM streaming fraction), just below the whole-wave compute side
    (242.8 µs): the output width does not decide that row."""
    from roofline.engine.presets import efficiency_for
    from roofline.specs.hardware import hardware
    from roofline.validation import gemm as g

    c = next(x for x in g.hopper_fp8_cases() if x.id == "azure ND H200 v5 fp8 802816x192x768")
    ot = g._model(c, efficiency_for(hardware(c["hardware"]), "default")).evaluate(1.0)
    assert float(ot.t_memory.sum()) == pytest.approx(924_991_488 / (4.8e12 * 0.80), rel=1e-9)
    assert float(ot.t_memory.sum()) == pytest.approx(240.9e-6, rel=1e-3)
    assert float(ot.t_kernel.sum()) == pytest.approx(242.8e-6, rel=1e-3)
