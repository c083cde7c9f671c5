"""A model file the user named, read once: its path, the sha256 of its bytes and its parsed graph.

Every layer that needs the model (the CLI's checks, loading for a target, Deeploy's lowering, the replay's report,
the calibration's key) asks `open_model` for it by the path it was given, and gets the same record: a command
reads, parses and hashes its model once. The record is kept per process, keyed by the file's resolved path, size
and modification time, so a file that changes is read again.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import onnx

from ckpt.errors import CkptError
from ckpt.paths import model_files


@dataclass(frozen=True)
class ModelFile:
    path: Path                 # the ONNX file (a folder's network.onnx)
    sha256: str                # of its bytes
    proto: onnx.ModelProto     # parsed, external data not yet read (solver.onnx_loader.read_model reads it)


_OPENED: dict[tuple[str, int, int], ModelFile] = {}
STATS = {"parsed": 0, "hashed": 0}      # how often a file was parsed and hashed in this process (tests count)


def model_path(source: str | Path) -> Path:
    """The ONNX file a model argument names: the file itself, or a folder's network.onnx (Deeploy's layout)."""
    return model_files(source)[0]


def open_model(source: str | Path | ModelFile) -> ModelFile:
    """The model file `source` names, read once per process (see the module doc); one-line errors for a missing
    file or one that is not ONNX."""
    if isinstance(source, ModelFile):
        return source
    path = model_path(source)
    try:
        stat = path.stat()
    except OSError:
        raise CkptError(f"no model at '{path}'", "pass an .onnx file or a folder holding network.onnx") from None
    if not path.is_file():          # it exists: a pipe would block the read, a device never end it
        raise CkptError(f"model '{path}' is not a regular file (a folder, device, pipe or socket)",
                        "pass an .onnx file or a folder holding network.onnx")
    key = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns)
    if key not in _OPENED:
        data = path.read_bytes()
        STATS["hashed"] += 1
        sha = hashlib.sha256(data).hexdigest()
        STATS["parsed"] += 1
        try:
            proto = onnx.load_from_string(data)
        except Exception as exc:  # protobuf raises several unrelated types for garbage input
            raise CkptError(f"'{path}' is not an ONNX model ({type(exc).__name__})",
                            "pass an .onnx file exported from a training framework") from None
        _OPENED[key] = ModelFile(path, sha, proto)
    found = _OPENED[key]
    return found if found.path == path else ModelFile(path, found.sha256, found.proto)
