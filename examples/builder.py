"""A tiny ONNX graph builder that records value_info as tensors are created.

Training graphs use ops (SGD, GeluGrad, com.microsoft *Grad) that onnx shape inference cannot handle,
so every tensor's shape and dtype must be written by the generator itself, exactly as the Deeploy
CCT training graphs (shared/models/cct2_ft2) carry value_info for every tensor. Nodes are appended
in creation order and may only consume tensors that already exist, so the node list is always a
valid topological order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64

#: Domain of ONNX Runtime's training gradient ops (LayerNormalizationGrad, SoftmaxGrad, ...).
MS_DOMAIN = "com.microsoft"
#: Attribute cct2_ft2 puts on every backward node; kept so tools can tell the passes apart.
BACKWARD_DESCRIPTION = "[Backward pass]"
#: Opsets the generated models import: Gelu needs 20; the Grad ops live in com.microsoft.
OPSET_IMPORTS: tuple[tuple[str, int], ...] = (("", 20), (MS_DOMAIN, 1))
PRODUCER = "ckpt.examples"

_NP_TO_ONNX = {np.dtype(np.float32): FLOAT, np.dtype(np.int64): INT64}


@dataclass(frozen=True)
class Tensor:
    """A named tensor with a static shape; what every builder call takes and returns."""

    name: str
    shape: tuple[int, ...]
    dtype: int = FLOAT

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


class GraphBuilder:
    """Accumulates nodes, initializers and value_info for one ONNX graph."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tensors: dict[str, Tensor] = {}
        self._nodes: list[onnx.NodeProto] = []
        self._node_names: set[str] = set()
        self._inits: list[onnx.TensorProto] = []
        self._inputs: list[Tensor] = []
        self._outputs: list[Tensor] = []
        self._produced: list[Tensor] = []

    # -- tensors ---------------------------------------------------------------------------------
    def _declare(self, t: Tensor) -> Tensor:
        if t.name in self._tensors:
            raise ValueError(f"tensor {t.name!r} defined twice")
        if any(int(d) <= 0 for d in t.shape):
            raise ValueError(f"tensor {t.name!r} has a non-positive dim {t.shape}")
        self._tensors[t.name] = t
        return t

    def input(self, name: str, shape: Sequence[int], dtype: int = FLOAT) -> Tensor:
        t = self._declare(Tensor(name, tuple(int(d) for d in shape), dtype))
        self._inputs.append(t)
        return t

    def initializer(self, name: str, array: np.ndarray) -> Tensor:
        """Adds a constant (weight, bias, shape vector or scalar); dtype float32 or int64."""
        arr = np.ascontiguousarray(array)
        if arr.dtype not in _NP_TO_ONNX:
            raise TypeError(f"initializer {name!r}: unsupported dtype {arr.dtype}")
        t = self._declare(Tensor(name, tuple(int(d) for d in arr.shape), _NP_TO_ONNX[arr.dtype]))
        self._inits.append(numpy_helper.from_array(arr, name=name))
        return t

    def shape_const(self, name: str, shape: Sequence[int]) -> Tensor:
        """An int64 shape vector for Reshape, reused when the same name is asked for again."""
        if name in self._tensors:
            existing = self._tensors[name]
            if existing.shape != (len(shape),):
                raise ValueError(f"shape constant {name!r} reused with a different rank")
            return existing
        return self.initializer(name, np.asarray(list(shape), dtype=np.int64))

    def get(self, name: str) -> Tensor:
        return self._tensors[name]

    # -- nodes -----------------------------------------------------------------------------------
    def op(
        self,
        op_type: str,
        inputs: Sequence[Tensor],
        out: str,
        shape: Sequence[int],
        *,
        name: str,
        dtype: int = FLOAT,
        domain: str = "",
        backward: bool = False,
        **attrs: object,
    ) -> Tensor:
        """Appends one single-output node; its output's value_info is recorded right away."""
        for t in inputs:
            if self._tensors.get(t.name) != t:
                raise ValueError(f"node {name!r} consumes unknown or stale tensor {t.name!r}")
        if name in self._node_names:
            raise ValueError(f"node name {name!r} used twice")
        if backward:
            attrs = {**attrs, "description": BACKWARD_DESCRIPTION}
        result = self._declare(Tensor(out, tuple(int(d) for d in shape), dtype))
        node = helper.make_node(op_type, [t.name for t in inputs], [out], name=name, domain=domain)
        # Sorted so the serialisation never depends on keyword order at the call site.
        node.attribute.extend(helper.make_attribute(k, attrs[k]) for k in sorted(attrs))
        self._nodes.append(node)
        self._node_names.add(name)
        self._produced.append(result)
        return result

    def output(self, t: Tensor) -> None:
        if self._tensors.get(t.name) != t:
            raise ValueError(f"unknown output {t.name!r}")
        self._outputs.append(t)

    # -- result ----------------------------------------------------------------------------------
    def build(self, doc: str = "") -> onnx.ModelProto:
        """The model; value_info covers every tensor that is neither a graph input nor output."""
        io = {t.name for t in self._inputs} | {t.name for t in self._outputs}
        vinfo = [_vi(t) for t in self._produced if t.name not in io]
        vinfo += [_vi(self._tensors[i.name]) for i in self._inits if i.name not in io]
        graph = helper.make_graph(
            self._nodes,
            self.name,
            [_vi(t) for t in self._inputs],
            [_vi(t) for t in self._outputs],
            initializer=self._inits,
            value_info=vinfo,
            doc_string=doc,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid(d, v) for d, v in OPSET_IMPORTS],
            producer_name=PRODUCER,
            producer_version="1",
        )
        return model


def _vi(t: Tensor) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(t.name, t.dtype, list(t.shape))
