"""A small residual CNN training step, for solver tests with skip connections over conv layers.

Backward uses only standard ONNX ops plus GeluGrad: the input gradient of a 3x3/stride-1 Conv is a
ConvTranspose with the same weight, and its weight gradient is a Conv of the transposed activation
(channels <-> batch) with the transposed output gradient as kernel. Global average pooling is a
MatMul with a constant averaging column. Deeploy (Siracusa) lowering of this graph is NOT a goal and
is not tested: it has no CCT counterpart (ConvTranspose, batch-as-channel Convs with large kernels).
"""

from __future__ import annotations

import numpy as np
import onnx

from .builder import INT64, GraphBuilder, Tensor
from .ops import (
    DEFAULT_LR,
    GradSet,
    bias_grad,
    gelu,
    gelu_grad,
    init_bias,
    init_weight,
    linear,
    linear_input_grad,
    linear_weight_grad,
    sgd_updates,
    softmax_ce_loss,
)

_CONV = dict(auto_pad="NOTSET", dilations=[1, 1], group=1, kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[1, 1])


def _conv(gb: GraphBuilder, x: Tensor, w: Tensor, prefix: str) -> Tensor:
    b, _, h, wd = x.shape
    return gb.op("Conv", [x, w], f"{prefix}_out", (b, w.shape[0], h, wd), name=f"{prefix}_Conv", **_CONV)


def _conv_input_grad(gb: GraphBuilder, dy: Tensor, w: Tensor, x: Tensor, out: str, prefix: str) -> Tensor:
    return gb.op("ConvTranspose", [dy, w], out, x.shape, name=f"{prefix}_Grad_dX_ConvTranspose_backward",
                 backward=True, **_CONV)


def _conv_weight_grad(gb: GraphBuilder, x: Tensor, dy: Tensor, w: Tensor, prefix: str) -> Tensor:
    """dW[o,c,i,j] = sum_{b,h,w} dY[b,o,h,w] * Xpad[b,c,h+i,w+j], as one Conv on transposed tensors."""
    b, c, h, wd = x.shape
    o = dy.shape[1]
    xt = gb.op("Transpose", [x], f"{prefix}_Grad_X_t", (c, b, h, wd), name=f"{prefix}_Grad_X_Transpose_backward",
               backward=True, perm=[1, 0, 2, 3])
    dyt = gb.op("Transpose", [dy], f"{prefix}_Grad_dY_t", (o, b, h, wd), name=f"{prefix}_Grad_dY_Transpose_backward",
                backward=True, perm=[1, 0, 2, 3])
    kh, kw = w.shape[2:]
    dwt = gb.op("Conv", [xt, dyt], f"{prefix}_Grad_dW_t", (c, o, kh, kw), name=f"{prefix}_Grad_dW_Conv_backward",
                backward=True, auto_pad="NOTSET", dilations=[1, 1], group=1, kernel_shape=[h, wd],
                pads=[1, 1, 1, 1], strides=[1, 1])
    return gb.op("Transpose", [dwt], f"{w.name}_grad", w.shape, name=f"{prefix}_Grad_dW_Transpose_backward",
                 backward=True, perm=[1, 0, 2, 3])


