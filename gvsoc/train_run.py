"""A split step (Deeploy's training branch: TrainingNetwork and OptimizerNetwork) run on gvsoc's Siracusa model by
the branch's own harness, deeploytraintest.c, as that branch's runner runs it.

The harness boots on the fabric controller, runs InitTrainingNetwork and InitOptimizerNetwork on the cluster,
zeroes the accumulators, copies the initial weights in where they are on chip, then, for every mini-batch, copies
its data in, sets the reset flag, runs the train network (timed: `[BENCH] mb=K train_cycles=N`) and keeps its
loss; after every accumulation it runs the optimizer (timed: `[BENCH] step=S step_train_cycles=N opt_cycles=M`).
It then holds the losses to the reference (|diff| > TRAINING_TOLERANCE_ABS is an error) and prints
`Errors: N out of M`. The step's data (coderun.train_harness) sits in the chip's weight memory, as the branch
places its initial weights, so L2 holds the step alone. ckpt's probes sum each layer's cycles over the run.

What the step needs of L2 is counted before it runs: what the ELF places there (the two networks' code and data,
the harness) and what the networks allocate there at their peak (as the same code measured on the host); where
the networks' code leaves no room, they are compiled for size (gvsoc.run.build_to_fit); a step that cannot fit
either way is not run and says by how much. A finished run is kept in the run cache like any gvsoc run.
"""
from __future__ import annotations

import hashlib
import json
import re
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from ckpt.cached import read_entry, write_entry
from ckpt.coderun.build import training_harness_missing
from ckpt.coderun.manifest import CodeManifest
from ckpt.coderun.sources import KernelSources
from ckpt.coderun.train_harness import TrainingRun, write_training_data
from ckpt.files import atomic_write
from ckpt.gvsoc.diagnosis import ram_overflow
from ckpt.gvsoc.draws import each_draw, median_counts, median_layers, summed_seconds, worst_draw
from ckpt.gvsoc.kernels import device_fingerprint, device_kernels
from ckpt.gvsoc.kit import GvsocKit
from ckpt.gvsoc.open_files import closes_files
from ckpt.gvsoc.probes import layer_cycles
from ckpt.gvsoc.run import (
    _ERRORS,
    L2_CAPACITY,
    NotSimulated,
    OnChipNeed,
    _does_not_fit,
    _environment,
    _runs,
    _simulate,
    build_to_fit,
    failed_reason,
    gvsoc_command,
    hung_reason,
    network_sources,
    runtime_heap,
)
from ckpt.gvsoc.sdk import SdkBuildError, sdk_library
from ckpt.gvsoc.step import LAYOUT, NETWORKS, StepBuildError, build_training_step

RUN_FORMAT = 2          # 2: the state hashes
DEVICE_SECTION = ".weightmem_sram"       # the weight memory of pulp-sdk's Siracusa linker script
_TRAIN = re.compile(r"\[BENCH\] mb=(\d+) train_cycles=(\d+)")
_OPT = re.compile(r"\[BENCH\] step=(\d+) step_train_cycles=(\d+) opt_cycles=(\d+)")
_STATE = re.compile(r"^ckpt-state (\d+) (\d+) ([0-9a-f]{8})\s*$", re.MULTILINE)


@dataclass
class TrainGvsocRun:
    """What the harness printed for one run."""

    errors: int
    total: int
    train_cycles: list[int]                   # the train network, per mini-batch
    optimizer_cycles: list[int]               # the optimizer network, per update
    layers: dict[str, int] | None             # probed cycles per layer, summed over the run (Deeploy's names)
    on_chip: OnChipNeed
    state: dict[str, str]                     # each train-network input when the run ended: "<bytes>:<fnv1a hash>"
    log: str
    seconds: dict[str, float] = field(default_factory=dict)
    cached: bool = False
    relaxed: bool = True                      # linked with ld's relaxation (gvsoc.step.DeviceStep)
    train_draws: list[int] = field(default_factory=list)       # several draws (gvsoc.draws): each one's train
    optimizer_draws: list[int] = field(default_factory=list)   # cycles per mini-batch and optimizer cycles per
                                                               # update; empty: one draw

    @property
    def train_per_batch(self) -> int:
        return round(sum(self.train_cycles) / len(self.train_cycles)) if self.train_cycles else 0

    @property
    def optimizer_per_update(self) -> int:
        return round(sum(self.optimizer_cycles) / len(self.optimizer_cycles)) if self.optimizer_cycles else 0


