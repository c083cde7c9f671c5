"""One operating point of a sweep, start to finish: solve, write seq.json, replay (Deeploy, host check, gvsoc).

`run_point` runs in a worker process of its own (Deeploy keeps global state), so everything it takes is a
picklable `PointTask` and everything it gives back is a JSON record, also stored as the point's point.json
before it returns: a finished point survives whatever happens to the sweep after it. A point that ends without
a verified schedule (infeasible, no schedule in the time limit, miswired, failed) still gives a row, its reason
in it; only unexpected failures are left unrecorded on disk so that a rerun tries them again.
"""
from __future__ import annotations

import math
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from ckpt.budgets.parse import Budget
from ckpt.budgets.store import SweepStore
from ckpt.budgets.table import PointRow
from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.replay.workflow import ReplayOptions
from ckpt.solver.solve import SolveOptions

BASELINE = "baseline"
SCHEDULE = "seq.json"
REPLAY = "replay"


@dataclass(frozen=True)
class PointTask:
    label: str                       # "baseline" or the budget fraction as written ("0.8")
    fraction: float | None           # None for the baseline (the graph order, no recompute)
    model: str
    target: str
    solve: SolveOptions              # budget None: the fraction is resolved against the baseline peak
    replay: ReplayOptions
    outdir: str                      # the sweep folder
    key: str
    baseline_peak: int
    lower_bound: int
    show_progress: bool = True


@dataclass
class Stage:
    """Wall seconds per stage of one point: solve (with loading), replay (Deeploy runs), verify (host)."""

    solve: float = 0.0
    replay: float = 0.0
    verify: float = 0.0


def label_of(fraction: float) -> str:
    return f"{fraction:g}"


def _progress(task: PointTask):
    def say(message: str) -> None:
        if task.show_progress:
            print(f"[ckpt] [{task.label}] {message}", file=sys.stderr, flush=True)
    return say


def run_point(task: PointTask) -> dict:
    """Run one point and store its record (see the module doc); returns the record."""
    say = _progress(task)
    stage = Stage()
    SweepStore(Path(task.outdir)).log(f"started {task.label} (process {os.getpid()})")
    try:
        row, persist = _run(task, stage, say)
    except CkptError as err:                       # bad input surfacing late: keep the row, do not store it
        row, persist = _failed(task, "error", str(err)), False
    except Exception as err:                      # a bug: say so in the row, retry on the next run
        row, persist = _failed(task, "error", f"{type(err).__name__}: {err}"), False
    record = {"key": task.key, "label": task.label, "row": asdict(row), "stage_seconds": asdict(stage),
              "stored": persist}
    if persist:
        SweepStore(Path(task.outdir)).save(task.label, record)
    say(f"done: {row.status}" + (f" ({row.reason})" if row.reason else ""))
    return record


def _run(task: PointTask, stage: Stage, say) -> tuple[PointRow, bool]:
    store = SweepStore(Path(task.outdir))
    folder = store.point_dir(task.label)
    store.clear(task.label)                       # a previous run's files (another key) must not linger
    start = time.perf_counter()
    say("solve" if task.fraction is not None else "baseline schedule (graph order, no recompute)")
    solved = _solve(task, say)
    stage.solve = time.perf_counter() - start
    if isinstance(solved, PointRow):
        return replace(solved, seconds=round(stage.solve, 1)), True
    doc, seconds = solved
    from ckpt.schedule_file import write_schedule

    write_schedule(folder / SCHEDULE, doc)
    say(f"replay: {doc['predicted']['recomputes']} recomputes, predicted peak {doc['predicted']['peak_bytes']} B")
    from ckpt.replay.workflow import replay_schedule

    start = time.perf_counter()
    try:
        result = replay_schedule(folder / SCHEDULE, task.model, folder / REPLAY, task.replay, say)
    except CkptError as err:
        stage.replay = time.perf_counter() - start
        return _row(task, doc, seconds, "replay failed", f"replay refused or failed: {err}"), True
    total = time.perf_counter() - start
    stage.verify = result.verification.seconds if result.verification is not None else 0.0
    stage.replay = total - stage.verify
    return _row_from_replay(task, doc, seconds, result.report), True


def _solve(task: PointTask, say) -> tuple[dict, float | None] | PointRow:
    """The schedule document and the solver's seconds (kept out of seq.json, which stays reproducible), or
    the row saying why the point has no schedule."""
    from ckpt.workflow import load_for_target, schedule_document, solve_model

    if task.fraction is None:
        return baseline_document(load_for_target(task.model, task.target), task.solve), None
    budget = Budget(text=task.label, fraction=task.fraction)
    nbytes = budget.resolve(task.baseline_peak)
    if nbytes < task.lower_bound:
        return _failed(task, "infeasible", f"budget {nbytes} B is below the single-op lower bound "
                                           f"{task.lower_bound} B: no schedule can fit")
    try:
        loaded, result, options = solve_model(task.model, budget, task.target, task.solve, progress=say)
    except InfeasibleBudget as err:
        status = "infeasible" if err.proven else "no schedule"
        return _failed(task, status, str(err))
    return schedule_document(loaded, budget, result, options), result.seconds


