"""`ckpt replay`: a schedule in; the graph and order Deeploy deploys, its code, and what it costs, out.

One replay plan (replay.plan) is made on the graph the schedule runs on (Deeploy's lowered graph, or the ONNX
as is for target none) and everything else is measured on it:
- ckpt's figures on the rewired graph: the live peak (solver.graph.simulate), the first-fit heap of the non-tiled
  code (solver.memory.heap), and for a Deeploy target the arena ckpt predicts per level (deeploy_bridge.arena);
- Deeploy's figures: one Deeploy run per flow (non-tiled, then tiled with code), each with a ReplayScheduler
  doing the same rewiring on Deeploy's own graph, and checked to have run exactly the planned order;
- the host check (replay.verification): the rewired ONNX in ckpt's numpy executor;
- the generated code of each flow, built with Deeploy's kernels and run on this host (replay.code_run): the
  `Errors: N out of M` the device harness would print, the figure that decides the point;
- the tiled flow's step (and, asked for, the non-tiled one's) built for Siracusa with Deeploy's harness and run on
  gvsoc's model (replay.gvsoc), where gvsoc and a RISC-V compiler are at hand: the device's Errors and cycles,
  per layer too.
The folder holds rewired.onnx, order.json, report.json, code/ (tiled) and code-non-tiled/; same inputs give the
same bytes.
"""
from __future__ import annotations

import hashlib
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import onnx
from onnx import numpy_helper
from onnx_graphsurgeon.logger import G_LOGGER

from ckpt import deeploy_bridge
from ckpt.coderun.run import CodeRun, run_code
from ckpt.coderun.sources import KernelSources, NoSources
from ckpt.deeploy_bridge import workarounds
from ckpt.deeploy_bridge.records import LoweredGraph, MemoryFigures
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, TARGETS, DeeploySetup, Flow, WeightUpdate, deployed_weights
from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.files import write_bytes, write_json
from ckpt.gvsoc.kit import NoKit, find_kit
from ckpt.gvsoc.run import simulation_timeout
from ckpt.hostexec.compare import VerifyResult
from ckpt.hostexec.executor import HostExecutor
from ckpt.paths import INPUTS, model_files
from ckpt.replay.closeness import closeness
from ckpt.replay.code_run import (
    HostStepper,
    code_run_record,
    code_sources,
    feedback_targets,
    graph_order_outputs,
    is_graph_order,
)
from ckpt.replay.folder import (
    CODE,
    CODE_DIRS,
    GVSOC_LOGS,
    ORDER,
    REPORT,
    REWIRED,
    check_replay_folder,
    default_outdir,
    install_code,
    previous_code_files,
    replay_folder,
)
from ckpt.replay.graph_view import GraphView
from ckpt.replay.gvsoc import not_simulated, simulate_flow
from ckpt.replay.onnx_graph import apply_to_model, rewired_scratch, view_of_model
from ckpt.replay.plan import ReplayPlan
from ckpt.replay.predict import (
    OnChipRoom,
    TilerTables,
    chosen_on_chip,
    home_arena_overflow,
    home_layout,
    level_price,
    predicted_split_levels,
    rewired,
    split_home_of,
)
from ckpt.replay.report import (
    BudgetRecord,
    CheckStatus,
    CodeRunRecord,
    CodeStatus,
    FingerprintRecord,
    GvsocRecord,
    LevelMemory,
    MemorySection,
    ModelSection,
    ReplayReport,
    ReplaySection,
    ScheduleSection,
    SimStatus,
    WorkaroundRecord,
)
from ckpt.replay.scheduler import ReplayScheduler
from ckpt.replay.split_run import SplitStep, deploy_split, run_split_code, simulate_split, split_step
from ckpt.replay.target_hint import plan_with_hint
from ckpt.replay.verification import StepData, VerifyReport, host_check, host_ready, verification_section
from ckpt.schedule_file import Schedule, dumps, part_dict, read_schedule
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.in_place import UPDATES_IN_PLACE
from ckpt.solver.graph.onnx_loader import io_names, load_graph, model_path, open_model, read_model
from ckpt.solver.graph.simulate import MemoryTrace, check_in_place, memory_trace, plain_sequence
from ckpt.solver.memory.heap import heap_bytes
from ckpt.solver.memory.layout import Layout
from ckpt.solver.memory.static_arena import arena_layout
from ckpt.solver.park_stage import chip_graph
from ckpt.targets import SPLIT_HOME, simulation_gap, uses_deeploy


