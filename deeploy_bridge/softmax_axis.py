"""SoftmaxGrad along its last axis only (the workaround of workarounds.Defect.SOFTMAX_GRAD_AXIS).

com.microsoft SoftmaxGrad(dY, Y) with `axis` runs over the input seen as 2-D at the axis (every dimension from
`axis` on flattened into one, as ONNX Runtime defines it and ckpt's host executor computes it). Deeploy's PULPOpen
kernel runs along the contiguous last axis, and its tile constraint tells it the length of the tile's last
dimension. A SoftmaxGrad whose axis is not its last is handed its inputs reshaped to that 2-D form (the bytes are
already in that order, and a Reshape is free in Deeploy), and its output is reshaped back.
"""
from __future__ import annotations

import math

import numpy as np
import onnx_graphsurgeon as gs

SUFFIX = "_ckpt_last_axis"


def _axis(node, rank: int) -> int:
    return int(node.attrs.get("axis", -1)) % rank


def _reshaped(tensor, shape: list[int], name: str):
    """(node, output): `tensor` seen with `shape`."""
    out = gs.Variable(f"{tensor.name}{SUFFIX}_{name}", dtype=tensor.dtype or np.float32, shape=shape)
    target = gs.Constant(f"{out.name}_shape", np.asarray(shape, dtype=np.int64))
    return gs.Node("Reshape", name=f"{out.name}_reshape", inputs=[tensor, target], outputs=[out]), out


def along_last_axis(graph: gs.Graph) -> list[str]:
    """Rewrite every SoftmaxGrad of `graph` whose axis is not its last (known shapes only) into one along the last
    axis of its 2-D form, between Reshapes; returns the names of the nodes rewritten."""
    rewritten = []
    for node in list(graph.nodes):
        if node.op != "SoftmaxGrad" or len(node.inputs) != 2 or len(node.outputs) != 1:
            continue
        shape = node.inputs[0].shape
        if not shape or not all(isinstance(d, int) for d in shape):
            continue
        axis = int(node.attrs.get("axis", 1)) % len(shape)
        if axis == len(shape) - 1:
            continue
        flat = [math.prod(shape[:axis]), math.prod(shape[axis:])]
        before = []
        for i, tensor in enumerate(node.inputs):
            view, out = _reshaped(tensor, flat, f"in{i}")
            before.append(view)
            node.inputs[i] = out
        result = node.outputs[0]
        inner = gs.Variable(f"{result.name}{SUFFIX}_out", dtype=result.dtype or np.float32, shape=flat)
        node.outputs[0] = inner
        target = gs.Constant(f"{inner.name}_shape", np.asarray(shape, dtype=np.int64))
        after = gs.Node("Reshape", name=f"{inner.name}_reshape", inputs=[inner, target], outputs=[result])
        node.attrs["axis"] = 1
        at = graph.nodes.index(node)
        graph.nodes[at:at + 1] = [*before, node, after]
        rewritten.append(node.name)
    return rewritten
