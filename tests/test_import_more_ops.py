"""Importers on the ops added after the first release: transposed, 3-D and per-axis
convolutions, per-axis and ceil-mode pooling, var/std, cumsum, sort and top-k.

One small module is traced (PyTorch) and exported once (ONNX); FLOPs are checked against
``torch.utils.flop_counter.FlopCounterMode`` where it counts the op (convolutions) and against
hand counts (arithmetic in the comments) where it does not. Hand-built ONNX graphs cover the
attribute forms an exporter does not write (auto_pad, output_shape, default strides).
"""

from __future__ import annotations

import io
import logging
import math
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import roofline as rl  # noqa: E402
from roofline.graphs.importers.torch_import import from_torch  # noqa: E402

nn = torch.nn
F = torch.nn.functional


class _More(nn.Module):
    """x [B, 4, 7, 9] through every new op; the outputs are returned as they are (no sums)."""

    def __init__(self) -> None:
        super().__init__()
        self.ct = nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0),
                                     output_padding=(1, 0), groups=2)
        self.c3 = nn.Conv3d(6, 4, (1, 3, 3), stride=(1, 2, 1), padding=(0, 1, 2),
                            dilation=(1, 1, 2), bias=False)
        self.c2 = nn.Conv2d(6, 2, 3, stride=(2, 1), bias=False)
        self.ct1 = nn.ConvTranspose1d(4, 2, 3, stride=2, dilation=2, bias=False)
        self.mp = nn.MaxPool2d((3, 2), stride=(2, 1), ceil_mode=True)
        self.ap = nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)
        self.mp3 = nn.MaxPool3d((1, 2, 2))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.ct(x)  # [B, 6, 14, 10]
        z = self.c3(y.unsqueeze(2))  # [B, 4, 1, 7, 10]
        v = torch.var(y, dim=-1, keepdim=True)
        s = torch.std(y, dim=(2, 3))
        srt, _ = torch.sort(y, dim=-1)
        top, _ = torch.topk(y, 2, dim=-1)
        return (z, self.mp3(z), self.c2(y), self.ct1(x[:, :, 0]), self.mp(y), self.ap(y),
                F.avg_pool1d(x[:, :, 0], 2, ceil_mode=True), v, s, torch.cumsum(y, 1), srt,
                top)


#: FLOPs per sample of each op, by hand
HAND = {
    # transposed: 2·C·ΠX·(C'/g)·Πk = 2·4·63·3·6 = 9,072 + bias C'·H'·W' = 6·14·10 = 840
    "ct": 9_072 + 840,
    # 2·C'·ΠX'·C·Πk = 2·4·(1·7·10)·6·(1·3·3) = 30,240
    "c3": 30_240,
    # stride (2, 1): H' = (14 − 3)//2 + 1 = 6, W' = 8; 2·2·48·6·9 = 10,368
    "c2": 10_368,
    # 1-D transposed, stride 2, dilation 2 on L = 9: 2·4·9·2·3 = 432
    "ct1": 432,
    # ceil mode, kernel (3, 2), stride (2, 1): 7×9 outputs × 6 channels × 6 comparisons = 2,268
    "mp": 2_268,
    # ceil mode, 3×3/2, pad 1: 8×6 outputs (floor would give 7×5) × 6 × 9 adds = 2,592
    "ap": 2_592,
    # (1, 2, 2) windows on 1×7×10: 1×3×5 outputs × 4 channels × 4 = 240
    "mp3": 240,
    # avg_pool1d, 2 wide, ceil mode, L = 9: 5 outputs (the last window half outside) × 4 × 2;
    # aten runs it as an avg_pool2d over [B, 4, 1, 9] with a 1×2 window
    "avg_pool2d": 40,
    # var over rows of 10 (6·14 = 84 rows): 4·840 + 2·84 = 3,528
    "var": 3_528,
    # std over 14·10 = 140 (6 rows): 4·840 + 3·6 = 3,378
    "std": 3_378,
    # cumsum over the 6 channels, 140 rows: 5 adds each = 700
    "cumsum": 700,
    # sort rows of 10 (84 rows): 84·10·log2(10) ≈ 2,790.4
    "sort": 84 * 10 * math.log2(10),
    # top-2 of 10 (84 rows): 10 + 2·log2(2) = 12 comparisons each = 1,008
    "topk": 1_008,
}


