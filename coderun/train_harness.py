"""What Deeploy's training harness (deeploytraintest.c of its training branch) is compiled with, for one run.

That harness (Platforms/Siracusa/src/deeploytraintest.c at a0e1e531) includes testinputs.h and testoutputs.h,
which the branch's runner writes (testUtils/codeGenerateTraining.py); ckpt writes the same macros and arrays:
- testinputs.h: N_TRAIN_STEPS, N_ACCUM_STEPS, TRAINING_DATA_SIZE (distinct mini-batches, cycled through),
  TRAINING_NUM_DATA_INPUTS, TRAINING_GRAD_BUF_START_IDX, TRAINING_NUM_GRAD_INPUTS, TRAINING_NUM_WEIGHT_INPUTS,
  TRAINING_LEARNING_RATE; `testDataVector[mb][buf]`, the data of each distinct mini-batch, and
  `testInitWeights[w]`, the weights the run starts from (copied in where the network keeps them on chip);
- testoutputs.h: TRAINING_TOLERANCE_ABS, N_LOSS_REFS and `testLossRef`, the loss of each mini-batch.
The harness reads the network's inputs by position: the data first, then the weights, then the gradient buffers,
the reset flag last. Inputs the network keeps off chip are loaded by its Init from files (`<i>.hex`), which are
written here too, with the values the run starts from.
The arrays are pulled in with the assembler's .incbin (the branch writes C literals) into a section of their own,
`section`: on Siracusa the weight memory (.weightmem_sram, where the branch puts its initial weights), so the
harness's data takes no L2 from the step.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ckpt.coderun.manifest import CodeManifest, Port
from ckpt.errors import CkptError
from ckpt.files import atomic_write

HEADERS = ("testinputs.h", "testoutputs.h")


@dataclass(frozen=True)
class TrainingRun:
    """One run of the harness: how many mini-batches and updates, on what data, held to which losses."""

    n_steps: int                                    # optimizer updates
    n_accum: int                                    # mini-batches accumulated per update
    batches: tuple[tuple[np.ndarray, ...], ...]     # per distinct mini-batch, its data inputs in input order
    grad_start: int                                 # the network's input index of the first gradient buffer
    n_grads: int
    losses: tuple[float, ...]                       # the reference loss of each mini-batch (empty: none)
    tolerance: float                                # |diff| above it is an error (TRAINING_TOLERANCE_ABS)
    learning_rate: float = 0.001                    # informational in the harness (SGD's rate is in its graph)

    @property
    def n_data(self) -> int:
        return len(self.batches[0])

    @property
    def n_weights(self) -> int:
        return self.grad_start - self.n_data

    @property
    def n_batches(self) -> int:
        return self.n_steps * self.n_accum

    @property
    def n_network_runs(self) -> int:
        """Runs of either network: what a whole run's time scales with."""
        return self.n_batches + self.n_steps

    def first_update(self) -> TrainingRun:
        """The run cut to its first mini-batch and one update: what the device runs, whose figures (the train
        network's cycles per mini-batch, the optimizer's per update) are per run of each network anyway."""
        return replace(self, n_steps=1, n_accum=1, batches=self.batches[:1], losses=self.losses[:1])


@dataclass(frozen=True)
class HarnessFiles:
    folder: Path                     # testinputs.h, testoutputs.h and the arrays they pull in
    flash_files: tuple[Path, ...]    # every file the networks' Init loads (constants, off-chip inputs)
    nbytes: int                      # the arrays the harness is compiled with


def c_float(value: float) -> str:
    """A C float literal of `value`: a whole number gets its point (`2.0f`; `2f` is not C)."""
    text = f"{value:.10g}"
    return f"{text}f" if any(c in text for c in ".e") else f"{text}.0f"


def _incbin(symbol: str, path: Path, section: str) -> str:
    if '"' in str(path) or "\\" in str(path):
        raise CkptError(f"the folder '{path.parent}' has a quote or backslash in its path",
                        "build in a folder whose path has neither")
    return (f'__asm__(".section {section}.{symbol},\\"aw\\",@progbits\\n.balign 4\\n.global {symbol}\\n'
            f'{symbol}:\\n.incbin \\"{path}\\"\\n.previous");\nextern char {symbol}[];\n')


