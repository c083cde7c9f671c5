"""The conv-net training kernels (hostexec.conv_training) against their forward ops: adjoint identities for the
linear ones (exact in float64), finite differences for batch norm, ONNX's reference ops for Adam, MaxPool's
indices and training-mode BatchNormalization."""
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import helper
from onnx.reference import ReferenceEvaluator
from strength import property_examples

from ckpt.hostexec import conv_training as C
from ckpt.hostexec.training_ops import conv2d


@st.composite
def conv_cases(draw):
    group = draw(st.sampled_from([1, 2, 3]))
    depthwise = draw(st.booleans())
    cg = 1 if depthwise else draw(st.integers(1, 2))
    c = cg * group
    m = group * (1 if depthwise else draw(st.integers(1, 2)))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    dil = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, 1)) for _ in range(4))
    h = draw(st.integers(dil[0] * (kh - 1) + 1, 6))
    w = draw(st.integers(dil[1] * (kw - 1) + 1, 6))
    n = draw(st.integers(1, 2))
    seed = draw(st.integers(0, 2**16))
    return n, c, h, w, m, cg, kh, kw, stride, pads, dil, group, seed


@settings(max_examples=property_examples(40), deadline=None)
@given(case=conv_cases())
def test_conv_grad_is_the_adjoint_of_conv(case):
    """<dY, conv(X', W)> = <dX, X'> and <dY, conv(X, W')> = <dW, W'> for every direction: ConvGrad is exactly
    the transpose of the Conv it differentiates (groups and depthwise included), and dB sums dY."""
    n, c, h, w, m, cg, kh, kw, stride, pads, dil, group, seed = case
    rng = np.random.default_rng(seed)
    kw_args = dict(strides=stride, pads=pads, dilations=dil, group=group)
    x, weight = rng.standard_normal((n, c, h, w)), rng.standard_normal((m, cg, kh, kw))
    y = conv2d(x, weight, **kw_args)
    dy = rng.standard_normal(y.shape)
    dx, dw, db = C.conv2d_grad(dy, x, weight, **kw_args)
    assert dx.shape == x.shape and dw.shape == weight.shape and db.shape == (m,)
    x_dir, w_dir = rng.standard_normal(x.shape), rng.standard_normal(weight.shape)
    assert np.isclose(np.sum(dy * conv2d(x_dir, weight, **kw_args)), np.sum(dx * x_dir), rtol=1e-9, atol=1e-9)
    assert np.isclose(np.sum(dy * conv2d(x, w_dir, **kw_args)), np.sum(dw * w_dir), rtol=1e-9, atol=1e-9)
    assert np.allclose(db, dy.sum(axis=(0, 2, 3)))


def test_conv_grad_keeps_float32():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    weight = rng.standard_normal((4, 1, 3, 3)).astype(np.float32)
    dy = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    assert all(a.dtype == np.float32 for a in C.conv2d_grad(dy, x, weight, pads=(1, 1, 1, 1), group=4))


