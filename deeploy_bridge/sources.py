"""Resolve what the caller passed (model folder, .onnx file or ModelProto) into bytes, graph and input values.

Keeping this separate lets the cache key and the Deeploy run see exactly the same model.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from ckpt.paths import model_files
from ckpt.solver.graph.onnx_loader import data_inputs, open_model

from .errors import BridgeError

ModelLike = str | Path | onnx.ModelProto

#: metadata_props key under which the bridge stores its JSON metadata in a lowered model.
LOWERED_META_KEY = "ckpt.deeploy_bridge.lowered"


@dataclass
class ModelSource:
    """A model ready to hand to Deeploy, with a content hash for caching."""

    model: onnx.ModelProto
    sha256: str
    inputs: dict[str, np.ndarray] | None  # values from inputs.npz, keyed by npz name, file order
    label: str  # for messages

    @property
    def lowered_meta(self) -> dict | None:
        """Bridge metadata if this model is a graph the bridge lowered earlier, else None."""
        for prop in self.model.metadata_props:
            if prop.key == LOWERED_META_KEY:
                return json.loads(prop.value)
        return None

    @property
    def looks_lowered(self) -> bool:
        """Bridge metadata present, or I/O already named input_i/output_i as only Deeploy names them."""
        if self.lowered_meta is not None:
            return True
        g = self.model.graph
        ins = [i.name for i in data_inputs(g)]
        return bool(ins) and ins == [f"input_{i}" for i in range(len(ins))] and \
            [o.name for o in g.output] == [f"output_{i}" for i in range(len(g.output))]


def load_source(model: ModelLike, inputs: str | Path | dict | None = None) -> ModelSource:
    """Load a model folder (network.onnx [+ inputs.npz]), an .onnx path, or take a ModelProto as is."""
    npz_path: Path | None = None
    if isinstance(model, onnx.ModelProto):
        proto = model
        sha = hashlib.sha256(proto.SerializeToString()).hexdigest()
        label = proto.graph.name or "<ModelProto>"
    else:
        onnx_path, npz_path, _ = model_files(model)
        if not onnx_path.is_file():
            raise BridgeError(f"no ONNX model at {onnx_path}")
        opened = open_model(onnx_path)          # the command's one read of it (solver.graph.model_file)
        proto = onnx.ModelProto()               # Deeploy's front end changes the constants of what it is given:
        proto.CopyFrom(opened.proto)            # the shared graph stays as the file says
        sha, label = opened.sha256, str(onnx_path)
    values: dict[str, np.ndarray] | None = None
    if isinstance(inputs, dict):
        values = {k: np.asarray(v) for k, v in inputs.items()}
    elif inputs is not None:
        npz_path = Path(inputs)
    if values is None and npz_path is not None and npz_path.is_file():
        with np.load(npz_path) as npz:
            values = {k: npz[k] for k in npz.files}
    return ModelSource(model=proto, sha256=sha, inputs=values, label=label)


def is_lowered(model: onnx.ModelProto) -> bool:
    """Whether `model` is a graph the bridge lowered (it carries the bridge's metadata)."""
    return any(prop.key == LOWERED_META_KEY for prop in model.metadata_props)
