"""`ckpt sweep`: verified operating points across budgets, for one model or several, in one command.

Each model is lowered once, in this process, before any task starts (the bridge's disk cache then serves every
worker). Then, in two phases of tasks that run where the executor puts them (budgets.executors: local
processes, or a Dask cluster):
1. solve every point of every model (the baseline, then each budget);
2. give each point the cheapest schedule that fits it, its own or one a tighter point of the same model found
   (so a looser budget never costs more than a tighter one), and replay it (Deeploy, host check, gvsoc).
Records already stored with the same key are reused, so an interrupted sweep resumes where it stopped, on any
machine. One model's folder holds points/, sweep.md, sweep.csv, sweep.json, pareto.png/svg and sweep.log;
with several models each has such a folder under OUTDIR/<model>/ and OUTDIR holds the combined tables.
"""
from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ckpt import deeploy_bridge
from ckpt.budgets.executors import LocalExecutor, LostCluster, default_jobs
from ckpt.budgets.reports import write_reports, write_tables
from ckpt.budgets.store import SweepStore, check_sweep_folder, is_ckpt_sweep
from ckpt.budgets.table import column_notes
from ckpt.budgets.tasks import run_tasks
from ckpt.coderun.sources import NoSources
from ckpt.deeploy_bridge.setup import Flow, WeightUpdate, deployed_weights, setup_for
from ckpt.errors import CkptError, ExitCode
from ckpt.files import check_output_dir, refuse_input_folder
from ckpt.gvsoc.kit import NoKit, find_kit
from ckpt.live import SweepProgress
from ckpt.paths import NETWORK, model_files
from ckpt.pipeline.calibrate import costs_and_why, measured_code_bytes, measured_tiler_tables
from ckpt.pipeline.load import LoadedModel, load_for_target
from ckpt.pipeline.on_chip import on_chip_home, refuse_beyond_floor
from ckpt.pipeline.parking import park_prices_of
from ckpt.pipeline.point import (
    PointRecord,
    PointSpec,
    ReplayTask,
    SolvedPoint,
    SolveTask,
    carried,
    content_key,
    replay_key,
    replay_point,
    solve_point,
)
from ckpt.pipeline.row import (
    BASELINE,
    REFERENCE,
    PointCheck,
    PointRow,
    empty_row,
    replayed_row,
    solved_row,
    with_overheads,
)
from ckpt.replay.code_run import code_sources
from ckpt.replay.predict import TilerTables
from ckpt.replay.run import ReplayOptions, replay_schedule
from ckpt.schedule_file import Schedule, read_schedule
from ckpt.solver.graph.baselines import STAGE_ORDER_RULES, Baselines, baselines
from ckpt.solver.graph.costs import CostModel
from ckpt.solver.graph.onnx_loader import model_path
from ckpt.solver.model.records import SolveOptions
from ckpt.targets import TARGET_TABLE, simulation_gap, uses_deeploy


class SweepInterrupted(CkptError):
    """Ctrl-C: finished points are kept; the exit code is the shell's for SIGINT."""

    exit_code = ExitCode.INTERRUPTED


@dataclass(frozen=True)
class SweepOptions:
    fractions: tuple[float, ...]                     # high to low, as budgets.ranges.parse_range gives them
    target: str = "siracusa"
    solve: SolveOptions = field(default_factory=lambda: SolveOptions())
    replay: ReplayOptions = field(default_factory=ReplayOptions)
    jobs: int = 0                                    # 0: the core count (local processes)
    show_progress: bool = True                       # workers print per-stage progress on stderr
    carry: bool = True                               # give looser points a cheaper schedule a tighter one found
    flow: Flow | None = None                         # the deployment budgets are checked on (None: target's)
    costs: str = "auto"                              # op costs: auto | estimate | gvsoc | a cost file
    overwrite: bool = False                          # replace files of a sweep's names no ckpt sweep wrote
    park: bool = False                               # --park auto: each point's solve may park activations off chip


