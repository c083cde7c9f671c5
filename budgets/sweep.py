"""`ckpt sweep`: verified operating points across budgets in one command.

The model is lowered once, in this process, before any point starts (the bridge's disk cache then serves every
worker). Each point (the baseline, then each budget) runs in a fresh worker process (spawn: Deeploy keeps global
state) through budgets.points.run_point, which stores the finished point before returning. Points already
finished with the same key are skipped, so an interrupted sweep resumes where it stopped. The sweep folder
ends up holding points/, sweep.md, sweep.csv, sweep.json, pareto.png/svg and sweep.log.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ckpt.budgets.points import BASELINE, PointTask, label_of, run_point
from ckpt.budgets.store import SweepStore, point_key
from ckpt.budgets.table import PointRow, csv_text, json_text, markdown_table
from ckpt.errors import CkptError
from ckpt.replay.workflow import ReplayOptions
from ckpt.schedule_file import atomic_write
from ckpt.solver.solve import SolveOptions


class SweepInterrupted(CkptError):
    """Ctrl-C: finished points are kept; the exit code is the shell's for SIGINT."""

    exit_code = 130


@dataclass(frozen=True)
class SweepOptions:
    fractions: tuple[float, ...]                     # high to low, as budgets.ranges.parse_range gives them
    target: str = "siracusa"
    solve: SolveOptions = field(default_factory=lambda: SolveOptions(budget=None))
    replay: ReplayOptions = field(default_factory=ReplayOptions)
    jobs: int = 0                                    # 0: the core count
    show_progress: bool = True                       # workers print per-stage progress on stderr


@dataclass
class SweepResult:
    outdir: Path
    rows: list[PointRow]
    ran: list[str]
    skipped: list[str]
    lower_bound: int
    baseline_peak: int
    files: list[Path]
    stage_seconds: dict[str, float]                  # lowering, solve, replay, verify (summed over points run)
    seconds: float                                   # wall time of the whole sweep
    point_seconds: dict[str, dict[str, float]] = field(default_factory=dict)  # per point run: its stages

    @property
    def failed(self) -> list[PointRow]:
        """Points that went wrong (a failure or a miswired replay), as opposed to budgets with no schedule."""
        return [r for r in self.rows if r.status == "error" or r.check in ("MISWIRED", "replay failed")]


def run_sweep(model: str | Path, outdir: str | Path, options: SweepOptions, progress=lambda msg: None) -> SweepResult:
    """Run (or resume) the sweep into `outdir`; see the module doc. Ctrl-C raises SweepInterrupted."""
    try:
        return _sweep(model, outdir, options, progress)
    except KeyboardInterrupt:
        raise SweepInterrupted(f"interrupted: finished points are kept in {Path(outdir) / 'points'}",
                               "rerun the same command to resume") from None


def _sweep(model: str | Path, outdir: str | Path, options: SweepOptions, progress) -> SweepResult:
    from ckpt.solver.baselines import baselines
    from ckpt.workflow import load_for_target

    start = time.perf_counter()
    outdir, model = Path(outdir), str(model)
    store = SweepStore(outdir)
    progress(f"lowering {model} for target {options.target} once for the whole sweep")
    loaded = load_for_target(model, options.target)
    lowering = time.perf_counter() - start
    base = baselines(loaded.graph)
    progress(f"{len(loaded.graph.ops)} nodes, baseline peak {base.graph_order_peak} B, single-op lower bound "
             f"{base.lower_bound} B ({lowering:.1f} s)")
    tasks = _tasks(model, outdir, options, loaded, base)
    for path in store.clean_partial():
        progress(f"removed {path.relative_to(outdir)} left by an interrupted run")
    records: dict[str, dict] = {}
    for task in tasks:
        stored = store.finished(task.label, task.key)
        if stored is not None:
            records[task.label] = stored
            store.log(f"skipped {task.label}: finished before with the same key {task.key[:12]}")
            progress(f"point {task.label}: finished before, skipped")
    pending = sorted((t for t in tasks if t.label not in records), key=_cheap_last)
    ran = _run_pending(pending, store, options, records, progress)
    rows = [PointRow(**records[t.label]["row"]) for t in tasks]
    stages = {"lowering": lowering, "solve": 0.0, "replay": 0.0, "verify": 0.0}
    for label in ran:
        for stage, seconds in records[label]["stage_seconds"].items():
            stages[stage] += seconds
    files = write_reports(outdir, rows, model, options, base.lower_bound, base.graph_order_peak)
    return SweepResult(outdir, rows, ran, [t.label for t in tasks if t.label not in ran], base.lower_bound,
                       base.graph_order_peak, files, stages, time.perf_counter() - start,
                       {label: records[label]["stage_seconds"] for label in ran})


