"""A split step of Deeploy's training branch, replayed: its two networks generated, run by the branch's harness on
this host and on gvsoc, and held to the goldens and to the graph order's code.

A step of the branch (inputs.npz positional, an optimizer graph beside the train graph) is deployed as the branch
deploys it (deeploy_bridge.split_step): the train graph with the schedule replayed as the TrainingNetwork, the
optimizer graph as the OptimizerNetwork over the train network's buffers. Both are built with the branch's
harness, deeploytraintest.c, and the run inputs.npz describes (coderun.train_harness: its mini-batches,
accumulations and updates), and run:
- on this host (coderun.train_run): the harness's own `Errors: N out of M` (the losses against outputs.npz, its
  tolerance); every loss and every final weight against outputs.npz by the same rule (the check `ckpt verify`
  makes); and the losses, the first mini-batch's outputs and the final state of what persists (weights,
  accumulators: `computed`) against the graph order's code of the same flow, bit for bit (what a schedule can break
  shows there even inside the tolerance);
- on gvsoc (gvsoc.train_run): the harness's Errors, the train network's cycles per mini-batch and the optimizer's
  per update, as its `[BENCH]` lines print them, and each layer's (probed, per run of its network).
The graph order's outputs are computed once per graph, optimizer, data, setup and toolchain, and cached.
"""
from __future__ import annotations

import hashlib
import io
import json
import tempfile
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import onnx

from ckpt import deeploy_bridge
from ckpt.cached import read_entry, write_entry
from ckpt.coderun.build import find_toolchain, runtime_fingerprint
from ckpt.coderun.run import NotRun
from ckpt.coderun.sources import KernelSources, NoSources
from ckpt.coderun.train_harness import TrainingRun
from ckpt.coderun.train_run import TrainCodeRun, run_training
from ckpt.deeploy_bridge.deploy_cache import cached_deploy
from ckpt.deeploy_bridge.errors import BridgeError
from ckpt.deeploy_bridge.records import MemoryFigures
from ckpt.deeploy_bridge.setup import DeeploySetup, WeightUpdate
from ckpt.deeploy_bridge.split_step import TrainRole, optimizer_role
from ckpt.deeploy_bridge.versions import bridge_fingerprint, deeploy_fingerprint
from ckpt.files import atomic_write
from ckpt.gvsoc.kit import GvsocKit, NoKit
from ckpt.gvsoc.probes import c_name
from ckpt.gvsoc.run import NotSimulated
from ckpt.gvsoc.train_run import simulate_training
from ckpt.hostexec.compare import TRAINING_HARNESS_TOLERANCE, bit_identical, compare_outputs
from ckpt.paths import cache_root
from ckpt.replay.gvsoc import not_simulated
from ckpt.replay.report import CodeRunRecord, CodeStatus, GvsocRecord, HarnessCount, SimStatus
from ckpt.replay.verification import StepData, harness_layout, step_data
from ckpt.solver.graph.onnx_loader import data_inputs, read_model
from ckpt.targets import simulation_gap

REFERENCE_FORMAT = 1
HARNESS_RULE = f"the losses against outputs.npz, |diff| > {TRAINING_HARNESS_TOLERANCE:g}"


@dataclass(frozen=True)
class SplitStep:
    """A split step as the replay runs it, on the names of the lowered train graph (input_i / output_i)."""

    data: StepData                      # feeds, goldens, layout and the optimizer graph (renamed to the train's)
    run: TrainingRun                    # the harness's run
    io: dict[str, str]                  # the train graph's original I/O names -> Deeploy's
    optimizer: onnx.ModelProto          # the optimizer graph as exported (its own names)
    on_chip: tuple[str, ...]            # the train network's I/O the harness touches at every mini-batch
    elements: dict[str, int]            # each train-network input's elements (a bias Deeploy repeats: more)

    @property
    def persistent_io(self) -> frozenset[str]:
        """The train network's I/O that persists across mini-batches: what the optimizer graph reads."""
        return frozenset(self.io[i.name] for i in self.optimizer.graph.input if i.name in self.io)

    def optimizer_layers(self) -> dict[str, tuple[str, ...]]:
        """Each train-network buffer (Deeploy's name) -> the op types of the optimizer network's layers that read or
        write it (`optimizer_layers`)."""
        return optimizer_layers(self.optimizer, self.io)

    @property
    def weights(self) -> list[str]:
        """The train network's weight inputs, in order."""
        return [f"input_{i}" for i in range(self.run.n_data, self.run.grad_start)]