@dataclass
class SweepResult:
    outdir: Path
    rows: list[PointRow]
    ran: list[str]                                   # points replayed by this run
    skipped: list[str]                               # points finished before with the same key
    lower_bound: int
    baseline_peak: int
    files: list[Path]
    stage_seconds: dict[str, float]                  # lowering, solve, replay, verify, code (summed over tasks)
    seconds: float                                   # wall time of the whole sweep
    point_seconds: dict[str, dict[str, float]] = field(default_factory=dict)  # per point run: its stages
    models: dict[str, SweepResult] = field(default_factory=dict)   # several models: each one's own result
    notes: list[str] = field(default_factory=list)   # why a column is empty for every point

    @property
    def failed(self) -> list[PointRow]:
        """Points that went wrong (a failure, a miswired replay, generated code that failed, erred or computed
        other numbers than the graph order's), as opposed to budgets with no schedule."""
        return [r for r in self.rows if r.label != REFERENCE
                and (r.status == "error" or PointCheck(r.check).failed or r.code_failed)]


@dataclass
class _Model:
    """One model of the sweep: its folder, its lowered graph, its points."""

    name: str
    source: str
    store: SweepStore
    loaded: LoadedModel
    base: Baselines
    specs: list[PointSpec]
    lowering: float
    data_sha256: str = ""            # inputs.npz and outputs.npz: a replay's verdict depends on them
    costs: CostModel | None = None   # the op costs its points are solved with (None: the built-in estimate)
    estimated: str = ""              # why the op costs are the built-in estimate ("" where they are measured)
    split_plus_code: int | None = None   # split+: the step's code its room counts (None: not counted)
    split_plus_tables: TilerTables | None = None   # ... and the tiler's tables, as ckpt solve's (None: not counted)


def run_sweep(models: str | Path | list, outdir: str | Path, options: SweepOptions,
              progress: Callable[[str], None] = lambda msg: None, executor=None) -> SweepResult:
    """Run (or resume) the sweep into `outdir`; see the module doc. Ctrl-C raises SweepInterrupted.
    `executor`: where tasks run (default: local processes, `options.jobs` at a time)."""
    # absolute, so a worker started in another folder (a Dask worker) finds the same files
    sources = [str(Path(m).absolute()) for m in (models if isinstance(models, list) else [models])]
    outdir = Path(outdir).absolute()
    executor = executor or LocalExecutor(default_jobs(options.jobs))     # a count below 0 refused before any work
    check_output_dir(outdir)
    for source, name in zip(sources, _names(sources)):      # even with --overwrite: never among the user's inputs
        refuse_input_folder(outdir / name if len(sources) > 1 else outdir, source)
    check_sweep_folder(outdir, _names(sources) if len(sources) > 1 else [], options.overwrite)
    root = SweepStore(outdir)
    board = SweepProgress.for_terminal(progress)
    try:
        with root.locked(), board:
            executor.check(outdir)
            return _sweep(sources, root, options, executor, board)
    except KeyboardInterrupt:
        executor.stop()
        root.clean_partial(replays=isinstance(executor, LocalExecutor))   # its workers are gone: nothing half-made
        deeploy_bridge.remove_stale_scratch()
        if is_ckpt_sweep(outdir):            # else it stopped before its first task: nothing of it is left
            root.log("interrupted: finished points are kept")
            raise SweepInterrupted(f"interrupted: finished points are kept in {outdir}",
                                   "rerun the same command to resume") from None
        gone = "its folder is removed" if not outdir.exists() else f"nothing of it is left in {outdir}"
        raise SweepInterrupted(f"interrupted before its first point: {gone}",
                               "rerun the same command to start it again") from None
    except LostCluster as err:
        root.clean_partial()
        if is_ckpt_sweep(outdir):
            root.log(str(err))
        raise
    finally:
        executor.close()


def _names(sources: list[str]) -> list[str]:
    """A folder name per model: its folder's (or file's) name, numbered where two would clash."""
    names = []
    for source in sources:
        path = model_path(source)
        name = path.parent.name if path.name == NETWORK else path.stem
        names.append(name if name not in names else f"{name}-{len(names)}")
    return names