@dataclass(frozen=True)
class ReplayOptions:
    target: str | None = None              # None: the target the schedule was solved for
    force: bool = False                    # replay despite another graph's fingerprint (never under 90% match)
    verify: bool = True
    deeploy_root: Path | None = None       # the Deeploy checkout whose kernels and harness the code is built with
    gvsoc: Path | None = None              # gvsoc's install (else $GVSOC_INSTALL, else the shared one)
    simulate: bool = True                  # run the steps on gvsoc where it can be found
    record_time: bool = False              # put wall-clock seconds in report.json (then not reproducible)
    overwrite: bool = False                # write into a non-empty folder ckpt did not write (its files only)
    deeploy: DeeploySetup = DEFAULT_SETUP
    steps: int = 1                         # training steps the generated code runs back to back
    optimizer: str | None = None           # a split step's optimizer graph (None: found beside the model)
    gvsoc_timeout: float | None = None     # seconds a step may run on gvsoc (None: scaled from its cycles)
    simulate_non_tiled: bool = False       # the non-tiled flow on gvsoc too (the tiled flow is what is deployed)
    on_chip_code: int | None = None        # split+: the step's own code and data on chip (measured; None: not counted)
    on_chip_tables: TilerTables | None = None   # split home: the calibration's code's tables per layer, to count the
                                           # tiler's tables on chip in the room and the predicted levels (None: not)
    gvsoc_draws: int = 1                   # each step on gvsoc run from this many starting states, its median kept


@dataclass
class ReplayResult:
    outdir: Path
    plan: ReplayPlan
    report: ReplayReport
    verification: VerifyReport | None      # when the host check ran
    seconds: dict[str, float] = field(default_factory=dict)   # wall time per stage: deeploy, verify, code

    @property
    def ok(self) -> bool:
        return self.report.ok


@dataclass(frozen=True)
class _Rewired:
    """The replay applied to the ONNX graph, and ckpt's figures on it."""

    model: onnx.ModelProto
    graph: TrainGraph
    trace: MemoryTrace                # live bytes at the schedule's home level (its flow's scratch only)
    heap: int
    home: Layout | None               # the tiled flow's home arena ckpt predicts (Deeploy targets)
    arena: Layout                     # the non-tiled flow's arena ckpt predicts
    homes: dict[str, LevelMemory] | None = None   # the split home: both its levels as ckpt predicts them


def schedule_target(doc: Schedule, asked: str | None) -> str:
    """The target a schedule replays on: the one asked for, else the one it was solved for."""
    target = asked or (doc.graph.target if doc.graph else None) or "none"
    if target not in TARGETS:
        raise CkptError(f"unknown target '{target}'", f"use one of {', '.join(TARGETS)}")
    return target