def optimizer_layers(optimizer: onnx.ModelProto, io: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Each train-network buffer (Deeploy's name; `io`: the train graph's I/O names -> Deeploy's) -> the op types of
    the `optimizer` graph's layers that read or write it, one per transfer: one per layer that reads it (its inputs
    by name), and one more for an update, which writes back the weight its layer reads first (off chip, a second
    transfer of it)."""
    found: dict[str, tuple[str, ...]] = {}
    outputs = {o.name for o in optimizer.graph.output}
    for node in optimizer.graph.node:
        touched = [io[name] for name in dict.fromkeys(node.input) if name in io]
        if node.input and node.input[0] in io and outputs & set(node.output):
            touched.append(io[node.input[0]])
        for name in touched:
            found[name] = (*found.get(name, ()), node.op_type)
    return found


def split_step(folder: Path, original: onnx.ModelProto, io_names: dict[str, str], optimizer: str | Path | None,
               lowered: onnx.ModelProto | None = None) -> SplitStep | None:
    """The split step of the model in `folder` on its `lowered` graph, or None when its data is not positional. A
    weight Deeploy's lowering repeats (a bias it broadcasts) starts repeated, as the branch's harness writes it."""
    data = step_data(folder, original, io_names, optimizer)
    if data.layout is None or data.optimizer is None or data.optimizer_path is None:
        return None
    elements = {i.name: int(np.prod([d.dim_value for d in i.type.tensor_type.shape.dim]))
                for i in (lowered.graph.input if lowered is not None else [])}
    data = replace(data, feeds={name: _repeated(value, elements.get(name)) for name, value in data.feeds.items()})
    names = [io_names.get(i.name, i.name) for i in data_inputs(original.graph)]
    n_data, grad_start = harness_layout(data.layout, names)
    layout = data.layout
    losses = tuple(float(v) for v in np.asarray((data.golden or {}).get("loss", [])).reshape(-1))
    run = TrainingRun(layout.n_steps, layout.n_accum,
                      tuple(tuple(batch[name] for name in names[:n_data]) for batch in layout.batches),
                      grad_start, len(layout.buffers), losses, TRAINING_HARNESS_TOLERANCE)
    outputs = [io_names.get(o.name, o.name) for o in original.graph.output]
    on_chip = (*names[:n_data], *([names[-1]] if layout.reset else []), outputs[0])
    return SplitStep(data, run, dict(io_names), read_model(data.optimizer_path), on_chip, elements)


def _repeated(value: np.ndarray, elements: int | None) -> np.ndarray:
    """`value` repeated to `elements` where the lowered graph holds it so (a whole number of times), else as is."""
    value = np.asarray(value)
    if elements is None or value.size == elements or not value.size or elements % value.size:
        return value
    return np.tile(value.reshape(-1), elements // value.size)


def deploy_split(base: onnx.ModelProto, order, step: SplitStep, target: str, tiled: bool, setup: DeeploySetup,
                 code_dir: Path) -> tuple[MemoryFigures, MemoryFigures]:
    """Both networks' code in `code_dir` (the train graph in `order`: a node list or a replay scheduler): the
    optimizer first, whose borrowed arenas (DeeploySetup.optimizer_borrows) the train network's must hold (its
    deployment, the same at every point, is kept: deeploy_bridge.deploy_cache). Returns (train, optimizer)
    figures."""
    setup_of_optimizer = replace(setup, weights=WeightUpdate.OUT_OF_PLACE)
    role = replace(optimizer_role(step.io, step.optimizer, step.elements), borrowed=setup.optimizer_borrows)
    optimizer = cached_deploy(step.optimizer, target, tiled, setup_of_optimizer, role, code_dir,
                              lambda: deeploy_bridge.deploy(step.optimizer, None, target, tiled=tiled,
                                                            setup=setup_of_optimizer, code_dir=code_dir, role=role,
                                                            already_lowered=False))
    floor = tuple((level, optimizer.arena[level]) for level in role.borrowed if optimizer.arena.get(level)) \
        if tiled else ()
    train = deeploy_bridge.deploy(base, order, target, tiled=tiled, setup=setup, code_dir=code_dir,
                                  role=TrainRole(step.on_chip, floor))
    return train, optimizer


# --------------------------------------------------------------------------- on this host


def _outcome(run: TrainCodeRun) -> dict[str, np.ndarray]:
    """What a run left, as one set of named arrays: the losses, the first mini-batch's outputs, the final inputs."""
    found = {"loss": run.losses}
    found.update({f"batch0/{k}": v for k, v in run.batches[0].items()})
    found.update({f"state/{k}": v for k, v in run.state.items()})
    return found