def simulate_training(code_dir: Path, run: TrainingRun, start: Mapping[str, np.ndarray], sources: KernelSources,
                      kit: GvsocKit, heap_peak: int, *, timeout: float, keep: Path | None = None, pad: int = 0,
                      layers_needed: bool = True, draws: int = 1) -> TrainGvsocRun | NotSimulated:
    """Build `code_dir`'s two networks with the harness and `run`'s data, and run them on gvsoc (see the module
    doc). `heap_peak`: the most the networks keep allocated in L2 at once; `timeout`: seconds before each run is
    taken as hung (gvsoc.run.simulation_timeout of every network run's cycles); `pad`: see
    gvsoc.step.build_step; `layers_needed` False: a step that fits L2 only without its per-layer probes is built
    without them (gvsoc.run.build_to_fit; its `layers` then empty); `draws`: runs from as many starting states
    (gvsoc.draws: the train network's init moves), their median kept (median_training_run); the first that fails is
    the answer."""
    missing = training_harness_missing(sources)
    if missing:
        return NotSimulated(missing)
    code_dir = Path(code_dir).resolve()
    runs = each_draw(code_dir, f"{NETWORKS[0][0]}.c", draws,
                     lambda code, draw: _simulate_draw(code, run, start, sources, kit, heap_peak, timeout,
                                                       keep if draw == 0 else None, pad, draw, layers_needed),
                     NotSimulated)
    return runs[-1] if isinstance(runs[-1], NotSimulated) else median_training_run(runs)


def median_training_run(runs: list[TrainGvsocRun]) -> TrainGvsocRun:
    """One run of several draws of the same split step: per mini-batch and per update the median cycles, each
    layer's median, the worst draw's Errors and log, each draw's figures in `train_draws` and `optimizer_draws`
    (empty for one draw). Draws whose weights end differently keep the first's state with an entry saying so (a
    comparison with another run's state then says they differ)."""
    if len(runs) == 1:
        return runs[0]
    worst = runs[worst_draw(runs)]
    state = dict(runs[0].state)
    if any(found.state != runs[0].state for found in runs):
        state["draws"] = "the draws' weights differ"
    return replace(runs[0], errors=worst.errors, total=worst.total,
                   train_cycles=median_counts([r.train_cycles for r in runs]),
                   optimizer_cycles=median_counts([r.optimizer_cycles for r in runs]),
                   layers=median_layers([r.layers for r in runs]), state=state, log=worst.log,
                   seconds=summed_seconds(runs),
                   cached=all(r.cached for r in runs), relaxed=all(r.relaxed for r in runs),
                   train_draws=[r.train_per_batch for r in runs],
                   optimizer_draws=[r.optimizer_per_update for r in runs])


