"""On-disk cache of lowered graphs, so Deeploy's ~4 s front end runs once per model/target/options.

Key: sha256 over (model file sha256, target, options, input types, Deeploy version, bridge format).
One file per entry (the lowered ONNX with the bridge's metadata inside), written to a temp file in the
same directory and renamed into place, so concurrent readers never see a partial entry.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

import onnx

FORMAT_VERSION = 5  # 2: per-node transient bytes; 3: key holds lowering options only; 4: constant bytes;
#                     5: the constant plan (one copy per constant)


def cache_key(model_sha256: str, target: str, options: dict, deeploy_version: str) -> str:
    blob = json.dumps({"model": model_sha256, "target": target, "options": options,
                       "deeploy": deeploy_version, "format": FORMAT_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_path(cache_dir: str | Path, key: str) -> Path:
    return Path(cache_dir) / f"{key}.onnx"


def load(cache_dir: str | Path, key: str) -> onnx.ModelProto | None:
    path = entry_path(cache_dir, key)
    if not path.is_file():
        return None
    try:
        return onnx.load_from_string(path.read_bytes())
    except Exception:  # a corrupt entry is a miss, not an error
        return None


def store(cache_dir: str | Path, key: str, model: onnx.ModelProto) -> Path:
    """Atomically write ``model`` as the entry for ``key``."""
    directory = Path(cache_dir)
    directory.mkdir(parents=True, exist_ok=True)
    final = entry_path(directory, key)
    fd, tmp = tempfile.mkstemp(prefix=f".{key[:16]}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(model.SerializeToString())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return final