def computed(outcome: Mapping[str, np.ndarray], persistent: frozenset[str]) -> dict[str, np.ndarray]:
    """What a run computed, of what it left (`_outcome`): the losses, the first mini-batch's outputs and the final
    state of the inputs that persist across mini-batches (`persistent`: the weights the updates left, the
    accumulators). The other inputs (data, labels, the reset flag) the harness writes again before each mini-batch;
    after their last read their bytes are whatever the arena's later tenants left there (the train network's own
    buffers, the optimizer's where it borrows the arena), which depends on the layout, not on what was computed."""
    return {name: value for name, value in outcome.items()
            if not name.startswith("state/") or name[len("state/"):] in persistent}


def _reference_key(base: onnx.ModelProto, step: SplitStep, target: str, setup: DeeploySetup, tiled: bool,
                   sources: KernelSources) -> str:
    digest = hashlib.sha256()
    for blob in (base.SerializeToString(), step.optimizer.SerializeToString()):
        digest.update(hashlib.sha256(blob).digest())
    toolchain = find_toolchain()
    run = step.run
    digest.update(json.dumps({"format": REFERENCE_FORMAT, "target": target, "setup": setup.as_dict(), "tiled": tiled,
                              "kernels": sources.fingerprint, "runtime": runtime_fingerprint(),
                              "assembly": bridge_fingerprint(), "deeploy": deeploy_fingerprint(),
                              "cc": toolchain.version if toolchain else None, "on_chip": list(step.on_chip),
                              "run": [run.n_steps, run.n_accum, run.grad_start, run.n_grads, list(run.losses),
                                      run.tolerance]}, sort_keys=True).encode())
    for batch in run.batches:
        for value in batch:
            digest.update(np.ascontiguousarray(value).tobytes())
    for name in sorted(step.data.feeds):
        digest.update(name.encode() + np.ascontiguousarray(step.data.feeds[name]).tobytes())
    return digest.hexdigest()


