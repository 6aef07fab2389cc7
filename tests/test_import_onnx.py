"""ONNX import: exported modules against the zoo and the torch trace, hand-built graphs, errors."""

from __future__ import annotations

import io
import json
import logging
import math
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import roofline as rl  # noqa: E402
from roofline.errors import ImportGraphError, SpecError  # noqa: E402
from roofline.graphs.importers.onnx_import import from_onnx  # noqa: E402


def _rel(a: float, b: float) -> float:
    return abs(a - b) / b


def _export(module, example, path: Path, opset: int = 20) -> Path:
    pytest.importorskip("onnxscript")
    from fixtures.onnx_export import export

    logging.disable(logging.WARNING)
    try:
        with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            return export(module, example, path, opset=opset)
    finally:
        logging.disable(logging.NOTSET)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch = pytest.importorskip("torch")
    from fixtures.torch_models import GPT2, ResNet50

    d = tmp_path_factory.mktemp("onnx")
    with torch.device("meta"):
        rn, gpt, small = ResNet50().eval(), GPT2().eval(), GPT2(layers=2).eval()
    ids = torch.zeros(1, 128, dtype=torch.long, device="meta")
    return {
        "resnet50": _export(rn, torch.empty(1, 3, 224, 224, device="meta"), d / "rn50.onnx"),
        "gpt2": _export(gpt, ids, d / "gpt2.onnx", opset=23),  # SDPA -> Attention op
        "gpt2_small_decomposed": _export(small, ids, d / "small.onnx", opset=20),
        "small_module": small,
    }


def test_resnet50_onnx_matches_zoo(exported) -> None:
    m = rl.model(str(exported["resnet50"]))
    zoo = rl.model("resnet50")
    assert m.params == 25_557_032
    for b in (1, 16):
        ours, ref = m.graph(precision="fp16").cost(b), zoo.graph(precision="fp16").cost(b)
        # +0.14 % FLOPs: the exporter gives every bias-free conv a computed zero bias, whose
        # adds (one per conv output) we count
        assert _rel(ours.flops, ref.flops) < 0.01
        assert _rel(ours.bytes, ref.bytes) < 0.05
    assert "layer3.2.conv1" in m.graph(precision="fp16").names
    assert m.unsupported_ops == ()


def test_gpt2_onnx_matches_zoo(exported) -> None:
    m = rl.model(str(exported["gpt2"]))
    zoo = rl.model("gpt2")
    assert m.params == zoo.params
    for b in (1, 8):
        ours = m.graph(precision="bf16").cost(b)
        ref = zoo.graph(precision="bf16", phase="forward", seq_len=128).cost(b)
        assert _rel(ours.flops, ref.flops) < 0.01
        assert _rel(ours.bytes, ref.bytes) < 0.05
    g = m.graph(precision="bf16")
    assert g.kinds.count("attention") == 12 and "h.0.attn.attention" in g.names


def test_decomposed_attention_fused_and_causal(exported) -> None:
    torch = pytest.importorskip("torch")
    m = rl.model(str(exported["gpt2_small_decomposed"]))
    t = rl.model(exported["small_module"],
                 example_inputs=(torch.zeros(1, 128, dtype=torch.long),))
    g = m.graph(precision="fp16")
    i = g.names.index("h.0.attn.attention")
    assert g.kinds[i] == "attention"
    # MatMul -> Add(Trilu mask) -> Softmax -> MatMul read as causal: 4·12·64·128·129/2
    assert g.op_cost(i, 1).flops == 4 * 12 * 64 * 8256
    assert "copy" not in g.kinds  # Split/Transpose feeding attention are absorbed
    for b in (1, 4):
        a, c = g.cost(b), t.graph(precision="fp16").cost(b)
        assert _rel(a.flops, c.flops) < 0.01 and _rel(a.bytes, c.bytes) < 0.05


def _save(model, path: Path) -> Path:
    onnx.save(model, str(path))
    return path


