"""`ckpt verify`: run a training step on the host and check it, and check that a replay computes the same thing.

Two questions, answered separately:
- Does the graph compute the golden step? Graph outputs against outputs.npz, counted as Deeploy's device
  harness counts them (hostexec.compare): `Errors: N out of M` over output elements, an element being an error
  when |expected - actual| > 1e-4 or NaN (1e-3 for the training branch's positional step, as its harness
  counts).
- Does the replay compute what the graph computes? The rewired graph runs in the replayed order; every
  execution must read the newest version of each input (reading an older one keeps its buffer alive, which
  is what checkpointing was meant to stop), and every tensor version it writes (clones included) must equal,
  bit for bit, the tensor the graph order writes. Recompute in a pure graph changes no numbers, so any
  difference is a wiring error.

The graph is checked as written: a known export defect is reported with a hint, and fixed only on request
(`fix_bias_gelu`), so a pass never hides a defect that Deeploy would deploy.

Deeploy's training branch splits a step in two graphs and feeds it positionally (hostexec.step_layout): there
the step is the harness's whole run (every mini-batch through the train graph, the optimizer graph after each
accumulation), compared with outputs.npz by name (`loss` per mini-batch, the weights after the last update);
golden tensors the step does not write (the BatchNorm running statistics the graph holds as constants) are
named and left out of the count. The replayed order is held to the graph order bit for bit on the first
mini-batch, accumulation buffers included, and runs the whole step for the golden comparison.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.sources import is_lowered
from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label
from ckpt.errors import CkptError
from ckpt.hostexec.compare import TRAINING_HARNESS_TOLERANCE, VerifyResult, bit_identical, compare_outputs
from ckpt.hostexec.executor import HostExecutor, OrderError, feeds_from_npz, golden_from_npz, read_npz
from ckpt.hostexec.graph_fixes import rewire_bias_gelu_grad
from ckpt.hostexec.step_layout import StepLayout, check_golden, is_positional, positional_layout
from ckpt.hostexec.training_step import StepOutcome, run_step
from ckpt.paths import NETWORK, OPTIMIZER, OPTIMIZER_SUFFIX, TRAIN_SUFFIX, model_files
from ckpt.replay.onnx_graph import apply_to_model, view_of_model
from ckpt.replay.plan import ReplayPlan
from ckpt.replay.report import CheckStatus, ScheduleCheck, VerificationSection, few
from ckpt.replay.target_hint import plan_with_hint
from ckpt.schedule_file import Schedule, clone_of
from ckpt.solver.graph.onnx_loader import data_inputs, model_path, optimizer_path, read_model
from ckpt.solver.graph.step_pair import UPDATED
from ckpt.targets import uses_deeploy


@dataclass
class VerifyReport:
    """A host check: what it found (the record report.json keeps) and what it ran on and computed."""

    model: str
    target: str
    nodes: int
    findings: VerificationSection
    seconds: float = 0.0
    outputs: dict[str, np.ndarray] = field(default_factory=dict)   # what the host computed (run-graph names)
    data: StepData | None = None                                    # the feeds and goldens it ran on

    @property
    def ok(self) -> bool:
        return self.findings.ok

    def lines(self) -> list[str]:
        found = self.findings
        fixed = found.fixed_bias_gelu
        which = "graph as written" if not fixed else f"with --fix-bias-gelu ({len(fixed)} nodes rewired)"
        order = "replayed order" if found.schedule else "graph order"
        lines = [f"verify {self.model} (target {self.target}, {self.nodes} nodes, {which}, {order})"]
        if self.data is not None and self.data.layout is not None:
            lines.append(self.data.step_line())
        if found.golden is not None:
            lines.extend(found.golden.format().splitlines())
        else:
            lines.append("no outputs.npz: golden comparison skipped")
        if found.not_compared:
            lines.append(f"not compared: {len(found.not_compared)} golden tensor(s) the step does not write ("
                         + few(found.not_compared) + ")")
        if found.no_golden:
            lines.append(f"not compared: {len(found.no_golden)} tensor(s) the step writes that outputs.npz does not "
                         "hold (" + few(found.no_golden) + ")")
        if found.hint:
            lines.append(found.hint)
        if found.schedule is not None:
            lines.append(found.schedule.line())
        return lines


def verification_section(report: VerifyReport | None, reason: str | None, record_time: bool = False
                         ) -> VerificationSection:
    """report.json's verification: the host check's findings, or why it was skipped."""
    if report is None:
        return VerificationSection(status=CheckStatus.SKIPPED, reason=reason)
    return replace(report.findings, seconds=round(report.seconds, 3) if record_time else None)


# --------------------------------------------------------------------------- preparing what runs


def host_ready(model: onnx.ModelProto) -> onnx.ModelProto:
    """A Deeploy-lowered graph with its float constants back in float32; any other model as it is.

    The bridge's export keeps float constants as float64 (Deeploy's in-memory dtype) though Deeploy binds them
    as float32_t; they came from float32, so casting back is exact and gives the numbers the device uses.
    """
    if not is_lowered(model) or not any(t.data_type == onnx.TensorProto.DOUBLE for t in model.graph.initializer):
        return model
    ready = onnx.ModelProto()
    ready.CopyFrom(model)
    for init in ready.graph.initializer:
        if init.data_type == onnx.TensorProto.DOUBLE:
            init.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float32), init.name))
    return ready


def bias_gelu_hint(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str], str | None]:
    """The fixed model, the nodes the fix rewires, and the one-line hint to print when not applying it."""
    fixed, rewired = rewire_bias_gelu_grad(model)
    if not rewired:
        return model, [], None
    hint = (f"hint: {len(rewired)} GeluGrad node(s) ({', '.join(rewired)}) read the pre-bias tensor, a known "
            "export defect (ORT's BiasGelu split back into Add + Gelu); `ckpt verify --fix-bias-gelu` rewires "
            "them to the Gelu's input before comparing")
    return fixed, rewired, hint


@dataclass
class StepData:
    """Feeds and goldens for a model folder, keyed by the names of the graph that runs; for the training branch's
    layout, the mini-batches and the optimizer graph the step runs with."""

    feeds: dict[str, np.ndarray]
    golden: dict[str, np.ndarray] | None
    back: dict[str, str]                        # run-graph output name -> original name, for messages
    layout: StepLayout | None = None            # positional step data: the harness's run (None: one step)
    optimizer: onnx.ModelProto | None = None    # the split step's optimizer graph
    optimizer_path: Path | None = None

    def step_line(self) -> str:
        layout = self.layout
        updates = f"{layout.n_steps} update(s) by the optimizer graph {self.optimizer_path}" \
            if self.optimizer is not None else "no optimizer graph (gradients only)"
        return (f"step: {layout.n_batches} mini-batch(es), {layout.n_accum} accumulated per update, {updates}; "
                "inputs.npz mapped by position as Deeploy's training harness maps it")


def step_data(model_dir: Path, original: onnx.ModelProto, io_names: dict[str, str] | None,
              optimizer: str | Path | None = None) -> StepData:
    """inputs.npz / outputs.npz of `model_dir`, renamed to the run graph's I/O (Deeploy's input_i/output_i); in
    the training branch's positional layout, mapped as its harness maps them, with the optimizer graph
    (`optimizer`, else found beside the model: paths.optimizer_graph)."""
    _, inputs, outputs = model_files(model_dir)
    if not inputs.is_file():
        raise CkptError(f"no inputs.npz in '{model_dir}'", "put the step's inputs next to network.onnx")
    io = io_names or {}
    try:
        arrays = read_npz(inputs)
        names = [i.name for i in data_inputs(original.graph)]
        if is_positional(list(arrays), names):
            return _positional_data(model_dir, original, arrays, outputs, optimizer, io)
        feeds = {io.get(k, k): v for k, v in feeds_from_npz(original, inputs).items()}
        golden = {io.get(k, k): v for k, v in golden_from_npz(original, outputs).items()} \
            if outputs.is_file() else None
    except ValueError as exc:
        raise CkptError(f"npz files in '{model_dir}' do not fit the model ({exc})",
                        "regenerate inputs.npz/outputs.npz for this network.onnx") from None
    return StepData(feeds, golden, {v: k for k, v in io.items()})


SPLIT_STEP_TARGETS = ("siracusa", "gap9")   # Siracusa: the branch's own harness and mappings; GAP9: PULPOpen's
                                             # training kernels lent by ckpt's bridge (deeploy_bridge.lent_kernels),
                                             # the step run on this host by ckpt's runtime


def check_split_step(model: str | Path, optimizer: str | Path | None, target: str = "siracusa") -> StepData | None:
    """Before any work, for a Deeploy target: a step in the training branch's positional layout needs a target
    that branch runs such a step on, that branch's Deeploy (its harness runs it), its optimizer graph, and its
    inputs in the order the harness reads them (see replay.split_run); refused in one line otherwise. Returns the
    step's data (None when it is not positional)."""
    folder = model_path(model).parent
    if not model_files(folder)[1].is_file():
        return None
    original = read_model(model)
    names = [i.name for i in data_inputs(original.graph)]
    if not is_positional(list(read_npz(model_files(folder)[1])), names):
        return None
    if target not in SPLIT_STEP_TARGETS:
        raise CkptError(f"the step data is positional (a split step, as Deeploy's training branch exports it), "
                        f"which runs on {', '.join(SPLIT_STEP_TARGETS)} only, not {target}",
                        f"use --target {SPLIT_STEP_TARGETS[0]}, or check the step with --target none")
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        raise CkptError(f"the step data is positional (Deeploy's training branch), and the installed Deeploy is "
                        f"{deeploy_label()}: its code needs the branch's mappings and harness",
                        "install the training branch (pip install ../shared/deeploy-train, or a checkout of "
                        "pull request 169), or check the step with --target none")
    data = step_data(folder, original, None, optimizer)
    if data.optimizer is None:
        raise CkptError(f"the split step in '{folder}' has no optimizer graph: the harness runs both networks",
                        f"put it in {folder.name.replace('_train', '_optimizer')}/network.onnx beside the model, "
                        "or name it with --optimizer")
    harness_layout(data.layout, [i.name for i in data_inputs(original.graph)])
    return data


