"""One operating point, in two tasks a sweep can run anywhere: solve it, then replay the schedule it gets.

Between the two the sweep may give a point a cheaper schedule found at a tighter budget (`carried`), so a
looser budget never costs more than a tighter one. Each task takes a picklable record and writes what it finds
into the point's folder before it returns, through a temp file and a rename:

  points/<label>/solved.json   the solve's outcome (its schedule or why there is none), keyed
  points/<label>/seq.json      the schedule the point replays (its own, or one carried from a tighter point)
  points/<label>/replay/       the replay (report.json, rewired.onnx, order.json, code/)
  points/<label>/point.json    the finished point: its row and stage times, keyed; written last

A task that fails (a refusal, a failure or a bug) returns a row saying so and stores nothing, so a rerun tries
again: only a point that finished is ever skipped. A split home's order whose activations alone overflow the chip
(replay.run.ActivationsBeyondChip) finished: its row says it does not fit, and it is stored.
"""
from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, Allocator, Flow, WeightUpdate
from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.events import as_lines
from ckpt.files import write_json
from ckpt.pipeline.deployed_solve import Checked, SolveRequest, schedule_of, solve_model, with_split_plus
from ckpt.pipeline.load import LoadedModel, load_for_target
from ckpt.pipeline.row import (
    BASELINE,
    INFEASIBLE,
    PointCheck,
    PointRow,
    empty_row,
    replayed_row,
    row_from_json,
    solved_row,
)
from ckpt.replay.predict import TilerTables
from ckpt.replay.run import ActivationsBeyondChip, ReplayOptions, replay_schedule
from ckpt.schedule_file import Schedule, dumps, write_schedule
from ckpt.solver.budget import Budget
from ckpt.solver.graph.baselines import graph_order_peak
from ckpt.solver.graph.costs import CostModel
from ckpt.solver.model.options import Objective, StageOrder, Views
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.solve import solve

SOLVED = "solved.json"
SCHEDULE = "seq.json"
REPLAY = "replay"
RECORD = "point.json"
KEY_FORMAT = 4  # bump when the meaning of a stored point changes (3: the generated code runs; 4: typed schedule)


def label_of(fraction: float) -> str:
    return f"{fraction:g}"