@pytest.fixture(scope="module")
def traced() -> rl.graphs.model.Model:
    return from_torch(_More(), torch.randn(1, 4, 7, 9))


def _by_name(g, batch: int) -> dict[str, float]:
    return {n: g.op_cost(i, batch).flops for i, n in enumerate(g.names)}


def test_torch_trace_counts_every_new_op(traced) -> None:
    assert traced.unsupported_ops == () and not traced.batch_dependent
    g = traced.graph(precision="fp32")
    kinds = dict(zip(g.names, g.kinds))
    assert {kinds[n] for n in ("ct", "c3", "c2", "ct1")} == {"conv"}
    assert {kinds[n] for n in ("mp", "ap", "mp3", "avg_pool2d")} == {"pool"}
    assert (kinds["var"], kinds["std"], kinds["cumsum"], kinds["sort"], kinds["topk"]) == \
        ("variance", "variance", "cumsum", "sort", "topk")
    for b in (1, 3):
        got = _by_name(g, b)
        assert set(got) == set(HAND)
        for name, per_sample in HAND.items():
            assert got[name] == pytest.approx(b * per_sample, rel=1e-12), name
    # the parameters: ct 4·3·3·2 + 6, c3 4·6·9, c2 2·6·9, ct1 4·2·3
    assert traced.params == 72 + 6 + 216 + 108 + 24


def test_torch_conv_flops_match_flop_counter_mode(traced) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    net = _More().eval()
    with FlopCounterMode(display=False) as fc, torch.no_grad():
        net(torch.randn(2, 4, 7, 9))
    counts = fc.get_flop_counts()
    got = _by_name(traced.graph(precision="fp32"), 2)
    for name in ("ct", "c3", "c2", "ct1"):
        (flops,) = counts[f"_More.{name}"].values()
        bias = 2 * 6 * 14 * 10 if name == "ct" else 0  # ours adds the bias adds
        assert got[name] == flops + bias, name


def test_torch_byte_counts_by_hand(traced) -> None:
    g = traced.graph(precision="bf16")
    c = {n: g.op_cost(i, 2) for i, n in enumerate(g.names)}
    # transposed conv: x 2·4·63 in, y 2·6·140 out (2 B); weights 72 + bias 6 (2 B)
    assert c["ct"].act_bytes_read == 2 * 4 * 63 * 2
    assert c["ct"].act_bytes_written == 2 * 6 * 140 * 2
    assert c["ct"].weight_bytes_read == (72 + 6) * 2
    # sort writes values (2 B) and int64 indices (8 B) for 2·840 elements
    assert c["sort"].act_bytes_written == 2 * 840 * (2 + 8)
    # topk writes 2 of 10 per row: 2·84 rows × 2 × (2 + 8)
    assert c["topk"].act_bytes_written == 2 * 84 * 2 * 10
    # implicit GEMM of the transposed conv: M·N·K = its multiply-adds per sample
    i = g.names.index("ct")
    assert math.prod(g.gemm[:, i]) == 9_072 / 2


