"""Bad input, the leftovers of round five (issue 54): a step whose tensors are all empty, and a graph without
value_info for a Deeploy target."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from test_cli_errors import one_line, run

from ckpt.examples import write_example


def _empty_step(folder: Path) -> Path:
    """A training step (a forward op and its gradient) whose every tensor has a dimension of 0: 0 B of activations."""
    shape = [0, 8]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    g = helper.make_tensor_value_info("g", TensorProto.FLOAT, shape)
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="act"),
             helper.make_node("ReluGrad", ["a", "x"], ["g"], name="act_grad", domain="com.microsoft")]
    graph = helper.make_graph(nodes, "empty", [x], [g],
                              value_info=[helper.make_tensor_value_info("a", TensorProto.FLOAT, shape)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("com.microsoft", 1)])
    folder.mkdir()
    onnx.save(model, folder / "network.onnx")
    np.savez(folder / "inputs.npz", x=np.ones(shape, np.float32))
    np.savez(folder / "outputs.npz", g=np.ones(shape, np.float32))
    return folder


def test_a_solve_of_a_step_with_a_baseline_peak_of_0_says_so_instead_of_dividing_by_it(tmp_path):
    model = _empty_step(tmp_path / "empty")
    code, out, err = run("solve", str(model), "--target", "none", "--budget", "1.0", "-o", str(tmp_path / "s.json"))
    assert code == 0 and "Traceback" not in err, err
    assert "peak 0 B (baseline 0 B: every tensor the step computes is empty)" in out + err


@pytest.mark.deeploy
def test_a_graph_without_value_info_is_refused_in_one_line_before_deeploy_parses(tmp_path):
    folder = tmp_path / "bare"
    write_example("mlp", folder, layers=2, width=8)
    model = onnx.load(folder / "network.onnx")
    del model.graph.value_info[:]
    onnx.save(model, folder / "network.onnx")
    code, _, err = run("solve", str(folder), "--target", "siracusa", "--budget", "0.9", "--costs", "estimate",
                       "-o", str(tmp_path / "s.json"))
    line = one_line(err)
    assert code == 1 and "tensors ('fc0_out' first) have no shape in the model's value_info" in line
    assert "value_info" in line.rsplit(":", 1)[-1] and not (tmp_path / "s.json").exists()