def replay_schedule(schedule: str | Path, model: str | Path, outdir: str | Path | None = None,
                    options: ReplayOptions = ReplayOptions(), progress=lambda msg: None,
                    held: Schedule | None = None) -> ReplayResult:
    """Replay `schedule` on `model` for the target; write and return the report (see the module doc). `held`: the
    schedule the file holds, when the caller has it (it wrote the file): the file is then not read back."""
    schedule = Path(schedule)
    doc = held if held is not None else read_schedule(schedule)
    target = schedule_target(doc, options.target)
    outdir = Path(outdir) if outdir is not None else default_outdir(schedule)
    check_replay_folder(outdir, options.overwrite)
    original = read_model(model)
    sources = code_sources(options.deeploy_root) if options.verify and uses_deeploy(target) else None
    lowered = None
    if uses_deeploy(target):
        progress(f"lowering {model} for {target} (cached after the first time)")
        lowered = deeploy_bridge.lower(model, target)
    base = lowered.model if lowered else original
    view = view_of_model(base)
    plan = plan_with_hint(view, list(doc.seq), doc.fingerprint, options.force, model, target)
    progress(f"plan: {plan.match.matched}/{plan.match.entries} entries matched, {plan.clones_kept} clones kept, "
             f"{plan.clones_pruned} pruned, {len(plan.unscheduled)} unnamed nodes placed")
    rewired = _rewire(base, view, plan, lowered, deployed_weights(target, Flow.TILED, options.deeploy.weights),
                      schedule_flow(doc, target), frozenset(options.deeploy.parked))
    split = _split_step(model, original, lowered, options)
    if lowered is not None and options.deeploy.home == SPLIT_HOME:
        _refuse_activations_beyond_chip(lowered, doc, options, split)
        if options.deeploy.persist_on_chip:
            options = _bring_on_chip(lowered, doc, options, split, progress)
    elif lowered is not None:
        overflow = home_arena_overflow(lowered, list(doc.seq), options.deeploy)
        if overflow is not None:
            raise overflow
    with replay_folder(outdir):
        clock = time.perf_counter()
        flows, optimizer = _deeploy_flows(base, doc, target, outdir, options, split, progress) if lowered \
            else ({}, {})
        seconds = {"deeploy": time.perf_counter() - clock}
        verification = _verify(model, original, base, lowered, plan, options, progress)
        seconds["verify"] = time.perf_counter() - clock - seconds["deeploy"]
        code_runs = _run_code(base, lowered, plan, outdir, flows, verification, sources, options, split, progress) \
            if isinstance(verification, VerifyReport) and lowered else {}
        seconds["code"] = time.perf_counter() - clock - seconds["deeploy"] - seconds["verify"]
        runs = split.run.first_update().n_network_runs if split is not None else 1   # the device runs both networks
        timeout = options.gvsoc_timeout or simulation_timeout(runs * predicted_cycles(doc, rewired.graph))
        gvsoc = _simulate(lowered, plan, outdir, flows, verification, code_runs, sources, options, split, progress,
                          timeout)
        seconds["gvsoc"] = time.perf_counter() - clock - seconds["deeploy"] - seconds["verify"] - seconds["code"]
        if lowered is not None and options.deeploy.home == SPLIT_HOME:
            rewired = replace(rewired, homes=predicted_split_levels(
                lowered, list(doc.seq), options.deeploy.weights, split.persistent_io if split else frozenset(),
                frozenset(options.deeploy.on_chip_persistent), frozenset(options.deeploy.parked),
                options.on_chip_tables))
        report = _report(schedule, doc, model, target, lowered, view, plan, rewired, flows, verification, gvsoc,
                         options, code_runs, held is not None)
        report = replace(report, deeploy_optimizer={name: f.figures(options.record_time)
                                                    for name, f in optimizer.items()} or None,
                         model=replace(report.model, deeploy_workarounds=_workarounds(
                             [*flows.values(), *optimizer.values()])))
        write_bytes(outdir / REWIRED, rewired.model.SerializeToString())
        write_json(outdir / ORDER, {"order": plan.order,
                                    "clones": {e.name: e.source for e in plan.executions if e.clone}})
        report.write(outdir / REPORT)
    return ReplayResult(outdir, plan, report, verification if isinstance(verification, VerifyReport) else None,
                        seconds)