def baseline_document(loaded, options: SolveOptions) -> dict:
    """The graph order without recompute (what Deeploy runs when nobody reorders it) as a schedule document:
    solve() in the graph's own order with its own peak as the budget returns exactly that."""
    from ckpt.solver.baselines import graph_order_peak
    from ckpt.solver.solve import solve
    from ckpt.workflow import schedule_document

    peak = graph_order_peak(loaded.graph)
    options = replace(options, budget=peak, order="graph", objective="cost", cost_cap=None)
    result = solve(loaded.graph, options)
    if result.recomputes:
        raise CkptError(f"the graph order does not fit its own peak {peak} B", "report this: baselines disagree")
    doc = schedule_document(loaded, None, result, options)
    doc["solver"].update(status=BASELINE, method="none", name="none", gap=None)
    return doc


# --------------------------------------------------------------------------- rows


def _budget_bytes(task: PointTask) -> int | None:
    return None if task.fraction is None else int(task.fraction * task.baseline_peak)


def _failed(task: PointTask, status: str, reason: str) -> PointRow:
    return PointRow(label=task.label, budget_fraction=task.fraction, budget_bytes=_budget_bytes(task),
                    predicted_peak=None, replayed_peak=None, deeploy_nontiled=None, deeploy_tiled_l3=None,
                    deeploy_tiled_l2=None, deeploy_tiled_l1=None, persistent_bytes=None, recomputes=None,
                    clones_kept=None, recompute_cost=None, cost_increase_pct=None, cycles="not simulated",
                    errors="not verified", check="-", status=status, reason=reason, gap=None, seconds=None,
                    schedule=None)


def _row(task: PointTask, doc: dict, seconds: float | None, check: str, reason: str) -> PointRow:
    predicted, solver = doc["predicted"], doc["solver"]
    return PointRow(
        label=task.label, budget_fraction=task.fraction, budget_bytes=_budget_bytes(task),
        predicted_peak=predicted["peak_bytes"], replayed_peak=None, deeploy_nontiled=None, deeploy_tiled_l3=None,
        deeploy_tiled_l2=None, deeploy_tiled_l1=None, persistent_bytes=predicted["persistent_bytes"],
        recomputes=predicted["recomputes"], clones_kept=None, recompute_cost=predicted["recompute_cost"],
        cost_increase_pct=predicted["cost_increase_pct"], cycles="not simulated", errors="not verified",
        check=check, status=solver["status"], reason=reason, gap=_finite(solver["gap"]),
        seconds=None if seconds is None else round(seconds, 1), schedule=f"points/{task.label}/{SCHEDULE}")


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _row_from_replay(task: PointTask, doc: dict, seconds: float | None, report: dict) -> PointRow:
    memory = report["memory"]
    peak, persistent = memory["activation_peak_bytes"], memory["persistent_bytes"]
    arenas = peak["deeploy_tiled_arenas"] or {}
    check, errors, reason = _verification(report)
    cycles, gvsoc_errors, gvsoc_reason = _gvsoc(report["gvsoc"], asked=task.replay.deeploy_root is not None)
    reason = "; ".join(r for r in (reason, gvsoc_reason) if r)
    row = _row(task, doc, seconds, check, reason)
    return replace(row, replayed_peak=peak["replayed"], deeploy_nontiled=peak["deeploy_non_tiled"],
                   deeploy_tiled_l3=arenas.get("L3"), deeploy_tiled_l2=arenas.get("L2"),
                   deeploy_tiled_l1=arenas.get("L1"), persistent_bytes=persistent["replayed"],
                   clones_kept=report["replay"]["clones_kept"], cycles=cycles,
                   errors=gvsoc_errors or errors)


def _verification(report: dict) -> tuple[str, str, str]:
    """(check, Errors, reason): the replay against the graph order, and the golden comparison on the host."""
    found = report["verification"]
    status = found.get("status")
    if status == "skipped":
        return "not verified", "not verified", f"not verified: {found.get('reason')}"
    golden, base = found.get("golden"), found.get("baseline_golden")
    errors = f"{golden['errors']}/{golden['compared']}" if golden else "no goldens"
    if status == "miswired":
        schedule = found.get("schedule") or {}
        differing, stale = schedule.get("differing", []), schedule.get("stale_reads", [])
        return "MISWIRED", errors, (f"unverified: the replay differs from the graph order "
                                    f"({len(differing)} tensor versions differ, {len(stale)} stale reads)")
    reason = ""
    if golden and base and golden["errors"] > base["errors"]:
        reason = f"golden Errors {golden['errors']} above the graph order's {base['errors']}"
    elif golden and golden["errors"] and found.get("hint"):
        reason = f"Errors {errors} as in the graph order (known export defect, see `ckpt verify --fix-bias-gelu`)"
    return "bit-identical", errors, reason


def _gvsoc(gvsoc: dict, asked: bool) -> tuple[str, str | None, str]:
    """(cycles, gvsoc's Errors or None, reason); why gvsoc did not run is a reason only when it was asked for."""
    if gvsoc["status"] == "measured":
        cycles = gvsoc.get("train_cycles")
        return (str(cycles) if cycles is not None else "no BENCH line"), f"{gvsoc['errors']}/{gvsoc['total']}", ""
    if gvsoc["status"] == "failed":
        return "gvsoc failed", None, f"gvsoc failed: {gvsoc.get('reason')}"
    return "not simulated", None, f"not simulated: {gvsoc.get('reason')}" if asked else ""
