"""ckpt's own numpy kernels against finite differences of onnx reference forward ops, formulas,
or onnx's reference implementation of the same op."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator
from onnx.reference.ops import load_op
from strength import property_examples

from ckpt.hostexec import training_ops as T

_RUN_PARAMS = {"log": lambda *a: None, "opsets": {"": 19}, "new_ops": None, "verbose": 0}
FAST = settings(max_examples=property_examples(25), deadline=None)


def ref_op(op_type: str, inputs: list, n_out: int = 1, version: int = 19, **attrs):
    """Run one onnx reference op (default domain) on numpy inputs."""
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op_type, names, [f"o{k}" for k in range(n_out)], **attrs)
    return load_op("", op_type, version)(node, _RUN_PARAMS).run(*inputs)


def ref_gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Gelu is a function op at opset 20; only a ReferenceEvaluator can expand it."""
    elem = TensorProto.DOUBLE if x.dtype == np.float64 else TensorProto.FLOAT
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, None)],
                              [helper.make_tensor_value_info("y", elem, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    return ReferenceEvaluator(model).run(None, {"x": x})[0]


def central_diff(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d f(x) / dx for scalar f, by central differences (x float64)."""
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


shapes = st.lists(st.integers(1, 4), min_size=1, max_size=3)
seeds = st.integers(0, 2**31 - 1)


# --------------------------------------------------------------------------- Gelu / GeluGrad


@FAST
@given(shape=shapes, seed=seeds, approximate=st.sampled_from(["none", "tanh"]))
def test_gelu_matches_onnx_reference_opset20(shape, seed, approximate):
    x = np.random.default_rng(seed).normal(0, 3, shape).astype(np.float32)
    np.testing.assert_allclose(T.gelu(x, approximate), ref_gelu(x, approximate), rtol=1e-6, atol=1e-6)


@FAST
@given(shape=shapes, seed=seeds, approximate=st.sampled_from(["none", "tanh"]))
def test_gelu_grad_is_derivative_of_reference_gelu(shape, seed, approximate):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 2, shape)
    dy = rng.normal(0, 1, shape)
    fd = central_diff(lambda v: float(np.sum(dy * ref_gelu(v, approximate))), x)
    np.testing.assert_allclose(T.gelu_grad(dy, x, approximate), fd, rtol=1e-6, atol=1e-8)


@FAST
@given(shape=shapes, seed=seeds)
def test_gelu_grad_sigmoid_is_derivative_of_x_sigmoid_1702x(shape, seed):
    """The form Deeploy's kernels compute for GeluGrad (GELU_fp32_fp32_sigmoid_grad_chunk)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 2, shape)
    dy = rng.normal(0, 1, shape)
    fd = central_diff(lambda v: float(np.sum(dy * T.gelu_sigmoid(v))), x)
    np.testing.assert_allclose(T.gelu_grad(dy, x, "sigmoid"), fd, rtol=1e-6, atol=1e-8)


def test_gelu_grad_forms_differ_and_an_unknown_one_is_refused():
    x, dy = np.linspace(-3, 3, 61), np.ones(61)
    forms = {a: T.gelu_grad(dy, x, a) for a in ("none", "tanh", "sigmoid")}
    assert 1e-3 < np.abs(forms["sigmoid"] - forms["tanh"]).max() < 0.1
    assert np.abs(forms["none"] - forms["tanh"]).max() < np.abs(forms["sigmoid"] - forms["tanh"]).max()
    with pytest.raises(ValueError, match="approximate='erf'"):
        T.gelu_grad(dy, x, "erf")


# --------------------------------------------------------------------------- SoftmaxGrad


@FAST
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3), seed=seeds, data=st.data())
def test_softmax_grad_is_derivative_of_reference_softmax(shape, seed, data):
    # For the last axis the 2-D coercion of SoftmaxGrad-1 and Softmax-13's per-axis semantics agree.
    axis = len(shape) - 1 if data.draw(st.booleans()) else -1
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 2, shape)
    dy = rng.normal(0, 1, shape)
    y = ref_op("Softmax", [x], axis=axis)[0]
    fd = central_diff(lambda v: float(np.sum(dy * ref_op("Softmax", [v], axis=axis)[0])), x)
    np.testing.assert_allclose(T.softmax_grad(dy, y, axis), fd, rtol=1e-6, atol=1e-8)