def _simulate_draw(code_dir: Path, run: TrainingRun, start: Mapping[str, np.ndarray], sources: KernelSources,
                   kit: GvsocKit, heap_peak: int, timeout: float, keep: Path | None, pad: int, draw: int,
                   layers_needed: bool) -> TrainGvsocRun | NotSimulated:
    """One draw of the split step in `code_dir` (already moved to draw `draw`'s starting state), from the run cache
    where it ran before."""
    manifest = CodeManifest.read(code_dir)
    key = _run_key(code_dir, run, start, sources, kit, heap_peak, pad, draw)
    cached = _cached(key)
    if cached is not None and (cached.on_chip.probed or not layers_needed):
        return cached
    networks = [code_dir / f"{stem}.c" for stem, _ in NETWORKS]      # their L3 buffers, in the order made
    overflow = ram_overflow(network_sources(networks))
    if overflow is not None:                 # before minutes of building and simulating a step that cannot run
        return NotSimulated(overflow)
    begin = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ckpt_gvsoc_train_") as scratch:
        work = Path(keep).resolve() if keep is not None else Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        try:
            files = write_training_data(manifest, run, start, sorted((code_dir / "hex").glob("*.hex")),
                                        work / "data", DEVICE_SECTION)
        except ValueError as exc:
            return NotSimulated(f"the harness cannot run this code: {exc}")
        closing = bool(files.flash_files) and closes_files(sources)
        runtime = runtime_heap(files.flash_files, closing)
        try:
            sdk = sdk_library(kit, sources)
            kernels = device_kernels(sources, kit, sdk, manifest.cores)
            step = build_to_fit(
                lambda compact, probed: build_training_step(code_dir, manifest.cores, files.folder,
                                                            bool(files.flash_files), run.n_batches + run.n_steps,
                                                            sources, kit, sdk, kernels, work, pad, compact, probed,
                                                            closing),
                lambda static: OnChipNeed(static, heap_peak, L2_CAPACITY, runtime=runtime, closes_files=closing),
                layers_needed)
        except (SdkBuildError, StepBuildError) as exc:
            return NotSimulated(str(exc), failed=True)
        if isinstance(step, OnChipNeed):
            return NotSimulated(_does_not_fit(step), on_chip=step)
        need = OnChipNeed(step.l2_static_bytes, heap_peak, L2_CAPACITY, compact=step.compact, probed=step.probed,
                          runtime=runtime, closes_files=closing)
        built = time.perf_counter()
        command = [*gvsoc_command(kit, step.elf, work / "gvsoc"),
                   *(f"--flash-property={f}@hyperflash:readfs:files" for f in files.flash_files), "image", "flash",
                   "run"]
        returncode, log, finished = _simulate(command, work, _environment(kit), timeout)
        if keep is not None:
            atomic_write(work / "gvsoc.log", log)
        if not finished:
            return NotSimulated(hung_reason(timeout, log), failed=True, on_chip=need, log=log)
        ran = time.perf_counter()
    errors = _ERRORS.findall(log)
    train = [int(c) for _, c in _TRAIN.findall(log)]
    if not errors or len(train) != run.n_batches:
        return NotSimulated(failed_reason(returncode, log, networks), failed=True, on_chip=need, log=log)
    state = {f"input_{i}": f"{size}:{digest}" for i, size, digest in _STATE.findall(log)}
    found = TrainGvsocRun(int(errors[-1][0]), int(errors[-1][1]), train, [int(m) for *_, m in _OPT.findall(log)],
                          layer_cycles(log, step.layers), need, state, log,
                          {"build": built - begin, "simulate": ran - built}, relaxed=step.relaxed)
    _store(key, found)
    return found


def _run_key(code_dir: Path, run: TrainingRun, start: Mapping[str, np.ndarray], sources: KernelSources,
             kit: GvsocKit, heap_peak: int, pad: int, draw: int = 0) -> str:
    """The run cache's key of one draw: draw 0 (the step as generated) keeps the key runs had before draws."""
    digest = hashlib.sha256(json.dumps({"format": RUN_FORMAT, "kit": kit.identity, "kernels": sources.fingerprint,
                                        "device": device_fingerprint(), "layout": LAYOUT, "pad": pad,
                                        "l2_heap": heap_peak, **({"draw": draw} if draw else {}),
                                        **({"closes_files": True} if closes_files(sources) else {}),
                                        "run": [run.n_steps, run.n_accum, run.grad_start, run.n_grads,
                                                list(run.losses), run.tolerance, run.learning_rate]}).encode())
    files = sorted(p for p in code_dir.rglob("*") if p.is_file())
    for path in files:
        digest.update(str(path.relative_to(code_dir)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    for batch in run.batches:
        for value in batch:
            digest.update(np.ascontiguousarray(value).tobytes())
    for name in sorted(start):
        digest.update(name.encode() + np.ascontiguousarray(start[name]).tobytes())
    return "train-" + digest.hexdigest()[:32]


def _cached(key: str) -> TrainGvsocRun | None:
    payload = read_entry(_runs() / f"{key}.entry", key)
    if payload is None:
        return None
    try:
        doc = json.loads(payload)
        return TrainGvsocRun(int(doc["errors"]), int(doc["total"]), list(doc["train"]), list(doc["optimizer"]),
                             doc["layers"], OnChipNeed(**doc["l2"]), dict(doc["state"]), str(doc["log"]),
                             doc["seconds"], cached=True, relaxed=bool(doc.get("relaxed", True)))
    except (ValueError, KeyError, TypeError):
        return None


def _store(key: str, run: TrainGvsocRun) -> None:
    write_entry(_runs() / f"{key}.entry", key, json.dumps(
        {"errors": run.errors, "total": run.total, "train": run.train_cycles, "optimizer": run.optimizer_cycles,
         "layers": run.layers, "l2": asdict(run.on_chip), "state": run.state, "seconds": run.seconds,
         "log": run.log, "relaxed": run.relaxed}, indent=1).encode())
