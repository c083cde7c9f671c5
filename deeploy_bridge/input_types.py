"""Choose the Deeploy type of each graph input the way Deeploy's own test runners do.

DeeployTest's training runner: float arrays -> float32_t, bool -> uint8_t, integers -> the smallest
integer type that holds all values (Deeploy's ``minimalIntegerType``, unsigned tried first), no sign
propagation. npz entries are matched to graph inputs by name; a positional inputs.npz of Deeploy's training
branch as that branch's runner maps it (hostexec.step_layout: the base arrays fill the inputs that are not
gradient-accumulation buffers, the buffers are float zeros); else by position (sorted npz keys, as v0.2.1's
runner does). Without values we fall back to the ONNX element type.
"""
from __future__ import annotations

import numpy as np
import onnx
from Deeploy.AbstractDataTypes import PointerClass
from Deeploy.CommonExtensions import DataTypes
from Deeploy.CommonExtensions.DataTypes import minimalFloatType, minimalIntegerType

from ckpt.hostexec.step_layout import is_positional, positional_layout
from ckpt.solver.graph.onnx_loader import data_inputs

from .errors import BridgeError

_ONNX_FALLBACK = {
    onnx.TensorProto.FLOAT: "float32_t",
    onnx.TensorProto.DOUBLE: "float32_t",
    onnx.TensorProto.FLOAT16: "float16_t",
    onnx.TensorProto.BFLOAT16: "bfloat16_t",
    onnx.TensorProto.BOOL: "uint8_t",
    onnx.TensorProto.INT8: "int8_t",
    onnx.TensorProto.UINT8: "uint8_t",
    onnx.TensorProto.INT16: "int16_t",
    onnx.TensorProto.UINT16: "uint16_t",
    onnx.TensorProto.INT32: "int32_t",
    onnx.TensorProto.UINT32: "uint32_t",
    onnx.TensorProto.INT64: "int32_t",
    onnx.TensorProto.UINT64: "uint32_t",
}


def type_for_values(values: np.ndarray) -> str:
    """Deeploy type name for one input array (see module docstring)."""
    arr = np.asarray(values)
    if arr.dtype == np.bool_:
        return "uint8_t"
    if np.issubdtype(arr.dtype, np.floating):
        return "float32_t"
    flat = arr.reshape(-1).astype(np.float64)
    if flat.size == 0:
        return "int8_t"
    if np.abs(np.round(flat) - flat).max() <= 1e-3:
        return minimalIntegerType(flat.astype(np.int64)).typeName
    return minimalFloatType(flat).typeName


def infer_input_types(graph: onnx.GraphProto, values: dict[str, np.ndarray] | None,
                      known: dict[str, str] | None = None) -> dict[str, str]:
    """Map lowered input names (input_i) to Deeploy type names.

    ``known`` (already-lowered graphs) wins; then npz values; then the ONNX element type.
    """
    real_inputs = data_inputs(graph)
    by_position: list[np.ndarray | None] = [None] * len(real_inputs)
    if values:
        names = [i.name for i in real_inputs]
        if is_positional(list(values), names):
            try:
                values = positional_layout(graph, values, "inputs.npz").base
            except ValueError as exc:
                raise BridgeError(str(exc)) from None
        if all(n in values for n in names):
            by_position = [values[n] for n in names]
        else:
            ordered = [values[k] for k in sorted(values)]
            for idx in range(min(len(ordered), len(real_inputs))):
                by_position[idx] = ordered[idx]
    types: dict[str, str] = {}
    for idx, tensor in enumerate(real_inputs):
        lowered = f"input_{idx}"
        if known and lowered in known:
            types[lowered] = known[lowered]
        elif by_position[idx] is not None:
            types[lowered] = type_for_values(by_position[idx])
        else:
            types[lowered] = _ONNX_FALLBACK.get(tensor.type.tensor_type.elem_type, "float32_t")
    return types


def pointer_types(type_names: dict[str, str]) -> dict:
    """Turn type names into the PointerClass objects PULPDeployer expects as inputTypes."""
    return {name: PointerClass(getattr(DataTypes, tname)) for name, tname in type_names.items()}
