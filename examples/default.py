"""The built-in default model: a small CCT-like training graph, generated once into the user's cache."""
from __future__ import annotations

from pathlib import Path

from ckpt.examples.write import write_example
from ckpt.paths import NETWORK, examples_cache_dir

DEFAULT_KIND = "cct"
DEFAULT_OPTIONS = {"blocks": 2}
DEFAULT_MODEL = "built-in example (CCT-like, 2 blocks)"
GENERATOR_VERSION = 3   # bump when the generators' graphs change, so a cached copy is not reused (3: device LN grad)


def default_model_dir() -> Path:
    """Folder with network.onnx and inputs.npz of the default example (written on first use; deterministic)."""
    name = DEFAULT_KIND + "".join(f"-{key}{value}" for key, value in DEFAULT_OPTIONS.items()) \
        + f"-v{GENERATOR_VERSION}"
    folder = examples_cache_dir() / name
    if not (folder / NETWORK).is_file():
        write_example(DEFAULT_KIND, folder, **DEFAULT_OPTIONS)
    return folder