def _rewire(base: onnx.ModelProto, view: GraphView, plan: ReplayPlan, lowered: LoweredGraph | None,
            weights: WeightUpdate, flow: Flow, parked: frozenset[str] = frozenset()) -> _Rewired:
    """The rewired graph as the tiled flow deploys it (weights written as `weights` says). Its live trace counts
    the scratch the home level of `flow` holds (none in the tiled flow's: L1 tiles) and not the activations `parked`
    off chip (Deeploy's names: the split home's L3 holds them); the non-tiled flow's heap and arena count every
    op's and every activation."""
    home = None
    if lowered:
        deployed = rewired(lowered, view, plan, weights)
        model, graph = deployed.model, deployed.graph
        home = home_layout(plan, graph, *io_names(model.graph), lowered.persistent_inputs)
    else:
        model = apply_to_model(base, plan)
        graph = load_graph(model)
    seq = plain_sequence(graph, plan.order)
    check_in_place(graph, seq)
    trace = memory_trace(graph, seq)
    at_home, home_graph = trace, graph
    if lowered is not None and lowered.home_scratch(flow) != lowered.transients:
        home_graph = replace(graph, scratch=rewired_scratch(plan, lowered.home_scratch(flow)))
        at_home = memory_trace(home_graph, seq)
    if parked:
        off = [t for t in graph.tensor_bytes if deeploy_bridge.deeploy_tensor_name(t) in parked]
        at_home = memory_trace(chip_graph(home_graph, off), seq)
    return _Rewired(model, graph, at_home, heap_bytes(graph, seq), home, arena_layout(graph, seq, trace))


def schedule_flow(doc: Schedule, target: str) -> Flow:
    """The flow a schedule's figures are of: the one it was solved for, else the target's default."""
    return Flow(doc.graph.flow) if doc.graph and doc.graph.flow else Flow.default_for(target)


# --------------------------------------------------------------------------- the measurements


class ActivationsBeyondChip(InfeasibleBudget):
    """A split home's replayed order whose activations' arena alone overflows the chip's level (exit 2): a sweep
    says so of its baseline (the graph order) rather than call it failed."""

    def __init__(self, level: str, arena: int, capacity: int) -> None:
        super().__init__(f"with --home split the replayed order's activations alone need {arena:,} B of {level}, "
                         f"{arena - capacity:,} B more than the {capacity:,} B {level} gives",
                         "replay a schedule solved with --home split (ckpt sweep --home split names the largest "
                         "budget that fits), or keep everything off chip (--home L3)")
        self.level, self.arena, self.capacity = level, arena, capacity

    @property
    def short(self) -> str:
        """The refusal in a few words: the level, the activations' bytes and the bytes over."""
        return (f"does not fit {self.level}: its activations alone need {self.arena:,} B, "
                f"{self.arena - self.capacity:,} B more than the {self.capacity:,} B {self.level} gives")


def _refuse_activations_beyond_chip(lowered: LoweredGraph, doc: Schedule, options: ReplayOptions,
                                    split: SplitStep | None) -> None:
    """Refuse (exit 2), before Deeploy runs, a split home whose activations' arena alone overflows the chip's level:
    Deeploy's tiler would only say that its geometrical constraints are infeasible."""
    chip = split_home_of(lowered).default
    levels = predicted_split_levels(lowered, list(doc.seq), options.deeploy.weights,
                                    split.persistent_io if split else frozenset(),
                                    parked=frozenset(options.deeploy.parked))
    arena, capacity = levels[chip].arena, options.deeploy.size(chip)
    if arena > capacity:
        raise ActivationsBeyondChip(chip, arena, capacity)


def _bring_on_chip(lowered: LoweredGraph, doc: Schedule, options: ReplayOptions, split: SplitStep | None,
                   progress) -> ReplayOptions:
    """split+: the options with what persists that the replay brings on chip (replay.predict.chosen_on_chip), the
    tiles of what stays off chip given the innermost level's size."""
    setup = options.deeploy
    chip = split_home_of(lowered).default
    room = OnChipRoom(setup.size(chip), options.on_chip_code or 0, setup.size(setup.innermost), options.on_chip_tables)
    chosen = chosen_on_chip(lowered, list(doc.seq), setup.weights, split.persistent_io if split else frozenset(),
                            room, level_price(lowered.target), split.optimizer_layers() if split else None)
    code = "the step's code not counted" if options.on_chip_code is None else f"code {room.code:,} B"
    progress(f"split+: {len(chosen)} persistent tensors brought on {chip} ({code})")
    return replace(options, deeploy=replace(setup, on_chip_persistent=tuple(sorted(chosen))))