def _sweep(sources: list[str], root: SweepStore, options: SweepOptions, executor, board: SweepProgress
           ) -> SweepResult:
    start = time.perf_counter()
    if board.live:
        options = replace(options, show_progress=False)     # the table shows each point's stage instead
    several = len(sources) > 1
    models = []
    for name, source in zip(_names(sources), sources):
        store = SweepStore(root.root / name) if several else root
        models.append(_load(name, source, store, options, board))
    for path in root.clean_partial(replays=isinstance(executor, LocalExecutor)) \
            + deeploy_bridge.remove_stale_scratch():
        board.note(f"removed {path} left by an interrupted run")
    for model in models if several else ():
        model.store.claim()
    board.note(f"running tasks on {executor.name}")
    code = _code_sources(options, board)
    solved = _solve_all(models, options, executor, board)
    finished, ran = _replay_all(models, options, solved, executor, board, code)
    references = {m.name: _off_chip_reference(m, options, board) for m in models}
    results = {m.name: _result_of(m, options, solved, finished, ran, start, references[m.name]) for m in models}
    if not several:
        return results[models[0].name]
    rows = [replace(row, label=f"{name}/{row.label}", schedule=f"{name}/{row.schedule}" if row.schedule else None)
            for name, result in results.items() for row in result.rows]
    said = list(dict.fromkeys(note for result in results.values() for note in result.notes))
    files = write_tables(root.root, rows, {"models": sources, "target": options.target},
                         facts="".join(f"{note}\n\n" for note in said))
    stages = {stage: sum(r.stage_seconds[stage] for r in results.values()) for stage in
              ("lowering", "solve", "replay", "verify", "code", "gvsoc")}
    return SweepResult(root.root, rows, [f"{n}/{label}" for n, r in results.items() for label in r.ran],
                       [f"{n}/{label}" for n, r in results.items() for label in r.skipped],
                       min(r.lower_bound for r in results.values()), max(r.baseline_peak for r in results.values()),
                       files, stages, time.perf_counter() - start, {}, results, said)


def _load(name: str, source: str, store: SweepStore, options: SweepOptions, board: SweepProgress) -> _Model:
    started = time.perf_counter()
    board.note(f"lowering {source} for target {options.target} once for the whole sweep")
    loaded = load_for_target(source, options.target, weights=_weights(options), home=options.replay.deeploy.home,
                             flow=options.flow)
    chip = on_chip_home(loaded, None) if loaded.split_home else None
    if chip is not None:          # no budget brings the activations on chip: refused before any calibration
        refuse_beyond_floor(loaded, chip)
    if options.park:              # a target without a level price is refused here, not at each point
        park_prices_of(loaded)
    lowering = time.perf_counter() - started
    costs, estimated = costs_and_why(options.costs, source, options.target, options.replay.deeploy,
                                     options.replay.gvsoc, options.replay.deeploy_root, board.note,
                                     options.replay.gvsoc_timeout, loaded if loaded.split_home else None,
                                     options.replay.gvsoc_draws)
    if costs is not None:
        board.note(f"{name}: op costs from {costs.source} (graph-order step {costs.measured_step} cycles)")
    plus_code = measured_code_bytes(source, options.target, replace(options.replay.deeploy, persist_on_chip=False),
                                    board.note, loaded, safe_side=True) if options.replay.deeploy.persist_on_chip \
        else None
    plus_tables = measured_tiler_tables(source, options.target, replace(options.replay.deeploy, persist_on_chip=False),
                                        board.note, loaded) if options.replay.deeploy.persist_on_chip else None
    base = baselines(loaded.graph)
    board.note(f"{name}: {len(loaded.graph.ops)} nodes, baseline peak {base.graph_order_peak} B, single-op lower "
               f"bound {base.lower_bound} B ({lowering:.1f} s)")
    specs = [PointSpec(BASELINE, None)] + [PointSpec.at(f, base.graph_order_peak) for f in options.fractions]
    for spec in specs:
        board.add(name, spec.label)
    return _Model(name, source, store, loaded, base, specs, lowering, _data_sha256(source), costs, estimated,
                  plus_code, plus_tables)


def _data_sha256(source: str) -> str:
    """sha256 over the step's inputs and goldens beside the model (absent files count as absent)."""
    digest = hashlib.sha256()
    for path in model_files(source)[1:]:
        digest.update(path.name.encode() + (hashlib.sha256(path.read_bytes()).digest() if path.is_file() else b"-"))
    return digest.hexdigest()