def content_key(parts: dict) -> str:
    """sha256 over the sorted JSON of everything that decides a result."""
    blob = json.dumps({"format": KEY_FORMAT, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class PointFolder:
    """Where one point's files live: the one definition of the layout (see the module doc)."""

    path: Path

    @property
    def solved(self) -> Path:
        return self.path / SOLVED

    @property
    def schedule(self) -> Path:
        return self.path / SCHEDULE

    @property
    def replay(self) -> Path:
        return self.path / REPLAY

    @property
    def record(self) -> Path:
        return self.path / RECORD

    def read(self, which: Path, key: str, field: str = "key") -> dict | None:
        """A stored JSON record carrying `key` (in its `field`), or None (absent, unreadable, or another key)."""
        try:
            record = json.loads(which.read_text())
        except (OSError, ValueError):
            return None
        return record if isinstance(record, dict) and record.get(field) == key else None

    def solved_record(self, key: str, proof_key: str) -> SolvedPoint | None:
        """The point's stored solve for `key`; else one whose options differed only in how long the solver ran
        (`proof_key`, SolveTask) and which proved its answer: a proof holds whatever time it took, so a sweep run
        again with a longer time limit solves again only the points left undecided."""
        stored = self.read(self.solved, key)
        if stored is not None:
            return SolvedPoint.from_stored(stored)
        stored = self.read(self.solved, proof_key, "proof_key") if proof_key else None
        record = None if stored is None else SolvedPoint.from_stored(stored)
        return record if record is not None and record.proven else None


@dataclass(frozen=True)
class PointSpec:
    label: str                       # "baseline" or the budget fraction as written ("0.8")
    budget: Budget | None            # resolved on the model's graph; None for the baseline (graph order)

    @classmethod
    def at(cls, fraction: float, baseline_peak: int) -> PointSpec:
        """The point of a budget fraction, resolved once, on the graph whose baseline peak is given: the solve
        takes this very budget and does not resolve it again."""
        label = label_of(fraction)
        return cls(label, Budget(text=label, fraction=fraction).resolved(baseline_peak))

    @property
    def fraction(self) -> float | None:
        return self.budget.fraction if self.budget else None

    @property
    def budget_bytes(self) -> int | None:
        return self.budget.nbytes if self.budget else None


@dataclass(frozen=True)
class SolveTask:
    spec: PointSpec
    model: str
    target: str
    solve: SolveOptions              # how to solve; the live bytes come from the spec's budget
    folder: str
    key: str
    lower_bound: int
    show_progress: bool = True
    flow: Flow | None = None         # the deployment the budget is checked on (None: the target's default)
    weights: WeightUpdate = DEFAULT_SETUP.weights   # how the tiled flow writes updated weights
    costs: CostModel | None = None   # the op costs (None: the built-in estimate)
    home: str = DEFAULT_SETUP.default_mem_level     # where the tiled flow keeps its tensors
    allocator: Allocator = DEFAULT_SETUP.allocator  # HEAP: a non-tiled budget is held on the first-fit heap
    persist_on_chip: bool = False    # split+: what persists brought on chip where each schedule leaves room
    split_plus_code: int | None = None   # ... beside the step's code of these bytes
    proof_key: str = ""              # the key without how long the solver may run (PointFolder.solved_record)
    park: bool = False               # --park auto: the exact model may park activations off chip (pipeline.parking),
                                     # so a budget below the single-op floor is solved, not refused
    split_plus_tables: TilerTables | None = None   # split+: the tiler's tables its room counts (None: not counted)


PROVEN = ("optimal", INFEASIBLE)     # a solve's outcomes that no longer solve could change


@dataclass(frozen=True)
class SolvedPoint:
    """A point's solve: its schedule, or the row saying why it has none."""

    key: str
    label: str
    schedule: Schedule | None
    row: PointRow | None             # the row of a point without a schedule
    seconds: float
    stored: bool = True
    proof_key: str = ""              # the solve's key without its time limit (SolveTask)

    @property
    def status(self) -> str:
        return self.schedule.solver.status if self.schedule else self.row.status

    @property
    def proven(self) -> bool:
        """The solver proved its answer (optimal within the gap, or no schedule exists)."""
        return self.status in PROVEN

    def to_dict(self) -> dict:
        """The form solved.json holds."""
        return {"key": self.key, "label": self.label, "schedule": self.schedule and self.schedule.to_dict(),
                "row": self.row and asdict(self.row), "seconds": self.seconds, "stored": self.stored,
                "proof_key": self.proof_key}

    @classmethod
    def from_stored(cls, stored: dict) -> SolvedPoint | None:
        """The record of a stored solved.json, or None when another ckpt version wrote it (solved again)."""
        try:
            schedule = stored["schedule"] and Schedule.from_dict(stored["schedule"])
            row = stored["row"] and row_from_json(stored["row"])
            return cls(stored["key"], stored["label"], schedule, row, stored["seconds"], stored["stored"],
                       stored.get("proof_key", ""))
        except (KeyError, TypeError, CkptError):
            return None


@dataclass(frozen=True)
class ReplayTask:
    spec: PointSpec
    model: str
    schedule: Schedule               # the schedule the point replays
    solver_seconds: float | None
    replay: ReplayOptions
    folder: str
    key: str
    note: str = ""                   # said in the row: where the schedule came from, when carried
    show_progress: bool = True


@dataclass(frozen=True)
class PointRecord:
    """A finished point: its row and the seconds of its stages (point.json holds `to_dict`)."""

    key: str
    label: str
    row: PointRow
    stage_seconds: dict[str, float] = field(default_factory=dict)
    stored: bool = True

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_stored(cls, stored: dict) -> PointRecord | None:
        """The record of a stored point.json, or None when another ckpt version wrote it (replayed again)."""
        try:
            return cls(**{**stored, "row": row_from_json(stored["row"])})
        except (KeyError, TypeError, ValueError):
            return None


def _say(label: str, show: bool):
    def say(message: str) -> None:
        if show:
            print(f"[ckpt] [{label}] {message}", file=sys.stderr, flush=True)
    return say


# --------------------------------------------------------------------------- solving


def solve_point(task: SolveTask) -> SolvedPoint:
    """Solve one point and store the outcome in its folder (a failure by a bug is returned, not stored)."""
    say = _say(task.spec.label, task.show_progress)
    folder = PointFolder(Path(task.folder))
    start = time.perf_counter()
    try:
        schedule, row, seconds = _solve(task, say)
        stored = True
    except Exception as err:                       # a bug or late bad input: keep the row, do not store it
        schedule, row = None, empty_row(task.spec.label, task.spec.fraction, task.spec.budget_bytes, "error",
                                   str(err) if isinstance(err, CkptError) else f"{type(err).__name__}: {err}")
        seconds, stored = time.perf_counter() - start, False
    record = SolvedPoint(task.key, task.spec.label, schedule, row, round(seconds, 3), stored, task.proof_key)
    if stored:
        write_json(folder.solved, record.to_dict())
    say("solved: " + (schedule.solver.status if schedule else f"{row.status} ({row.reason})"))
    return record


def _solve(task: SolveTask, say) -> tuple[Schedule | None, PointRow | None, float]:
    """(schedule, None, solver seconds), or (None, the row saying why there is none, seconds)."""
    spec = task.spec
    start = time.perf_counter()
    if spec.fraction is None:
        say("baseline schedule (graph order, no recompute)")
        loaded = load_for_target(task.model, task.target, task.costs, task.weights, home=task.home, flow=task.flow)
        return baseline_schedule(loaded, task.solve, task.split_plus_code if task.persist_on_chip else False,
                                 task.split_plus_tables), None, 0.0
    if spec.budget_bytes < task.lower_bound and not task.park:
        return None, empty_row(spec.label, spec.fraction, spec.budget_bytes, INFEASIBLE,
                               f"budget {spec.budget_bytes} B is below the single-op lower bound "
                               f"{task.lower_bound} B: no schedule can fit"), 0.0
    say("solve")
    try:
        schedule, result = solve_model(task.model, spec.budget, task.target, task.solve, task.costs,
                                       progress=as_lines(say), flow=task.flow, weights=task.weights, home=task.home,
                                       allocator=task.allocator, persist_on_chip=task.persist_on_chip,
                                       split_plus_code=task.split_plus_code, park=task.park,
                                       split_plus_tables=task.split_plus_tables)
    except InfeasibleBudget as err:
        return None, empty_row(spec.label, spec.fraction, spec.budget_bytes,
                               INFEASIBLE if err.proven else "no schedule", str(err)), \
            time.perf_counter() - start
    return schedule, None, result.seconds


def baseline_schedule(loaded: LoadedModel, options: SolveOptions, split_plus: int | None | bool = False,
                      tables: TilerTables | None = None) -> Schedule:
    """The graph order without recompute (what Deeploy runs when nobody reorders it) as a schedule:
    solve() in the graph's own order with its own peak as the budget returns exactly that. `split_plus`: False, or
    split+ chosen for it beside the step's code of these bytes (None: not counted) and the tiler's tables as
    `tables` gives them (None: not counted)."""
    peak = graph_order_peak(loaded.graph)
    options = replace(options, budget=peak, order=StageOrder.GRAPH, objective=Objective.COST, cost_cap=None,
                      views=Views.FIXED)
    result = solve(loaded.graph, options)
    if result.recomputes:
        raise CkptError(f"the graph order does not fit its own peak {peak} B", "report this: baselines disagree")
    if split_plus is False:
        schedule = schedule_of(loaded, None, result, options)
    else:
        request = SolveRequest(str(loaded.optimizer_path or ""), loaded.target, None, persist_on_chip=True,
                               split_plus_code=split_plus, split_plus_tables=tables)
        schedule = with_split_plus(loaded, request, result, options, Checked("peak_bytes", result.peak_bytes, None,
                                                                             options.budget))
    return replace(schedule, solver=replace(schedule.solver, status=BASELINE, method="none", name="none", gap=None,
                                            time_limit=None))


# --------------------------------------------------------------------------- the schedule a point replays


def carried(own: Schedule | None, others: list[tuple[str, Schedule]], budget_bytes: int, tolerance: float
            ) -> tuple[Schedule | None, str]:
    """The cheapest schedule that fits this point: its own, or one solved at another point (`others`, label and
    schedule) whose held figure fits `budget_bytes` and costs less. A carried schedule keeps its sequence and
    figures; its budget is this point's and its status is judged against this point's own lower bound."""
    best, note = own, ""
    best_cost = _carried_cost(own) if own else math.inf
    for label, other in others:
        cost = _carried_cost(other)
        if other.predicted.held_bytes <= budget_bytes and cost < best_cost:
            best, best_cost, note = other, cost, label
    if best is own or own is None and best is None:
        return own, ""
    budget = own.budget if own else replace(best.budget, bytes=budget_bytes)
    bound = own.solver.cost_lower_bound if own else None    # on the planned cost, over one stage order
    planned = best.predicted.planned_cost + best.predicted.park_cycles if best.predicted.planned_cost is not None \
        else best_cost
    gap = None if bound is None else (0.0 if planned <= bound else (planned - bound) / planned)
    status = "optimal" if gap is not None and gap <= tolerance else best.solver.status
    solver = replace(best.solver, status=status, gap=None if gap is None else round(gap, 6), cost_lower_bound=bound,
                     carried_from=note)
    return replace(best, budget=budget, solver=solver), f"schedule carried from budget {note} (cheaper, and it fits)"


def _carried_cost(schedule: Schedule) -> int:
    """What a schedule adds to the step: its recomputes' cycles and its parking's (--park auto), as the solve's
    bound counts them."""
    return schedule.predicted.recompute_cost + schedule.predicted.park_cycles


# --------------------------------------------------------------------------- replaying


def replay_key(schedule: Schedule, replay: ReplayOptions, model_sha256: str, code: str) -> str:
    """What decides a replay's result: the schedule as replayed, the model, the replay options and what the
    generated code is built against (`code`: the kernels' fingerprint, or why it cannot run)."""
    options = asdict(replay)
    options["deeploy_root"] = str(replay.deeploy_root) if replay.deeploy_root else None
    options["gvsoc"] = str(replay.gvsoc) if replay.gvsoc else None
    options.pop("record_time", None)
    if replay.on_chip_code is None:           # split+ options, where unset, leave the keys of earlier runs as they were
        options.pop("on_chip_code")
    if replay.on_chip_tables is None:
        options.pop("on_chip_tables")
    if replay.gvsoc_draws == 1:               # so does one draw on gvsoc
        options.pop("gvsoc_draws")
    if not replay.deeploy.persist_on_chip and not replay.deeploy.on_chip_persistent:
        options["deeploy"].pop("persist_on_chip")
        options["deeploy"].pop("on_chip_persistent")
    if not replay.deeploy.parked:             # nor does parking nothing
        options["deeploy"].pop("parked")
    return content_key({"schedule": dumps(schedule), "model": model_sha256, "replay": options, "code": code})


def replay_point(task: ReplayTask) -> PointRecord:
    """Write the point's seq.json, replay it (Deeploy, host check, gvsoc) and store the finished point."""
    say = _say(task.spec.label, task.show_progress)
    folder = PointFolder(Path(task.folder))
    stage = {"replay": 0.0, "verify": 0.0, "code": 0.0, "gvsoc": 0.0}
    row = solved_row(task.spec.label, task.spec.fraction, task.spec.budget_bytes, task.schedule, task.solver_seconds,
                     "not verified", task.note, f"points/{task.spec.label}/{SCHEDULE}")
    folder.record.unlink(missing_ok=True)           # a crash midway leaves the point unfinished
    stored = True
    try:
        write_schedule(folder.schedule, task.schedule)
        say(f"replay: {task.schedule.predicted.recomputes} recomputes, predicted peak "
            f"{task.schedule.predicted.peak_bytes} B")
        start = time.perf_counter()
        options = replace(task.replay, overwrite=True)   # the point folder is the sweep's own
        result = replay_schedule(folder.schedule, task.model, folder.replay, options, say, held=task.schedule)
        total = time.perf_counter() - start
        stage["verify"] = result.seconds.get("verify", 0.0)
        stage["code"] = result.seconds.get("code", 0.0)
        stage["gvsoc"] = result.seconds.get("gvsoc", 0.0)
        stage["replay"] = total - stage["verify"] - stage["code"] - stage["gvsoc"]
        row = replayed_row(row, result.report, gvsoc_asked=task.replay.gvsoc is not None)
    except CkptError as err:                          # refused or failed: said in the row, tried again on a rerun
        if isinstance(err, ActivationsBeyondChip):   # refused before Deeploy runs: the order's activations overflow
            row = replace(row, check=PointCheck.DOES_NOT_FIT.value, reason=err.short)   # the chip, no failure
        else:
            row = replace(row, check=PointCheck.REPLAY_FAILED.value, reason=f"replay refused or failed: {err}")
            stored = False
    except Exception as err:                          # a bug: say so in the row, retry on the next run
        row = replace(row, check=PointCheck.REPLAY_FAILED.value, status="error", reason=f"{type(err).__name__}: {err}")
        stored = False
    record = PointRecord(task.key, task.spec.label, row, {k: round(v, 3) for k, v in stage.items()}, stored)
    if stored:
        write_json(folder.record, record.to_dict())
    say(f"done: {row.status}" + (f" ({row.reason})" if row.reason else ""))
    return record

