"""`ckpt sweep`: verified operating points across budgets in one command.

The model is lowered once, in this process, before any task starts (the bridge's disk cache then serves every
worker). Then, in two phases of tasks that each run in a process of their own (budgets.executors):
1. solve every point (the baseline, then each budget);
2. give each point the cheapest schedule that fits it, its own or one a tighter point found (so a looser
   budget never costs more than a tighter one), and replay it (Deeploy, host check, gvsoc).
Records already stored with the same key are reused, so an interrupted sweep resumes where it stopped. The
sweep folder ends up holding points/, sweep.md, sweep.csv, sweep.json, pareto.png/svg and sweep.log.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ckpt import deeploy_bridge
from ckpt.budgets.executors import LocalExecutor, default_jobs
from ckpt.budgets.plot import pareto_plot
from ckpt.budgets.store import SweepStore
from ckpt.budgets.table import csv_text, json_text, markdown_table
from ckpt.deeploy_bridge.setup import Flow
from ckpt.errors import CkptError, ExitCode
from ckpt.files import atomic_write, check_output_dir
from ckpt.pipeline.load import LoadedModel, load_for_target
from ckpt.pipeline.point import (
    PointRecord,
    PointSpec,
    ReplayTask,
    SolveRecord,
    SolveTask,
    carried,
    content_key,
    finished_row,
    label_of,
    replay_key,
    replay_point,
    solve_point,
)
from ckpt.pipeline.row import BASELINE, PointRow, empty_row
from ckpt.replay.run import ReplayOptions
from ckpt.solver.baselines import Baselines, baselines
from ckpt.solver.solve import SolveOptions


class SweepInterrupted(CkptError):
    """Ctrl-C: finished points are kept; the exit code is the shell's for SIGINT."""

    exit_code = ExitCode.INTERRUPTED


@dataclass(frozen=True)
class SweepOptions:
    fractions: tuple[float, ...]                     # high to low, as budgets.ranges.parse_range gives them
    target: str = "siracusa"
    solve: SolveOptions = field(default_factory=lambda: SolveOptions(budget=None))
    replay: ReplayOptions = field(default_factory=ReplayOptions)
    jobs: int = 0                                    # 0: the core count
    show_progress: bool = True                       # workers print per-stage progress on stderr
    carry: bool = True                               # give looser points a cheaper schedule a tighter one found
    flow: Flow | None = None                         # the deployment budgets are checked on (None: target's)


@dataclass
class SweepResult:
    outdir: Path
    rows: list[PointRow]
    ran: list[str]                                   # points replayed by this run
    skipped: list[str]                               # points finished before with the same key
    lower_bound: int
    baseline_peak: int
    files: list[Path]
    stage_seconds: dict[str, float]                  # lowering, solve, replay, verify (summed over tasks run)
    seconds: float                                   # wall time of the whole sweep
    point_seconds: dict[str, dict[str, float]] = field(default_factory=dict)  # per point run: its stages

    @property
    def failed(self) -> list[PointRow]:
        """Points that went wrong (a failure or a miswired replay), as opposed to budgets with no schedule."""
        return [r for r in self.rows if r.status == "error" or r.check in ("MISWIRED", "replay failed")]


def run_sweep(model: str | Path, outdir: str | Path, options: SweepOptions, progress=lambda msg: None,
              executor=None) -> SweepResult:
    """Run (or resume) the sweep into `outdir`; see the module doc. Ctrl-C raises SweepInterrupted.
    `executor`: where tasks run (default: local processes, `options.jobs` at a time)."""
    outdir = Path(outdir)
    check_output_dir(outdir)
    store = SweepStore(outdir)
    executor = executor or LocalExecutor(default_jobs(options.jobs))
    try:
        with store.locked():
            return _sweep(str(model), store, options, executor, progress)
    except KeyboardInterrupt:
        executor.stop()
        store.clean_partial()
        deeploy_bridge.remove_stale_scratch()
        store.log("interrupted: finished points are kept")
        raise SweepInterrupted(f"interrupted: finished points are kept in {outdir / 'points'}",
                               "rerun the same command to resume") from None
    finally:
        executor.close()


