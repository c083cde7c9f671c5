"""Run the training step Deeploy generated, on this host, and return what it computed.

`run_code` builds the code folder (build.py) and runs it with ckpt's harness (runtime/host_main.c) on the
given inputs for one or more steps. The outcome is a `CodeRun` (the outputs of every step, and what the code
allocated and moved), or a `NotRun`: `failed` when the code itself did not build or run (a fault of the code:
an L3 access outside its allocations, a DMA past a buffer, a sanitizer report, a crash, a hang), otherwise the
reason this host cannot run it (no kernel sources, no C compiler). Nothing is ever made up.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ckpt.coderun.build import BuildConfig, BuildError, Sanitizer, build_step, find_toolchain, kernel_library
from ckpt.coderun.dma import oversized_reason
from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.sources import KernelSources, NoSources
from ckpt.files import atomic_write

FAULT_PREFIX = "ckpt-host: fault: "
SANITIZER_OPTIONS = {"ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0",
                     "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
                     "TSAN_OPTIONS": "halt_on_error=1"}


@dataclass(frozen=True)
class LevelUse:
    """One memory level as the running code used it, bytes."""

    peak: int          # the most allocated at once
    end: int           # still allocated when the run ended
    allocated: int     # all allocations together


@dataclass(frozen=True)
class RuntimeStats:
    levels: dict[str, LevelUse]
    forks: int
    dma_transfers: int
    dma_bytes: int
    ram_copies: int
    ram_bytes: int


@dataclass
class CodeRun:
    """The outputs of each step (by Deeploy's output names) and what the code did."""

    steps: list[dict[str, np.ndarray]]
    stats: RuntimeStats
    skipped_kernels: tuple[str, ...] = ()
    seconds: dict[str, float] = field(default_factory=dict)    # build, run

    @property
    def outputs(self) -> dict[str, np.ndarray]:
        """The last step's outputs."""
        return self.steps[-1]


@dataclass(frozen=True)
class NotRun:
    reason: str
    failed: bool = False       # True: the code's fault (it did not build or run); False: this host cannot run it


def run_code(code_dir: Path, feeds: Mapping[str, np.ndarray], sources: KernelSources | NoSources, *,
             steps: int = 1, sanitizer: Sanitizer = Sanitizer.NONE, timeout: float = 600.0) -> CodeRun | NotRun:
    """Build `code_dir` and run `steps` training steps on `feeds` (keyed by input_<i>); see the module doc."""
    oversized = oversized_reason(code_dir)
    if oversized:
        return NotRun(oversized, failed=True)
    if isinstance(sources, NoSources):
        return NotRun(sources.reason)
    toolchain = find_toolchain()
    if toolchain is None:
        return NotRun("no C compiler on PATH (gcc or cc, and ar)")
    code_dir = Path(code_dir).resolve()
    manifest = CodeManifest.read(code_dir)
    config = BuildConfig(manifest.cores, manifest.l3_bytes, sanitizer)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ckpt_coderun_") as scratch:
        work = Path(scratch)
        try:
            library = kernel_library(sources, toolchain, config)
            exe = build_step(code_dir, sources, toolchain, config, library, work / "step")
        except BuildError as err:
            return NotRun(str(err), failed=True)
        built = time.perf_counter()
        _link_files(code_dir / "hex", work)
        _write_inputs(manifest, feeds, work)
        # every file the code loads sits in its working folder: no list of folders to parse, whatever the paths hold
        env = {**os.environ, **SANITIZER_OPTIONS, "CKPT_HOST_FILES": "."}
        try:
            done = subprocess.run([str(exe), str(work / "outputs.bin"), str(work / "stats.json"), str(steps)],
                                  cwd=work, env=env, capture_output=True, text=True, errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired:
            return NotRun(f"the step did not finish in {timeout:g} s", failed=True)
        ran = time.perf_counter()
        if done.returncode != 0:
            return NotRun(_failure(done), failed=True)
        stats = json.loads((work / "stats.json").read_text())
        outputs = _read_outputs(manifest, stats, (work / "outputs.bin").read_bytes(), steps)
    return CodeRun(outputs, _stats(stats), library.skipped, {"build": built - start, "run": ran - built})


def _link_files(folder: Path, work: Path) -> None:
    """The code's data files (hex/: the constants InitNetwork loads), linked into the run's working folder."""
    for path in sorted(folder.glob("*.hex")):
        (work / path.name).symlink_to(path)


def _write_inputs(manifest: CodeManifest, feeds: Mapping[str, np.ndarray], work: Path) -> None:
    """input_<i>.bin for the harness, and the file InitNetwork loads for inputs kept in L3."""
    for index, port in enumerate(manifest.inputs):
        if port.name not in feeds:
            raise KeyError(f"no value for the code's input {port.name}")
        data = np.ascontiguousarray(np.asarray(feeds[port.name]).astype(port.dtype)).reshape(-1)
        if data.size != port.elements:
            raise ValueError(f"input {port.name} has {data.size} elements; the code's has {port.elements}")
        atomic_write(work / f"input_{index}.bin", data.tobytes())
        if port.file:
            if (work / port.file).exists():
                raise ValueError(f"input {port.name} is loaded from {port.file}, which a constant's file also is")
            atomic_write(work / port.file, data.tobytes())


def _read_outputs(manifest: CodeManifest, stats: dict, raw: bytes, steps: int) -> list[dict[str, np.ndarray]]:
    sizes = [p.nbytes for p in manifest.outputs]
    if stats["output_bytes"] != sizes or len(raw) != steps * sum(sizes):
        raise ValueError(f"the harness wrote outputs of {stats['output_bytes']} bytes; the manifest says {sizes}")
    found, offset = [], 0
    for _ in range(steps):
        step = {}
        for port in manifest.outputs:
            step[port.name] = np.frombuffer(raw, port.dtype, port.elements, offset).copy()
            offset += port.nbytes
        found.append(step)
    return found


def _stats(doc: dict) -> RuntimeStats:
    return RuntimeStats({name: LevelUse(**use) for name, use in doc["levels"].items()}, doc["forks"],
                        doc["dma_transfers"], doc["dma_bytes"], doc["ram_copies"], doc["ram_bytes"])


def _failure(done: subprocess.CompletedProcess) -> str:
    """One line saying how the step failed: ckpt's fault line, a sanitizer's summary, or the signal."""
    lines = done.stderr.splitlines()
    for line in lines:
        if line.startswith(FAULT_PREFIX):
            return "the code faulted: " + line[len(FAULT_PREFIX):]
    for marker in ("SUMMARY:", "runtime error:", "WARNING: ThreadSanitizer:", "ERROR: AddressSanitizer:"):
        for line in lines:
            if marker in line:
                return "sanitizer: " + line.strip()
    if done.returncode < 0:
        return f"the step was killed by {signal.Signals(-done.returncode).name}"
    return f"the step exited with status {done.returncode}" + (f": {lines[-1].strip()}" if lines else "")