def harness_layout(layout: StepLayout, inputs: list[str]) -> tuple[int, int]:
    """(data inputs, index of the first gradient buffer) of a positional step, checked against the order the
    training harness reads the network's inputs in: the data, the weights, the gradient buffers, the reset flag
    last. CkptError naming the first input out of place."""
    data = [name for name in inputs if name in layout.batches[0]]
    if inputs[:len(data)] != data:
        raise CkptError(f"the harness copies each mini-batch into the network's first inputs; the data input "
                        f"'{next(d for d, n in zip(data, inputs) if d != n)}' is not among them",
                        "export the train graph with its data inputs first")
    buffers = list(layout.buffers)
    if not buffers:
        return len(data), len(inputs) - 1
    start = inputs.index(buffers[0])
    if inputs[start:start + len(buffers)] != buffers or start + len(buffers) != len(inputs) - 1 \
            or layout.reset != inputs[-1]:
        raise CkptError("the harness reads the gradient buffers as the inputs after the weights and the reset "
                        "flag as the last one; this train graph's inputs are in another order",
                        "export the train graph with the branch's exporter (Onnx4Deeploy)")
    return len(data), start


def check_step_data(model: str | Path) -> None:
    """Refuse, before any work, step data beside `model` that does not fit its graph (arrays missing, of another
    shape or element type, labels outside the classes); nothing when there is no inputs.npz."""
    folder = model_path(model).parent
    if model_files(folder)[1].is_file():
        step_data(folder, read_model(model), None)