def test_softmax_grad_coerces_to_2d_for_inner_axis():
    """SoftmaxGrad-1 (ORT schema) treats dims axis.. as one softmax row, like Softmax-1.

    onnx's reference has only the per-axis Softmax-13 (for every version), so the coerced
    forward is built from it on a 2-D view.
    """
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 4))
    dy = rng.normal(size=(2, 3, 4))
    softmax_1 = lambda v: ref_op("Softmax", [v.reshape(2, 12)], axis=1)[0].reshape(v.shape)
    y = softmax_1(x)
    fd = central_diff(lambda v: float(np.sum(dy * softmax_1(v))), x)
    np.testing.assert_allclose(T.softmax_grad(dy, y, 1), fd, rtol=1e-6, atol=1e-8)


# --------------------------------------------------------------------------- LayerNormalizationGrad


@FAST
@given(rows=st.lists(st.integers(1, 3), min_size=0, max_size=2), width=st.integers(2, 6), seed=seeds,
       with_stats=st.booleans())
def test_layer_norm_grad_is_derivative_of_reference_layer_norm(rows, width, seed, with_stats):
    rng = np.random.default_rng(seed)
    shape = tuple(rows) + (width,)
    x = rng.normal(0, 2, shape)
    scale = rng.normal(1, 0.5, width)
    bias = rng.normal(0, 0.5, width)
    dy = rng.normal(0, 1, shape)
    eps = 1e-5

    def loss(v, s=scale, b=bias):
        return float(np.sum(dy * ref_op("LayerNormalization", [v, s, b], axis=-1, epsilon=eps)[0]))

    mean = inv_std = None
    if with_stats:  # com.microsoft form: saved stats from the forward's optional outputs
        _, mean, inv_std = ref_op("LayerNormalization", [x, scale, bias], 3, axis=-1, epsilon=eps)
    dx, dscale, dbias = T.layer_norm_grad(dy, x, scale, -1, eps, mean, inv_std)
    np.testing.assert_allclose(dx, central_diff(loss, x), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dscale, central_diff(lambda s: loss(x, s=s), scale), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(dbias, central_diff(lambda b: loss(x, b=b), bias), rtol=1e-5, atol=1e-7)


@FAST
@given(rows=st.integers(1, 4), width=st.integers(2, 8), seed=seeds, spread=st.floats(0.3, 3.0))
def test_deeploy_layer_norm_grad_is_the_gradient_only_where_each_rows_variance_plus_epsilon_is_one(
        rows, width, seed, spread):
    """Deeploy's LayernormGrad (the "deeploy" form) carries 1/std once more in its projection term: with unit
    scale it equals the gradient on rows whose variance + epsilon is 1, and misses it on rows spread otherwise."""
    rng = np.random.default_rng(seed)
    eps = 1e-5
    raw = rng.normal(0, 1, (rows, width))
    centred = raw - raw.mean(-1, keepdims=True)
    unit = centred / np.sqrt((centred ** 2).mean(-1, keepdims=True)) * np.sqrt(1 - eps) + rng.normal(0, 2, (rows, 1))
    dy = rng.normal(0, 1, (rows, width))
    ones = np.ones(width)
    exact = T.layer_norm_grad(dy, unit, ones, -1, eps)
    device = T.layer_norm_grad(dy, unit, ones, -1, eps, form="deeploy")
    for a, b in zip(exact, device):
        np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12)
    if abs(spread - 1) < 0.05:
        return
    spread_rows = unit * spread
    exact_dx = T.layer_norm_grad(dy, spread_rows, ones, -1, eps)[0]
    device_dx = T.layer_norm_grad(dy, spread_rows, ones, -1, eps, form="deeploy")[0]
    # the projection term inv_std * xhat * mean(dY * xhat) is scaled by inv_std once more: they differ by that
    centred_rows = spread_rows - spread_rows.mean(-1, keepdims=True)
    inv_std = 1 / np.sqrt((centred_rows ** 2).mean(-1, keepdims=True) + eps)
    xhat = centred_rows * inv_std
    projection = inv_std * xhat * (dy * xhat).mean(-1, keepdims=True)
    np.testing.assert_allclose(device_dx - exact_dx, projection * (1 - inv_std), rtol=1e-6, atol=1e-10)


def test_an_unknown_layer_norm_grad_form_is_refused():
    x = np.arange(6.0).reshape(2, 3)
    with pytest.raises(ValueError, match="form='sideways'.*exact, deeploy"):
        T.layer_norm_grad(x, x, np.ones(3), form="sideways")