def _code_sources(options: SweepOptions, board: SweepProgress) -> str:
    """What the points' generated code is built against (part of every replay's key): the kernels' fingerprint,
    or why the code cannot run here, said once. A checkout of another release is refused before any work."""
    if not options.replay.verify or not uses_deeploy(options.target):
        return "not verified"
    found = code_sources(options.replay.deeploy_root)
    if isinstance(found, NoSources):
        board.note(f"the generated code will not be run: {found.reason}")
        return found.reason
    return found.fingerprint


def _non_tiled(options: SweepOptions, spec) -> dict:
    """What a point's key adds where its budget is held on the non-tiled flow: whether on ckpt's arena (the live
    peak) or on the first-fit heap (--allocator heap)."""
    if spec.fraction is None or (options.flow or Flow.default_for(options.target)) is not Flow.NON_TILED:
        return {}
    return {"non_tiled": "arena" if options.replay.deeploy.allocator.non_tiled_arena else "heap"}


def _split_plus(options: SweepOptions, model: _Model) -> dict:
    """What a point's solve key adds under split+: that it is chosen, and the code and tiler's tables its room
    counts (the tables where counted)."""
    if not options.replay.deeploy.persist_on_chip:
        return {}
    tables = {} if model.split_plus_tables is None else {"split_plus_tables": asdict(model.split_plus_tables)}
    return {"split_plus": True, "split_plus_code": model.split_plus_code, **tables}


def _replay_options(options: SweepOptions, model: _Model, schedule: Schedule | None = None) -> ReplayOptions:
    """A point's replay options: under split+, its room counts the code and the tiler's tables its solves counted,
    so each replay brings on chip what its schedule's figures say; with --park auto, the activations its schedule
    parks are homed off chip, as `ckpt replay` homes them (predicted.parked)."""
    replay = options.replay
    if options.replay.deeploy.persist_on_chip:
        replay = replace(replay, on_chip_code=model.split_plus_code, on_chip_tables=model.split_plus_tables)
    parked = schedule.predicted.parked_tensors if schedule is not None and schedule.predicted else ()
    if parked:
        replay = replace(replay, deeploy=replace(replay.deeploy, parked=parked))
    return replay


def _park(options: SweepOptions, spec: PointSpec) -> dict:
    """What a point's solve key adds with --park auto (nothing without it, so earlier keys stay as they were; nor
    at the baseline, the graph order, which parks nothing)."""
    return {"park": True} if options.park and spec.fraction is not None else {}


def _weights(options: SweepOptions) -> WeightUpdate:
    """How the points' deployment writes updated weights (in place only in a Deeploy target's tiled flow)."""
    return deployed_weights(options.target, options.flow, options.replay.deeploy.weights)


# the branch's own setting of its training runs' tiler (DeeployTest test_platforms.py at a0e1e531): L2 2,000,000 B
BRANCH_TRAINING_L2 = 2_000_000


def _off_chip_reference(model: _Model, options: SweepOptions, board: SweepProgress) -> PointRow | None:
    """With the home on chip: the graph order deployed as it would be off chip (home the outermost level; a split
    step at the training branch's own L2 setting, as the branch deploys the models that spill), replayed and run
    like the points, so the table stands the on-chip points beside it. None when the home is off chip."""
    setup, target = options.replay.deeploy, TARGET_TABLE.get(options.target)
    baseline = model.store.point(BASELINE).schedule
    if target is None or not target.is_on_chip(setup.default_mem_level) or not baseline.is_file():
        return None
    levels = tuple((name, BRANCH_TRAINING_L2 if name == target.on_chip and model.loaded.optimizer is not None
                    else size) for name, size in setup_for(options.target, target.off_chip).levels)
    reference = replace(setup, default_mem_level=target.off_chip, levels=levels, persistent_mem_level=None,
                        persist_on_chip=False)
    board.note(f"{model.name}: the graph order with its home in {target.off_chip}, for reference")
    try:
        found = replay_schedule(baseline, model.source, model.store.root / "reference",
                                replace(options.replay, deeploy=reference, overwrite=True), board.note)
    except CkptError as err:
        return empty_row(REFERENCE, None, None, "reference", f"the graph order off chip: {err}")
    row = solved_row(REFERENCE, None, None, read_schedule(baseline), None, "-", "", "reference/")
    return replace(replayed_row(row, found.report, True), status="reference", cycles_predicted=None,
                   optimizer_cycles_predicted=None)    # the calibration is of the points' deployment, not this one