NO_OPTIMIZER = ("is a split step whose optimizer graph is absent: outputs.npz holds the weights after its update, "
                "which the train graph alone does not compute")


def no_optimizer_way_out(model: str | Path, also: str = "", option: bool = True) -> str:
    """Where the optimizer graph of `model` is found (and --optimizer, where the command takes it)."""
    folder = model_path(model).parent
    sibling = f"{folder.name[:-len(TRAIN_SUFFIX)]}{OPTIMIZER_SUFFIX}/{NETWORK}" \
        if folder.name.endswith(TRAIN_SUFFIX) else None
    where = f"put it at {folder.parent / sibling}" if sibling else f"put it at {folder / OPTIMIZER}"
    return where + (" or pass --optimizer GRAPH" if option else "") + also


def check_complete_step(model: str | Path, optimizer: str | Path | None, also: str = "", option: bool = True
                        ) -> None:
    """Refuse, before any work, a host check of a split step (positional step data with goldens) whose optimizer
    graph is absent: its goldens are the updated weights, which the train graph alone never computes, so a
    comparison would count weights that were never updated (and pass where the update is small)."""
    if lacks_optimizer(model, optimizer):
        raise CkptError(f"'{model_path(model).parent}' {NO_OPTIMIZER}", no_optimizer_way_out(model, also, option))