def _sweep(model: str, store: SweepStore, options: SweepOptions, executor, progress) -> SweepResult:
    start = time.perf_counter()
    progress(f"lowering {model} for target {options.target} once for the whole sweep")
    loaded = load_for_target(model, options.target)
    lowering = time.perf_counter() - start
    base = baselines(loaded.graph)
    progress(f"{len(loaded.graph.ops)} nodes, baseline peak {base.graph_order_peak} B, single-op lower bound "
             f"{base.lower_bound} B ({lowering:.1f} s)")
    for path in store.clean_partial() + deeploy_bridge.remove_stale_scratch():
        progress(f"removed {path} left by an interrupted run")
    specs = _specs(options, base)
    solved = _solve_all(model, store, options, loaded, base, specs, executor, progress)
    finished, ran = _replay_all(model, store, options, loaded, specs, solved, executor, progress)
    rows = [_row_of(spec, solved[spec.label], finished.get(spec.label)) for spec in specs]
    stages = {"lowering": lowering, "solve": sum(solved[label].seconds for label in solved if label in ran),
              "replay": 0.0, "verify": 0.0}
    for label in ran:
        for stage, seconds in finished[label].stage_seconds.items():
            stages[stage] += seconds
    files = write_reports(store.root, rows, model, options, base.lower_bound, base.graph_order_peak)
    return SweepResult(store.root, rows, ran, [s.label for s in specs if s.label not in ran], base.lower_bound,
                       base.graph_order_peak, files, stages, time.perf_counter() - start,
                       {label: finished[label].stage_seconds for label in ran})


def _specs(options: SweepOptions, base: Baselines) -> list[PointSpec]:
    """The baseline first, then each budget high to low."""
    return [PointSpec(BASELINE, None, None)] + [
        PointSpec(label_of(f), f, int(f * base.graph_order_peak)) for f in options.fractions]


# --------------------------------------------------------------------------- phase 1: solve


def _solve_all(model: str, store: SweepStore, options: SweepOptions, loaded: LoadedModel, base: Baselines,
               specs: list[PointSpec], executor, progress) -> dict[str, SolveRecord]:
    common = {"fingerprint": loaded.graph.fingerprint(), "model_sha256": loaded.model_sha256,
              "target": options.target}
    solver = asdict(replace(options.solve, budget=None))
    records: dict[str, SolveRecord] = {}
    tasks = []
    for spec in specs:
        # the baseline is the graph order whatever the solver options: they are not part of its key
        key = content_key({**common, "point": spec.label, "fraction": spec.fraction,
                           "solver": solver if spec.fraction is not None else None,
                           "flow": options.flow.value if options.flow and spec.fraction is not None else None})
        task = SolveTask(spec, model, options.target, options.solve, str(store.point(spec.label).path), key,
                         base.lower_bound, options.show_progress, options.flow)
        stored = store.point(spec.label).read(store.point(spec.label).solved, key)
        if stored is not None:
            records[spec.label] = SolveRecord(**stored)
            progress(f"point {spec.label}: solved before, reused")
        else:
            tasks.append(task)
    # points that solve first; the baseline and points below the floor (no solve) last, to fill the gaps
    tasks.sort(key=lambda t: t.spec.fraction is None or t.spec.budget_bytes < t.lower_bound)
    if tasks:
        progress(f"solving {len(tasks)} point(s) on {executor.name}")

    def done(task: SolveTask, record: SolveRecord) -> None:
        records[task.spec.label] = record
        store.log(f"solved {task.spec.label}: " + (record.doc["solver"]["status"] if record.doc
                                                    else f"{record.row['status']} ({record.row['reason']})"))
        progress(f"point {task.spec.label} solved")

    _run_tasks(executor, solve_point, tasks, done, lambda t, why: SolveRecord(
        t.key, t.spec.label, None, asdict(empty_row(t.spec.label, t.spec.fraction, t.spec.budget_bytes, "error",
                                                    why)), 0.0, stored=False), progress)
    return records


# --------------------------------------------------------------------------- phase 2: replay