def brought_on_chip(schedule: str | Path, model, options: ReplayOptions, progress=lambda msg: None
                    ) -> tuple[str, ...]:
    """split+ (`options.deeploy.persist_on_chip`, home split): what a replay of `schedule` with `options` brings on
    chip (Deeploy's names), chosen as it chooses before Deeploy runs. Nothing: its step is the split home's own,
    which a caller that measured that one need not build and run again."""
    target = schedule_target(doc := read_schedule(Path(schedule)), options.target)
    lowered = deeploy_bridge.lower(model, target)
    split = _split_step(model, read_model(model), lowered, options)
    return _bring_on_chip(lowered, doc, options, split, progress).deeploy.on_chip_persistent


def _split_step(model, original: onnx.ModelProto, lowered: LoweredGraph | None, options: ReplayOptions
                ) -> SplitStep | None:
    """The training branch's split step the replay deploys as two networks (replay.split_run), or None."""
    folder = model_path(model).parent
    if lowered is None or not model_files(folder)[1].is_file():
        return None
    return split_step(folder, original, lowered.io_names, options.optimizer, lowered.model)


def _deeploy_flows(base: onnx.ModelProto, doc: Schedule, target: str, outdir: Path, options: ReplayOptions,
                   split: SplitStep | None, progress) -> tuple[dict[str, MemoryFigures], dict[str, MemoryFigures]]:
    """Deeploy's non-tiled and tiled figures for the replayed order, each flow writing its code (CODE_DIRS); for a
    split step, the train network's and (second) the optimizer network's."""
    setup = options.deeploy
    flows, optimizer = {}, {}
    for tiled in (False, True):
        flow = "tiled" if tiled else "non_tiled"
        progress(f"Deeploy {'tiled' if tiled else 'non-tiled'} run with the replay as its scheduler"
                 + (f" ({setup.allocator.value} allocator)" if tiled else "")
                 + (", and the optimizer network" if split else ""))
        scheduler = ReplayScheduler.of_schedule(doc, force=options.force)
        previous = previous_code_files(outdir, flow)
        staged = Path(tempfile.mkdtemp(dir=outdir, prefix=f".{CODE_DIRS[flow]}."))
        with G_LOGGER.suppress(G_LOGGER.ERROR):      # clones share constants by name: gs warns, harmlessly
            if split is not None:
                figures, optimizer[flow] = deploy_split(base, scheduler, split, target, tiled, setup, staged)
            else:
                figures = deeploy_bridge.deploy(base, scheduler, target, tiled=tiled, setup=setup, code_dir=staged)
        figures.code_files = install_code(staged, outdir / CODE_DIRS[flow], previous)
        if figures.order != scheduler.plan.order:
            raise CkptError(f"Deeploy ran {len(figures.order)} layers, not the {len(scheduler.plan.order)} "
                            "executions the replay planned", "report this: the replay and Deeploy disagree")
        flows["tiled" if tiled else "non_tiled"] = figures
    return flows, optimizer


def _verify(model, original, base, lowered: LoweredGraph | None, plan: ReplayPlan, options: ReplayOptions,
            progress) -> VerifyReport | str | None:
    """The host check's report, or why it did not run."""
    if not options.verify:
        return "--no-verify"
    folder = model_path(model).parent
    if not model_files(folder)[1].is_file():
        return f"no {INPUTS} in {folder}"
    return host_check(folder, original, base, lowered.io_names if lowered else None,
                      lowered.target if lowered else "none", plan, progress, options.optimizer)


