"""On-disk cache of lowered graphs, so Deeploy's ~4 s front end runs once per model/target/options.

Key: sha256 over (model file sha256, target, options, input types, Deeploy version, bridge format).
One checked entry per key (ckpt.cached: the lowered ONNX with the bridge's metadata inside, under its key and
content hash), written whole or not at all; an entry that does not check out (another key's, cut short,
corrupted) is a miss, and the graph is lowered again and stored over it.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import onnx
from google.protobuf.message import DecodeError

from ckpt.cached import read_entry, write_entry

FORMAT_VERSION = 8  # 2: per-node transient bytes; 3: key holds lowering options only; 4: constant bytes;
#                     5: the constant plan (one copy per constant); 6: checked entries (key and content hash);
#                     8: each constant's bytes as the code declares it (7: a draft of it, never on main)


def cache_key(model_sha256: str, target: str, options: dict, deeploy_version: str) -> str:
    blob = json.dumps({"model": model_sha256, "target": target, "options": options,
                       "deeploy": deeploy_version, "format": FORMAT_VERSION}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def entry_path(cache_dir: str | Path, key: str) -> Path:
    return Path(cache_dir) / f"{key}.entry"


def load(cache_dir: str | Path, key: str) -> onnx.ModelProto | None:
    """The lowered model stored for `key`, or None (absent, or an entry that does not check out)."""
    payload = read_entry(entry_path(cache_dir, key), key)
    if payload is None:
        return None
    try:
        return onnx.load_from_string(payload)
    except (DecodeError, ValueError):      # checked bytes that are no model: an older ckpt's, made again
        return None


def store(cache_dir: str | Path, key: str, model: onnx.ModelProto) -> Path:
    """Write ``model`` as the entry for ``key``, whole or not at all."""
    path = entry_path(cache_dir, key)
    write_entry(path, key, model.SerializeToString())
    return path
