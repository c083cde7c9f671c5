"""A deployment that reads no schedule, kept on disk: a split step's optimizer network is deployed the same way at
every point of a sweep (its graph, its role over the train network's buffers, the setup), so Deeploy runs for it
once and later points take its code files and figures from the cache.

The key holds everything the deployment depends on: the graph's bytes, target, flow, setup, the role, the
installed Deeploy (its version and files), and this bridge's files with the workarounds in force
(deeploy_bridge.versions: a change in ckpt's own Deeploy passes is a new key). An entry is a sealed folder
(ckpt.cached): the files the deployment wrote and its figures; one that does not check out is deployed again and
stored over.
"""
from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path

import onnx

from ckpt.cached import discard, folder_checks_out, stored_folder
from ckpt.files import atomic_write
from ckpt.paths import cache_root

from .records import MemoryFigures, StageTimings
from .setup import DeeploySetup
from .split_step import OptimizerRole
from .versions import bridge_fingerprint, deeploy_fingerprint

FORMAT = 1
FIGURES = "figures.pickle"
CODE = "code"


def deploy_key(model: onnx.ModelProto, target: str, tiled: bool, setup: DeeploySetup, role: OptimizerRole) -> str:
    blob = json.dumps({"format": FORMAT, "model": hashlib.sha256(model.SerializeToString()).hexdigest(),
                       "target": target, "tiled": tiled, "setup": asdict(setup), "role": role.key(),
                       "deeploy": deeploy_fingerprint(), "bridge": bridge_fingerprint()},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def cached_deploy(model: onnx.ModelProto, target: str, tiled: bool, setup: DeeploySetup, role: OptimizerRole,
                  code_dir: Path, deploy: Callable[[], MemoryFigures]) -> MemoryFigures:
    """`deploy()`'s figures, with its code files in `code_dir`: from the cache when this deployment was kept,
    else by running it (and keeping it)."""
    key = deploy_key(model, target, tiled, setup, role)
    folder = cache_root() / "deployed" / key[:32]
    code_dir = Path(code_dir)
    started = time.perf_counter()
    if folder_checks_out(folder, key):
        figures = pickle.loads((folder / FIGURES).read_bytes())
        code_dir.mkdir(parents=True, exist_ok=True)
        for name in figures.code_files:
            atomic_write(code_dir / name, (folder / CODE / name).read_bytes())
        return replace(figures, code_dir=code_dir, timings=StageTimings(cache_load=time.perf_counter() - started))
    discard(folder)                               # absent, or not what was stored: deployed again
    figures = deploy()
    _keep(folder, key, figures, code_dir)
    return figures


def _keep(folder: Path, key: str, figures: MemoryFigures, code_dir: Path) -> None:
    with stored_folder(folder, key, ".deployed.") as staging:
        for name in figures.code_files:
            (staging / CODE / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(code_dir / name, staging / CODE / name)
        atomic_write(staging / FIGURES, pickle.dumps(replace(figures, code_dir=None, timings=StageTimings())))