def _result_of(model: _Model, options: SweepOptions, solved: dict, finished: dict, ran: list, start: float,
               reference: PointRow | None = None) -> SweepResult:
    labels = [s.label for s in model.specs]
    mine_ran = [label for (name, label) in ran if name == model.name]
    rows = with_overheads([finished[model.name, label].row if (model.name, label) in finished
                           else solved[model.name, label].row for label in labels]
                          + ([reference] if reference is not None else []))
    stages = {"lowering": model.lowering,
              "solve": sum(solved[model.name, label].seconds for label in mine_ran),
              "replay": 0.0, "verify": 0.0, "code": 0.0, "gvsoc": 0.0}
    for label in mine_ran:
        for stage, seconds in finished[model.name, label].stage_seconds.items():
            stages[stage] += seconds
    said = column_notes(rows, model.estimated, _unsimulated(options))
    files = write_reports(model.store.root, rows, model.source, options.target, options.solve,
                          model.base.lower_bound, model.base.graph_order_peak, said)
    return SweepResult(model.store.root, rows, mine_ran, [label for label in labels if label not in mine_ran],
                       model.base.lower_bound, model.base.graph_order_peak, files, stages,
                       time.perf_counter() - start,
                       {label: {**finished[model.name, label].stage_seconds, "solve": solved[model.name, label].seconds}
                        for label in mine_ran}, notes=said)


def _unsimulated(options: SweepOptions) -> str:
    """Why no point's step runs on gvsoc, where that is one reason for all ("" where it could run)."""
    replay = options.replay
    if not replay.simulate:
        return "--no-simulate"
    if not replay.verify:
        return "--no-verify skips the generated code gvsoc would run"
    if simulation_gap(options.target):
        return simulation_gap(options.target)
    kit = find_kit(replay.gvsoc)
    return kit.reason if isinstance(kit, NoKit) else ""


# --------------------------------------------------------------------------- phase 1: solve


def _solve_all(models: list[_Model], options: SweepOptions, executor, board: SweepProgress
               ) -> dict[tuple[str, str], SolvedPoint]:
    records: dict[tuple[str, str], SolvedPoint] = {}
    tasks = []
    solver = asdict(options.solve)      # how to solve (its live bytes are set per point)
    for model in models:
        common = {"fingerprint": model.loaded.graph.fingerprint(), "model_sha256": model.loaded.model_sha256,
                  "target": options.target}
        for spec in model.specs:
            # the baseline is the graph order whatever the solver options: they are not part of its key
            parts = {**common, "point": spec.label, "fraction": spec.fraction,
                     "solver": {**solver, "stage_order_rules": STAGE_ORDER_RULES} if spec.fraction is not None
                     else None,
                     "flow": options.flow.value if options.flow and spec.fraction is not None else None,
                     "weights": _weights(options).value,
                     "costs": model.costs.source if model.costs else "estimate",
                     "home": options.replay.deeploy.home,
                     **_non_tiled(options, spec), **_split_plus(options, model), **_park(options, spec)}
            key = content_key(parts)
            proof_key = content_key({**parts, "solver": _proof_solver(parts["solver"])})
            folder = model.store.point(spec.label)
            record = folder.solved_record(key, proof_key)
            if record is not None:
                records[model.name, spec.label] = record
                if record.key != key:
                    model.store.log(f"kept {spec.label}: {record.status}, proven before under another time limit "
                                    f"(key {record.key[:12]})")
                board.stage(model.name, spec.label, "solved", record.status)
                continue
            tasks.append((model, SolveTask(spec, model.source, options.target, options.solve, str(folder.path), key,
                                           model.base.lower_bound, options.show_progress, options.flow,
                                           _weights(options), model.costs, options.replay.deeploy.home,
                                           options.replay.deeploy.allocator,
                                           options.replay.deeploy.persist_on_chip, model.split_plus_code,
                                           proof_key, park=options.park,
                                           split_plus_tables=model.split_plus_tables)))
    # points that solve first; the baseline and points below the floor (no solve) last, to fill the gaps
    tasks.sort(key=lambda mt: mt[1].spec.fraction is None or mt[1].spec.budget_bytes < mt[1].lower_bound)

    def began(item) -> None:
        board.stage(item[0].name, item[1].spec.label, "solving")

    def done(item, record: SolvedPoint) -> None:
        model, task = item
        records[model.name, task.spec.label] = record
        model.store.log(f"solved {task.spec.label}: {record.status}")
        board.stage(model.name, task.spec.label, "solved", record.status)
        if not board.live:
            board.say(f"point {task.spec.label} solved")

    def lost(item, why: str) -> SolvedPoint:
        task = item[1]
        return SolvedPoint(task.key, task.spec.label, None, empty_row(
            task.spec.label, task.spec.fraction, task.spec.budget_bytes, "error", why), 0.0, stored=False)

    run_tasks(executor, solve_point, tasks, began, done, lost, board, "solve", _logger(models))
    return records