def test_layer_norm_grad_over_two_trailing_axes():
    rng = np.random.default_rng(1)
    x, dy = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    scale, bias = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    loss = lambda v: float(np.sum(dy * ref_op("LayerNormalization", [v, scale, bias], axis=1)[0]))
    np.testing.assert_allclose(T.layer_norm_grad(dy, x, scale, 1)[0], central_diff(loss, x), rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------- SoftmaxCrossEntropyLoss(Grad)

sce_cases = st.fixed_dictionaries({
    "n": st.integers(1, 4),
    "c": st.integers(2, 5),
    "d": st.sampled_from([None, 3]),
    "reduction": st.sampled_from(["mean", "sum", "none"]),
    "weighted": st.booleans(),
    "ignore": st.booleans(),
    "seed": seeds,
})


def _sce_inputs(case):
    rng = np.random.default_rng(case["seed"])
    extra = () if case["d"] is None else (case["d"],)
    logits = rng.normal(0, 2, (case["n"], case["c"]) + extra)
    labels = rng.integers(0, case["c"], (case["n"],) + extra)
    weight = rng.uniform(0.5, 2.0, case["c"]) if case["weighted"] else None
    ignore = int(labels.flat[0]) if case["ignore"] else None
    if ignore is not None and np.all(labels == ignore):  # keep at least one counted sample
        labels.flat[-1] = (ignore + 1) % case["c"]
    return logits, labels, weight, ignore


def _sce_attrs(case, ignore) -> dict:
    """The onnx reference's attributes for a case."""
    return {"reduction": case["reduction"], **({} if ignore is None else {"ignore_index": ignore})}


@FAST
@given(case=sce_cases)
def test_sce_loss_matches_onnx_reference(case):
    logits, labels, weight, ignore = _sce_inputs(case)
    attrs = _sce_attrs(case, ignore)
    args = [logits, labels] + ([weight] if weight is not None else [])
    ref_loss, ref_lp = ref_op("SoftmaxCrossEntropyLoss", args, 2, **attrs)
    loss, log_prob = T.softmax_cross_entropy_loss(logits, labels, weight, case["reduction"], ignore)
    np.testing.assert_allclose(loss, ref_loss, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(log_prob, ref_lp, rtol=1e-10, atol=1e-12)


def test_sce_log_prob_is_stable_where_onnx_reference_overflows():
    """onnx's reference takes log(softmax): a logit gap > ~104 in float32 gives -inf / inf."""
    logits = np.array([[0.0, 200.0, -10.0]], dtype=np.float32)
    labels = np.array([0])
    with np.errstate(divide="ignore"):
        ref_loss, ref_lp = ref_op("SoftmaxCrossEntropyLoss", [logits, labels], 2)
    assert np.isinf(ref_loss) and np.isneginf(ref_lp[0, 0])
    loss, log_prob = T.softmax_cross_entropy_loss(logits, labels)
    assert loss == np.float32(200.0)
    np.testing.assert_array_equal(log_prob, np.array([[-200.0, 0.0, -210.0]], np.float32))


@FAST
@given(case=sce_cases)
def test_sce_grad_is_derivative_of_reference_loss(case):
    logits, labels, weight, ignore = _sce_inputs(case)
    attrs = _sce_attrs(case, ignore)
    rng = np.random.default_rng(case["seed"] + 1)
    dloss = rng.normal(size=labels.shape) if case["reduction"] == "none" else np.float64(rng.normal())

    def f(v):
        args = [v, labels] + ([weight] if weight is not None else [])
        return float(np.sum(dloss * ref_op("SoftmaxCrossEntropyLoss", args, 1, **attrs)[0]))

    log_prob = T.log_softmax(logits, axis=1)
    grad = T.softmax_cross_entropy_loss_grad(dloss, log_prob, labels, weight, case["reduction"], ignore)
    np.testing.assert_allclose(grad, central_diff(f, logits), rtol=1e-5, atol=1e-8)


# --------------------------------------------------------------------------- optimizer / accumulator


@FAST
@given(shape=shapes, seed=seeds, lr=st.floats(1e-4, 1.0))
def test_sgd_formula(shape, seed, lr):
    rng = np.random.default_rng(seed)
    w = rng.normal(size=shape).astype(np.float32)
    g = rng.normal(size=shape).astype(np.float32)
    out = T.sgd(w, g, lr)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, w - np.float32(lr) * g)


def test_inplace_accumulator_v2():
    buf, val = np.arange(4.0, dtype=np.float32), np.full(4, 0.5, np.float32)
    flag, out = T.inplace_accumulator_v2(buf, val)
    assert bool(flag) and out.dtype == np.float32
    np.testing.assert_array_equal(out, buf + val)
    np.testing.assert_array_equal(T.inplace_accumulator_v2(buf, val, np.array([True]))[1], val)
    np.testing.assert_array_equal(T.inplace_accumulator_v2(buf, val, np.array(False))[1], buf + val)
    np.testing.assert_array_equal(buf, np.arange(4.0))  # not mutated


# --------------------------------------------------------------------------- Gemm / Conv


@FAST
@given(batch=st.lists(st.integers(1, 3), min_size=0, max_size=2), m=st.integers(1, 4), k=st.integers(1, 4),
       n=st.integers(1, 4), ta=st.integers(0, 1), tb=st.integers(0, 1), bias=st.booleans(),
       alpha=st.sampled_from([1.0, 0.5]), beta=st.sampled_from([1.0, 0.0, 2.0]), seed=seeds)
def test_batched_gemm_matches_reference_gemm_per_slice(batch, m, k, n, ta, tb, bias, alpha, beta, seed):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=tuple(batch) + ((k, m) if ta else (m, k))).astype(np.float32)
    b = rng.normal(size=tuple(batch) + ((n, k) if tb else (k, n))).astype(np.float32)
    c = rng.normal(size=(n,)).astype(np.float32) if bias else None
    y = T.batched_gemm(a, b, c, alpha, beta, ta, tb)
    assert y.shape == tuple(batch) + (m, n) and y.dtype == np.float32
    for idx in np.ndindex(*batch):
        args = [a[idx], b[idx]] + ([c] if c is not None else [])
        ref = ref_op("Gemm", args, alpha=alpha, beta=beta, transA=ta, transB=tb)[0]
        np.testing.assert_allclose(y[idx], ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=property_examples(15), deadline=None)