def lacks_optimizer(model: str | Path, optimizer: str | Path | None) -> bool:
    """Whether `model` is a split step (positional step data with goldens) whose optimizer graph is not found."""
    folder = model_path(model).parent
    _, inputs, outputs = model_files(folder)
    if not inputs.is_file() or not outputs.is_file() or optimizer_path(folder, optimizer) is not None:
        return False
    names = [i.name for i in data_inputs(read_model(model).graph)]
    try:
        keys = list(read_npz(inputs))
    except ValueError:
        return False                # step data that is no npz is refused where it is read (step_data)
    return is_positional(keys, names)


def missing_optimizer_note(model: str | Path, optimizer: str | Path | None, what: str) -> str | None:
    """For solve and inspect, which need the train graph alone: a split step whose optimizer graph is not found
    is said (what it leaves out and where to put the graph), never passed over in silence."""
    if not lacks_optimizer(model, optimizer):
        return None
    return (f"note: '{model_path(model).parent}' {NO_OPTIMIZER}: {what} the train graph alone; "
            f"{no_optimizer_way_out(model)}")


def _positional_data(model_dir: Path, original: onnx.ModelProto, arrays: dict[str, np.ndarray], outputs: Path,
                     optimizer: str | Path | None, io: dict[str, str]) -> StepData:
    """The branch's positional step; on a graph Deeploy lowered (`io`: original I/O name -> Deeploy's), the layout
    and the optimizer graph's inputs renamed to the lowered train graph's."""
    plain = positional_layout(original.graph, arrays, str(model_dir / "inputs.npz"))
    layout = plain.renamed(io)
    golden = read_npz(outputs) if outputs.is_file() else None
    path = optimizer_path(model_dir, optimizer)
    model = read_model(path) if path is not None else None
    if golden is not None:
        held = {t.name for t in original.graph.initializer} | {i.name for i in original.graph.input}
        updated = [] if model is None else [w for w in (o.name.removesuffix(UPDATED) for o in model.graph.output)
                                            if w in held]
        check_golden(original.graph, updated, plain, golden, str(outputs))
    if model is not None and io:
        model = renamed_inputs(model, io)
    return StepData({**layout.base, **layout.feeds(0)}, golden, {v: k for k, v in io.items()}, layout, model, path)


def renamed_inputs(model: onnx.ModelProto, names: dict[str, str]) -> onnx.ModelProto:
    """`model` with its graph inputs renamed (`names`: old -> new), as its nodes read them."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    for info in graph.input:
        info.name = names.get(info.name, info.name)
    for node in graph.node:
        node.input[:] = [names.get(name, name) for name in node.input]
    return out


# --------------------------------------------------------------------------- running and comparing


def compare_golden(outputs: dict[str, np.ndarray], data: StepData) -> VerifyResult | None:
    if data.golden is None:
        return None
    back = lambda d: {data.back.get(k, k): v for k, v in d.items()}  # noqa: E731 - names users know
    return compare_outputs(back(outputs), back(data.golden), back(data.feeds))


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return not bit_identical({"x": a}, {"x": b})


def _base(version: str, known: dict) -> str:
    """The graph tensor a version copies: itself, or `<tensor>` for a clone's `<tensor>__ck<k>`."""
    if version in known:
        return version
    clone = clone_of(version)
    return clone[0] if clone and clone[0] in known else version


