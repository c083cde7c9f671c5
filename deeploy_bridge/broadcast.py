"""The bytes Deeploy deploys for a constant a reader broadcasts: more than the constant's own in the ONNX graph.

Deeploy's front end gives each reader its own copy of a constant (`NetworkDeployer._duplicateConstants`), then each
layer's shape inference (`ONNXLayer.broadcast` in DeeployTypes.py) sets every input's shape to what the layer's
`computeShapes` says and, for a constant whose element count differs, replaces its values by `np.broadcast_to` of
them: the copy is deployed at the reader's shape. Add and Mul (Generic Layers' AddLayer, MulLayer) give an input of
lower rank the other input's whole shape, so a scalar scale read by a Mul of an activation becomes a copy of that
activation's size (CCT's attention scale: 4 B in the graph, 32,768 B in L2). A Gemm's bias broadcast to its rows is
recorded from Deeploy's own buffers (ConstantPlan.repeats). What ckpt lays out on chip counts these bytes.
"""
from __future__ import annotations

import math

import onnx
from onnx.helper import tensor_dtype_to_np_dtype

from .arena import deeploy_tensor_name
from .records import ConstantPlan

BROADCASTING = frozenset({"Add", "Mul"})    # layers whose shape inference gives a lower-rank input the other's shape


def broadcast_constant_bytes(model: onnx.ModelProto, plan: ConstantPlan | None = None) -> dict[str, int]:
    """Each constant of `model` (an initializer) that Deeploy deploys larger than its own bytes -> the bytes it
    deploys (see the module doc)."""
    declared = {v.name: v.type.tensor_type for v in (*model.graph.value_info, *model.graph.input,
                                                      *model.graph.output)}
    constants = {i.name: i for i in model.graph.initializer}
    found: dict[str, int] = {}
    for node in model.graph.node:
        if node.op_type not in BROADCASTING or len(node.input) != 2:
            continue
        for mine, other in ((node.input[0], node.input[1]), (node.input[1], node.input[0])):
            tensor, kind = constants.get(mine), declared.get(other)
            if tensor is None or kind is None or not all(d.HasField("dim_value") for d in kind.shape.dim):
                continue
            if len(tensor.dims) >= len(kind.shape.dim):
                continue
            itemsize = tensor_dtype_to_np_dtype(tensor.data_type).itemsize
            nbytes = math.prod(d.dim_value for d in kind.shape.dim) * itemsize
            if nbytes > math.prod(tensor.dims) * itemsize:
                found[mine] = max(found.get(mine, 0), nbytes)
    named = {**{deeploy_tensor_name(name): name for name in constants}, **{name: name for name in constants}}
    for copy, (canonical, times) in (plan.repeats.items() if plan is not None else ()):
        tensor = constants.get(named.get(canonical, ""))
        if tensor is not None and copy in named:
            found[named[copy]] = math.prod(tensor.dims) * tensor_dtype_to_np_dtype(tensor.data_type).itemsize * times
    return found