def _run_code(base: onnx.ModelProto, lowered: LoweredGraph, plan: ReplayPlan, outdir: Path,
              flows: dict[str, MemoryFigures], verification: VerifyReport, sources: KernelSources | NoSources,
              options: ReplayOptions, split: SplitStep | None, progress) -> dict[str, CodeRunRecord]:
    """Each flow's generated code built and run on the step's inputs (options.steps steps in a row; a split step:
    the harness's run), and what it computed (replay.code_run, replay.split_run)."""
    if split is not None:
        found = {flow: run_split_code(flow, outdir / CODE_DIRS[flow], base, split, lowered.target, options.deeploy,
                                      sources, options.record_time, progress) for flow in flows}
        data = split.data
        starts = {data.back.get(w, w): data.feeds[w] for w in split.weights if w in data.feeds}
        return _with_closeness(found, data.golden, starts, verification.findings.golden)
    data: StepData = verification.data
    stepper = _stepper(base, lowered, plan, data) if options.steps > 1 else None
    weights = {"tiled": deployed_weights(lowered.target, Flow.TILED, options.deeploy.weights).value,
               "non_tiled": WeightUpdate.OUT_OF_PLACE.value}
    found = {}
    for flow in flows:
        if isinstance(sources, NoSources):
            found[flow] = CodeRunRecord(flow, CodeStatus.NOT_RUN, sources.reason, weights[flow])
            continue
        progress(f"building and running the {flow.replace('_', '-')} code on the host"
                 + (f", {options.steps} steps" if options.steps > 1 else ""))
        outcome = run_code(outdir / CODE_DIRS[flow], data.feeds, sources, steps=options.steps)
        ran = outcome.outputs if isinstance(outcome, CodeRun) and is_graph_order(base, plan.order) else None
        reference = graph_order_outputs(base, lowered.target, options.deeploy, flow == "tiled", sources,
                                        data.feeds, progress, ran)
        found[flow] = code_run_record(flow, outcome, data, verification.outputs, stepper, reference,
                                      options.record_time, weights[flow])
    back = lambda d: {data.back.get(k, k): v for k, v in (d or {}).items()}  # noqa: E731 - the goldens' names
    return _with_closeness(found, back(data.golden), _updated_from(base, data.feeds, data.back),
                           verification.findings.golden)


def _updated_from(model: onnx.ModelProto, feeds: dict, back: dict[str, str]) -> dict:
    """Each weight an optimizer op of `model` updates, by its updated output's name as the goldens know it (`back`):
    its value when the step began (a feed, or the graph's initializer), beside the feeds themselves."""
    starts = {back.get(k, k): v for k, v in feeds.items()}
    updated = {node.input[0]: back.get(node.output[0], node.output[0]) for node in model.graph.node
               if node.op_type in UPDATES_IN_PLACE and node.input and node.output}
    initial = {init.name: init for init in model.graph.initializer if init.name in updated}
    for weight, output in updated.items():
        if weight in feeds:
            starts.setdefault(output, feeds[weight])
        elif weight in initial and not initial[weight].data_location:       # external data: not at hand here
            starts.setdefault(output, numpy_helper.to_array(initial[weight]))
    return starts


def _with_closeness(found: dict[str, CodeRunRecord], golden: dict | None, starts: dict,
                    host: VerifyResult | None = None) -> dict[str, CodeRunRecord]:
    """Each flow's code run with its outputs' closeness to the goldens (replay.closeness): the tiled flow's beside
    the non-tiled flow's, each beside the host check's own float32 run (`host`: its count against the goldens)."""
    if not golden:
        return found
    non_tiled = found.get("non_tiled")
    beside = non_tiled.golden if non_tiled is not None else None
    return {flow: replace(run, closeness=closeness(run.golden, golden, starts, beside if flow == "tiled" else None,
                                                   host))
            if run.golden is not None else run for flow, run in found.items()}


def _stepper(base: onnx.ModelProto, lowered: LoweredGraph, plan: ReplayPlan, data: StepData) -> HostStepper:
    """The host executor's step on the rewired graph in the replayed order, weights fed from a step's outputs."""
    rewired = apply_to_model(host_ready(base), plan)
    return HostStepper(HostExecutor(rewired), plan.order, data.feeds, feedback_targets(rewired, lowered.constants))