@given(c=st.integers(1, 3), m_per_group=st.integers(1, 3), group=st.integers(1, 2), k=st.integers(1, 3),
       stride=st.integers(1, 2), pad=st.integers(0, 2), dilation=st.integers(1, 2), bias=st.booleans(), seed=seeds)
def test_conv2d_matches_reference_conv(c, m_per_group, group, k, stride, pad, dilation, bias, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(2, c * group, 7, 6)).astype(np.float32)
    w = rng.normal(size=(m_per_group * group, c, k, k)).astype(np.float32)
    b = rng.normal(size=(m_per_group * group,)).astype(np.float32) if bias else None
    # onnx's reference Conv crashes once a pad reaches the kernel size (e.g. 1x1 with pad 1 on
    # one side only, 2x2 with pad 2), so pads stay below the kernel size.
    pad = min(pad, k - 1)
    pads = (pad, min(pad + 1, k - 1), pad, pad)
    attrs = dict(strides=[stride, stride], pads=list(pads), dilations=[dilation, dilation],
                 group=group, kernel_shape=[k, k])
    ref = ref_op("Conv", [x, w] + ([b] if b is not None else []), **attrs)[0]
    y = T.conv2d(x, w, b, (stride, stride), pads, (dilation, dilation), group)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


@settings(max_examples=property_examples(30), deadline=None)
@given(batch=st.integers(1, 6), classes=st.integers(2, 7), seed=st.integers(0, 1000))
def test_the_deeploy_form_of_the_loss_gradient_scales_by_the_batch_once_more(batch, classes, seed):
    """Deeploy's SoftmaxCrossEntropyLossGrad ('deeploy' form) is the gradient of the mean loss over the batch
    once more: equal at batch 1, a batch-th of it above."""
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((batch, classes)).astype(np.float32)
    log_prob = (logits - np.log(np.exp(logits).sum(1, keepdims=True))).astype(np.float32)
    labels = rng.integers(0, classes, batch)
    exact = T.softmax_cross_entropy_loss_grad(1.0, log_prob, labels)
    device = T.softmax_cross_entropy_loss_grad(1.0, log_prob, labels, form="deeploy")
    np.testing.assert_allclose(device, exact / batch, rtol=1e-6, atol=1e-9)
    with pytest.raises(ValueError, match="form"):
        T.softmax_cross_entropy_loss_grad(1.0, log_prob, labels, form="other")