def _proof_solver(solver: dict | None) -> dict | None:
    """The solver options without how long (on which clock) and on how many threads it runs: a proven answer is
    the same under any of them (the key of PointFolder.solved_record)."""
    if solver is None:
        return None
    backend = {name: value for name, value in solver["backend"].items()
               if name not in ("time_limit", "clock", "ends_by", "threads", "verbose")}
    return {**solver, "backend": backend}


def _logger(models: list[_Model]) -> Callable[[str], None]:
    """A line in every model's sweep.log."""
    def log(message: str) -> None:
        for model in models:
            model.store.log(message)
    return log


# --------------------------------------------------------------------------- phase 2: replay


def _replay_all(models: list[_Model], options: SweepOptions, solved: dict[tuple[str, str], SolvedPoint],
                executor, board: SweepProgress, code: str
                ) -> tuple[dict[tuple[str, str], PointRecord], list[tuple[str, str]]]:
    finished: dict[tuple[str, str], PointRecord] = {}
    tasks = []
    for model in models:
        found = [(s.label, solved[model.name, s.label].schedule) for s in model.specs
                 if s.fraction is not None and solved[model.name, s.label].schedule]
        for spec in model.specs:
            record = solved[model.name, spec.label]
            schedule, note = record.schedule, ""
            if spec.fraction is not None and options.carry:
                schedule, note = carried(schedule, [(label, s) for label, s in found if label != spec.label],
                                         spec.budget_bytes, options.solve.backend.gap)
            if schedule is None:
                board.stage(model.name, spec.label, "done", record.row.status)
                continue
            replay = _replay_options(options, model, schedule)
            key = replay_key(schedule, replay, model.loaded.model_sha256 + model.data_sha256, code)
            folder = model.store.point(spec.label)
            stored = folder.read(folder.record, key)
            earlier = None if stored is None else PointRecord.from_stored(stored)
            if earlier is not None:
                finished[model.name, spec.label] = earlier
                model.store.log(f"skipped {spec.label}: finished before with the same key {key[:12]}")
                board.stage(model.name, spec.label, "done", f"{earlier.row.status} (earlier run)")
                if not board.live:
                    board.say(f"point {spec.label}: finished before, skipped")
                continue
            tasks.append((model, ReplayTask(spec, model.source, schedule, record.seconds, replay,
                                            str(folder.path), key, note, options.show_progress)))
    ran: list[tuple[str, str]] = []

    def began(item) -> None:
        board.stage(item[0].name, item[1].spec.label, "replaying")

    def done(item, record: PointRecord) -> None:
        model, task = item
        finished[model.name, task.spec.label] = record
        ran.append((model.name, task.spec.label))
        row = record.row
        model.store.log(f"ran {task.spec.label}: {row.status}" + (f" ({row.reason})" if row.reason else ""))
        board.stage(model.name, task.spec.label, "done", f"{row.status}, {row.check}")
        if not board.live:
            board.say(f"point {task.spec.label} finished ({len(ran)}/{len(tasks)} run): {row.status}, "
                      f"check {row.check}")

    def lost(item, why: str) -> PointRecord:
        task = item[1]
        row = replace(empty_row(task.spec.label, task.spec.fraction, task.spec.budget_bytes, "error", why),
                      check=PointCheck.REPLAY_FAILED.value)
        return PointRecord(task.key, task.spec.label, row, {}, stored=False)

    run_tasks(executor, replay_point, tasks, began, done, lost, board, "replay", _logger(models))
    order = {(m.name, s.label): k for k, (m, s) in enumerate((m, s) for m in models for s in m.specs)}
    return finished, sorted(ran, key=order.get)