def _simulate(lowered: LoweredGraph | None, plan: ReplayPlan, outdir: Path, flows: dict[str, MemoryFigures],
              verification: VerifyReport | str | None, code_runs: dict[str, CodeRunRecord],
              sources: KernelSources | NoSources | None, options: ReplayOptions, split: SplitStep | None,
              progress, timeout: float) -> dict[str, GvsocRecord]:
    """Each flow's step on gvsoc (replay.gvsoc, replay.split_run), or why not; a run longer than `timeout` seconds
    is taken as hung."""
    if lowered is None:
        return {}                       # target none: no generated code, no device
    if not options.simulate or not isinstance(verification, VerifyReport) or sources is None:
        why = "--no-simulate" if not options.simulate else "the host check did not run"
        return {flow: not_simulated(flow, why) for flow in flows}
    if simulation_gap(lowered.target):
        return {flow: not_simulated(flow, simulation_gap(lowered.target)) for flow in flows}
    kit = find_kit(options.gvsoc)
    data = verification.data

    def simulated(flow: str) -> GvsocRecord:
        if split is not None:
            return simulate_split(flow, outdir / CODE_DIRS[flow], code_runs.get(flow), split, plan.order, sources,
                                  kit, outdir / GVSOC_LOGS[flow], options.record_time, timeout, progress,
                                  lowered.target, layers_needed=False,   # the step's cycles are what it reports
                                  draws=options.gvsoc_draws)
        return simulate_flow(flow, outdir / CODE_DIRS[flow], code_runs.get(flow), lowered.target, data.feeds,
                             data.golden, verification.outputs, plan.order, sources, kit,
                             outdir / GVSOC_LOGS[flow], options.record_time, progress, timeout, options.gvsoc_draws)

    return {flow: simulated(flow) if flow == "tiled" or options.simulate_non_tiled or isinstance(kit, NoKit)
            else not_simulated(flow, NON_TILED_ON_REQUEST)
            for flow in flows}


NON_TILED_ON_REQUEST = "the non-tiled flow is simulated on request (--simulate-non-tiled); the tiled one is deployed"


ESTIMATE_SCALE = 5       # the built-in estimate's cycles run up to this many times longer built with Debian's GCC


def predicted_cycles(doc: Schedule, graph: TrainGraph) -> int:
    """The step's cycles as far as ckpt can predict them before it runs: the calibrated graph-order step plus the
    recomputes where the schedule was solved with measured costs, else the built-in estimate of every execution
    of the rewired graph, scaled up (the estimate knows no compiler): what a gvsoc run's timeout is scaled from."""
    if doc.predicted is not None and doc.predicted.step_cycles:
        return doc.predicted.step_cycles
    return ESTIMATE_SCALE * sum(graph.op_cost.values())


# --------------------------------------------------------------------------- report.json



def _report(schedule: Path, doc: Schedule, model, target: str, lowered: LoweredGraph | None, view: GraphView,
            plan: ReplayPlan, rewired: _Rewired, flows: dict[str, MemoryFigures],
            verification: VerifyReport | str | None, gvsoc: dict[str, GvsocRecord], options: ReplayOptions,
            code_runs: dict[str, CodeRunRecord], held: bool) -> ReplayReport:
    predicted = doc.predicted
    solved_on = part_dict(doc.graph) if doc.graph else {}
    model_sha = open_model(model).sha256
    non_tiled, tiled = flows.get("non_tiled"), flows.get("tiled")
    trace = rewired.trace
    memory = MemorySection(
        predicted_peak=predicted.peak_bytes if predicted else None, replayed_peak=trace.peak_bytes, heap=rewired.heap,
        deeploy_non_tiled=sum(non_tiled.worst_case.values()) if non_tiled else None,
        persistent_predicted=predicted.persistent_bytes if predicted else None,
        persistent_replayed=rewired.graph.persistent_bytes,
        deeploy_non_tiled_static=sum(non_tiled.static.values()) if non_tiled else None,
        baseline_peak=predicted.baseline_peak_bytes if predicted else None, peak_index=trace.peak_index,
        peak_after=plan.order[trace.peak_index] if plan.order else None,
        levels=_levels(rewired, tiled) if tiled else {}, arena=rewired.arena.size,
        arena_live_max=rewired.arena.live_max,
        arena_code=sum(non_tiled.arena.values()) if non_tiled and non_tiled.arena else None)
    check = verification if isinstance(verification, VerifyReport) else None
    section = verification_section(check, verification if isinstance(verification, str) else None,
                                   options.record_time)
    budget = _budget(doc, memory)
    ok = (section.status is not CheckStatus.MISWIRED and all(run.status is not SimStatus.FAILED and not run.errors
                                                for run in gvsoc.values())
          and all(run.ok or run.status is CodeStatus.NOT_RUN for run in code_runs.values())
          and (budget is None or budget.fits) and memory.arena_fits)
    schedule_sha = hashlib.sha256(dumps(doc).encode() if held else schedule.read_bytes()).hexdigest()
    return ReplayReport(
        ok=ok,
        schedule=ScheduleSection(str(schedule), schedule_sha, plan.match.entries, plan.match.matched,
                                 round(plan.match.rate, 6), list(plan.match.missing),
                                 FingerprintRecord(plan.fingerprint.schedule, plan.fingerprint.graph,
                                                   plan.fingerprint.status), solved_on),
        model=ModelSection(str(model), model_sha, target,
                           (solved_on.get("model_sha256") == model_sha) if solved_on else None,
                           lowered.deeploy_version if lowered else None, len(view.live)),
        replay=ReplaySection(**plan.counts(), clones=[e.name for e in plan.executions if e.clone],
                             pruned=[e.name for e in plan.pruned], unscheduled=list(plan.unscheduled),
                             stale=list(plan.stale)),
        memory=memory,
        deeploy={name: f.figures(options.record_time) for name, f in flows.items()} or None,
        verification=section,
        gvsoc=gvsoc,
        files={"rewired": REWIRED, "order": ORDER, "code": CODE if tiled else None,
               "code_non_tiled": CODE_DIRS["non_tiled"] if non_tiled else None,
               **{f"gvsoc_{flow}": run.log for flow, run in gvsoc.items() if run.log}},
        code_runs=code_runs, budget=budget)


