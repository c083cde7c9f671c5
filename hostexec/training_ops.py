"""Numpy kernels for the training ops that onnx's reference evaluator lacks or gets wrong here.

Each kernel is a plain function of arrays and attributes (no ONNX types), so the tests can
check it against finite differences of a forward op or against its formula.  Elementwise and
reduction math runs in float64 and is cast back to the input dtype: the host reference should
be more accurate than the device kernels it judges, not as inaccurate.
"""

from __future__ import annotations

import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)
_INV_SQRT2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_GELU_TANH_C = 0.044715
_GELU_SIGMOID_C = 1.702


def erf(x: np.ndarray) -> np.ndarray:
    """Exact erf (math.erf per element) in float64; numpy has none and scipy is not a dependency."""
    x64 = np.asarray(x, dtype=np.float64)
    return _erf(x64).astype(np.float64) if x64.size else x64.copy()


# --------------------------------------------------------------------------- activations


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Gelu (ONNX opset 20 semantics); needed because these graphs use it at opset 19."""
    x64 = np.asarray(x, dtype=np.float64)
    if approximate == "tanh":
        y = 0.5 * x64 * (1.0 + np.tanh(_SQRT_2_OVER_PI * (x64 + _GELU_TANH_C * x64**3)))
    elif approximate == "none":
        y = 0.5 * x64 * (1.0 + erf(x64 * _INV_SQRT2))
    else:
        raise ValueError(f"Gelu: unknown approximate={approximate!r}")
    return y.astype(np.asarray(x).dtype)


def gelu_grad(dy: np.ndarray, x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """GeluGrad(dY, X): dY times the derivative at X of the Gelu that `approximate` names.

    "none" (the default, ORT's GeluGrad): the exact (erf) Gelu, Phi(x) + x * phi(x). "tanh": the tanh form's
    derivative. "sigmoid": the derivative of x * sigmoid(1.702 x), what Deeploy's training kernels compute
    for GeluGrad whatever the graph says (v0.2.1: GELU_fp32_fp32_sigmoid_grad_chunk).
    """
    x64 = np.asarray(x, dtype=np.float64)
    if approximate == "none":
        cdf = 0.5 * (1.0 + erf(x64 * _INV_SQRT2))
        slope = cdf + x64 * _INV_SQRT_2PI * np.exp(-0.5 * x64 * x64)
    elif approximate == "tanh":
        t = np.tanh(_SQRT_2_OVER_PI * (x64 + _GELU_TANH_C * x64**3))
        slope = 0.5 * (1.0 + t) + 0.5 * x64 * (1.0 - t * t) * _SQRT_2_OVER_PI * (1.0 + 3.0 * _GELU_TANH_C * x64**2)
    elif approximate == "sigmoid":
        s = 1.0 / (1.0 + np.exp(-_GELU_SIGMOID_C * x64))
        slope = s + x64 * s * (1.0 - s) * _GELU_SIGMOID_C
    else:
        raise ValueError(f"GeluGrad: unknown approximate={approximate!r}")
    return (np.asarray(dy, dtype=np.float64) * slope).astype(np.asarray(dy).dtype)


def gelu_sigmoid(x: np.ndarray) -> np.ndarray:
    """x * sigmoid(1.702 x): the function whose derivative GeluGrad's "sigmoid" form is."""
    x64 = np.asarray(x, dtype=np.float64)
    return (x64 / (1.0 + np.exp(-_GELU_SIGMOID_C * x64))).astype(np.asarray(x).dtype)


# --------------------------------------------------------------------------- softmax family


def _coerce_2d(x: np.ndarray, axis: int) -> np.ndarray:
    """View x as [prod(shape[:axis]), prod(shape[axis:])] (the opset<13 softmax convention)."""
    axis = axis % x.ndim if x.ndim else 0
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(rows, -1)


def softmax_grad(dy: np.ndarray, y: np.ndarray, axis: int = 1) -> np.ndarray:
    """com.microsoft SoftmaxGrad(dY, Y): dX = Y * (dY - sum(dY * Y)).

    The schema (since 1, default axis=1) coerces the input to 2D at `axis`, so the sum runs
    over all dimensions from `axis` on; for axis = last dim this is the per-axis softmax.
    """
    dy64 = _coerce_2d(np.asarray(dy, dtype=np.float64), axis)
    y64 = _coerce_2d(np.asarray(y, dtype=np.float64), axis)
    dx = y64 * (dy64 - np.sum(dy64 * y64, axis=1, keepdims=True))
    return dx.reshape(np.shape(dy)).astype(np.asarray(dy).dtype)


def log_softmax(x: np.ndarray, axis: int = 1) -> np.ndarray:
    """Stable log-softmax: x - max - log(sum(exp(x - max))); never log(0) for tiny probabilities."""
    x64 = np.asarray(x, dtype=np.float64)
    shifted = x64 - np.max(x64, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def _sce_weights(
    labels: np.ndarray, weight: np.ndarray | None, ignore_index: int | None
) -> np.ndarray:
    """Per-sample weight w[n, d...]: class weight of its label, 0 where label == ignore_index."""
    labels = np.asarray(labels)
    valid = np.ones(labels.shape, dtype=bool) if ignore_index is None else labels != ignore_index
    safe = np.where(valid, labels, 0)
    w = np.ones(labels.shape) if weight is None else np.asarray(weight, np.float64)[safe]
    return np.where(valid, w, 0.0)


def _pick_label(log_prob: np.ndarray, labels: np.ndarray, ignore_index: int | None) -> np.ndarray:
    """log_prob[n, label[n, d...], d...] (0 where ignored)."""
    valid = np.ones(labels.shape, dtype=bool) if ignore_index is None else labels != ignore_index
    safe = np.where(valid, labels, 0).astype(np.int64)
    picked = np.take_along_axis(log_prob, np.expand_dims(safe, 1), axis=1).squeeze(1)
    return np.where(valid, picked, 0.0)


def softmax_cross_entropy_loss(
    logits: np.ndarray,
    labels: np.ndarray,
    weight: np.ndarray | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """SoftmaxCrossEntropyLoss -> (loss, log_prob), class axis 1, ONNX semantics.

    'mean' divides by the sum of the per-sample weights (the count of non-ignored samples when
    no class weight is given), as the ONNX spec says.
    """
    dtype = np.asarray(logits).dtype
    log_prob = log_softmax(logits, axis=1)
    w = _sce_weights(labels, weight, ignore_index)
    per_sample = -_pick_label(log_prob, np.asarray(labels), ignore_index) * w
    if reduction == "none":
        loss = per_sample
    elif reduction == "sum":
        loss = np.sum(per_sample)
    elif reduction == "mean":
        loss = np.sum(per_sample) / np.sum(w)
    else:
        raise ValueError(f"SoftmaxCrossEntropyLoss: unknown reduction={reduction!r}")
    return np.asarray(loss, dtype=dtype), log_prob.astype(dtype)


#: What a SoftmaxCrossEntropyLossGrad node's ``form`` attribute may say. "deeploy" is Deeploy's kernel (v0.2.1
#: Targets/PULPOpen/Templates/SoftmaxCrossEntropyLossTemplate.py, the gradient template): with reduction 'mean' it
#: scales by 1/batch twice, where the gradient of the mean loss has it once. The two agree at batch 1.
SOFTMAX_CE_GRAD_FORMS = ("exact", "deeploy")


def softmax_cross_entropy_loss_grad(
    dloss: np.ndarray | float,
    log_prob: np.ndarray,
    labels: np.ndarray,
    weight: np.ndarray | None = None,
    reduction: str = "mean",
    ignore_index: int | None = None,
    form: str = "exact",
) -> np.ndarray:
    """com.microsoft SoftmaxCrossEntropyLossGrad -> d_logits = dloss * w * (softmax - onehot) / norm.

    norm is sum(w) for 'mean' and 1 otherwise ('deeploy' form: sum(w) squared for 'mean'); for 'none' dloss
    has the labels' shape.
    """
    if form not in SOFTMAX_CE_GRAD_FORMS:
        raise ValueError(f"SoftmaxCrossEntropyLossGrad: unknown form={form!r}")
    dtype = np.asarray(log_prob).dtype
    labels = np.asarray(labels)
    prob = np.exp(np.asarray(log_prob, dtype=np.float64))
    w = _sce_weights(labels, weight, ignore_index)
    safe = np.where(w != 0, labels, 0).astype(np.int64)
    onehot = np.zeros_like(prob)
    np.put_along_axis(onehot, np.expand_dims(safe, 1), 1.0, axis=1)
    scale = w * np.asarray(dloss, dtype=np.float64)
    if reduction == "mean":
        scale = scale / np.sum(w) ** (2 if form == "deeploy" else 1)
    elif reduction not in ("sum", "none"):
        raise ValueError(f"SoftmaxCrossEntropyLossGrad: unknown reduction={reduction!r}")
    return (np.expand_dims(scale, 1) * (prob - onehot)).astype(dtype)


# --------------------------------------------------------------------------- layer norm

#: What a LayerNormalizationGrad node's ``form`` attribute may say. "deeploy" is Deeploy's kernel
#: (v0.2.1 TargetLibraries/Generic/src/Layernorm_fp32.c, LayernormGrad_fp32_fp32; still so in later sources):
#: inv_std * scale * (dY - mean(dY) - (X - mean) * inv_std**2 * mean(dY * scale * (X - mean) * inv_std)),
#: where the gradient has inv_std * (g - mean(g) - (X - mean) * inv_std**2 * mean(g * (X - mean))),
#: g = dY * scale. A graph that means Deeploy's numbers says so; the host computes what it says.
LAYER_NORM_GRAD_FORMS = ("exact", "deeploy")


def layer_norm_stats(
    x: np.ndarray, axis: int = -1, epsilon: float = 1e-5
) -> tuple[np.ndarray, np.ndarray]:
    """(mean, inv_std) over dims axis..rank-1, keepdims, float64."""
    x64 = np.asarray(x, dtype=np.float64)
    dims = tuple(range(axis % x64.ndim, x64.ndim))
    mean = np.mean(x64, axis=dims, keepdims=True)
    var = np.mean((x64 - mean) ** 2, axis=dims, keepdims=True)
    return mean, 1.0 / np.sqrt(var + epsilon)


def layer_norm_grad(
    dy: np.ndarray,
    x: np.ndarray,
    scale: np.ndarray,
    axis: int = -1,
    epsilon: float = 1e-5,
    mean: np.ndarray | None = None,
    inv_std: np.ndarray | None = None,
    form: str = "exact",
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LayerNormalizationGrad -> (dX, dScale, dBias).

    The com.microsoft schema passes the forward's saved mean/inv_std; Deeploy's graphs pass
    (dY, X, scale, bias) instead, so mean/inv_std are recomputed from X when not given.

    form "exact" (the default): dX is the gradient. "deeploy": the dX Deeploy's kernel computes
    (v0.2.1: LayernormGrad_fp32_fp32), which is the gradient only where a row's variance + epsilon
    is 1 and the scale is 1 (see LAYER_NORM_GRAD_FORMS); dScale and dBias are the same in both.
    """
    dtype = np.asarray(dy).dtype
    x64 = np.asarray(x, dtype=np.float64)
    dy64 = np.asarray(dy, dtype=np.float64)
    axis = axis % x64.ndim
    dims = tuple(range(axis, x64.ndim))
    outer = tuple(range(axis))
    if mean is None or inv_std is None:
        mean, inv_std = layer_norm_stats(x64, axis, epsilon)
    mean = np.asarray(mean, np.float64).reshape(x64.shape[:axis] + (1,) * len(dims))
    inv_std = np.asarray(inv_std, np.float64).reshape(mean.shape)
    xhat = (x64 - mean) * inv_std
    scale64 = np.asarray(scale, dtype=np.float64)
    g = dy64 * scale64
    if form == "exact":
        projection = xhat * np.mean(g * xhat, axis=dims, keepdims=True)
        dx = inv_std * (g - np.mean(g, axis=dims, keepdims=True) - projection)
    elif form == "deeploy":
        # the scale multiplies after centring dY, and the projection is divided by the std once more
        projection = inv_std * xhat * np.mean(g * xhat, axis=dims, keepdims=True)
        dx = inv_std * scale64 * (dy64 - np.mean(dy64, axis=dims, keepdims=True) - projection)
    else:
        raise ValueError(f"LayerNormalizationGrad: unknown form={form!r}; known: {', '.join(LAYER_NORM_GRAD_FORMS)}")
    dscale = np.sum(dy64 * xhat, axis=outer)
    dbias = np.sum(dy64, axis=outer)
    return dx.astype(dtype), dscale.astype(dtype), dbias.astype(dtype)


# --------------------------------------------------------------------------- optimizer


def sgd(weight: np.ndarray, grad: np.ndarray, lr: float) -> np.ndarray:
    """Default-domain SGD of Deeploy's graphs: W_new = W - lr * G (in the weight's dtype)."""
    w = np.asarray(weight)
    return (w - w.dtype.type(lr) * np.asarray(grad, dtype=w.dtype)).astype(w.dtype)


def inplace_accumulator_v2(
    buffer: np.ndarray, value: np.ndarray, overwrite: np.ndarray | bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """com.microsoft InPlaceAccumulatorV2 -> (updated flag, buffer + value or value if overwrite)."""
    do_overwrite = bool(np.asarray(overwrite).reshape(-1)[0]) if overwrite is not None else False
    b = np.asarray(buffer)
    new = np.asarray(value, dtype=b.dtype).copy() if do_overwrite else (b + value).astype(b.dtype)
    return np.asarray(True), new


# --------------------------------------------------------------------------- linear algebra


def batched_gemm(
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None = None,
    alpha: float = 1.0,
    beta: float = 1.0,
    trans_a: int = 0,
    trans_b: int = 0,
) -> np.ndarray:
    """Gemm generalised to rank > 2 as Deeploy uses it: transposes swap the last two axes and
    leading axes broadcast like MatMul (onnx's reference Gemm would transpose every axis)."""
    a = np.asarray(a)
    b = np.asarray(b)
    am = np.swapaxes(a, -1, -2) if trans_a else a
    bm = np.swapaxes(b, -1, -2) if trans_b else b
    y = np.matmul(am, bm)
    if alpha != 1.0:
        y = y * y.dtype.type(alpha)
    if c is not None and beta != 0.0:
        c = np.asarray(c, dtype=y.dtype)
        y = y + (c if beta == 1.0 else c * y.dtype.type(beta))
    return y.astype(a.dtype, copy=False)


def conv2d(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    strides: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilations: tuple[int, int] = (1, 1),
    group: int = 1,
) -> np.ndarray:
    """2-D Conv (NCHW, explicit pads [top, left, bottom, right]) via im2col + matmul.

    onnx's reference Conv takes ~6 s for CCT's second tokenizer conv; this takes milliseconds.
    """
    x = np.asarray(x)
    w = np.asarray(w)
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    if c != cg * group or m % group:
        raise ValueError(f"Conv: channels {c} / weight {w.shape} / group {group} mismatch")
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    # cols[n, c, i, j, oh, ow] = xp[n, c, i*dh + oh*sh, j*dw + ow*sw]
    cols = np.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dh, j * dw
            cols[:, :, i, j] = xp[:, :, r0 : r0 + sh * (oh - 1) + 1 : sh, c0 : c0 + sw * (ow - 1) + 1 : sw]
    mg = m // group
    out = np.empty((n, m, oh * ow), dtype=x.dtype)
    for g in range(group):
        col_g = cols[:, g * cg : (g + 1) * cg].reshape(n, cg * kh * kw, oh * ow)
        w_g = w[g * mg : (g + 1) * mg].reshape(mg, cg * kh * kw)
        out[:, g * mg : (g + 1) * mg] = np.matmul(w_g, col_g)
    y = out.reshape(n, m, oh, ow)
    if b is not None:
        y = y + np.asarray(b, dtype=y.dtype).reshape(1, m, 1, 1)
    return y
