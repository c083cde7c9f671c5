"""Tests for ckpt.examples: structure, determinism, gradients and Deeploy lowering of generated graphs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from ckpt import deeploy_bridge
from ckpt import examples as E
from ckpt.deeploy_identity import Flavour
from ckpt.errors import CkptError
from ckpt.examples.builder import BACKWARD_DESCRIPTION, MS_DOMAIN
from ckpt.hostexec.executor import run_graph
from ckpt.paths import shared_models

CCT2_FT2 = shared_models() / "cct2_ft2" / "network.onnx"

# Small instances keep the suite fast; defaults are covered separately.
SMALL = {
    "mlp": dict(layers=3, width=8, batch=3, in_dim=5, classes=4),
    "cct": dict(blocks=2, embed_dim=8, heads=2, mlp_dim=6, image_size=8, conv_layers=1, conv_channels=4, classes=3),
    "resnet": dict(blocks=2, channels=3, image_size=5, classes=4),
}


def _attrs(node: onnx.NodeProto) -> dict[str, object]:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


# -- structure -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(SMALL))
@pytest.mark.parametrize("size", ["small", "default"])
def test_structure(kind: str, size: str) -> None:
    model = E.build(kind, **(SMALL[kind] if size == "small" else {}))
    assert E.graph_problems(model) == []
    onnx.checker.check_model(E.checkable(model))
    g = model.graph
    assert [i.name for i in g.input] == ["input", "labels"]
    assert g.input[1].type.tensor_type.elem_type == onnx.TensorProto.INT64
    inits = {i.name for i in g.initializer}
    sgd = [n for n in g.node if n.op_type == "SGD"]
    assert [o.name for o in g.output] == [n.output[0] for n in sgd]
    for n in sgd:
        assert n.domain == "" and n.input[0] in inits and n.output[0] == f"{n.input[0]}_updated"
        assert "lr" in _attrs(n)
    typed = {v.name for v in [*g.value_info, *g.input, *g.output]}
    assert inits <= typed, "initializers carry value_info too, as in cct2_ft2"


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_backward_marked_like_cct2(kind: str) -> None:
    model = E.build(kind, **SMALL[kind])
    names = [n.name for n in model.graph.node]
    first_bwd = min(i for i, n in enumerate(model.graph.node) if "description" in _attrs(n))
    assert model.graph.node[first_bwd].op_type == "SoftmaxCrossEntropyLossGrad"
    for i, n in enumerate(model.graph.node):
        a = _attrs(n)
        if n.op_type == "SGD":
            assert "description" not in a
        elif i >= first_bwd:
            assert a.get("description") == BACKWARD_DESCRIPTION.encode(), names[i]
            assert n.name.endswith("_backward")
        else:
            assert "description" not in a, names[i]


@pytest.mark.skipif(not CCT2_FT2.exists(), reason="shared cct2_ft2 model not available")
@pytest.mark.parametrize("kind", ["mlp", "cct"])
def test_op_set_within_cct2_ft2(kind: str) -> None:
    ref = onnx.load(str(CCT2_FT2), load_external_data=False)
    allowed = {(n.domain, n.op_type) for n in ref.graph.node}
    ours = {(n.domain, n.op_type) for n in E.build(kind, **SMALL[kind]).graph.node}
    assert ours <= allowed, ours - allowed
    ms = {op for d, op in ours if d == MS_DOMAIN}
    if kind == "cct":
        assert ms == {"LayerNormalizationGrad", "SoftmaxGrad", "SoftmaxCrossEntropyLossGrad"}
        assert ("", "GeluGrad") in ours and ("", "SGD") in ours


@pytest.mark.parametrize("options", [SMALL["cct"], {}], ids=["small", "default"])
def test_cct_declares_the_gradient_forms_deeploy_computes(options: dict) -> None:
    """Every GeluGrad and LayerNormalizationGrad of a CCT example says which form its goldens follow: the one
    Deeploy's kernels compute (the host executor honours it; tests/test_deeploy_kernels.py holds the kernels
    to it)."""
    nodes = E.build("cct", Flavour.RELEASE, **options).graph.node   # the branch's forms: test_branch_forms.py
    forms = {n.name: _attrs(n).get("form") for n in nodes if n.op_type == "LayerNormalizationGrad"}
    assert forms and set(forms.values()) == {b"deeploy"}, forms
    assert {_attrs(n).get("approximate") for n in nodes if n.op_type == "GeluGrad"} == {b"sigmoid"}


def test_default_node_counts() -> None:
    assert len(E.mlp().graph.node) == 26
    assert len(E.cct().graph.node) == 180  # cct2_ft2: 179
    assert len(E.cct(train="classifier").graph.node) == 68  # cct2_lp: 70
    assert len(E.resnet().graph.node) == 63
    counts = [len(E.cct(blocks=b).graph.node) for b in range(1, 9)]
    assert counts == [106 + 74 * (b - 1) for b in range(1, 9)]


def test_cct_train_sets() -> None:
    outs = lambda **kw: [o.name for o in E.cct(**SMALL["cct"] | kw).graph.output]  # noqa: E731
    assert outs(train="classifier") == ["fc_weight_updated", "fc_bias_updated"]
    assert len(outs(train="all")) == 16
    assert outs(train=[1]) == [f"blocks_1_{p}_weight_updated"
                               for p in ("q_proj", "k_proj", "v_proj", "proj", "linear1", "linear2")]
    assert outs(train=["pool"]) == ["attention_pool_weight_updated", "attention_pool_bias_updated"]
    with pytest.raises(ValueError):
        E.cct(**SMALL["cct"] | dict(train=[5]))
    with pytest.raises(ValueError):
        E.cct(**SMALL["cct"] | dict(train="everything"))
    # Training only block 1 still back-propagates through nothing below it.
    nodes = [n.name for n in E.cct(**SMALL["cct"] | dict(train=[1])).graph.node]
    assert not any(n.startswith("blocks_0_") and n.endswith("_backward") for n in nodes)


def test_cct_shapes_follow_args() -> None:
    m = E.cct(blocks=1, embed_dim=16, heads=4, image_size=16, conv_layers=2, conv_channels=8, classes=5)
    vi = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in m.graph.value_info}
    assert vi["blocks_0_attn_Softmax_out"] == [1, 4, 16, 16]  # heads x seq x seq, seq = (16/4)^2
    assert vi["output"] == [1, 5]
    with pytest.raises(ValueError):
        E.cct(embed_dim=10, heads=3)


# -- determinism -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_deterministic(kind: str) -> None:
    a = E.build(kind, **SMALL[kind]).SerializeToString()
    b = E.build(kind, **SMALL[kind]).SerializeToString()
    c = E.build(kind, **SMALL[kind] | dict(seed=1)).SerializeToString()
    assert a == b
    assert a != c


def test_write_example_layout_and_bytes(tmp_path: Path) -> None:
    r1 = E.write_example("mlp", tmp_path / "a", **SMALL["mlp"])
    r2 = E.write_example("mlp", tmp_path / "b", **SMALL["mlp"])
    for name in ("network.onnx", "inputs.npz"):
        assert (r1.directory / name).read_bytes() == (r2.directory / name).read_bytes()
    model = onnx.load(str(r1.network))
    feeds = np.load(r1.inputs)
    assert sorted(feeds.files) == ["input", "labels"]
    assert feeds["input"].dtype == np.float32 and feeds["input"].shape == (3, 5)
    assert feeds["labels"].dtype == np.int64 and feeds["labels"].max() < 4
    assert model.SerializeToString() == E.build("mlp", **SMALL["mlp"]).SerializeToString()   # the installed forms
    assert r1.outputs is not None
    assert r1.outputs.read_bytes() == r2.outputs.read_bytes()
    outs = np.load(r1.outputs)
    assert sorted(outs.files) == sorted(o.name for o in model.graph.output)
    with pytest.raises(CkptError, match="unknown example kind 'vgg'"):
        E.write_example("vgg", tmp_path / "c")
    with pytest.raises(CkptError, match="cct example options rejected"):
        E.write_example("cct", tmp_path / "d", train="nonsense")


# -- gradients -------------------------------------------------------------------------------------


def _with_output(model: onnx.ModelProto, name: str) -> onnx.ModelProto:
    """Copy of ``model`` that also outputs tensor ``name`` (moved from value_info)."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    vi = [v for v in m.graph.value_info if v.name == name]
    m.graph.output.append(vi[0])
    m.graph.value_info.remove(vi[0])
    return m


