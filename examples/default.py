"""The built-in default model: a small CCT-like training graph, generated once into the user's cache."""
from __future__ import annotations

from pathlib import Path

from ckpt.cached import folder_checks_out, seal_folder
from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.examples.write import write_example
from ckpt.paths import examples_cache_dir

DEFAULT_KIND = "cct"
DEFAULT_OPTIONS = {"blocks": 2}
DEFAULT_MODEL = "built-in example (CCT-like, 2 blocks)"
GENERATOR_VERSION = 4   # bump when the generators' graphs change, so a cached copy is not reused (4: device CE grad)


def default_model_dir() -> Path:
    """Folder with network.onnx and inputs.npz of the default example (written on first use, deterministic, and
    sealed: a copy that does not check out is written again)."""
    branch = "-branch" if deeploy_flavour() is Flavour.TRAINING_BRANCH else ""   # the forms its kernels compute
    name = DEFAULT_KIND + "".join(f"-{key}{value}" for key, value in DEFAULT_OPTIONS.items()) \
        + f"-v{GENERATOR_VERSION}{branch}"
    folder = examples_cache_dir() / name
    if not folder_checks_out(folder, name):       # absent, or not the files it was written with: written again
        write_example(DEFAULT_KIND, folder, overwrite=True, **DEFAULT_OPTIONS)
        seal_folder(folder, name)
    return folder