def _replay_all(model: str, store: SweepStore, options: SweepOptions, loaded: LoadedModel, specs: list[PointSpec],
                solved: dict[str, SolveRecord], executor, progress) -> tuple[dict[str, PointRecord], list[str]]:
    finished: dict[str, PointRecord] = {}
    tasks = []
    found = [(s.label, solved[s.label].doc) for s in specs if s.fraction is not None and solved[s.label].doc]
    for spec in specs:
        record = solved[spec.label]
        doc, note = record.doc, ""
        if spec.fraction is not None and options.carry:
            doc, note = carried(doc, [(label, d) for label, d in found if label != spec.label], spec.budget_bytes,
                                options.solve.backend.gap)
        if doc is None:
            continue
        key = replay_key(doc, options.replay, loaded.model_sha256)
        folder = store.point(spec.label)
        stored = folder.read(folder.record, key)
        if stored is not None and finished_row(stored) is not None:
            finished[spec.label] = PointRecord(**stored)
            store.log(f"skipped {spec.label}: finished before with the same key {key[:12]}")
            progress(f"point {spec.label}: finished before, skipped")
            continue
        tasks.append(ReplayTask(spec, model, doc, record.seconds, options.replay, str(folder.path), key, note,
                                options.show_progress))
    if tasks:
        progress(f"replaying {len(tasks)} point(s) on {executor.name}")
    ran: list[str] = []

    def done(task: ReplayTask, record: PointRecord) -> None:
        finished[task.spec.label] = record
        ran.append(task.spec.label)
        row = record.row
        store.log(f"ran {task.spec.label}: {row['status']}" + (f" ({row['reason']})" if row["reason"] else ""))
        progress(f"point {task.spec.label} finished ({len(ran)}/{len(tasks)} run): {row['status']}, "
                 f"check {row['check']}")

    _run_tasks(executor, replay_point, tasks, done, lambda t, why: PointRecord(
        t.key, t.spec.label, asdict(replace(empty_row(t.spec.label, t.spec.fraction, t.spec.budget_bytes, "error",
                                                      why), check="replay failed")), {}, stored=False), progress)
    return finished, [s.label for s in specs if s.label in ran]


def _row_of(spec: PointSpec, solved: SolveRecord, finished: PointRecord | None) -> PointRow:
    if finished is not None:
        return PointRow(**finished.row)
    return PointRow(**solved.row)


# --------------------------------------------------------------------------- running tasks


def _run_tasks(executor, fn: Callable, tasks: list, done: Callable, lost: Callable, progress) -> None:
    """Run `fn` over `tasks` on the executor, at most `executor.slots` at a time, calling `done(task, result)` in
    the sweep process as each ends. A task whose worker process died is tried once more on a fresh pool, then
    recorded by `lost`."""
    queue, tries = list(tasks), {id(t): 0 for t in tasks}
    running: dict = {}
    while queue or running:
        while queue and len(running) < executor.slots:
            task = queue.pop(0)
            running[executor.submit(fn, task)] = task
        broken = False
        for future in sorted(executor.wait_first(running), key=lambda f: tasks.index(running[f])):
            task = running.pop(future)
            error = future.exception()
            if error is None:
                done(task, future.result())
            elif executor.lost_worker(error):
                broken = True
                tries[id(task)] += 1
                if tries[id(task)] < 2:
                    queue.insert(0, task)
                else:
                    done(task, lost(task, f"worker process died twice ({type(error).__name__})"))
            else:
                done(task, lost(task, f"{type(error).__name__}: {error}"))
        if broken:
            queue = [running.pop(f) for f in list(running)] + queue    # the broken pool took them down too
            progress(f"a worker process died: running {len(queue)} task(s) again")
            executor.renew()


# --------------------------------------------------------------------------- reports


def write_reports(outdir: Path, rows: list[PointRow], model: str, options: SweepOptions, lower_bound: int,
                  baseline_peak: int) -> list[Path]:
    """sweep.md, sweep.csv, sweep.json and the Pareto plot (PNG and SVG)."""
    header = {"model": model, "target": options.target, "baseline_peak_bytes": baseline_peak,
              "lower_bound_bytes": lower_bound, "method": options.solve.method,
              "time_limit": options.solve.backend.time_limit}
    title = f"# ckpt sweep: {Path(model).name} (target {options.target})\n\n"
    facts = (f"Baseline peak {baseline_peak} B (graph order, no recompute); single-op lower bound {lower_bound} B. "
             f"Seconds are wall time and differ run to run.\n\n")
    written = []
    for name, text in (("sweep.md", title + facts + markdown_table(rows)), ("sweep.csv", csv_text(rows)),
                       ("sweep.json", json_text(rows, header))):
        atomic_write(outdir / name, text)
        written.append(outdir / name)
    title = f"{Path(model).name} ({options.target}): replayed peak against recompute cost"
    return written + pareto_plot(rows, lower_bound, outdir / "pareto", title)