def _set_init(model: onnx.ModelProto, name: str, value: np.ndarray) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for i in m.graph.initializer:
        if i.name == name:
            i.CopyFrom(numpy_helper.from_array(value.astype(np.float32), name))
    return m


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_sgd_step_matches_finite_differences(kind: str) -> None:
    """(w - w_updated)/lr must be dL/dw: checked along a random direction per weight by central
    differences of the loss -mean(log_prob[label]) from the same graph's forward part. GeluGrad is checked in
    the form that is the derivative of the graph's Gelu (tanh), LayerNormalizationGrad in its exact form; the
    examples carry the forms Deeploy computes (sigmoid, an approximation of it; deeploy, the gradient only on
    rows of unit variance; the loss gradient over the batch once more, the gradient at batch 1)."""
    model = _with_output(E.build(kind, **SMALL[kind]), "log_prob")
    as_derivative = {("GeluGrad", "approximate"): (b"sigmoid", b"tanh"),
                     ("LayerNormalizationGrad", "form"): (b"deeploy", b"exact"),
                     ("SoftmaxCrossEntropyLossGrad", "form"): (b"deeploy", b"exact")}
    for node in model.graph.node:
        for attr in node.attribute:
            if (node.op_type, attr.name) in as_derivative:
                declared, derivative = as_derivative[node.op_type, attr.name]
                assert attr.s == declared
                attr.s = derivative
    feeds = E.example_inputs(model, 0)
    labels = feeds["labels"]
    rng = np.random.default_rng(123)

    def loss(m: onnx.ModelProto) -> float:
        lp = np.asarray(run_graph(m, dict(feeds))["log_prob"], dtype=np.float64)
        return float(-lp[np.arange(len(labels)), labels].mean())

    base = run_graph(model, dict(feeds))
    inits = {i.name: numpy_helper.to_array(i).astype(np.float64) for i in model.graph.initializer}
    eps = 1e-2
    report = []
    for node in (n for n in model.graph.node if n.op_type == "SGD"):
        w_name, lr = node.input[0], _attrs(node)["lr"]
        grad = (inits[w_name] - np.asarray(base[node.output[0]], np.float64)) / lr
        d = rng.standard_normal(grad.shape)
        d /= np.linalg.norm(d)
        analytic = float((grad * d).sum())
        fd = (loss(_set_init(model, w_name, inits[w_name] + eps * d))
              - loss(_set_init(model, w_name, inits[w_name] - eps * d))) / (2 * eps)
        report.append((w_name, analytic, fd))
        assert abs(analytic - fd) <= 2e-3 + 5e-2 * abs(fd), report[-1]
    assert any(abs(a) > 1e-3 for _, a, _ in report), "all gradients vanish: the check would be vacuous"


