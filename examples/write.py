"""Writes a generated example in the shared/models folder layout.

network.onnx + inputs.npz (+ outputs.npz, golden updated weights, when the host executor is
available). npz files are written with fixed zip timestamps so that the same arguments give
byte-identical files.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx

from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.errors import CkptError
from ckpt.files import atomic_write, check_output_dir
from ckpt.hostexec.executor import run_graph
from ckpt.paths import INPUTS, NETWORK, OUTPUTS

from .cct import cct
from .mlp import mlp
from .ops import for_training_branch
from .resnet import resnet

_FIXED_ZIP_TIME = (1980, 1, 1, 0, 0, 0)


GENERATORS: dict[str, Callable[..., onnx.ModelProto]] = {"cct": cct, "mlp": mlp, "resnet": resnet}
KINDS = tuple(sorted(GENERATORS))


@dataclass(frozen=True)
class WrittenExample:
    """Paths of what write_example produced; ``outputs`` is None when goldens were not asked for."""

    directory: Path
    network: Path
    inputs: Path
    outputs: Path | None


def build(kind: str, flavour: Flavour | None = None, **opts: object) -> onnx.ModelProto:
    """The model of generator ``kind`` (``mlp``, ``cct``, ``resnet``) with its keyword options, in the forms the
    kernels of `flavour` compute (default: the installed Deeploy's); options a generator refuses become a one-line
    CkptError."""
    if kind not in GENERATORS:
        raise CkptError(f"unknown example kind {kind!r}", f"choose one of {', '.join(KINDS)}")
    try:
        model = GENERATORS[kind](**opts)
    except (ValueError, TypeError) as exc:
        raise CkptError(f"{kind} example options rejected ({exc})", "see `ckpt example --help`") from None
    branch = (flavour or deeploy_flavour()) is Flavour.TRAINING_BRANCH
    return for_training_branch(model) if branch else model


def example_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Deterministic feeds for a generated model: normal floats, labels in [0, classes)."""
    rng = np.random.default_rng([seed, 1])
    classes = _num_classes(model)
    feeds: dict[str, np.ndarray] = {}
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        shape = tuple(d.dim_value for d in tt.shape.dim)
        if tt.elem_type == onnx.TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, classes, size=shape, dtype=np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _num_classes(model: onnx.ModelProto) -> int:
    shapes = {v.name: v.type.tensor_type.shape for v in model.graph.value_info}
    for node in model.graph.node:
        if node.op_type == "SoftmaxCrossEntropyLoss":
            return int(shapes[node.input[0]].dim[-1].dim_value)
    raise ValueError("model has no SoftmaxCrossEntropyLoss node")


def npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An np.savez-compatible file with fixed timestamps (np.savez stamps the current time)."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_STORED) as zf:
        for key, arr in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asanyarray(arr), allow_pickle=False)
            info = zipfile.ZipInfo(f"{key}.npy", date_time=_FIXED_ZIP_TIME)
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())
    return out.getvalue()


def save_npz(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    atomic_write(path, npz_bytes(arrays))


def golden_outputs(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Graph outputs computed by the host executor: the step's golden updated weights."""
    values = run_graph(model, dict(feeds))
    return {o.name: np.asarray(values[o.name]) for o in model.graph.output}


def write_example(kind: str, out_dir: str | Path, *, golden: bool = True, overwrite: bool = False,
                  flavour: Flavour | None = None, **opts: object) -> WrittenExample:
    """Generates example ``kind`` and writes network.onnx, inputs.npz and outputs.npz to out_dir. A file of
    those names already there with other bytes (another model's) is refused unless `overwrite`; the same
    bytes (the same command run again) are fine."""
    model = build(kind, flavour, **opts)
    out = Path(out_dir)
    check_output_dir(out)
    feeds = example_inputs(model, int(opts.get("seed", 0)))  # type: ignore[arg-type]
    network, inputs, outputs = out / NETWORK, out / INPUTS, out / OUTPUTS
    files = {network: model.SerializeToString(), inputs: npz_bytes(feeds)}
    if golden:
        files[outputs] = npz_bytes(golden_outputs(model, feeds))
    other = [path.name for path, data in files.items() if path.exists() and path.read_bytes() != data]
    if other and not overwrite:
        raise CkptError(f"'{out}' already holds another model's {', '.join(other)}",
                        "choose a new folder, or pass --overwrite to replace them")
    made, written = not out.exists(), []
    try:
        for path, data in files.items():
            if not (path.exists() and path.read_bytes() == data):      # the same bytes stay untouched
                atomic_write(path, data)
                written.append(path)
    except BaseException:            # no half an example: the files written so far go, and a folder made for them
        for path in written:
            path.unlink(missing_ok=True)
        if made and out.is_dir() and not any(out.iterdir()):
            out.rmdir()
        raise
    return WrittenExample(out, network, inputs, outputs if golden else None)