def graph_order_outcome(base: onnx.ModelProto, step: SplitStep, target: str, setup: DeeploySetup, tiled: bool,
                        sources: KernelSources | NoSources, progress=lambda m: None) -> dict[str, np.ndarray] | NotRun:
    """What the graph order's code (this flow) computes over the run: cached (a checked entry), else made."""
    if isinstance(sources, NoSources):
        return NotRun(sources.reason)
    key = _reference_key(base, step, target, setup, tiled, sources)
    path = cache_root() / "coderun" / "reference" / f"split-{key[:24]}.entry"
    payload = read_entry(path, key)
    if payload is not None:
        try:
            with np.load(io.BytesIO(payload), allow_pickle=False) as stored:
                return {name: stored[name] for name in stored.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile):
            pass
    refused = path.with_suffix(".refused")       # Deeploy's refusal is as much a fact of these inputs as its code
    said = read_entry(refused, key)
    if said is not None:
        return NotRun(said.decode())
    flow = "tiled" if tiled else "non-tiled"
    progress(f"generating and running the graph order's {flow} code once (the reference; cached)")
    with tempfile.TemporaryDirectory(prefix="ckpt_reference_") as scratch:
        code = Path(scratch) / "code"
        try:
            deploy_split(base, [n.name for n in base.graph.node], step, target, tiled, setup, code)
        except BridgeError as err:
            reason = f"Deeploy makes no code for the graph order here: {err}"
            refused.parent.mkdir(parents=True, exist_ok=True)
            write_entry(refused, key, reason.encode())
            return NotRun(reason)
        outcome = run_training(code, step.run, step.data.feeds, sources)
    if isinstance(outcome, NotRun):
        return NotRun(f"the graph order's code: {outcome.reason}", outcome.failed)
    found = _outcome(outcome)
    buffer = io.BytesIO()
    np.savez(buffer, **found)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_entry(path, key, buffer.getvalue())
    return found


def split_code_record(flow: str, outcome: TrainCodeRun | NotRun, step: SplitStep,
                      reference: dict[str, np.ndarray] | NotRun, record_time: bool) -> CodeRunRecord:
    """What one flow's code run found (see the module doc)."""
    if isinstance(outcome, NotRun):
        return CodeRunRecord(flow, CodeStatus.FAILED if outcome.failed else CodeStatus.NOT_RUN, outcome.reason,
                             WeightUpdate.IN_PLACE.value)
    data = step.data
    produced = {"loss": outcome.losses}
    produced.update({data.back.get(w, w): outcome.state[w] for w in step.weights})
    golden = None
    if data.golden is not None:
        wanted = {k: np.asarray(v) for k, v in data.golden.items() if k in produced}
        golden = compare_outputs({k: _copies(np.asarray(v), wanted[k]) for k, v in produced.items() if k in wanted},
                                 wanted, data.feeds, TRAINING_HARNESS_TOLERANCE)
    if isinstance(reference, NotRun):
        graph_order, differing = f"not compared ({reference.reason})", []
    else:
        differing = bit_identical(computed(_outcome(outcome), step.persistent_io),
                                  computed(reference, step.persistent_io))
        graph_order = "differs" if differing else "bit-identical"
    return CodeRunRecord(
        flow=flow, status=CodeStatus.RAN, weights=WeightUpdate.IN_PLACE.value, golden=golden,
        graph_order=graph_order, differing=differing, stats=outcome.stats,
        skipped_kernels=list(outcome.skipped_kernels),
        seconds={k: round(v, 3) for k, v in outcome.seconds.items()} if record_time else None,
        harness=HarnessCount(outcome.errors, outcome.total, HARNESS_RULE))


def _copies(value: np.ndarray, golden: np.ndarray) -> np.ndarray:
    """A final weight as outputs.npz holds it; one the network holds repeated is its first copy, or, where another
    copy differs from it (an update that did not reach every copy), NaN there, which counts as an error."""
    flat = value.reshape(-1)
    if flat.size == golden.size or not golden.size or flat.size % golden.size:
        return flat.reshape(golden.shape) if flat.size == golden.size else value
    copies = flat.reshape(-1, golden.size)
    first = copies[0].copy()
    first[(copies != copies[0]).any(axis=0)] = np.nan
    return first.reshape(golden.shape)


