"""Host executor on the real CCT training graphs: goldens, order independence, order errors."""

from __future__ import annotations

import time

import numpy as np
import onnx
import pytest
from conftest import SHARED_MODELS as MODELS
from onnx import helper

from ckpt.hostexec.compare import TRAINING_HARNESS_TOLERANCE, bit_identical, compare_outputs
from ckpt.hostexec.executor import (
    HostExecutor,
    OrderError,
    feeds_from_npz,
    golden_from_npz,
    graph_order,
    lifo_topological_order,
    random_topological_order,
    run_graph,
)
from ckpt.hostexec.graph_fixes import rewire_bias_gelu_grad

needs_models = pytest.mark.skipif(not (MODELS / "cct2_ft2" / "network.onnx").exists(),
                                  reason="shared CCT models not available")


class Case:
    """A model with its feeds, golden outputs and a bound executor."""

    def __init__(self, name: str) -> None:
        d = MODELS / name
        self.model = onnx.load(d / "network.onnx")
        self.feeds = feeds_from_npz(self.model, d / "inputs.npz")
        self.golden = golden_from_npz(self.model, d / "outputs.npz")
        self.executor = HostExecutor(self.model)
        self.outputs = self.executor.run(self.feeds)


@pytest.fixture(scope="module")
def ft2() -> Case:
    return Case("cct2_ft2")


@pytest.fixture(scope="module")
def lp() -> Case:
    return Case("cct2_lp")


# --------------------------------------------------------------------------- goldens


@needs_models
def test_cct2_lp_matches_golden(lp):
    result = compare_outputs(lp.outputs, lp.golden)
    elements = sum(v.size for v in lp.golden.values())
    assert result.line == f"Errors: 0 out of {elements}" and result.tensors == 2
    assert result.worst.abs_diff < 1e-7


@needs_models
def test_cct2_ft2_as_written_is_off_only_by_the_bias_gelu_grad_defect(ft2):
    """As written, GeluGrad differentiates at the pre-bias tensor (see graph_fixes): the two linear1 weights
    miss by ~1.2e-5, far inside the device harness's 1e-4, so Deeploy's harness passes it: 0 errors over
    every output element; the miss is still there to see."""
    result = compare_outputs(ft2.outputs, ft2.golden)
    assert result.tensors == 16 and result.compared == sum(v.size for v in ft2.golden.values())
    assert result.errors == 0 and result.line == f"Errors: 0 out of {result.compared}"
    assert 1e-5 < result.worst.abs_diff < 2e-5 and "linear1" in result.worst.tensor


@needs_models
def test_cct2_ft2_matches_golden_with_bias_gelu_grad_rewired(ft2):
    fixed, rewired = rewire_bias_gelu_grad(ft2.model)
    assert sorted(rewired) == ["GeluGrad_137_GeluGrad_backward", "GeluGrad_91_GeluGrad_backward"]
    result = compare_outputs(run_graph(fixed, ft2.feeds), ft2.golden)
    assert result.errors == 0 and result.tensors == 16
    assert max(result.max_abs_diff.values()) < 1e-7


@needs_models
def test_cct2_ft2_runs_in_well_under_a_second(ft2):
    start = time.perf_counter()
    ft2.executor.run(ft2.feeds)
    assert time.perf_counter() - start < 2.0  # measured ~0.08 s on 2 shared cores


# --------------------------------------------------------------------------- order independence


@needs_models
@pytest.mark.parametrize("make_order", [
    lambda m: random_topological_order(m, seed=1),
    lambda m: random_topological_order(m, seed=2),
    lifo_topological_order,
], ids=["random1", "random2", "lifo"])
def test_other_topological_orders_are_bit_identical(ft2, make_order):
    order = make_order(ft2.model)
    assert order != ft2.executor.default_order and sorted(order) == sorted(ft2.executor.default_order)
    assert bit_identical(ft2.executor.run(ft2.feeds, order), ft2.outputs) == []


@needs_models
def test_all_intermediate_tensors_are_order_independent(lp):
    a = lp.executor.run(lp.feeds, return_all=True)
    b = lp.executor.run(lp.feeds, random_topological_order(lp.model, seed=5), return_all=True)
    assert len(a) > len(lp.golden) and bit_identical(a, b) == []