def _workarounds(deployed: list[MemoryFigures]) -> list[WorkaroundRecord]:
    """The installed Deeploy's defects ckpt worked around in the code this replay generated, as each deployment
    (both flows, both networks of a split step) bound them: the nodes whose code carries a workaround, and those it
    concerns whose code does not."""
    records = []
    for found in workarounds.active():
        bound = [f.workarounds[found.defect.value] for f in deployed if found.defect.value in f.workarounds]
        carried = list(dict.fromkeys(n for b in bound for n in b.carried))
        missed = list(dict.fromkeys(n for b in bound for n in b.missed))
        if carried or missed:
            records.append(WorkaroundRecord(found.defect.value, found.file, found.line, found.what, carried, missed))
    return records


def _budget(doc: Schedule, memory: MemorySection) -> BudgetRecord | None:
    """The schedule's budget against the replayed value of the figure it was held to when solved."""
    limit = doc.budget.bytes if doc.budget else None
    checked = doc.predicted.checked if doc.predicted else "peak_bytes"
    if doc.budget is not None and doc.budget.level:      # a level's total: that level's total, of its own kind
        checked = f"total_{doc.budget.level}"
    if not isinstance(limit, int) or isinstance(limit, bool) or not isinstance(checked, str):
        return None
    if checked.startswith("total_"):
        level = memory.levels.get(checked[len("total_"):])
        replayed = level.total if level is not None else None
    else:
        replayed = {"peak_bytes": memory.replayed_peak, "heap_bytes": memory.heap}.get(checked)
    return BudgetRecord(checked, limit, replayed)


def _levels(rewired: _Rewired, tiled: MemoryFigures) -> dict[str, LevelMemory]:
    """Per memory level of the tiled flow: the emitted arena, ckpt's predicted one (home level), the live
    maximum of the blocks Deeploy laid out, and the static constants."""
    home = tiled.setup.default_mem_level
    predicted = {home: rewired.home.size} if rewired.home is not None else {}
    if rewired.homes is not None:     # the split home: each level's whole-network blocks, as the tiler laid them out
        predicted = {level: fig.arena for level, fig in rewired.homes.items()}
    levels = sorted(set(tiled.arena) | set(tiled.static))
    return {level: LevelMemory(arena=tiled.arena.get(level), live_max=tiled.live_max.get(level),
                               predicted_arena=predicted.get(level), static=tiled.static.get(level),
                               home_arena=tiled.home_arena.get(level))
            for level in levels}