def run_split_code(flow: str, code_dir: Path, base: onnx.ModelProto, step: SplitStep, target: str,
                   setup: DeeploySetup, sources: KernelSources | NoSources, record_time: bool,
                   progress=lambda m: None) -> CodeRunRecord:
    """One flow's two networks built and run by the harness on this host, and held to what they must compute."""
    if isinstance(sources, NoSources):
        return CodeRunRecord(flow, CodeStatus.NOT_RUN, sources.reason, WeightUpdate.IN_PLACE.value)
    progress(f"building the {flow.replace('_', '-')} networks with the training harness and running "
             f"{step.run.n_batches} mini-batch(es) and {step.run.n_steps} update(s) on the host")
    outcome = run_training(code_dir, step.run, step.data.feeds, sources)
    reference = graph_order_outcome(base, step, target, setup, flow == "tiled", sources, progress)
    return split_code_record(flow, outcome, step, reference, record_time)


# --------------------------------------------------------------------------- on gvsoc


def simulate_split(flow: str, code_dir: Path, code_run: CodeRunRecord | None, step: SplitStep, nodes: list[str],
                   sources: KernelSources | NoSources, kit: GvsocKit | NoKit, log: Path, record_time: bool,
                   timeout: float, progress=lambda m: None, target: str = "siracusa", pad: int = 0,
                   layers_needed: bool = True, draws: int = 1) -> GvsocRecord:
    """One flow's split step on gvsoc, or why not; a run longer than `timeout` seconds is taken as hung. `pad`: see
    gvsoc.step.build_step; `layers_needed` False: the step may be built without its per-layer probes where only so
    it fits L2 (gvsoc.run.build_to_fit); `draws`: runs from as many starting states, their median kept
    (gvsoc.draws)."""
    if simulation_gap(target):
        return not_simulated(flow, simulation_gap(target))
    if isinstance(kit, NoKit):
        return not_simulated(flow, kit.reason)
    if isinstance(sources, NoSources):
        return not_simulated(flow, sources.reason)
    if code_run is None or code_run.status is not CodeStatus.RAN:
        why = code_run.reason if code_run is not None else "no generated code"
        return not_simulated(flow, f"the code did not run on this host ({why})")
    progress(f"gvsoc: building the {flow.replace('_', '-')} networks with the training harness for Siracusa and "
             "running its first mini-batch and one update on the model")
    heap = code_run.stats.levels["L2"].peak if code_run.stats and "L2" in code_run.stats.levels else 0
    run = step.run.first_update()             # the host ran every mini-batch; the device's figures are per run
    found = simulate_training(code_dir, run, step.data.feeds, sources, kit, heap, timeout=timeout, pad=pad,
                              layers_needed=layers_needed, draws=draws)
    if found.log is not None:                    # gvsoc ran: its output is kept, even when it printed nothing
        log.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(log, found.log)             # kept beside the report, a failed run's above all
    if isinstance(found, NotSimulated):
        status = SimStatus.FAILED if found.failed else SimStatus.NOT_SIMULATED
        return GvsocRecord(flow, status, found.reason, on_chip=found.on_chip,
                           log=log.name if found.log is not None else None)
    return GvsocRecord(flow, SimStatus.MEASURED, None, found.errors, found.total, found.train_per_batch,
                       _per_run(found.layers or {}, nodes, run), HARNESS_RULE, found.on_chip, log.name,
                       {k: round(v, 3) for k, v in found.seconds.items()} if record_time else None,
                       optimizer_cycles=found.optimizer_per_update, batches=run.n_batches,
                       updates=run.n_steps, state=dict(found.state), relaxed=found.relaxed,
                       draws=list(found.train_draws), optimizer_draws=list(found.optimizer_draws))


def _per_run(layers: dict[str, int], nodes: list[str], run: TrainingRun) -> dict[str, int]:
    """Each probed layer's cycles per run of its network (the probes sum over the whole run): train layers by
    deployed node name, per mini-batch; the optimizer's under Deeploy's name, per update."""
    by_c_name = {c_name(node): node for node in nodes}
    found = {by_c_name[layer]: round(cycles / run.n_batches) for layer, cycles in layers.items() if layer in by_c_name}
    ordered = {node: found[node] for node in nodes if node in found}
    ordered.update({layer: round(cycles / run.n_steps) for layer, cycles in layers.items() if layer not in by_c_name})
    return ordered