@needs_models
def test_file_order_is_not_topological_so_default_order_is_a_stable_sort(ft2):
    file_order = [n.name for n in ft2.model.graph.node]
    with pytest.raises(OrderError, match="node_81_classifier_blocks_0_Add_Add.*has not run yet"):
        ft2.executor.run(ft2.feeds, file_order)
    assert graph_order(ft2.model) == ft2.executor.default_order
    assert sorted(graph_order(ft2.model)) == sorted(file_order)


# --------------------------------------------------------------------------- clones (recompute)


def _with_clone(model: onnx.ModelProto, victim: str) -> tuple[onnx.ModelProto, str]:
    """Add a recompute clone of `victim` whose outputs feed the victim's backward consumers."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    node = next(n for n in m.graph.node if n.name == victim)
    clone = helper.make_node(node.op_type, list(node.input), [o + "_rc" for o in node.output],
                             name=victim + "_recompute", domain=node.domain)
    clone.attribute.extend(node.attribute)
    rename = dict(zip(node.output, clone.output))
    for n in m.graph.node:
        if n.name.endswith("_backward"):
            n.input[:] = [rename.get(t, t) for t in n.input]
    m.graph.node.append(clone)
    return m, clone.name


@needs_models
def test_recompute_clone_late_in_the_order_is_bit_identical(ft2):
    victim = "node_70_classifier_blocks_0_self_attn_Softmax_Softmax"
    model, clone = _with_clone(ft2.model, victim)
    order = list(ft2.executor.default_order)
    readers = {n.name for n in model.graph.node if "node_0_classifier_blocks_0_self_attn_Softmax__0_rc" in n.input}
    assert len(readers) == 2  # SoftmaxGrad and the MatMul_1 weight-side Gemm
    first_reader = min(order.index(r) for r in readers)
    assert first_reader > order.index(victim) + 50  # far from the original: a real recompute
    order.insert(first_reader, clone)
    assert bit_identical(HostExecutor(model).run(ft2.feeds, order), ft2.outputs) == []


@needs_models
def test_clone_after_its_consumer_is_an_order_error(ft2):
    model, clone = _with_clone(ft2.model, "node_208_classifier_Softmax_Softmax")
    order = ft2.executor.default_order + [clone]
    with pytest.raises(OrderError, match=r"reads tensor 'node_0_classifier_Softmax__0_rc'.*"
                                         r"node_208_classifier_Softmax_Softmax_recompute"):
        HostExecutor(model).run(ft2.feeds, order)


# --------------------------------------------------------------------------- invalid orders


@needs_models
def test_unknown_node_name_is_an_order_error(lp):
    with pytest.raises(OrderError, match="no node named 'nope'"):
        lp.executor.run(lp.feeds, ["nope"])


@needs_models
def test_order_missing_a_producer_of_a_graph_output_is_an_order_error(lp):
    sgd = [n.name for n in lp.model.graph.node if n.op_type == "SGD"]
    order = [n for n in lp.executor.default_order if n != sgd[0]]
    with pytest.raises(OrderError, match="graph outputs never produced"):
        lp.executor.run(lp.feeds, order)


@needs_models
def test_missing_feed_is_reported(lp):
    with pytest.raises(ValueError, match="missing feeds.*labels"):
        lp.executor.run({"input": lp.feeds["input"]})


# --------------------------------------------------------------------------- mis-wiring is caught


@needs_models
def test_miswired_consumer_gives_errors(ft2):
    """A consumer reading another tensor of the same shape must fail the golden comparison."""
    m = onnx.ModelProto()
    m.CopyFrom(ft2.model)
    name = "node_91_classifier_blocks_0_norm1_Mul_LayerNormFusion__LayerNormalization"
    node = next(n for n in m.graph.node if n.name == name)
    assert node.input[0] == "node_0_classifier_blocks_0_Add__0"
    node.input[0] = "node_0_classifier_Add__0"  # block input instead of the residual sum: same [1, 64, 128]
    result = compare_outputs(run_graph(m, ft2.feeds), ft2.golden)
    assert result.errors > 0 and result.failed
    assert result.format().startswith(f"Errors: {result.errors} out of {result.compared}")


# --------------------------------------------------------------------------- npz name mapping


@needs_models
def test_npz_maps_by_position_when_graph_io_is_renamed(lp):
    """Deeploy's lowered graphs call their I/O input_i / output_i."""
    m = onnx.ModelProto()
    m.CopyFrom(lp.model)
    renames = {v.name: f"input_{i}" for i, v in enumerate(m.graph.input)}
    renames |= {v.name: f"output_{i}" for i, v in enumerate(m.graph.output)}
    for v in list(m.graph.input) + list(m.graph.output):
        v.name = renames[v.name]
    for n in m.graph.node:
        n.input[:] = [renames.get(t, t) for t in n.input]
        n.output[:] = [renames.get(t, t) for t in n.output]
    feeds = feeds_from_npz(m, MODELS / "cct2_lp" / "inputs.npz")
    golden = golden_from_npz(m, MODELS / "cct2_lp" / "outputs.npz")
    assert list(feeds) == ["input_0", "input_1"] and feeds["input_1"].dtype == np.int64
    assert list(golden) == ["output_0", "output_1"]
    assert compare_outputs(run_graph(m, feeds), golden).errors == 0


