"""The built-in default model: a small CCT-like training graph, generated once into the user's cache."""
from __future__ import annotations

import os
from pathlib import Path

DEFAULT_KIND = "cct"
DEFAULT_OPTIONS = {"blocks": 2}


def cache_root() -> Path:
    return Path(os.environ.get("CKPT_CACHE_DIR", Path.home() / ".cache" / "ckpt"))


def default_model_dir() -> Path:
    """Folder with network.onnx and inputs.npz of the default example (written on first use; deterministic)."""
    from ckpt.examples.write import write_example

    name = DEFAULT_KIND + "".join(f"-{key}{value}" for key, value in DEFAULT_OPTIONS.items())
    folder = cache_root() / "examples" / name
    if not (folder / "network.onnx").is_file():
        write_example(DEFAULT_KIND, folder, **DEFAULT_OPTIONS)
    return folder
