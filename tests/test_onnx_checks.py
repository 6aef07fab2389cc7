"""Issue 11 §2: malformed ONNX files are ImportGraphErrors/SpecErrors (RooflineErrors), never
IndexErrors; absurd static dimensions and bad metadata are handled; arguments are checked."""

from __future__ import annotations

import pytest

import roofline as rl
from roofline.errors import RooflineError

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def _save(tmp_path, nodes, inits=(), x_shape=("batch", 16), name="m.onnx", opset=17):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    g = helper.make_graph(nodes, "g", [x], [y], list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    p = tmp_path / name
    onnx.save(m, str(p))
    return p


def _w(name, dims):
    n = 1
    for d in dims:
        n *= d
    return helper.make_tensor(name, TensorProto.FLOAT, dims, [0.0] * n)


def test_well_formed_matmul_imports(tmp_path):
    p = _save(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"])], [_w("w", [16, 8])])
    r = rl.solve(rl.model(str(p)), "A100", batch=4)
    assert r.flops == pytest.approx(2 * 4 * 16 * 8)  # 2·B·K·N = 1024


@pytest.mark.parametrize("op, attrs, opset", [
    ("MatMul", {}, 17), ("Gemm", {}, 17), ("Attention", {}, 23)])
def test_node_with_one_input_is_a_clear_error(tmp_path, op, attrs, opset):
    p = _save(tmp_path, [helper.make_node(op, ["x"], ["y"], **attrs)], opset=opset)
    with pytest.raises(RooflineError, match=f"{op} needs at least"):
        rl.model(str(p))


def test_huge_static_dimension_is_refused(tmp_path):
    p = _save(tmp_path, [helper.make_node("Relu", ["x"], ["y"])], x_shape=(2**62, 16))
    with pytest.raises(RooflineError, match="static dimension"):
        rl.model(str(p))


@pytest.mark.parametrize("value", ["42", "{'a': 1}", "[[[[" * 2000, "not python"])
def test_odd_name_scope_metadata_only_loses_the_names(tmp_path, value):
    n = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    for key in ("pkg.torch.onnx.name_scopes", "pkg.torch.onnx.class_hierarchy"):
        e = n.metadata_props.add()
        e.key, e.value = key, value
    p = _save(tmp_path, [n], [_w("w", [16, 8])])
    r = rl.solve(rl.model(str(p)), "A100", batch=2)
    assert r.flops == pytest.approx(2 * 2 * 16 * 8)


def test_onnx_arguments_are_checked(tmp_path):
    p = _save(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"])], [_w("w", [16, 8])])
    with pytest.raises(RooflineError, match="seq_len"):
        rl.model(str(p), seq_len="8")
    with pytest.raises(RooflineError, match="dims"):
        rl.model(str(p), dims={"seq": 0})
    with pytest.raises(RooflineError, match="keep_views"):
        rl.model(str(p), keep_views="yes")