def _hand_model(tmp_path: Path, *, seq: str | int = 16) -> Path:
    """x[batch, C=4, 8, 8] -> Conv 3x3 (8) -> BatchNorm -> Relu -> MaxPool 2 -> Flatten ->
    Gemm 128x10 -> Softmax; plus a TopK branch and a Hardmax (no formula)."""
    def init(name: str, dims: list[int]) -> TensorProto:
        return helper.make_tensor(name, TensorProto.FLOAT, dims, [0.0] * int(_prod(dims)))

    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "g", "b", "mu", "var"], ["n"]),
        helper.make_node("Relu", ["n"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1),
        helper.make_node("Softmax", ["y"], ["out"], axis=-1),
        helper.make_node("TopK", ["y", "k"], ["tv", "ti"], axis=-1),
        helper.make_node("Hardmax", ["y"], ["hm"], axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "hand", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                      ["batch", 4, 8, 8])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 10]),
         helper.make_tensor_value_info("tv", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("hm", TensorProto.FLOAT, None)],
        [init("w", [8, 4, 3, 3]), init("g", [8]), init("b", [8]), init("mu", [8]),
         init("var", [8]), init("fc_w", [10, 128]), init("fc_b", [10]),
         helper.make_tensor("k", TensorProto.INT64, [1], [3])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return _save(m, tmp_path / "hand.onnx")


def _prod(xs: list[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def test_hand_built_graph_costs(tmp_path: Path) -> None:
    m = from_onnx(_hand_model(tmp_path))
    g = m.graph(precision="fp32")
    assert g.kinds == ("conv2d", "norm", "elementwise", "pool2d", "linear", "softmax", "topk")
    c = g.cost(2)
    # conv 2·B·8·8·8·4·9 = 36,864·B; bn 2·B·512; relu B·512; pool 4·B·128; gemm 2·B·128·10
    # + bias B·10; softmax 5·B·10; top-3 of 10: 10 comparisons + 3·log2(3) to sort the 3:
    # per sample 36,864 + 1,024 + 512 + 512 + 2,560 + 10 + 50 + 10 + 3·log2(3)
    assert c.flops == pytest.approx(2 * (36_864 + 1_024 + 512 + 512 + 2_560 + 10 + 50 + 10
                                         + 3 * math.log2(3)), rel=1e-12)
    # weights (fp32, read once): conv 288 + bn 4·8 + fc 1,280 + 10 = 1,610 × 4 B
    assert c.weight_bytes_read == 1_610 * 4
    assert m.params == 288 + 16 + 1_290  # BN running statistics are not parameters
    (u,) = m.unsupported_ops
    assert u.op == "onnx:Hardmax" and u.input_shapes[0] == (1, 10)
    assert "UNSUPPORTED: 1 ops" in str(m)


def test_symbolic_sequence_and_errors(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 16])
    nodes = [helper.make_node("MatMul", ["x", "xt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "x"], ["o"]),
             helper.make_node("Transpose", ["x"], ["xt"], perm=[0, 2, 1])]
    order = [nodes[3], *nodes[:3]]
    g = helper.make_graph(order, "attn", [x],
                          [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    path = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                 tmp_path / "attn.onnx")
    with pytest.raises(ImportGraphError, match="seq"):
        from_onnx(path)
    m = from_onnx(path, seq_dim="seq", seq_len=32)
    for T in (32, 8):
        gr = m.graph(precision="fp32", seq_len=T)
        assert gr.kinds == ("attention",)  # non-causal: no Trilu in the mask path
        # 4·B·T·T·H with one head of 16
        assert gr.cost(3).flops == 4 * 3 * T * T * 16
    fixed = from_onnx(path, dims={"seq": 8})
    assert fixed.graph(precision="fp32").cost(1).flops == 4 * 8 * 8 * 16


def test_bad_files(tmp_path: Path) -> None:
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"\x00\x01not a protobuf at all\xff" * 10)
    with pytest.raises(ImportGraphError, match="does not parse|no ONNX graph"):
        rl.model(str(junk))
    with pytest.raises(ImportGraphError, match="does not exist"):
        rl.model(str(tmp_path / "missing.onnx"))
    # a Reshape to a shape given at run time: no static output shape
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])
    s = helper.make_tensor_value_info("shape", TensorProto.INT64, [2])
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["r"]),
                           helper.make_node("Relu", ["r"], ["y"])], "dyn", [x, s],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    p = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "dyn.onnx")
    with pytest.raises(ImportGraphError, match="unresolvable shapes"):
        from_onnx(p)