def _tasks(model: str, outdir: Path, options: SweepOptions, loaded, base) -> list[PointTask]:
    """The baseline first, then each budget high to low; each keyed by what decides its result."""
    common = {"fingerprint": loaded.graph.fingerprint(), "model_sha256": loaded.model_sha256,
              "target": options.target, "replay": _replay_key(options.replay)}
    solver = asdict(replace(options.solve, budget=None))
    tasks = [PointTask(BASELINE, None, model, options.target, options.solve, options.replay, str(outdir),
                       point_key({**common, "point": BASELINE}), base.graph_order_peak, base.lower_bound,
                       options.show_progress)]
    for fraction in options.fractions:
        key = point_key({**common, "fraction": fraction, "solver": solver})
        tasks.append(PointTask(label_of(fraction), fraction, model, options.target, options.solve, options.replay,
                               str(outdir), key, base.graph_order_peak, base.lower_bound, options.show_progress))
    return tasks


def _cheap_last(task: PointTask) -> bool:
    """Submission order: points that solve first, the baseline and points below the floor (no solve) last,
    so the short tasks fill the gaps the long ones leave (rows keep the baseline-first order)."""
    return task.fraction is None or task.fraction * task.baseline_peak < task.lower_bound


def _replay_key(replay: ReplayOptions) -> dict:
    found = asdict(replay)
    found["deeploy_root"] = str(replay.deeploy_root) if replay.deeploy_root else None
    found.pop("record_time", None)
    return found


# --------------------------------------------------------------------------- running the points


def _run_pending(pending: list[PointTask], store: SweepStore, options: SweepOptions, records: dict[str, dict],
                 progress) -> list[str]:
    """Run the points, each in a fresh spawned process, at most `jobs` at a time; returns the labels run.

    Plain processes and one pipe each (no executor threads): on Ctrl-C the sweep terminates exactly the
    processes it started and nothing is left to join at exit.
    """
    if not pending:
        return []
    jobs = min(options.jobs or os.cpu_count() or 1, len(pending))
    progress(f"running {len(pending)} point(s) on {jobs} worker process(es)")
    context = multiprocessing.get_context("spawn")
    queue, running, ran = list(pending), {}, []
    try:
        while queue or running:
            while queue and len(running) < jobs:
                task = queue.pop(0)
                receive, send = context.Pipe(duplex=False)
                process = context.Process(target=_worker, args=(task, send), name=f"ckpt-sweep-{task.label}")
                _start_ignoring_interrupts(process)
                send.close()
                running[receive] = (task, process)
            for receive in multiprocessing.connection.wait(list(running)):
                task, process = running.pop(receive)
                records[task.label] = _outcome(task, process, receive)
                ran.append(task.label)
                row = records[task.label]["row"]
                store.log(f"ran {task.label}: {row['status']}" + (f" ({row['reason']})" if row["reason"] else ""))
                progress(f"point {task.label} finished ({len(ran)}/{len(pending)} run): {row['status']}, "
                         f"check {row['check']}")
    except KeyboardInterrupt:
        _stop([process for _, process in running.values()])
        store.clean_partial()
        store.log(f"interrupted: {sum(1 for label in ran if records[label].get('stored'))} point(s) of this run "
                  "finished and kept")
        raise
    return ran


def _start_ignoring_interrupts(process) -> None:
    """Start a worker with Ctrl-C ignored from its first instruction (an ignored signal stays ignored across
    exec, and Python then installs no handler): the sweep process handles Ctrl-C and stops its workers."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        process.start()
    finally:
        signal.signal(signal.SIGINT, previous)


def _worker(task: PointTask, send) -> None:
    send.send(run_point(task))
    send.close()


def _outcome(task: PointTask, process, receive) -> dict:
    """The worker's record, or one saying the worker died (the row is kept; nothing is stored)."""
    try:
        record = receive.recv()
    except (EOFError, OSError):
        record = None
    receive.close()
    process.join()
    if record is not None:
        return record
    from ckpt.budgets.points import _failed

    row = _failed(task, "error", f"worker process ended with exit code {process.exitcode} and no result")
    return {"key": task.key, "label": task.label, "row": asdict(row), "stage_seconds": {}, "stored": False}


def _stop(processes: list) -> None:
    """Terminate the sweep's own running workers (their temp files are removed afterwards by
    SweepStore.clean_partial; every finished file was renamed into place whole) and wait for them."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(10)


# --------------------------------------------------------------------------- reports


def write_reports(outdir: Path, rows: list[PointRow], model: str, options: SweepOptions, lower_bound: int,
                  baseline_peak: int) -> list[Path]:
    """sweep.md, sweep.csv, sweep.json and the Pareto plot (PNG and SVG)."""
    from ckpt.budgets.plot import pareto_plot

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