def check_replayed(rewired: onnx.ModelProto, order: list[str], feeds: dict[str, np.ndarray],
                   baseline: dict[str, np.ndarray]) -> tuple[ScheduleCheck, dict[str, np.ndarray]]:
    """Run a rewired graph in `order` and hold it to the replay's two promises against `baseline` (every tensor
    of the graph order's run): each execution reads the newest version of each input, and every version equals
    the graph order's tensor bit for bit. Returns the check and the run's graph outputs."""
    executor = HostExecutor(rewired)
    try:
        env = executor.run(feeds, order, return_all=True)
    except OrderError as exc:
        raise CkptError(f"the replayed order does not run on the host: {exc}", "the replay is miswired") from None
    nodes = {n.name: n for n in rewired.graph.node}
    newest: dict[str, str] = {}
    stale, written = [], []
    for name in order:
        node = nodes[name]
        for t in node.input:
            base = _base(t, baseline)
            if t and base in newest and newest[base] != t:
                stale.append(f"{name} reads {t} (newest is {newest[base]})")
        for t in node.output:
            if t:
                newest[_base(t, baseline)] = t
                written.append(t)
    written += executor.updated_inputs      # buffers updated in place (gradient accumulation) are versions too
    differing = [t for t in written if _base(t, baseline) not in baseline
                 or not _same(env[t], baseline[_base(t, baseline)])]
    clones = sum(1 for name in order if any(t and _base(t, baseline) != t for t in nodes[name].output))
    check = ScheduleCheck(len(order), clones, 0, len(written), differing, stale)
    return check, {o: env[o] for o in [*executor.output_names, *executor.updated_inputs]}


def check_schedule(model: onnx.ModelProto, plan: ReplayPlan, feeds: dict[str, np.ndarray],
                   baseline: dict[str, np.ndarray]) -> tuple[ScheduleCheck, dict[str, np.ndarray]]:
    """Apply `plan` to `model` and check the result (see check_replayed)."""
    check, outputs = check_replayed(apply_to_model(model, plan), plan.order, feeds, baseline)
    check.clones_kept, check.clones_pruned = plan.clones_kept, plan.clones_pruned
    return check, outputs


def verify_loaded(model: onnx.ModelProto, data: StepData, plan: ReplayPlan | None = None, *, label: str = "",
                  target: str = "none", hint: str | None = None, fixed: list[str] | None = None,
                  progress=lambda msg: None) -> VerifyReport:
    """Run `model` (ready for the host) in its graph order and, given a plan, in the replayed order; compare."""
    start = time.perf_counter()
    if data.layout is not None and data.optimizer is None and data.golden is not None:
        raise CkptError(f"'{label}' {NO_OPTIMIZER}", "pass --optimizer GRAPH")
    executor = HostExecutor(model)
    progress("running the graph order on the host")
    baseline = executor.run(data.feeds, return_all=plan is not None)
    outputs = {o: baseline[o] for o in [*executor.output_names, *executor.updated_inputs]}
    schedule, baseline_golden = None, None
    step = _run_step(executor, None, data, progress)
    if plan is not None:
        progress(f"running the replayed order ({len(plan.executions)} executions) on the host")
        schedule, replayed = check_schedule(model, plan, data.feeds, baseline)
        baseline_golden, outputs = _compare(outputs, step, data), replayed
        if data.layout is not None:
            step = _run_step(HostExecutor(apply_to_model(model, plan)), plan.order, data, progress)
    produced = {data.back.get(k, k): v for k, v in step.as_outputs().items()} \
        if step is not None and data.golden is not None else {}     # the names outputs.npz uses
    not_compared = sorted(k for k in data.golden if k not in produced) if produced else []
    no_golden = [k for k in produced if k not in data.golden]
    findings = VerificationSection.of(_compare(outputs, step, data), baseline_golden, schedule, hint,
                                      list(fixed or []), not_compared, no_golden)
    return VerifyReport(model=label, target=target, nodes=len(model.graph.node), findings=findings,
                        seconds=time.perf_counter() - start, outputs=outputs, data=data)


