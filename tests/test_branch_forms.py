"""ckpt's graph rewrites around Deeploy (no Deeploy needed): a SoftmaxGrad along another axis than its last is
handed a last-axis view (deeploy_bridge.softmax_axis) and the release's loss and LayerNormalizationGrad take the
training branch's forms (deeploy_bridge.branch_forms), each computing what the graph computed; the built-in
examples made for the branch declare the forms its kernels compute (examples.ops.for_training_branch)."""
from __future__ import annotations

import numpy as np
import onnx
import onnx_graphsurgeon as gs
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

from ckpt.deeploy_bridge.branch_forms import to_branch_forms
from ckpt.deeploy_bridge.softmax_axis import along_last_axis
from ckpt.deeploy_bridge.workarounds import ENV, Defect, wanted
from ckpt.deeploy_identity import Flavour
from ckpt.errors import CkptError
from ckpt.examples.write import build
from ckpt.hostexec.executor import run_graph

F = TensorProto.FLOAT
OPSETS = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]


def _softmax_grad_model(shape: list[int], axis: int) -> onnx.ModelProto:
    node = helper.make_node("SoftmaxGrad", ["dy", "y"], ["dz"], name="sg", domain="com.microsoft", axis=axis)
    add = helper.make_node("Add", ["dz", "dy"], ["dx"], name="add")
    graph = helper.make_graph([node, add], "g", [helper.make_tensor_value_info(n, F, shape) for n in ("dy", "y")],
                              [helper.make_tensor_value_info("dx", F, shape)],
                              value_info=[helper.make_tensor_value_info("dz", F, shape)])
    return helper.make_model(graph, opset_imports=OPSETS)


def _rewritten(model: onnx.ModelProto, rewrite) -> tuple[onnx.ModelProto, list[str]]:
    graph = gs.import_onnx(model)
    names = rewrite(graph)
    return gs.export_onnx(graph), names


@given(shape=st.lists(st.integers(1, 4), min_size=2, max_size=4), data=st.data())
def test_a_softmax_grad_along_any_axis_computes_the_same_along_its_last(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    model = _softmax_grad_model(shape, axis)
    rng = np.random.default_rng(0)
    feeds = {"dy": rng.normal(size=shape).astype(np.float32),
             "y": rng.uniform(0.01, 1, size=shape).astype(np.float32)}
    rewritten, names = _rewritten(model, along_last_axis)
    last = axis % len(shape) == len(shape) - 1
    assert names == ([] if last else ["sg"])
    sg = next(n for n in rewritten.graph.node if n.op_type == "SoftmaxGrad")
    if not last:
        view = next(t for t in rewritten.graph.value_info if t.name == sg.input[0])
        assert next(a.i for a in sg.attribute if a.name == "axis") == len(view.type.tensor_type.shape.dim) - 1
    np.testing.assert_allclose(run_graph(rewritten, feeds)["dx"], run_graph(model, feeds)["dx"], rtol=1e-6, atol=1e-6)


def test_cct_trains_pool_softmax_grad_is_handed_reshapes_alone():
    """[1, 64, 1] along axis 1 becomes [1, 64] along its last axis: Reshapes, which Deeploy makes free."""
    rewritten, _ = _rewritten(_softmax_grad_model([1, 64, 1], 1), along_last_axis)
    assert sorted(n.op_type for n in rewritten.graph.node) == ["Add", "Reshape", "Reshape", "Reshape", "SoftmaxGrad"]
    sg = next(n for n in rewritten.graph.node if n.op_type == "SoftmaxGrad")
    view = next(t for t in rewritten.graph.value_info if t.name == sg.input[0])
    assert [d.dim_value for d in view.type.tensor_type.shape.dim] == [1, 64]


def _release_step() -> onnx.ModelProto:
    """A release-form LayerNormalization with its gradient and a release-form loss."""
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("LayerNormalization", ["x", "w", "b"], ["n"], name="ln", axis=-1, epsilon=1e-5),
             helper.make_node("SoftmaxCrossEntropyLoss", ["n2", "labels"], ["log_prob"], name="loss",
                              reduction="mean"),
             helper.make_node("SoftmaxCrossEntropyLossGrad", ["log_prob", "labels"], ["dn2"], name="loss_grad",
                              domain="com.microsoft", reduction="mean"),
             helper.make_node("LayerNormalizationGrad", ["dn", "x", "w", "b"], ["dx"], name="ln_grad",
                              domain="com.microsoft", axis=-1, epsilon=1e-5, form="deeploy")]
    reshape = [helper.make_node("Reshape", ["n", "s2"], ["n2"], name="flat"),
               helper.make_node("Reshape", ["dn2", "s3"], ["dn"], name="unflat")]
    init = [helper.make_tensor("s2", TensorProto.INT64, [2], [4, 8]), helper.make_tensor("s3", TensorProto.INT64, [3],
                                                                                         [1, 4, 8])]
    graph = helper.make_graph([nodes[0], reshape[0], nodes[1], nodes[2], reshape[1], nodes[3]], "g",
                              [vi("x", F, [1, 4, 8]), vi("w", F, [8]), vi("b", F, [8]),
                               vi("labels", TensorProto.INT64, [4])], [vi("dx", F, [1, 4, 8])], init,
                              value_info=[vi("n", F, [1, 4, 8]), vi("n2", F, [4, 8]), vi("log_prob", F, [4, 8]),
                                          vi("dn2", F, [4, 8]), vi("dn", F, [1, 4, 8])])
    return helper.make_model(graph, opset_imports=OPSETS)