# -- Deeploy ---------------------------------------------------------------------------------------

# Each lowering runs in its own interpreter: Deeploy 0.2.1 caches closure struct types by node name
# in global state, so lowering a second graph with the same node names in one process fails in
# backEnd ("Can't assign {...} to <..._closure_args_t>").
_LOWER = textwrap.dedent(
    """
    import json, sys, tempfile
    import onnx, onnx_graphsurgeon as gs
    from Deeploy.AbstractDataTypes import PointerClass
    from Deeploy.CommonExtensions.DataTypes import float32_t, int8_t
    from Deeploy.Targets.PULPOpen.Deployer import PULPDeployer
    from Deeploy.Targets.PULPOpen.Platform import PULPClusterEngine, PULPOptimizer, PULPPlatform
    model = onnx.load(sys.argv[1])
    types = {f"input_{i}": PointerClass(float32_t if v.type.tensor_type.elem_type == 1 else int8_t)
             for i, v in enumerate(model.graph.input)}
    platform = PULPPlatform()
    for engine in platform.engines:
        if isinstance(engine, PULPClusterEngine):
            engine.n_cores = 8
    deployer = PULPDeployer(gs.import_onnx(model), platform, types, PULPOptimizer, lambda g: list(g.nodes),
                            name="DeeployNetwork", default_channels_first=False,
                            deeployStateDir=tempfile.mkdtemp())
    deployer.frontEnd()
    lowered = len(deployer.graph.nodes)
    deployer.midEnd()
    deployer.backEnd()
    code = deployer.generateInferenceCode()
    print("RESULT " + json.dumps({"lowered": lowered, "code": len(code)}))
    """
)


def _lower_in_subprocess(model: onnx.ModelProto, tmp_path: Path) -> dict[str, int]:
    path = tmp_path / "network.onnx"
    path.write_bytes(model.SerializeToString())
    proc = subprocess.run([sys.executable, "-c", _LOWER, str(path)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [text for text in proc.stdout.splitlines() if text.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.mark.deeploy
@pytest.mark.parametrize("blocks", [1, 3])
def test_cct_lowers_on_siracusa(blocks: int, tmp_path: Path) -> None:
    model = E.cct(blocks=blocks)
    res = _lower_in_subprocess(model, tmp_path)
    # Like cct2_ft2 (179 -> 193): only Transposes are added by lowering.
    assert res["lowered"] >= len(model.graph.node)
    assert res["code"] > 0


@pytest.mark.deeploy
def test_mlp_and_linear_probe_lower_on_siracusa(tmp_path: Path) -> None:
    for i, model in enumerate([E.mlp(), E.cct(blocks=1, train="classifier")]):
        d = tmp_path / str(i)
        d.mkdir()
        assert _lower_in_subprocess(model, d)["code"] > 0


@pytest.mark.deeploy
def test_cct_lowers_through_bridge(tmp_path: Path) -> None:
    model = E.cct(blocks=1)
    path = tmp_path / "network.onnx"
    path.write_bytes(model.SerializeToString())
    lowered = deeploy_bridge.lower(str(path), "siracusa", cache_dir=tmp_path / "cache", use_cache=False)
    assert len(lowered.model.graph.node) >= len(model.graph.node)
    added = {n.op_type for n in lowered.model.graph.node if n.name in set(lowered.added_nodes)}
    assert added <= {"Transpose"}, added
