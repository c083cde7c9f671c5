"""Weights given as `Constant` nodes whose value_info leaves the element type out are typed from the value.

The models carry an Unsqueeze in the pre-13 form (an `axes` attribute) at opset 17, as the training branch's CCTs
do: ONNX shape inference then fails on the whole graph, so it cannot fill the type in either."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from ckpt.errors import CkptError
from ckpt.solver.graph.onnx_loader import load_graph


def _model(value: np.ndarray, *, declare_type: bool, declare_shape: bool = True) -> onnx.ModelProto:
    const = helper.make_node("Constant", [], ["w"], name="const_w", value=numpy_helper.from_array(value))
    mul = helper.make_node("Mul", ["x", "w"], ["y"], name="mul")
    grad = helper.make_node("Mul", ["y", "w"], ["w_grad"], name="mul_Grad")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(value.shape))
    out = helper.make_tensor_value_info("w_grad", TensorProto.FLOAT, list(value.shape))
    w_info = onnx.ValueInfoProto(name="w")
    if declare_shape:
        w_info.type.tensor_type.shape.dim.extend(onnx.TensorShapeProto.Dimension(dim_value=d) for d in value.shape)
    if declare_type:
        w_info.type.tensor_type.elem_type = TensorProto.FLOAT
    y_info = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(value.shape))
    old_form = helper.make_node("Unsqueeze", ["y"], ["y_u"], name="unsqueeze", axes=[0])
    y_u = helper.make_tensor_value_info("y_u", TensorProto.FLOAT, [1, *value.shape])
    graph = helper.make_graph([const, mul, grad, old_form], "g", [x], [out, y_u], value_info=[w_info, y_info])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("dtype, itemsize", [(np.float32, 4), (np.float16, 2), (np.int64, 8)])
def test_constant_weight_without_elem_type_takes_the_values_type(dtype, itemsize):
    value = np.arange(12, dtype=dtype).reshape(3, 4)
    graph = load_graph(_model(value, declare_type=False))
    assert graph.tensor_bytes["w"] == 12 * itemsize
    assert "w" in graph.persistent


def test_constant_weight_without_shape_takes_the_values_shape():
    value = np.ones((2, 5), dtype=np.float32)
    graph = load_graph(_model(value, declare_type=False, declare_shape=False))
    assert graph.tensor_bytes["w"] == 40


def test_an_untyped_tensor_no_value_can_type_is_still_refused():
    model = _model(np.ones((2, 2), np.float32), declare_type=True)
    model.graph.node[1].op_type = "Shape"      # an op ckpt cannot type from
    model.graph.node[1].ClearField("input")
    model.graph.node[1].input.append("w_missing")
    model.graph.input.append(onnx.ValueInfoProto(name="w_missing"))
    with pytest.raises(CkptError):
        load_graph(model)
