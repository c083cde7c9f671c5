"""A split step's generated code run on this host by the training branch's own harness (deeploytraintest.c).

The step's two networks (TrainingNetwork, OptimizerNetwork: deeploy_bridge.split_step) are built with the
harness as it is and the data of one run (coderun.train_harness), and run: every mini-batch through the train
network, the optimizer after each accumulation, the losses held to the reference by the harness's own rule. What
comes back is what the harness printed (its `Errors: N out of M`) and what ckpt's host side of it wrote
(runtime/host_train.c): each mini-batch's train-network outputs and every train-network input when the run ended
(the weights the updates left, the accumulated gradients). Nothing is made up: a step that does not build or
run is a `NotRun` saying why.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ckpt.coderun.build import (
    BuildConfig,
    BuildError,
    Sanitizer,
    build_training_step,
    find_toolchain,
    kernel_library,
    training_harness_missing,
)
from ckpt.coderun.dma import oversized_reason
from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.run import SANITIZER_OPTIONS, NotRun, RuntimeStats, _failure, _stats
from ckpt.coderun.sources import KernelSources, NoSources
from ckpt.coderun.train_harness import TrainingRun, write_training_data

ERRORS = re.compile(r"Errors:\s*(\d+)\s+out of\s+(\d+)")
# the host has no weight memory: the harness's data is ordinary initialised data here
HOST_SECTION = ".data"


@dataclass
class TrainCodeRun:
    """What one run of the harness computed on this host."""

    batches: list[dict[str, np.ndarray]]      # each mini-batch's train-network outputs (Deeploy's names)
    state: dict[str, np.ndarray]              # every train-network input when the run ended
    errors: int                               # the harness's own count (its losses against the reference)
    total: int
    stats: RuntimeStats
    log: str                                  # what the harness printed
    skipped_kernels: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def losses(self) -> np.ndarray:
        """The loss of every mini-batch (the train network's first output)."""
        first = next(iter(self.batches[0])) if self.batches else None
        return np.array([b[first].reshape(-1)[0] for b in self.batches], dtype=np.float32)


def run_training(code_dir: Path, run: TrainingRun, start: Mapping[str, np.ndarray],
                 sources: KernelSources | NoSources, *, sanitizer: Sanitizer = Sanitizer.NONE,
                 timeout: float = 600.0) -> TrainCodeRun | NotRun:
    """Build `code_dir`'s two networks with the harness and `run`'s data, run them, and read what they computed;
    `start`: every train-network input's value when the run starts (Deeploy's names)."""
    oversized = oversized_reason(code_dir)
    if oversized:
        return NotRun(oversized, failed=True)
    if isinstance(sources, NoSources):
        return NotRun(sources.reason)
    missing = training_harness_missing(sources)
    if missing:
        return NotRun(missing)
    toolchain = find_toolchain()
    if toolchain is None:
        return NotRun("no C compiler on PATH (gcc or cc, and ar)")
    code_dir = Path(code_dir).resolve()
    manifest = CodeManifest.read(code_dir)
    config = BuildConfig(manifest.cores, manifest.l3_bytes, sanitizer)
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ckpt_coderun_train_") as scratch:
        work = Path(scratch)
        try:
            files = write_training_data(manifest, run, start, sorted((code_dir / "hex").glob("*.hex")),
                                        work / "data", HOST_SECTION)
        except ValueError as exc:
            return NotRun(f"the harness cannot run this code: {exc}")
        try:
            library = kernel_library(sources, toolchain, config)
            exe = build_training_step(code_dir, files.folder, sources, toolchain, config, library, work / "step")
        except BuildError as err:
            return NotRun(str(err), failed=True)
        built = time.perf_counter()
        for path in files.flash_files:
            (work / path.name).symlink_to(path)
        env = {**os.environ, **SANITIZER_OPTIONS, "CKPT_HOST_FILES": ".", "CKPT_TRAIN_OUTPUTS": "outputs.bin",
               "CKPT_TRAIN_STATE": "state.bin", "CKPT_STATS": "stats.json"}
        try:
            done = subprocess.run([str(exe)], cwd=work, env=env, capture_output=True, text=True, errors="replace",
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            return NotRun(f"the training step did not finish in {timeout:g} s", failed=True)
        ran = time.perf_counter()
        found = ERRORS.findall(done.stdout)
        if done.returncode != 0 or not found:
            return NotRun(_failure(done), failed=True)
        stats = json.loads((work / "stats.json").read_text())
        batches = _batches(manifest, (work / "outputs.bin").read_bytes(), stats["steps"])
        state = _state(manifest, (work / "state.bin").read_bytes())
    return TrainCodeRun(batches, state, int(found[-1][0]), int(found[-1][1]), _stats(stats), done.stdout,
                        library.skipped, {"build": built - begin, "run": ran - built})


def _batches(manifest: CodeManifest, raw: bytes, count: int) -> list[dict[str, np.ndarray]]:
    size = sum(p.nbytes for p in manifest.outputs)
    if len(raw) != count * size:
        raise ValueError(f"the harness wrote {len(raw)} bytes of outputs for {count} mini-batches of {size}")
    found, offset = [], 0
    for _ in range(count):
        batch = {}
        for port in manifest.outputs:
            batch[port.name] = np.frombuffer(raw, port.dtype, port.elements, offset).copy()
            offset += port.nbytes
        found.append(batch)
    return found


def _state(manifest: CodeManifest, raw: bytes) -> dict[str, np.ndarray]:
    if len(raw) != sum(p.nbytes for p in manifest.inputs):
        raise ValueError(f"the harness wrote {len(raw)} bytes of state; the inputs hold "
                         f"{sum(p.nbytes for p in manifest.inputs)}")
    state, offset = {}, 0
    for port in manifest.inputs:
        state[port.name] = np.frombuffer(raw, port.dtype, port.elements, offset).copy()
        offset += port.nbytes
    return state