def test_data_dependent_sort_axis_is_retraced() -> None:
    class SortBatch(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.sort(x, dim=0).values  # rows along the batch: B·log2(B) per column

    # sorting along dim 0 mixes its rows: by tracing, the batch is dim 1 (independent columns)
    assert from_torch(SortBatch(), torch.randn(2, 3)).batch_dims == (1,)
    m = from_torch(SortBatch(), torch.randn(2, 3), batch_dim=0)  # the user says dim 0
    assert m.batch_dependent
    # batch 4: 3 columns of 4: 3·4·log2(4) = 24 comparisons
    assert m.graph(precision="fp32", batch=4).cost(4).flops == 24


# -- ONNX ---------------------------------------------------------------------------------------

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from roofline.graphs.importers.onnx_import import from_onnx  # noqa: E402


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    pytest.importorskip("onnxscript")
    from fixtures.onnx_export import export

    path = tmp_path_factory.mktemp("more") / "more.onnx"
    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return export(_More().eval(), torch.randn(2, 4, 7, 9), path, opset=20)
    finally:
        logging.disable(logging.NOTSET)


def test_onnx_export_counts_as_the_trace(exported, traced) -> None:
    m = from_onnx(exported)
    assert m.unsupported_ops == ()
    g, t = m.graph(precision="fp32"), traced.graph(precision="fp32")
    ours = _by_name(g, 2)
    kinds = dict(zip(g.names, g.kinds))
    # ConvTranspose, Conv (3-D, per-axis stride), MaxPool/AveragePool (ceil_mode, per-axis):
    # the same formulas and numbers as the trace
    # (the exporter gives each bias-free direct conv a computed zero bias: one add per output,
    # c3 4·1·7·10 = 280, c2 2·6·8 = 96, which we count; the transposed ct1 gets none)
    zero_bias = {"c3": 280, "c2": 96}
    for name in ("ct", "c3", "c2", "ct1", "mp", "ap", "mp3"):
        assert ours[name] == 2 * (HAND[name] + zero_bias.get(name, 0)), name
    assert [v for n, v in ours.items() if n.startswith("averagepool")] == \
        [2 * HAND["avg_pool2d"]]
    assert kinds["ct"] == kinds["c3"] == "conv" and kinds["ap"] == "pool"
    # torch.sort exports as a TopK with k = n: priced as the full sort it is
    topks = sorted(v for n, v in ours.items() if kinds[n] == "topk")
    assert topks == pytest.approx([2 * HAND["topk"], 2 * HAND["sort"]], rel=1e-12)
    assert [v for n, v in ours.items() if kinds[n] == "cumsum"] == [2 * HAND["cumsum"]]
    # var/std arrive decomposed (ReduceMean, Sub, Mul, ReduceMean, Mul, Div [, Sqrt]) and are
    # priced op by op; their FLOPs sum to the fused formula's: the totals differ only by the
    # zero-bias adds
    assert "variance" not in kinds.values()
    for b in (1, 4):
        extra = b * sum(zero_bias.values())
        assert g.cost(b).flops == pytest.approx(t.cost(b).flops + extra, rel=1e-12)
        assert g.cost(b).flops == pytest.approx(b * sum(HAND.values()) + extra, rel=1e-12)


def _model(tmp_path: Path, nodes: list, inputs: list, inits: list, name: str) -> Path:
    g = helper.make_graph(nodes, name, inputs,
                          [helper.make_tensor_value_info(n.output[0], TensorProto.FLOAT, None)
                           for n in nodes], inits)
    path = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), str(path))
    return path


def _w(name: str, dims: list[int]) -> TensorProto:
    return helper.make_tensor(name, TensorProto.FLOAT, dims, [0.0] * math.prod(dims))