def test_the_releases_loss_and_layer_norm_gradient_take_the_branchs_forms_and_compute_the_same():
    model = _release_step()
    rewritten, names = _rewritten(model, lambda g: to_branch_forms(
        g, frozenset({"SoftmaxCrossEntropyLoss", "LayerNormalizationGrad"})))
    assert sorted(names) == ["ln", "ln_grad", "loss"]
    nodes = {n.name: n for n in rewritten.graph.node}
    assert len(nodes["loss"].output) == 2 and nodes["loss"].output[1] == "log_prob"
    assert len(nodes["ln"].output) == 3 and list(nodes["ln_grad"].input[3:]) == list(nodes["ln"].output[1:])
    assert len(nodes["ln_grad"].output) == 3 and not any(a.name == "form" for a in nodes["ln_grad"].attribute)
    rng = np.random.default_rng(1)
    feeds = {"x": rng.normal(size=(1, 4, 8)).astype(np.float32), "w": np.ones(8, np.float32),
             "b": np.zeros(8, np.float32), "labels": np.array([0, 3, 7, 1])}
    exact = onnx.ModelProto()
    exact.CopyFrom(model)
    for node in exact.graph.node:        # the branch's kernel computes the gradient, which the rewrite now says
        kept = [a for a in node.attribute if a.name != "form" or node.op_type != "LayerNormalizationGrad"]
        del node.attribute[:]
        node.attribute.extend(kept)
    np.testing.assert_allclose(run_graph(rewritten, feeds)["dx"], run_graph(exact, feeds)["dx"], rtol=1e-5,
                               atol=1e-6)


def test_a_graph_in_the_branchs_forms_is_left_as_it_is():
    model = _release_step()
    once, _ = _rewritten(model, lambda g: to_branch_forms(g, frozenset({"SoftmaxCrossEntropyLoss",
                                                                         "LayerNormalizationGrad"})))
    _, again = _rewritten(once, lambda g: to_branch_forms(g, frozenset({"SoftmaxCrossEntropyLoss",
                                                                          "LayerNormalizationGrad"})))
    assert again == []


def test_an_example_made_for_the_training_branch_declares_its_exact_gelu_and_layer_norm_gradient():
    options = {"blocks": 1, "embed_dim": 16, "heads": 2, "image_size": 8}
    release, branch = build("cct", Flavour.RELEASE, **options), build("cct", Flavour.TRAINING_BRANCH, **options)

    def attrs(model, op):
        return [{a.name for a in n.attribute} for n in model.graph.node if n.op_type == op]

    for op, name in (("Gelu", "approximate"), ("GeluGrad", "approximate"), ("LayerNormalizationGrad", "form")):
        assert all(name in a for a in attrs(release, op)) and attrs(release, op)
        assert not any(name in a for a in attrs(branch, op))
    assert [n.name for n in release.graph.node] == [n.name for n in branch.graph.node]


def test_the_workarounds_kept_are_read_from_the_environment(monkeypatch):
    for value, kept in (("", None), ("on", None), ("off", frozenset()),
                        ("softmax-grad-axis", frozenset({Defect.SOFTMAX_GRAD_AXIS})),
                        (" layernorm-grad-zeroing , softmax-grad-axis",
                         frozenset({Defect.LAYERNORM_GRAD_ZEROING, Defect.SOFTMAX_GRAD_AXIS})),
                        (",".join(d.value for d in Defect), frozenset(Defect))):
        monkeypatch.setenv(ENV, value)
        assert wanted() == kept
    monkeypatch.setenv(ENV, "softmax,off")
    with pytest.raises(CkptError, match="names no workaround 'off', 'softmax'"):
        wanted()