def test_batch_norm_training_matches_onnx_training_mode():
    """Y and the running statistics as ONNX's BatchNormalization (training_mode=1) computes them."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    scale, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    mean, var = rng.standard_normal(3).astype(np.float32), rng.random(3).astype(np.float32) + 0.5
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y", "rm", "rv"], epsilon=1e-5,
                            momentum=0.9, training_mode=1)
    ref = ReferenceEvaluator(helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, None) for k in "xsbmv"],
        [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, None) for k in ("y", "rm", "rv")]),
        opset_imports=[helper.make_opsetid("", 15)]))
    y, rm, rv = ref.run(None, {"x": x, "s": scale, "b": bias, "m": mean, "v": var})
    ours = C.batch_norm_training(x, scale, bias, mean, var, 1e-5, 0.9)
    assert np.allclose(ours[0], y, atol=1e-5) and np.allclose(ours[1], rm, atol=1e-6)
    assert np.allclose(ours[2], rv, atol=1e-6)
    batch = x.astype(np.float64).transpose(1, 0, 2, 3).reshape(3, -1)
    assert np.allclose(ours[3], batch.mean(axis=1)) and np.allclose(ours[4], 1 / np.sqrt(batch.var(axis=1) + 1e-5))


def test_batch_norm_grad_matches_finite_differences():
    """dX, dScale, dBias of sum(dY * BatchNormInternal(X).Y) by central differences (float64)."""
    rng = np.random.default_rng(2)
    x, scale, bias = rng.standard_normal((2, 3, 3, 2)), rng.standard_normal(3), rng.standard_normal(3)
    dy = rng.standard_normal(x.shape)
    stats = np.zeros(3), np.ones(3)
    _, _, _, mean, inv_std = C.batch_norm_training(x, scale, bias, *stats)
    dx, dscale, dbias = C.batch_norm_grad(dy, x, scale, mean, inv_std)

    def loss(x_, scale_, bias_):
        return float(np.sum(dy * C.batch_norm_training(x_, scale_, bias_, *stats)[0]))

    eps = 1e-6
    for grad, which in ((dx, 0), (dscale, 1), (dbias, 2)):
        args = [x, scale, bias]
        numeric = np.zeros_like(args[which])
        for idx in np.ndindex(numeric.shape):
            up, down = [a.copy() for a in args], [a.copy() for a in args]
            up[which][idx] += eps
            down[which][idx] -= eps
            numeric[idx] = (loss(*up) - loss(*down)) / (2 * eps)
        assert np.allclose(grad, numeric, atol=1e-5), which


def test_relu_grad_masks_where_the_input_is_not_positive():
    dy = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    assert C.relu_grad(dy, np.array([-1.0, 0.0, 0.5, 2.0], np.float32)).tolist() == [0.0, 0.0, 3.0, 4.0]


def test_global_average_pool_grad_is_the_adjoint_of_the_pool():
    rng = np.random.default_rng(3)
    x, dy = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 1, 1))
    dx = C.global_average_pool_grad(dy, (4, 5))
    assert np.isclose(np.sum(dy * x.mean(axis=(2, 3), keepdims=True)), np.sum(dx * x))


@pytest.mark.parametrize("include", [False, True])
def test_average_pool_grad_is_the_adjoint_of_average_pool(include):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                            count_include_pad=int(include))
    model = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, None)],
                                                [helper.make_tensor_value_info("y", 1, None)]),
                              opset_imports=[helper.make_opsetid("", 19)])
    y = ReferenceEvaluator(model).run(None, {"x": x})[0]
    dy = rng.standard_normal(y.shape).astype(np.float32)
    dx = C.average_pool_grad(dy, x.shape, (3, 3), (2, 2), (1, 1, 1, 1), include)
    assert np.isclose(np.sum(dy.astype(np.float64) * y), np.sum(dx.astype(np.float64) * x), rtol=1e-5)


def test_max_pool_grad_routes_each_gradient_to_its_maximum():
    x = np.array([[[[1, 5, 2, 0], [3, 4, 8, 1], [0, 1, 2, 3], [9, 2, 1, 7]]]], np.float32)
    node = helper.make_node("MaxPool", ["x"], ["y", "i"], kernel_shape=[2, 2], strides=[2, 2])
    model = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, None)],
                                                [helper.make_tensor_value_info("y", 1, None),
                                                 helper.make_tensor_value_info("i", 7, None)]),
                              opset_imports=[helper.make_opsetid("", 19)])
    _, indices = ReferenceEvaluator(model).run(None, {"x": x})
    dx = C.max_pool_grad(np.array([[[[1, 2], [3, 4]]]], np.float32), indices, x.shape)
    expected = np.zeros_like(x)
    expected[0, 0, 0, 1], expected[0, 0, 1, 2], expected[0, 0, 3, 0], expected[0, 0, 3, 3] = 1, 2, 3, 4
    assert np.array_equal(dx, expected)


def test_mse_loss_grad_matches_finite_differences():
    rng = np.random.default_rng(5)
    p, t = rng.standard_normal((1, 6)), rng.standard_normal((1, 6))
    g = C.mse_loss_grad(p, t)
    eps = 1e-6
    for k in range(6):
        up, down = p.copy(), p.copy()
        up[0, k] += eps
        down[0, k] -= eps
        assert np.isclose(g[0, k], (C.mse_loss(up, t) - C.mse_loss(down, t)) / (2 * eps), atol=1e-6)


@pytest.mark.parametrize("step", [0, 3])
def test_adam_matches_onnx_reference_adam(step):
    rng = np.random.default_rng(6)
    x, g, v, h = (rng.standard_normal(5).astype(np.float32) for _ in range(4))
    h = np.abs(h)
    attrs = dict(alpha=0.9, beta=0.999, epsilon=1e-6, norm_coefficient=0.01, norm_coefficient_post=0.001)
    node = helper.make_node("Adam", ["r", "t", "x", "g", "v", "h"], ["x2", "v2", "h2"],
                            domain="ai.onnx.preview.training", **attrs)
    model = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(k, 1, None) for k in "rxgvh"]
        + [helper.make_tensor_value_info("t", 7, None)],
        [helper.make_tensor_value_info(k, 1, None) for k in ("x2", "v2", "h2")]),
        opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid("ai.onnx.preview.training", 1)])
    r = np.array(0.01, np.float32)
    ref = ReferenceEvaluator(model).run(None, {"r": r, "t": np.array(step, np.int64), "x": x, "g": g, "v": v,
                                                "h": h})
    ours = C.adam(float(r), step, x, g, v, h, **attrs)
    for a, b in zip(ours, ref):
        assert np.allclose(a, b, rtol=1e-5, atol=1e-7)


def test_a_conv_gradient_is_priced_as_two_convs_not_by_its_outputs():
    """ConvGrad computes dX and dW, each as many MACs as the Conv: pricing it by output elements made its
    recompute look as cheap as a Relu's, and the solver picked it."""
    from ckpt.solver.graph.costs import estimate_costs
    from ckpt.solver.graph.graph import Op

    conv = Op("conv", "Conv", ("x", "w"), ("y",))
    grad = Op("grad", "ConvGrad", ("dy", "x", "w"), ("dx", "dw"))
    shapes = {"x": (1, 16, 8, 8), "w": (32, 16, 3, 3), "y": (1, 32, 8, 8), "dy": (1, 32, 8, 8),
              "dx": (1, 16, 8, 8), "dw": (32, 16, 3, 3)}
    costs = estimate_costs([conv, grad], shapes)
    assert costs["conv"] == 32 * 8 * 8 * 16 * 9
    assert costs["grad"] == 2 * costs["conv"]