def _bytes(value: np.ndarray, port: Port, what: str) -> bytes:
    data = np.ascontiguousarray(np.asarray(value).astype(port.dtype)).reshape(-1)
    if data.size != port.elements:
        raise ValueError(f"{what} has {data.size} elements; the code's input {port.name} has {port.elements}")
    return data.tobytes()


def write_training_data(manifest: CodeManifest, run: TrainingRun, start: Mapping[str, np.ndarray],
                        code_files: list[Path], out: Path, section: str) -> HarnessFiles:
    """testinputs.h, testoutputs.h, their arrays and the off-chip inputs' files for `run` of the network
    `manifest` describes, in `out`; `start`: every input's value when the run starts (Deeploy's names);
    `code_files`: the data files the code itself brought (constants). ValueError names what does not fit."""
    inputs = manifest.inputs
    if run.grad_start + run.n_grads + 1 != len(inputs) or run.n_weights < 0:
        raise ValueError(f"the harness reads {run.n_data} data inputs, {run.n_weights} weights, {run.n_grads} "
                         f"gradient buffers and a reset flag; the network has {len(inputs)} inputs")
    out.mkdir(parents=True, exist_ok=True)
    blobs, lines = [], ["/* written by ckpt: the run deeploytraintest.c makes */", "#include <stdint.h>",
                        f"#define N_TRAIN_STEPS {run.n_steps}", f"#define N_ACCUM_STEPS {run.n_accum}",
                        f"#define TRAINING_DATA_SIZE {min(len(run.batches), run.n_batches)}",
                        f"#define TRAINING_NUM_DATA_INPUTS {run.n_data}",
                        f"#define TRAINING_LEARNING_RATE {c_float(run.learning_rate)}"]
    if run.n_grads:
        lines += [f"#define TRAINING_GRAD_BUF_START_IDX {run.grad_start}",
                  f"#define TRAINING_NUM_GRAD_INPUTS {run.n_grads}",
                  f"#define TRAINING_NUM_WEIGHT_INPUTS {run.n_weights}"]

    def blob(symbol: str, data: bytes) -> str:
        path = out / f"{symbol}.bin"
        atomic_write(path, data)
        blobs.append(path)
        return _incbin(symbol, path, section)

    rows = []
    for mb, batch in enumerate(run.batches[:run.n_batches]):
        names = [f"ckpt_mb{mb}_{i}" for i in range(run.n_data)]
        lines += [blob(name, _bytes(value, inputs[i], f"mini-batch {mb}'s data input {i}"))
                  for i, (name, value) in enumerate(zip(names, batch))]
        lines.append(f"void *ckpt_row{mb}[] = {{{', '.join(f'(void *){n}' for n in names)}}};")
        rows.append(f"ckpt_row{mb}")
    lines.append(f"void **testDataVector[{len(rows)}] = {{{', '.join(rows)}}};")
    weights = []
    for w in range(run.n_weights):
        port = inputs[run.n_data + w]
        lines.append(blob(f"ckpt_weight{w}", _bytes(start[port.name], port, f"weight {w}")))
        weights.append(f"ckpt_weight{w}")
    lines.append(f"void *testInitWeights[{max(1, len(weights))}] = "
                 f"{{{', '.join(f'(void *){w}' for w in weights) or '0'}}};")
    atomic_write(out / HEADERS[0], "\n".join(lines) + "\n")
    refs = ", ".join(c_float(v) for v in run.losses) or "0"
    atomic_write(out / HEADERS[1], "\n".join([
        "/* written by ckpt: the losses deeploytraintest.c holds the run to */", "#include <stdint.h>",
        f"#define TRAINING_TOLERANCE_ABS {c_float(run.tolerance)}", f"#define N_LOSS_REFS {len(run.losses)}",
        f"float testLossRef[{max(1, len(run.losses))}] = {{{refs}}};", ""]))
    flash = list(code_files)
    for port in inputs:
        if port.file:
            path = out / port.file
            atomic_write(path, _bytes(start[port.name], port, f"the value input {port.name} starts from"))
            flash.append(path)
    names = [p.name for p in flash]
    if len(set(names)) != len(names):
        raise ValueError(f"two files the code loads have one name: {sorted(n for n in names if names.count(n) > 1)[0]}")
    return HarnessFiles(out, tuple(flash), sum(p.stat().st_size for p in blobs))
