"""The bytes Deeploy deploys a constant at, where they differ from the constant's own bytes in the ONNX graph.

Deeploy's front end gives each reader of a constant its own copy (`NetworkDeployer._duplicateConstants`), then each
layer's shape inference (`ONNXLayer.broadcast` in DeeployTypes.py) sets every input's shape to what the layer's
`computeShapes` says and, for a constant whose element count differs, replaces its values by `np.broadcast_to` of
them: the copy is deployed at the reader's shape (CCT's scalar attention scale read by a Mul: 4 B in the graph, a
[1, heads, seq, seq] float array in L2; a Gemm's bias: one row in the graph, every row in L2). And the code declares
each constant at its bound type, while Deeploy's lowered graph holds some constants' values as float64 (a
`float32_t` array of half the bytes the graph's DOUBLE says). Both are read from Deeploy's own buffers when ckpt lowers
the graph (LoweredGraph.constant_sizes); what ckpt lays out on chip counts these bytes.
"""
from __future__ import annotations

import math

import onnx
from onnx.helper import tensor_dtype_to_np_dtype

from .arena import deeploy_tensor_name


def declared_constant_bytes(model: onnx.ModelProto, sizes: dict[str, int]) -> dict[str, int]:
    """Each constant of `model` (an initializer, ONNX name) whose bytes as Deeploy's code declares it (`sizes`:
    Deeploy's names -> bytes, LoweredGraph.constant_sizes) differ from its own bytes in `model` -> those bytes."""
    found: dict[str, int] = {}
    for tensor in model.graph.initializer:
        declared = sizes.get(tensor.name, sizes.get(deeploy_tensor_name(tensor.name)))
        own = math.prod(tensor.dims) * tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        if declared is not None and declared != own:
            found[tensor.name] = declared
    return found