# --------------------------------------------------------------------------- verify utilities


def test_compare_outputs_counts_elements_nan_missing_and_shape_as_errors():
    golden = {"a": np.zeros(3, np.float32), "b": np.ones(2), "c": np.ones(2), "d": np.ones((2, 2))}
    actual = {"a": np.array([0, np.nan, 0], np.float32), "c": np.ones(3), "d": np.ones((2, 2)) + 1e-6}
    r = compare_outputs(actual, golden)
    assert (r.errors, r.compared, r.tensors) == (1 + 2 + 2, 3 + 2 + 2 + 4, 4)   # NaN, missing b, misshapen c
    assert r.worst.tensor == "a" and r.worst.index == (1,) and np.isnan(r.worst.actual)
    text = r.format()
    assert text.splitlines()[0].startswith("Errors: 5 out of 11") and "Worst: a[1]" in text


def test_compare_outputs_uses_the_device_harness_absolute_tolerance():
    """deeploytest.c: an element is an error when |expected - actual| > 1e-4 (float32), whatever its size."""
    golden = {"x": np.array([100.0, 0.0, -3.0], np.float32)}
    close = {"x": np.array([100.0 + 6e-5, 9e-5, -3.0 - 9e-5], np.float32)}
    assert compare_outputs(close, golden).errors == 0
    far = {"x": np.array([100.0 + 2e-4, 1.1e-4, -3.0], np.float32)}
    assert compare_outputs(far, golden).errors == 2


def test_compare_outputs_reports_nan_in_inputs():
    golden = {"y": np.zeros(2, np.float32)}
    result = compare_outputs({"y": np.zeros(2, np.float32)}, golden, {"x": np.array([np.nan], np.float32)})
    assert result.errors == 0 and result.nan_inputs == ["x"] and "NaN in inputs: x" in result.format()


def test_bit_identical_compares_bytes_including_nan_positions():
    a = {"x": np.array([1.0, np.nan]), "y": np.zeros(2, np.float32), "only_a": np.zeros(1)}
    b = {"x": np.array([1.0, np.nan]), "y": np.zeros(2, np.float64), "only_b": np.zeros(1)}
    assert bit_identical(a, b) == ["only_a", "only_b", "y"]
    assert bit_identical({"x": np.array([np.nan, 1.0])}, {"x": np.array([1.0, np.nan])}) == ["x"]
    assert bit_identical({"x": np.array([1.0, 2.0])}, {"x": np.array([1.0, 2.0 + 1e-16 * 4])}) == ["x"]


def test_the_training_branchs_step_is_counted_with_its_harness_tolerance():
    """deeploytraintest.c: |diff| > TRAINING_TOLERANCE_ABS (1e-3 by default) is an error; 1e-4 is
    deeploytest.c's rule for the one-step graphs."""
    golden = {"w": np.zeros(3, np.float32)}
    near = {"w": np.array([5e-4, -9e-4, 0.0], np.float32)}
    assert compare_outputs(near, golden).errors == 2
    relaxed = compare_outputs(near, golden, tolerance=TRAINING_HARNESS_TOLERANCE)
    assert relaxed.errors == 0 and "|diff| > 0.001" in relaxed.format()
    assert compare_outputs({"w": np.array([2e-3, 0, 0], np.float32)}, golden,
                           tolerance=TRAINING_HARNESS_TOLERANCE).errors == 1
