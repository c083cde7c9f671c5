"""Numpy kernels for the conv-net training ops of Deeploy's training branch, as onnxruntime defines them.

The forward and backward ops ORT's training graphs use for CNNs (ResNet-8, DS-CNN, MobileNetV1): ConvGrad with
groups (depthwise), BatchNormInternal (training-mode batch norm that also returns the batch statistics it
normalised with), BatchNormalizationGrad, ReluGrad, the gradients of the pooling ops, the fused MSE loss of the
branch's autoencoder, and the optimizers (ONNX's Adam; SGD lives in training_ops). Layout is NCHW.
Reductions and sums run in float64 and are cast back to the input's dtype, as in training_ops: the host
reference should be more accurate than the kernels it judges.
"""

from __future__ import annotations

import math

import numpy as np


def _channel_view(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    """x as float64 [N, C, S] (S: every spatial element of a channel) and the axes to reduce a channel over."""
    x64 = np.asarray(x, dtype=np.float64)
    return x64.reshape(x64.shape[0], x64.shape[1], -1), (0, 2)


def _per_channel(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, dtype=np.float64).reshape(1, -1, 1)


# --------------------------------------------------------------------------- batch norm


def batch_norm_training(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, running_mean: np.ndarray,
                        running_var: np.ndarray, epsilon: float = 1e-5, momentum: float = 0.9
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """com.microsoft BatchNormInternal in training mode -> (Y, running_mean, running_var, saved_mean,
    saved_inv_std).

    The batch statistics are over N and the spatial axes; the variance is the population (biased) one, and
    saved_inv_std = 1 / sqrt(var + epsilon). The running statistics are updated as
    running * momentum + batch * (1 - momentum) (ORT's convention: momentum weighs the old value).
    """
    dtype = np.asarray(x).dtype
    x3, axes = _channel_view(x)
    mean = x3.mean(axis=axes)
    var = ((x3 - mean.reshape(1, -1, 1)) ** 2).mean(axis=axes)
    inv_std = 1.0 / np.sqrt(var + epsilon)
    y = (x3 - _per_channel(mean)) * _per_channel(inv_std * np.asarray(scale, np.float64)) + _per_channel(bias)
    new_mean = np.asarray(running_mean, np.float64) * momentum + mean * (1.0 - momentum)
    new_var = np.asarray(running_var, np.float64) * momentum + var * (1.0 - momentum)
    stat_dtype = np.asarray(running_mean).dtype
    return (y.reshape(np.shape(x)).astype(dtype), new_mean.astype(stat_dtype), new_var.astype(stat_dtype),
            mean.astype(stat_dtype), inv_std.astype(stat_dtype))


def batch_norm_grad(dy: np.ndarray, x: np.ndarray, scale: np.ndarray, saved_mean: np.ndarray,
                    saved_inv_std: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """com.microsoft BatchNormalizationGrad(dY, X, scale, saved_mean, saved_inv_std) -> (dX, dScale, dBias).

    With xhat = (X - mean) * inv_std and M the elements per channel: dBias = sum dY, dScale = sum dY * xhat,
    dX = scale * inv_std / M * (M * dY - dBias - xhat * dScale), the batch-statistics gradient."""
    dtype = np.asarray(dy).dtype
    dy3, axes = _channel_view(dy)
    x3, _ = _channel_view(x)
    count = dy3.shape[0] * dy3.shape[2]
    xhat = (x3 - _per_channel(saved_mean)) * _per_channel(saved_inv_std)
    dbias = dy3.sum(axis=axes)
    dscale = (dy3 * xhat).sum(axis=axes)
    factor = _per_channel(np.asarray(scale, np.float64) * np.asarray(saved_inv_std, np.float64) / count)
    dx = factor * (count * dy3 - _per_channel(dbias) - xhat * _per_channel(dscale))
    stat_dtype = np.asarray(scale).dtype
    return dx.reshape(np.shape(dy)).astype(dtype), dscale.astype(stat_dtype), dbias.astype(stat_dtype)


# --------------------------------------------------------------------------- activations and pooling


def relu_grad(dy: np.ndarray, x: np.ndarray) -> np.ndarray:
    """com.microsoft ReluGrad(dY, X): dY where X > 0, else 0 (X the Relu's input or output: same mask)."""
    dy = np.asarray(dy)
    return np.where(np.asarray(x) > 0, dy, np.zeros((), dtype=dy.dtype)).astype(dy.dtype)


def global_average_pool_grad(dy: np.ndarray, spatial: tuple[int, ...]) -> np.ndarray:
    """GlobalAveragePoolGrad (the branch's fused Scale + Expand): dY [N, C, 1, ...] spread evenly over the
    `spatial` extent of the pooled input, dX = dY / prod(spatial)."""
    dy = np.asarray(dy)
    count = math.prod(spatial)
    dx = np.broadcast_to(np.asarray(dy, np.float64) / count, (*dy.shape[:2], *spatial))
    return np.ascontiguousarray(dx).astype(dy.dtype)


def average_pool_grad(dy: np.ndarray, out_shape: tuple[int, ...], kernel: tuple[int, int],
                      strides: tuple[int, int], pads: tuple[int, int, int, int],
                      count_include_pad: bool = False) -> np.ndarray:
    """AveragePoolGrad (ORT, 2-D): each dY element spread evenly over the input window it averaged, the
    window clipped to the input; divided by the whole kernel area with count_include_pad, else by the
    clipped window's."""
    dy64 = np.asarray(dy, np.float64)
    dx = np.zeros(out_shape, dtype=np.float64)
    height, width = out_shape[2], out_shape[3]
    for i in range(dy64.shape[2]):
        top = max(i * strides[0] - pads[0], 0)
        bottom = min(i * strides[0] - pads[0] + kernel[0], height)
        for j in range(dy64.shape[3]):
            left = max(j * strides[1] - pads[1], 0)
            right = min(j * strides[1] - pads[1] + kernel[1], width)
            area = kernel[0] * kernel[1] if count_include_pad else (bottom - top) * (right - left)
            dx[:, :, top:bottom, left:right] += dy64[:, :, i:i + 1, j:j + 1] / area
    return dx.astype(np.asarray(dy).dtype)


def max_pool_grad(dy: np.ndarray, indices: np.ndarray, out_shape: tuple[int, ...]) -> np.ndarray:
    """MaxPoolGrad(dY, Indices) (ORT): each dY element added at the flat input position MaxPool took it from
    (the Indices output of MaxPool, counted over the whole tensor)."""
    dy = np.asarray(dy)
    dx = np.zeros(math.prod(out_shape), dtype=np.float64)
    np.add.at(dx, np.asarray(indices, np.int64).reshape(-1), dy.astype(np.float64).reshape(-1))
    return dx.reshape(out_shape).astype(dy.dtype)


# --------------------------------------------------------------------------- convolution


def _columns(x: np.ndarray, kernel: tuple[int, int], strides: tuple[int, int], pads: tuple[int, int, int, int],
             dilations: tuple[int, int], out_hw: tuple[int, int]) -> np.ndarray:
    """cols[n, c, i, j, oh, ow] = padded x[n, c, i*dh + oh*sh, j*dw + ow*sw]: the input each output reads."""
    n, c = x.shape[:2]
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    cols = np.empty((n, c, kernel[0], kernel[1], *out_hw), dtype=x.dtype)
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            r, q = i * dilations[0], j * dilations[1]
            cols[:, :, i, j] = xp[:, :, r:r + strides[0] * (out_hw[0] - 1) + 1:strides[0],
                                  q:q + strides[1] * (out_hw[1] - 1) + 1:strides[1]]
    return cols


def conv2d_grad(dy: np.ndarray, x: np.ndarray, w: np.ndarray, strides: tuple[int, int] = (1, 1),
                pads: tuple[int, int, int, int] = (0, 0, 0, 0), dilations: tuple[int, int] = (1, 1),
                group: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """com.microsoft ConvGrad(dY, X, W) -> (dX, dW, dB) of a 2-D Conv (pads [top, left, bottom, right]),
    grouped convolutions (depthwise: group = channels) included.

    dW[g] = dY[g] x columns(X)[g]^T summed over the batch; dX scatters W[g]^T x dY[g] back through the same
    columns (the transposed convolution), cropped to X; dB sums dY over the batch and spatial axes."""
    dtype = np.asarray(x).dtype
    x64, w64, dy64 = (np.asarray(a, np.float64) for a in (x, w, dy))
    n, c, height, width = x64.shape
    m, cg, kh, kw = w64.shape
    oh, ow = dy64.shape[2], dy64.shape[3]
    mg = m // group
    cols = _columns(x64, (kh, kw), strides, pads, dilations, (oh, ow))
    dw = np.empty_like(w64)
    dcols = np.empty((n, c, kh, kw, oh, ow), dtype=np.float64)
    for g in range(group):
        col_g = cols[:, g * cg:(g + 1) * cg].reshape(n, cg * kh * kw, oh * ow)
        dy_g = dy64[:, g * mg:(g + 1) * mg].reshape(n, mg, oh * ow)
        dw[g * mg:(g + 1) * mg] = np.einsum("nmp,nkp->mk", dy_g, col_g).reshape(mg, cg, kh, kw)
        w_g = w64[g * mg:(g + 1) * mg].reshape(mg, cg * kh * kw)
        dcols[:, g * cg:(g + 1) * cg] = np.einsum("mk,nmp->nkp", w_g, dy_g).reshape(n, cg, kh, kw, oh, ow)
    padded = np.zeros((n, c, height + pads[0] + pads[2], width + pads[1] + pads[3]), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            r, q = i * dilations[0], j * dilations[1]
            padded[:, :, r:r + strides[0] * (oh - 1) + 1:strides[0],
                   q:q + strides[1] * (ow - 1) + 1:strides[1]] += dcols[:, :, i, j]
    dx = padded[:, :, pads[0]:pads[0] + height, pads[1]:pads[1] + width]
    db = dy64.sum(axis=(0, 2, 3))
    return dx.astype(dtype), dw.astype(np.asarray(w).dtype), db.astype(np.asarray(w).dtype)


# --------------------------------------------------------------------------- losses


def mse_loss(prediction: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The branch's fused MSELoss: mean((prediction - target)^2), a scalar."""
    diff = np.asarray(prediction, np.float64) - np.asarray(target, np.float64)
    return np.asarray(np.mean(diff * diff), dtype=np.asarray(prediction).dtype)


def mse_loss_grad(prediction: np.ndarray, target: np.ndarray) -> np.ndarray:
    """MSELossGrad with the loss's gradient 1: 2 * (prediction - target) / elements."""
    p = np.asarray(prediction)
    diff = p.astype(np.float64) - np.asarray(target, np.float64)
    return (2.0 * diff / diff.size).astype(p.dtype)


# --------------------------------------------------------------------------- optimizers


def adam(r: float, t: int, x: np.ndarray, g: np.ndarray, v: np.ndarray, h: np.ndarray, *, alpha: float = 0.9,
         beta: float = 0.999, epsilon: float = 1e-6, norm_coefficient: float = 0.0,
         norm_coefficient_post: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ONNX's Adam (ai.onnx.preview.training, as the training branch parses it) for one tensor -> (X_new,
    V_new, H_new): the gradient with its L2 term, both moments, the bias-corrected step size at step T
    (`R * sqrt(1 - beta^T) / (1 - alpha^T)` once T > 0), and the post-update L2 shrink."""
    dtype = np.asarray(x).dtype
    x64, g64, v64, h64 = (np.asarray(a, np.float64) for a in (x, g, v, h))
    g_reg = norm_coefficient * x64 + g64
    v_new = alpha * v64 + (1.0 - alpha) * g_reg
    h_new = beta * h64 + (1.0 - beta) * g_reg * g_reg
    h_sqrt = np.sqrt(h_new) + epsilon
    step = float(r)
    if int(t) > 0:
        step *= math.sqrt(1.0 - beta ** int(t)) / (1.0 - alpha ** int(t))
    x_new = (x64 - step * v_new / h_sqrt) * (1.0 - norm_coefficient_post)
    return x_new.astype(dtype), v_new.astype(dtype), h_new.astype(dtype)
