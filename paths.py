"""Where ckpt keeps and finds things: its cache (lowered graphs, the built-in example, built kernels) and the shared
folder (models, a Deeploy checkout)."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent


NETWORK, INPUTS, OUTPUTS = "network.onnx", "inputs.npz", "outputs.npz"   # a model folder, as Deeploy's test models
MODEL_FILES = (NETWORK, INPUTS, OUTPUTS)


def model_files(model: str | Path) -> list[Path]:
    """The files of a model argument: the .onnx it names, or a folder's network.onnx, and the step's inputs.npz
    and outputs.npz beside it."""
    path = Path(model)
    onnx = path / NETWORK if path.is_dir() else path
    return [onnx, onnx.parent / INPUTS, onnx.parent / OUTPUTS]


OPTIMIZER = "optimizer.onnx"       # a model folder's own optimizer graph, beside network.onnx
TRAIN_SUFFIX, OPTIMIZER_SUFFIX = "_train", "_optimizer"   # the training branch's sibling folders


def optimizer_graph(model: str | Path, given: str | Path | None = None) -> Path | None:
    """The optimizer graph that completes a split training step (Deeploy's training branch): the one `given`
    (an .onnx, or a folder holding network.onnx), else `optimizer.onnx` beside the model's network.onnx, else
    the sibling folder `<name>_optimizer` of a folder `<name>_train`; None when there is none (one that is
    given is returned as it is: solver.graph.onnx_loader.optimizer_path checks it is there)."""
    if given is not None:
        return model_files(given)[0]
    folder = Path(os.path.abspath(model_files(model)[0].parent))    # `.` or `..` have a name only so
    own = folder / OPTIMIZER
    if own.is_file():
        return own
    if folder.name.endswith(TRAIN_SUFFIX):
        sibling = folder.parent / (folder.name[: -len(TRAIN_SUFFIX)] + OPTIMIZER_SUFFIX) / NETWORK
        if sibling.is_file():
            return sibling
    return None


def cache_root() -> Path:
    """$CKPT_CACHE_DIR, else ~/.cache/ckpt: lowered graphs under lowered/, generated examples under examples/."""
    env = os.environ.get("CKPT_CACHE_DIR")
    return Path(env) if env else Path.home() / ".cache" / "ckpt"


def lowered_cache_dir() -> Path:
    return cache_root() / "lowered"


def examples_cache_dir() -> Path:
    return cache_root() / "examples"


def shared_models() -> Path:
    """$CKPT_SHARED_MODELS, else ../shared/models beside the repository (where CI puts the copy)."""
    env = os.environ.get("CKPT_SHARED_MODELS")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "models"


def shared_folder() -> Path:
    """The folder holding the shared models: where CI also puts a Deeploy checkout (deeploy-v<version>)."""
    return shared_models().parent