def resnet(blocks: int = 2, channels: int = 8, image_size: int = 8, in_channels: int = 3, classes: int = 10,
           batch: int = 2, seed: int = 0, lr: float = DEFAULT_LR) -> onnx.ModelProto:
    """One SGD step of stem Conv/Gelu, ``blocks`` residual blocks (Conv/Gelu/Conv + skip Add, Gelu),
    global average pooling and a Gemm classifier; every conv and fc parameter is trained."""
    if blocks < 0 or channels < 1 or image_size < 1:
        raise ValueError("need blocks >= 0, channels >= 1, image_size >= 1")
    rng = np.random.default_rng(seed)
    gb = GraphBuilder(f"resnet{blocks}_c{channels}")
    x = gb.input("input", (batch, in_channels, image_size, image_size))
    labels = gb.input("labels", (batch,), INT64)
    hw = image_size * image_size

    stem_w = gb.initializer("stem_weight", init_weight(rng, in_channels * 9, (channels, in_channels, 3, 3)))
    convs = [(gb.initializer(f"block{i}_conv{k}_weight", init_weight(rng, channels * 9, (channels, channels, 3, 3))))
             for i in range(blocks) for k in (1, 2)]
    fc_w = gb.initializer("fc_weight", init_weight(rng, channels, (channels, classes)))
    fc_b = gb.initializer("fc_bias", init_bias(rng, (classes,)))
    avg = gb.initializer("pool_avg", np.full((hw, 1), 1.0 / hw, dtype=np.float32))

    # Forward.
    z0 = _conv(gb, x, stem_w, "stem")
    h = gelu(gb, z0, "stem_act_out", name="stem_act_Gelu")
    saved = []
    for i in range(blocks):
        w1, w2 = convs[2 * i], convs[2 * i + 1]
        c1 = _conv(gb, h, w1, f"block{i}_conv1")
        a = gelu(gb, c1, f"block{i}_act1_out", name=f"block{i}_act1_Gelu")
        c2 = _conv(gb, a, w2, f"block{i}_conv2")
        s = gb.op("Add", [h, c2], f"block{i}_skip_out", h.shape, name=f"block{i}_skip_Add")
        saved.append((h, c1, a, s))
        h = gelu(gb, s, f"block{i}_act2_out", name=f"block{i}_act2_Gelu")
    flat, col, pooled = _pool(gb, h, avg)
    logits = linear(gb, pooled, fc_w, fc_b, "fc")
    _, dlogits = softmax_ce_loss(gb, logits, labels)

    # Backward.
    updates = [(fc_w, linear_weight_grad(gb, pooled, dlogits, fc_w, "fc")), (fc_b, bias_grad(gb, dlogits, fc_b, "fc"))]
    dpooled = linear_input_grad(gb, dlogits, fc_w, pooled, "pooled_out_grad", "fc")
    dh = _pool_backward(gb, dpooled, h, flat, col, avg)
    for i in reversed(range(blocks)):
        w1, w2 = convs[2 * i], convs[2 * i + 1]
        hin, c1, a, s = saved[i]
        ds = gelu_grad(gb, dh, s, f"block{i}_act2_Grad_GeluGrad_backward")
        grads = GradSet(gb)
        updates.append((w2, _conv_weight_grad(gb, a, ds, w2, f"block{i}_conv2")))
        da = _conv_input_grad(gb, ds, w2, a, f"{a.name}_grad", f"block{i}_conv2")
        dc1 = gelu_grad(gb, da, c1, f"block{i}_act1_Grad_GeluGrad_backward")
        updates.append((w1, _conv_weight_grad(gb, hin, dc1, w1, f"block{i}_conv1")))
        grads.add(hin, _conv_input_grad(gb, dc1, w1, hin, grads.name_for(hin), f"block{i}_conv1"))
        grads.add(hin, ds)
        dh = grads.total(hin)
    dz0 = gelu_grad(gb, dh, z0, "stem_act_Grad_GeluGrad_backward")
    updates.append((stem_w, _conv_weight_grad(gb, x, dz0, stem_w, "stem")))

    order = {t.name: k for k, t in enumerate([stem_w, *convs, fc_w, fc_b])}
    sgd_updates(gb, sorted(updates, key=lambda u: order[u[0].name]), lr)
    return gb.build(doc=f"ckpt.examples.resnet(blocks={blocks}, channels={channels}, image_size={image_size}, "
                        f"in_channels={in_channels}, classes={classes}, batch={batch}, seed={seed}, lr={lr})")


def _pool(gb: GraphBuilder, h, avg):
    """Global average pooling as Reshape, MatMul by 1/hw, Reshape: (flat, col, pooled)."""
    batch, channels, height, width = h.shape
    hw = height * width
    flat = gb.op("Reshape", [h, gb.shape_const("pool_flat_shape", (batch, channels, hw))], "pool_flat_out",
                 (batch, channels, hw), name="pool_flat_Reshape")
    col = gb.op("MatMul", [flat, avg], "pool_MatMul_out", (batch, channels, 1), name="pool_MatMul")
    pooled = gb.op("Reshape", [col, gb.shape_const("pooled_shape", (batch, channels))], "pooled_out",
                   (batch, channels), name="pooled_Reshape")
    return flat, col, pooled


def _pool_backward(gb: GraphBuilder, dpooled, h, flat, col, avg):
    """The pooling's gradient back to its input `h`."""
    dcol = gb.op("Reshape", [dpooled, gb.shape_const("pool_MatMul_grad_shape", col.shape)], "pool_MatMul_out_grad",
                 col.shape, name="pooled_Grad_Reshape_backward", backward=True)
    dflat = gb.op("Gemm", [dcol, avg], "pool_flat_out_grad", flat.shape, name="pool_MatMul_Grad_Gemm_backward",
                  backward=True, alpha=1.0, beta=0.0, transA=0, transB=1)
    return gb.op("Reshape", [dflat, gb.shape_const("pool_flat_grad_shape", h.shape)], f"{h.name}_grad", h.shape,
                 name="pool_flat_Grad_Reshape_backward", backward=True)
