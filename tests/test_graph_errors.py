"""Graphs the loader must refuse with a one-line reason."""
import pytest
from onnx import TensorProto, helper

from ckpt.errors import CkptError
from ckpt.solver.graph.onnx_loader import load_graph


def _model(nodes, value_info=(), outputs=None, x_shape=(4,)):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
                              outputs or [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                              value_info=list(value_info))
    return helper.make_model(graph)


def test_cycle_is_named():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["b"], name="n2"),
             helper.make_node("Relu", ["a"], ["y"], name="n3")]
    with pytest.raises(CkptError, match="cycle through op 'n1'"):
        load_graph(_model(nodes))


def test_unknown_size_is_named():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["y"], name="n2")]
    dynamic = [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch"])]
    with pytest.raises(CkptError, match="size of tensor 'a' .*is unknown"):
        load_graph(_model(nodes, dynamic, x_shape=["batch"]))


def test_missing_shapes_are_inferred():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="n1"), helper.make_node("Relu", ["a"], ["y"], name="n2")]
    assert load_graph(_model(nodes)).tensor_bytes["a"] == 16


def test_unsorted_graph_is_sorted_stably():
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="late"), helper.make_node("Relu", ["x"], ["a"], name="early")]
    model = _model(nodes)
    assert [op.name for op in load_graph(model).ops] == ["early", "late"]