def _run_step(executor: HostExecutor, order: list[str] | None, data: StepData, progress) -> StepOutcome | None:
    """The harness's whole run of a positional step (None for a one-step layout)."""
    if data.layout is None:
        return None
    progress(f"running {data.layout.n_batches} mini-batch(es) and the optimizer graph on the host")
    optimizer = HostExecutor(data.optimizer) if data.optimizer is not None else None
    try:
        return run_step(executor, optimizer, data.layout, order)
    except ValueError as exc:
        raise CkptError(f"the optimizer graph does not complete this train graph ({exc})",
                        "pass the optimizer graph exported with it (--optimizer)") from None


def _compare(outputs: dict[str, np.ndarray], step: StepOutcome | None, data: StepData) -> VerifyResult | None:
    """The goldens against one step's outputs, or against what the whole positional run wrote."""
    if step is None:
        return compare_golden(outputs, data)
    if data.golden is None:
        return None
    produced = {data.back.get(k, k): v for k, v in step.as_outputs().items()}     # the names outputs.npz uses
    return compare_outputs(produced, {k: v for k, v in data.golden.items() if k in produced}, data.feeds,
                           TRAINING_HARNESS_TOLERANCE)


def verify_model(model_dir: str | Path, doc: Schedule | None = None, target: str = "none", *,
                 fix_bias_gelu: bool = False, force: bool = False, optimizer: str | Path | None = None,
                 progress=lambda msg: None) -> VerifyReport:
    """Verify MODEL_DIR's step on the host, optionally through a schedule's replay (see the module doc)."""
    start = time.perf_counter()
    original = read_model(model_path(model_dir))    # a missing model is named as given
    check_complete_step(model_dir, optimizer)
    model_dir = model_path(model_dir).parent        # a folder, or the folder of the .onnx named
    io_names = None
    if not uses_deeploy(target):
        model = original
    else:
        progress(f"lowering for {target} (cached after the first time)")
        lowered = deeploy_bridge.lower(model_dir, target)
        model, io_names = host_ready(lowered.model), lowered.io_names
    fixed_model, rewired, hint = bias_gelu_hint(model)
    if fix_bias_gelu:
        model, hint = fixed_model, None
    data = step_data(model_dir, original, io_names, optimizer)
    if doc is None and data.golden is None:
        raise CkptError(f"no outputs.npz in '{model_dir}': nothing to compare against",
                        "add the golden outputs, or pass --schedule to compare the replay with the graph order")
    plan = None
    if doc is not None:
        plan = plan_with_hint(view_of_model(model), list(doc.seq), doc.fingerprint, force, model_dir, target)
    report = verify_loaded(model, data, plan, label=str(model_dir), target=target, hint=hint,
                           fixed=rewired if fix_bias_gelu else [], progress=progress)
    report.seconds = time.perf_counter() - start
    return report


def host_check(folder: Path, original: onnx.ModelProto, base: onnx.ModelProto, io_names: dict[str, str] | None,
               target: str, plan: ReplayPlan, progress=lambda msg: None, optimizer: str | None = None
               ) -> VerifyReport:
    """The replay's host check on the graph it ran on (`base`: Deeploy's lowered graph, or the ONNX as is)."""
    ready = host_ready(base)
    _, _, hint = bias_gelu_hint(ready)
    data = step_data(folder, original, io_names, optimizer)
    return verify_loaded(ready, data, plan, label=str(folder), target=target, hint=hint, progress=progress)