def test_onnx_attribute_forms(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 5, 6])
    nodes = [
        # ConvTranspose 2 -> 3, 3×3, stride 2, output_shape 10×12 (padding implied)
        helper.make_node("ConvTranspose", ["x", "wt"], ["ct"], strides=[2, 2],
                         output_shape=[10, 12]),
        # ConvTranspose with auto_pad SAME_UPPER: output = input × stride = 10×12
        helper.make_node("ConvTranspose", ["x", "wt"], ["ct2"], strides=[2, 2],
                         auto_pad="SAME_UPPER"),
        # Conv with per-axis strides and auto_pad SAME_LOWER: 5×6 -> ceil(5/2)×ceil(6/3) = 3×2
        helper.make_node("Conv", ["x", "wc"], ["cv"], strides=[2, 3], auto_pad="SAME_LOWER"),
        # AveragePool without strides: ONNX's default stride is 1, 2×3 windows: 4×4 outputs
        helper.make_node("AveragePool", ["x"], ["ap"], kernel_shape=[2, 3]),
        # MaxPool ceil_mode, 2×2 stride 2 on 5×6: 3×3
        helper.make_node("MaxPool", ["x"], ["mp"], kernel_shape=[2, 2], strides=[2, 2],
                         ceil_mode=1),
        # CumSum along axis 3 (an initializer), TopK 4 of 6 unsorted
        helper.make_node("CumSum", ["x", "axis"], ["cs"]),
        helper.make_node("TopK", ["x", "k"], ["tk", "ti"], axis=3, sorted=0),
    ]
    inits = [_w("wt", [2, 3, 3, 3]), _w("wc", [4, 2, 3, 3]),
             helper.make_tensor("axis", TensorProto.INT64, [], [3]),
             helper.make_tensor("k", TensorProto.INT64, [1], [4])]
    m = from_onnx(_model(tmp_path, nodes, [x], inits, "forms"))
    assert m.unsupported_ops == ()
    g = m.graph(precision="fp32")
    got = dict(zip(g.names, (g.op_cost(i, 1) for i in range(len(g)))))
    assert g.kinds == ("conv", "conv", "conv", "pool", "pool", "cumsum", "topk")
    # transposed: 2·C·ΠX·C'·Πk = 2·2·30·3·9 = 3,240 for both forms
    assert got["ConvTranspose_0"].flops == got["ConvTranspose_1"].flops == 3_240
    assert got["ConvTranspose_0"].act_bytes_written == 3 * 10 * 12 * 4
    # conv 3×2 outputs: 2·4·6·2·9 = 864
    assert got["Conv_2"].flops == 864
    # pools: 4×4·2 channels·6 = 192; 3×3·2·4 = 72
    assert got["AveragePool_3"].flops == 192 and got["MaxPool_4"].flops == 72
    # cumsum rows of 6 (2·5 = 10 rows): 5 adds each = 50
    assert got["CumSum_5"].flops == 50
    # top-4 of 6 unsorted: 6 comparisons per row, 10 rows; 4 values + 4 int64 indices per row
    assert got["TopK_6"].flops == 60
    assert got["TopK_6"].act_bytes_written == 10 * 4 * (4 + 8)


def test_onnx_conv3d_and_pool1d(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2, 3, 4, 5])
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 0, 1, 1, 0, 1],
                              strides=[1, 2, 1]),
             helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[3, 2, 2],
                              strides=[1, 2, 2])]
    # 1-D MaxPool, ceil mode, 2 wide / 2 with pads 1 on L = 5: ONNX shape inference keeps the
    # last window (it starts at 6, in the right padding): ceil((5 + 2 − 2)/2) + 1 = 4 outputs
    x1 = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3, 5])
    p1 = from_onnx(_model(tmp_path, [helper.make_node("MaxPool", ["y"], ["q"], kernel_shape=[2],
                                                      strides=[2], pads=[1, 1], ceil_mode=1)],
                          [x1], [], "p1d"))
    assert p1.unsupported_ops == ()
    assert p1.graph(precision="fp32").cost(2).flops == 2 * 3 * 4 * 2  # B·C·4 outputs·2
    m = from_onnx(_model(tmp_path, nodes, [x], [_w("w", [3, 2, 3, 3, 3])], "c3d"))
    g = m.graph(precision="fp32")
    # conv: D' = 3 + 2 − 3 + 1 = 3, H' = (4 − 3)//2 + 1 = 1, W' = 5 + 2 − 3 + 1 = 5:
    # 2·3·15·2·27 = 4,860 per sample
    assert g.op_cost(0, 2).flops == 2 * 4_860
    # pool: D' = 1, H' = 2, W' = 2: 4 outputs × 2 channels × 12 = 96
    assert g.op_cost(1, 1).flops == 96
    assert m.params == 3 * 2 * 27