def test_cli_solve_onnx(tmp_path: Path, capsys) -> None:
    cli = pytest.importorskip("roofline.cli.solve")
    del cli
    from roofline.cli import main

    path = _hand_model(tmp_path)
    assert main(["solve", str(path), "H100", "--batch", "32"]) == 0
    out = capsys.readouterr().out
    assert "hand" in out and "batch 32" in out
    # the Hardmax has no formula: the printed result says so, with its share of the bytes
    assert "WARNING         1 ops unpriced (" in out and "% of bytes" in out
    assert main(["solve", str(path), "H100", "--batch", "32", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["warnings"]) == 1 and data["warnings"][0].startswith("1 ops unpriced (")
    assert main(["sweep", str(path), "H100", "--batch", "1,2"]) == 0
    assert "WARNING: 1 ops unpriced (" in capsys.readouterr().out


def test_batch_symbol_found_or_given(tmp_path: Path) -> None:
    """(seq, batch, 16) input: the batch is the symbol named so, not dimension 0."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["seq", "batch", 16])
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 8], [0.0] * 128)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "sbe", [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    path = _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                 tmp_path / "sbe.onnx")
    m = from_onnx(path, dims={"seq": 10})
    # batch 4: 4 sequences of 10 tokens, 2·40·16·8 = 10,240 FLOPs
    assert m.graph(precision="fp32").cost(4).flops == 2 * 4 * 10 * 16 * 8
    # two symbols, neither named batch: ambiguous, unless batch_dim says which
    x2 = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["S", "N", 16])
    g2 = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "sn", [x2],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    p2 = _save(helper.make_model(g2, opset_imports=[helper.make_opsetid("", 17)]),
               tmp_path / "sn.onnx")
    with pytest.raises(ImportGraphError, match="batch_dim="):
        from_onnx(p2)
    m2 = from_onnx(p2, batch_dim="N", dims={"S": 10})
    assert m2.graph(precision="fp32").cost(4).flops == 2 * 4 * 10 * 16 * 8
    with pytest.raises(SpecError, match="batch_dim='Q' is not a symbolic dimension"):
        from_onnx(p2, batch_dim="Q", dims={"S": 10})


def _static(tmp_path: Path, nodes, shape, inits, name: str) -> Path:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))
    g = helper.make_graph(nodes, name, [x],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]),
                 tmp_path / f"{name}.onnx")


def test_static_file_batch_axis_found_or_refused(tmp_path: Path) -> None:
    """A static first input: its batch axis is the one whose doubling doubles the FLOPs;
    dimension 0 is never assumed."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 8], [0.0] * 128)
    mm = [helper.make_node("MatMul", ["x", "w"], ["y"])]
    # (10, 2, 16) tokens through a 16x8 matmul: dims 0 and 1 both scale it linearly
    p = _static(tmp_path, mm, (10, 2, 16), [w], "sbe_static")
    with pytest.raises(ImportGraphError, match=r"dims 0, 1 each scale.*batch_dim=<axis>"):
        from_onnx(p)
    m = from_onnx(p, batch_dim=1)
    # batch 4: 4 sequences of 10 tokens, 2·40·16·8 FLOPs
    assert m.graph(precision="fp32").cost(4).flops == 2 * 4 * 10 * 16 * 8
    with pytest.raises(SpecError, match="batch_dim=3"):
        from_onnx(p, batch_dim=3)
    # a static CNN-like input (1, 4, 8, 8): conv + global pool + linear. Doubling the channels
    # breaks the conv's weights, doubling H or W leaves the linear layer's FLOPs unchanged
    # (not 2x): only dim 0 is the batch
    conv_w = helper.make_tensor("cw", TensorProto.FLOAT, [8, 4, 3, 3], [0.0] * 288)
    fc = helper.make_tensor("fw", TensorProto.FLOAT, [8, 10], [0.0] * 80)
    cnn = [helper.make_node("Conv", ["x", "cw"], ["c"], kernel_shape=[3, 3],
                            pads=[1, 1, 1, 1]),
           helper.make_node("GlobalAveragePool", ["c"], ["g"]),
           helper.make_node("Flatten", ["g"], ["f"]),
           helper.make_node("MatMul", ["f", "fw"], ["y"])]
    m2 = from_onnx(_static(tmp_path, cnn, (1, 4, 8, 8), [conv_w, fc], "cnn_static"))
    one = m2.graph(precision="fp32").cost(1).flops
    assert m2.graph(precision="fp32").cost(3).flops == pytest.approx(3 * one)
    # a Reshape that hard-codes the batch: no dimension scales, so the file is refused
    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 64])
    fixed = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("MatMul", ["r", "w64"], ["y"])]
    w64 = helper.make_tensor("w64", TensorProto.FLOAT, [64, 8], [0.0] * 512)
    with pytest.raises(ImportGraphError, match="no dimension of it is a batch"):
        from_onnx(_static(tmp_path, fixed, (1, 4, 16), [shape, w64], "fixed_static"))
