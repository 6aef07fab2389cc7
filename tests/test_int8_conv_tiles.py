"""Whole waves of tiles for convolutions and for int8 (session 26, engine/tiles.py).

A dense convolution is priced as the implicit GEMM cuDNN / TensorRT run it: the same kernel time
as a matmul of its (M, N, K); a depthwise one (N = 1) keeps the smooth model. int8 operands on
Ampere and Hopper use the 16-bit set's parameters against the int8 peak (data/presets/tiles.toml
``[arch.ampere.int8]`` / ``[arch.hopper.int8]``, source int8transfer), checked by hand on one
shape and against a published A100 int8 GEMM table that no fit saw.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

import roofline as rl
from roofline.engine.core import TimeModel
from roofline.engine.presets import efficiency_for
from roofline.graphs.graph import GraphBuilder
from roofline.specs.dtypes import precision


def _kernel_s(g, hw_key: str, smooth: bool = False) -> float:
    hw = rl.hardware(hw_key)
    eff = efficiency_for(hw, "default")
    if smooth:
        eff = replace(eff, tiles=None)
    return float(TimeModel(g, hw, eff).evaluate(1.0).t_kernel.sum())


def _conv(dtype: str, c_in: int, c_out: int, hw: int, k: int, groups: int = 1):
    b = GraphBuilder("c", "forward", precision(dtype))
    b.add("conv2d", "conv", params=c_out * (c_in // groups) * k * k, c_in=c_in, h=hw, w=hw,
          c_out=c_out, kernel=k, stride=1, padding=(k - 1) // 2, dilation=1, groups=groups,
          bias=False)
    return b.build()


def _dot(dtype: str, m: int, n: int, k: int):
    b = GraphBuilder("d", "forward", precision(dtype))
    b.add("matmul", "dot", m=m, k=k, n=n)
    return b.build()


@pytest.mark.parametrize("dtype", ["fp16", "int8"])
def test_a_dense_conv_is_priced_as_its_implicit_gemm(dtype: str) -> None:
    """3x3 conv, 256 -> 256 channels on 14 x 14: M = 196, N = 256, K = 256 x 9 = 2304, the
    matmul of those sizes' kernel time exactly; not the smooth model's."""
    conv = _conv(dtype, 256, 256, 14, 3)
    assert conv.gemm[:, 0].tolist() == [196.0, 256.0, 2304.0]
    t = _kernel_s(conv, "a100-sxm4-80gb")
    assert t == pytest.approx(_kernel_s(_dot(dtype, 196, 256, 2304), "a100-sxm4-80gb"), rel=1e-12)
    assert t != pytest.approx(_kernel_s(conv, "a100-sxm4-80gb", smooth=True), rel=1e-3)
    assert t >= 6e-6  # the 6 us per-kernel fill is in it


def test_a_strided_padded_dilated_grouped_conv_by_hand() -> None:
    """128 -> 256 channels in 2 groups on 56 x 56, kernel 3, stride 2, padding 2, dilation 2:
    H' = floor((56 + 2 + 2 - 2 x (3 - 1) - 1) / 2) + 1 = 28; the two groups' GEMMs run as one
    of M = 28 x 28 x 2 = 1568 rows, N = 256 / 2 = 128 columns (a tile's worth: in waves),
    K = 128 / 2 x 9 = 576, the matmul of those sizes' kernel time exactly. With 32 groups
    N = 8 columns, below the smallest tile: the smooth model's time."""
    b = GraphBuilder("c", "forward", precision("fp16"))
    b.add("conv2d", "conv", params=256 * 64 * 9, c_in=128, h=56, w=56, c_out=256, kernel=3,
          stride=2, padding=2, dilation=2, groups=2, bias=False)
    conv = b.build()
    assert conv.gemm[:, 0].tolist() == [1568.0, 128.0, 576.0]
    assert _kernel_s(conv, "a100-sxm4-80gb") == pytest.approx(
        _kernel_s(_dot("fp16", 1568, 128, 576), "a100-sxm4-80gb"), rel=1e-12)
    g32 = _conv("fp16", 256, 256, 14, 3, groups=32)
    assert g32.gemm[1, 0] == 8.0
    assert _kernel_s(g32, "a100-sxm4-80gb") == pytest.approx(
        _kernel_s(g32, "a100-sxm4-80gb", smooth=True), rel=1e-12)
    assert _kernel_s(g32, "a100-sxm4-80gb") < 6e-6  # no per-kernel fill in the smooth model


def test_a_depthwise_conv_keeps_the_smooth_model() -> None:
    """groups = channels: N = C'/g = 1 column, no tensor-core GEMM: the smooth model's time."""
    dw = _conv("fp16", 256, 256, 14, 3, groups=256)
    assert dw.gemm[1, 0] == 1.0
    assert _kernel_s(dw, "a100-sxm4-80gb") == pytest.approx(
        _kernel_s(dw, "a100-sxm4-80gb", smooth=True), rel=1e-12)


def test_int8_tiles_by_hand_on_the_a100() -> None:
    """4096 x 4096 x 4096 int8 on an A100 (108 SMs, 624 TOP/s, the 16-bit set: max 1, a = b =
    16, c = 128, fill 6 us). Without a split, tile 128 x 128: 32 x 32 = 1024 tiles, 10 waves of
    108; one tile 2 x 128 x 128 x 4096 x (1 + 16/128 + 16/128 + 128/4096) / (624e12 / 108)
    = 23.21 us; 10 waves 232.1 us. Tile 256 x 128: 16 x 32 = 512 tiles, 5 waves of a tile twice
    as long at 1 + 16/256 + 16/128 + 128/4096: 5 x 2 x 256 x 128 x 4096 x 1.21875 / 5.778e12 =
    221.2 us, the fastest (the other shapes and splits are slower: checked against the
    engine, which takes the minimum over all of them). Time = 6 + 221.2 us."""
    per_sm = 624e12 / 108
    t128 = 10 * 2 * 128 * 128 * 4096 * (1 + 16 / 128 + 16 / 128 + 128 / 4096) / per_sm
    t256 = 5 * 2 * 256 * 128 * 4096 * (1 + 16 / 256 + 16 / 128 + 128 / 4096) / per_sm
    assert t256 < t128
    got = _kernel_s(_dot("int8", 4096, 4096, 4096), "a100-sxm4-80gb")
    assert got == pytest.approx(6e-6 + t256, rel=1e-9)
    # fp16 on the same tiles: the same formula at half the peak
    got16 = _kernel_s(_dot("fp16", 4096, 4096, 4096), "a100-sxm4-80gb")
    assert got16 - 6e-6 == pytest.approx(2 * t256, rel=1e-9)


# sgl-project/sglang pull request #2752, A100, sgl-kernel int8 scaled GEMM: (M, N, K) -> GOP/s
# (the table is labelled GB/s; its script counts about 2MNK bytes of one-byte elements)
SGLANG_A100_INT8 = {(512, 8192, 21760): 434703.1, (1024, 8192, 21760): 507601.5,
                    (2048, 8192, 21760): 501544.4, (1024, 4096, 8192): 415411.8,
                    (2048, 4096, 8192): 498995.8}


def test_int8_tiles_against_a_published_a100_int8_gemm_table() -> None:
    """Held out (nothing int8 was fitted): ours within -10 ... +5 % of each published rate at
    M >= 512 (today -1 ... -8 %)."""
    errs = []
    for (m, n, k), gops in SGLANG_A100_INT8.items():
        ops = 2.0 * m * n * k
        errs.append(ops / _kernel_s(_dot("int8", m, n, k), "a100-sxm4-80gb") / (gops * 1e9) - 1)
    assert all(-0.10 <= e <= 0.05 for e in errs), errs


def test_int8_has_a_tile_set_where_the_16_bit_one_lives_only_on_ampere_and_hopper() -> None:
    from roofline.engine.tiles import tiles_for

    for key in ("a100-sxm4-40gb", "a100-pcie-80gb", "h100-sxm5", "h100-pcie", "h200-sxm"):
        t = tiles_for(rl.hardware(key))
        assert t is not None and t.for_dtype("int8") is not None, key
        i8 = t.for_dtype("int8")
        assert (i8.max, i8.a, i8.b, i8.c, i8.fill) == (t.max, t.a, t.b, t.c, t.fill)
    b200 = tiles_for(rl.hardware("b200"))
    assert b200 is not None and b200.for_dtype("int8") is None


def test_small_k_int8_conv_on_the_t4_by_hand() -> None:
    """The K-loop term at a small K (stop 28: 'untested'). ResNet-50's layer1 1x1 conv, 64 ->
    256 channels on 56 x 56, batch 1, int8 on the T4: M = 3136, N = 256, K = 64. The T4 set
    (a = b = 16, c = 128, fill 6 us, 40 SMs) at the int8 peak x the T4's sustained 0.41: one SM
    runs 130e12 x 0.41 / 40 = 1.3325e12 OP/s. The fastest candidate is the 64 x 64 tile without
    a split: 49 x 4 = 196 tiles, 5 waves of 40; one tile 2 x 64 x 64 x 64 x (1 + 16/64 + 16/64
    + 128/64 = 3.5) / 1.3325e12 = 1.377 us, 5 waves 6.886 us, + 6 us fill = 12.886 us (a split
    only adds K-loop fills at this K, c·s/K = 2s, and partials). The K-loop fill is 2 of the 3.5:
    the conv runs at 102.8 MOP / 12.886 us = 8.0 TOP/s, 6 % of the 130 TOP/s peak."""
    conv = _conv("int8", 64, 256, 56, 1)
    assert conv.gemm[:, 0].tolist() == [3136.0, 256.0, 64.0]
    per_sm = 130e12 * 0.41 / 40
    t = 6e-6 + 5 * 2 * 64 * 64 * 64 * (1 + 16 / 64 + 16 / 64 + 128 / 64) / per_sm
    assert t == pytest.approx(12.886e-6, rel=1e-4)
    assert _kernel_s(conv, "t4") == pytest.approx(t, rel=1e-9)
    assert 2 * 3136 * 256 * 64 / t == pytest.approx(7.98e12, rel=1e-3)
