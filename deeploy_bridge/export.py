"""Export Deeploy's lowered graph as a self-contained onnx.ModelProto with complete value_info.

onnx shape inference fails on these training graphs, so value_info is written explicitly for every
non-constant tensor: shape from the graph, element type from Deeploy's *bound* buffer type (that is
what Deeploy sizes buffers with: ``VariableBuffer.sizeInBytes`` = prod(shape) * typeWidth / 8), falling
back to the graph's dtype. The model carries the bridge's metadata as JSON in metadata_props so a
graph that goes back into Deeploy (e.g. after a replay rewired it) is recognised as already lowered.
"""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_graphsurgeon as gs
from onnx import helper

from .sources import LOWERED_META_KEY

DEEPLOY_TO_ONNX = {
    "float32_t": onnx.TensorProto.FLOAT,
    "float64_t": onnx.TensorProto.DOUBLE,
    "float16_t": onnx.TensorProto.FLOAT16,
    "bfloat16_t": onnx.TensorProto.BFLOAT16,
    "int8_t": onnx.TensorProto.INT8,
    "uint8_t": onnx.TensorProto.UINT8,
    "int16_t": onnx.TensorProto.INT16,
    "uint16_t": onnx.TensorProto.UINT16,
    "int32_t": onnx.TensorProto.INT32,
    "uint32_t": onnx.TensorProto.UINT32,
    "int64_t": onnx.TensorProto.INT64,
    "uint64_t": onnx.TensorProto.UINT64,
}


def bound_types(ctxt) -> dict[str, str]:
    """Deeploy's element type name for every typed buffer in a NetworkContext."""
    types = {}
    for scope in (ctxt.globalObjects, ctxt.localObjects):
        for name, buf in scope.items():
            typ = getattr(buf, "_type", None)
            ref = getattr(typ, "referencedType", None)
            if ref is not None and getattr(ref, "typeName", None) in DEEPLOY_TO_ONNX:
                types[name] = ref.typeName
    return types


def _tensor_elem_type(tensor, deeploy_types: dict[str, str]) -> int:
    if tensor.name in deeploy_types:
        return DEEPLOY_TO_ONNX[deeploy_types[tensor.name]]
    if tensor.dtype is None:
        return onnx.TensorProto.UNDEFINED
    try:
        return helper.np_dtype_to_tensor_dtype(np.dtype(tensor.dtype))
    except (TypeError, KeyError, ValueError):
        return int(tensor.dtype) if isinstance(tensor.dtype, int) else onnx.TensorProto.UNDEFINED


def export_lowered(graph, deeploy_types: dict[str, str], meta: dict, opset_model: onnx.ModelProto | None = None
                   ) -> onnx.ModelProto:
    """gs.Graph (Deeploy's in-memory lowered graph) -> ModelProto with full value_info + metadata."""
    g = graph.copy()
    for tensor in g.tensors().values():
        # Deeploy keeps some constants in a compute dtype that differs from their export dtype.
        if isinstance(tensor, gs.Constant) and getattr(tensor, "export_dtype", None) is not None \
                and tensor.dtype != tensor.export_dtype:
            tensor.values = np.asarray(tensor.values).astype(tensor.export_dtype)
    model = gs.export_onnx(g, do_type_check=False)
    if opset_model is not None:
        del model.opset_import[:]
        model.opset_import.extend(opset_model.opset_import)
        model.ir_version = opset_model.ir_version

    constants = {t.name for t in model.graph.initializer}
    io = {v.name: v for v in list(model.graph.input) + list(model.graph.output)}
    described = {}
    for tensor in g.tensors().values():
        if isinstance(tensor, gs.Constant) or tensor.name in constants or not tensor.name:
            continue
        shape = [int(d) for d in tensor.shape] if tensor.shape is not None else None
        info = helper.make_tensor_value_info(tensor.name, _tensor_elem_type(tensor, deeploy_types), shape)
        if tensor.name in io:
            io[tensor.name].CopyFrom(info)
        else:
            described[tensor.name] = info
    del model.graph.value_info[:]
    model.graph.value_info.extend(described[name] for name in sorted(described))
    del model.metadata_props[:]
    prop = model.metadata_props.add()
    prop.key = LOWERED_META_KEY
    prop.value = json.dumps(meta, sort_keys=True)
    return model


def strip_mangling(model: onnx.ModelProto) -> onnx.ModelProto:
    """Undo Deeploy's '_tensor' suffix so feeding a lowered graph back reproduces the same names."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    rename = {}

    def fix(name: str) -> str:
        if name.endswith("_tensor"):
            rename[name] = name[: -len("_tensor")]
            return rename[name]
        return name

    graph = out.graph
    for node in graph.node:
        node.input[:] = [fix(n) for n in node.input]
        node.output[:] = [fix(n) for n in node.output]
    for coll in (graph.input, graph.output, graph.value_info, graph.initializer):
        for item in coll:
            item.name = fix(item.name)
    return out
