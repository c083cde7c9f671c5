"""A plain-chain training step (Gemm + Gelu layers): the simplest graph the solver must handle.

Gelu/GeluGrad rather than Relu: ONNX has no ReluGrad, and GeluGrad is what the CCT training
graphs (and so Deeploy's Siracusa target) already use.
"""

from __future__ import annotations

import numpy as np
import onnx

from .builder import INT64, GraphBuilder
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


def mlp(layers: int = 3, width: int = 64, batch: int = 4, in_dim: int = 32, classes: int = 10,
        seed: int = 0, lr: float = DEFAULT_LR) -> onnx.ModelProto:
    """One SGD step of a ``layers``-deep MLP: inputs ``input`` [batch, in_dim] and ``labels``
    [batch] (int64); outputs every weight and bias after the update (``<name>_updated``)."""
    if layers < 1:
        raise ValueError("layers must be >= 1")
    rng = np.random.default_rng(seed)
    gb = GraphBuilder(f"mlp{layers}_w{width}")
    x = gb.input("input", (batch, in_dim))
    labels = gb.input("labels", (batch,), INT64)

    dims = [in_dim] + [width] * (layers - 1) + [classes]
    params = []
    for i in range(layers):
        w = gb.initializer(f"fc{i}_weight", init_weight(rng, dims[i], (dims[i], dims[i + 1])))
        b = gb.initializer(f"fc{i}_bias", init_bias(rng, (dims[i + 1],)))
        params.append((w, b))

    # Forward: keep each layer's input (for dW) and pre-activation (for GeluGrad).
    acts, pre = [x], []
    h = x
    for i, (w, b) in enumerate(params):
        z = linear(gb, h, w, b, f"fc{i}")
        pre.append(z)
        if i < layers - 1:
            h = gelu(gb, z, f"act{i}_out", name=f"act{i}_Gelu")
            acts.append(h)
    _, dz = softmax_ce_loss(gb, pre[-1], labels)

    # Backward, last layer first.
    grads = GradSet(gb)
    updates = []
    for i in reversed(range(layers)):
        w, b = params[i]
        updates.append((w, linear_weight_grad(gb, acts[i], dz, w, f"fc{i}")))
        updates.append((b, bias_grad(gb, dz, b, f"fc{i}")))
        if i == 0:
            break
        da = acts[i]
        grads.add(da, linear_input_grad(gb, dz, w, da, grads.name_for(da), f"fc{i}"))
        dz = gelu_grad(gb, grads.total(da), pre[i - 1], f"act{i - 1}_Grad_GeluGrad_backward")

    # SGD last, in forward parameter order (as cct2_ft2 updates after the whole backward).
    order = {t.name: k for k, t in enumerate(p for pair in params for p in pair)}
    sgd_updates(gb, sorted(updates, key=lambda u: order[u[0].name]), lr)
    return gb.build(doc=f"ckpt.examples.mlp(layers={layers}, width={width}, batch={batch}, "
                        f"in_dim={in_dim}, classes={classes}, seed={seed}, lr={lr})")
