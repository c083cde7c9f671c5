"""One operating point as a row: what a sweep tabulates and plots, whatever happened to the point.

A field is None ("-") where it was not measured and `reason` says why, so an infeasible, timed-out or
unverified point is visible rather than missing. Rows are made here only: from a schedule and its
replay report, or from the reason a point has neither.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ckpt.deeploy_bridge.records import FlowFigures
from ckpt.gvsoc.run import OnChipNeed
from ckpt.replay.report import (
    CheckStatus,
    CodeRunRecord,
    CodeStatus,
    GvsocRecord,
    LevelMemory,
    ReplayReport,
    SimStatus,
    VerificationSection,
    record_from_json,
)
from ckpt.schedule_file import Schedule
from ckpt.targets import TARGET_TABLE, uses_deeploy

BASELINE = "baseline"
INFEASIBLE = "infeasible"              # a point proven to have no schedule (below the floor, or by the solver)
REFERENCE = "off-chip graph order"     # with the home on chip: the graph order deployed off chip, for reference
NOT_VERIFIED = "not verified"


class PointCheck(StrEnum):
    """A point's replay check, as its row says it."""

    BIT_IDENTICAL = "bit-identical"    # the replayed order computes what the graph order computes, bit for bit
    MISWIRED = "MISWIRED"              # it does not
    OVER_BUDGET = "OVER BUDGET"        # the replayed figure is over the schedule's budget
    REPLAY_FAILED = "replay failed"    # refused or failed (reason)
    DOES_NOT_FIT = "does not fit"      # the replayed order's activations alone overflow the split home's on-chip
                                       # level (reason), refused before Deeploy runs: at the baseline (the graph
                                       # order), why a user sweeps it; at a point, a budget above what fits there
    NOT_VERIFIED = NOT_VERIFIED        # not checked (reason)
    NONE = "-"                         # no schedule to check

    @property
    def failed(self) -> bool:
        return self in (PointCheck.MISWIRED, PointCheck.OVER_BUDGET, PointCheck.REPLAY_FAILED)


@dataclass(frozen=True)
class PointRow:
    """One operating point of a sweep (bytes unless named otherwise)."""

    label: str                       # "baseline" or the budget fraction as given ("0.8")
    budget_fraction: float | None
    budget_bytes: int | None
    predicted_peak: int | None       # ckpt's replay semantics on the graph it solved on
    replayed_peak: int | None        # the same on the rewired graph the replay deploys
    heap: int | None                 # first-fit L2 heap the non-tiled code needs
    deeploy_nontiled: int | None     # Deeploy's own non-tiled counter
    arena_predicted: int | None      # ckpt's predicted arena at the tiled flow's home level
    home: str | None                 # the tiled flow's home level (Deeploy's default memory level)
    levels: dict[str, LevelMemory]   # the tiled flow per memory level: constants, arena, total the code reserves
    on_chip: int | None              # what the whole step needs on chip (the target's on-chip level) to run
                                     # there: its code and data, what it allocates there, and (home off chip) its
                                     # constants and arena brought in
    on_chip_capacity: int | None     # the bytes the chip's on-chip level gives it
    persistent_bytes: int | None
    recomputes: int | None
    clones_kept: int | None
    recompute_cost: int | None       # cycles (ckpt's cost model) the recomputes add
    cost_increase_pct: float | None  # ... as % of the baseline step
    cycles: int | None               # the deployed (tiled) step on gvsoc, measured; None: not simulated (reason);
                                     # a split step: its train network, per mini-batch
    cycles_predicted: int | None     # measured op costs: the calibrated graph-order step + the recompute cycles
    overhead_pct: float | None       # measured cycles over the baseline's, %
    overhead_pct_predicted: float | None   # predicted cycles over the baseline's predicted, %
    errors: str                      # the verdict, "N/M": gvsoc's when simulated, else the generated code's run
                                     # on this host; "not run" / "failed" when the code did not run (see reason)
    host_errors: str                 # ckpt's host executor against the goldens, "N/M", beside it
    code_check: str                  # the generated code's outputs vs the graph order's code: bit-identical,
                                     # differs, not run, failed, -
    check: str                       # replayed order vs graph order on the host: bit-identical, MISWIRED, ...
    status: str                      # solver status (optimal, feasible, heuristic, baseline), or infeasible, ...
    reason: str                      # why a point has no verified schedule, or what its Errors mean ("" if nothing)
    gap: float | None
    seconds: float | None            # solver seconds (timed: differs run to run)
    schedule: str | None             # the point's seq.json, relative to the sweep folder
    optimizer_cycles: int | None = None            # a split step: its optimizer network per update, measured
    optimizer_cycles_predicted: int | None = None  # ... and as the calibration measured it (no schedule moves it)
    device_state: dict[str, str] = field(default_factory=dict)   # a split step on gvsoc: its weights' hashes at the end
    on_chip_parts: dict[str, int] = field(default_factory=dict)  # what `on_chip` is made of: code (and data),
                                                                 # constants, arena (the home's and what is
                                                                 # allocated on chip), runtime (gvsoc.run's
                                                                 # runtime_heap, where counted)
    device_check: str = "-"          # ... against the baseline's (graph order) on gvsoc: bit-identical, differs, -
    non_tiled_arena: int | None = None   # the non-tiled flow's arena: what its generated code allocates where it
                                         # ran, else ckpt's layout (None: the code mallocs on the heap)
    code_errors: str = "-"           # the generated (tiled) code run on this host, "N/M" (target none: the host
                                     # executor's); "not run", "failed", "-"
    gvsoc_errors: str = "-"          # the deployed step on gvsoc, "N/M"; "failed" (reason); "-": not simulated
    persist_on_chip: int | None = None        # split+ (--persist-on-chip auto): the persistent tensors (Deeploy's
                                              # names) the schedule brings on chip; None: no split+
    persist_on_chip_bytes: int | None = None  # ... and their bytes (a copy sharing another's bytes counted once)
    parked: int | None = None                 # --park auto: the activations the schedule parks off chip (Deeploy's
                                              # names); None: no parking
    parked_bytes: int | None = None           # ... and their bytes
    cycles_draws: list[int] = field(default_factory=list)      # run from several starting states (gvsoc.draws):
    optimizer_draws: list[int] = field(default_factory=list)   # each draw's cycles and optimizer cycles, of which
                                                               # `cycles` (`optimizer_cycles`) is the median;
                                                               # gvsoc_errors is then the worst draw's; empty: one

    @property
    def peak(self) -> int | None:
        """The live peak the table shows: the replayed one, else the predicted one."""
        return self.replayed_peak if self.replayed_peak is not None else self.predicted_peak

    @property
    def verified(self) -> bool:
        """Replayed and bit-identical to the graph order on the host, and its generated code, where it ran,
        computed the goldens (no error) and the graph order's code's outputs bit for bit."""
        compared = self.code_check in ("bit-identical", "not compared")   # not compared: no graph-order code here
        code_ok = self.code_check == "not run" or (compared and _no_errors(self.errors))
        return self.check == PointCheck.BIT_IDENTICAL and self.replayed_peak is not None and code_ok \
            and self.gvsoc_errors != "failed"


    @property
    def fits_on_chip(self) -> bool | None:
        """Whether the whole step fits the chip's on-chip level (None: not known, the step was not built for the
        chip)."""
        return None if self.on_chip is None else self.on_chip <= self.on_chip_capacity

    @property
    def home_figures(self) -> LevelMemory | None:
        """The tiled flow's home level as the generated code reserves it."""
        return self.levels.get(self.home) if self.home else None

    @property
    def code_failed(self) -> bool:
        """Its generated code failed, erred, or computed other numbers than the graph order's code."""
        ran = self.code_check in ("bit-identical", "differs")
        return self.code_check in ("failed", "differs") or (ran and not _no_errors(self.errors)) \
            or self.gvsoc_errors == "failed" or (self.gvsoc_errors != "-" and not _no_errors(self.gvsoc_errors))


def _no_errors(errors: str) -> bool:
    return errors.partition("/")[0] == "0"


def empty_row(label: str, fraction: float | None, budget_bytes: int | None, status: str, reason: str) -> PointRow:
    """A point without a schedule: only its budget, its status and why."""
    return PointRow(label=label, budget_fraction=fraction, budget_bytes=budget_bytes, predicted_peak=None,
                    replayed_peak=None, heap=None, deeploy_nontiled=None, arena_predicted=None, home=None, levels={},
                    on_chip=None, on_chip_capacity=None,
                    persistent_bytes=None, recomputes=None, clones_kept=None, recompute_cost=None,
                    cost_increase_pct=None, cycles=None, cycles_predicted=None, overhead_pct=None,
                    overhead_pct_predicted=None, errors=NOT_VERIFIED, host_errors="-", code_check="-",
                    check=PointCheck.NONE.value, status=status, reason=reason, gap=None, seconds=None, schedule=None)


def solved_row(label: str, fraction: float | None, budget_bytes: int | None, found: Schedule,
               seconds: float | None, check: str, reason: str, schedule: str) -> PointRow:
    """A point with a schedule (`found`, written at `schedule`), before (or without) its replay."""
    predicted, solver = found.predicted, found.solver
    plus = predicted.split_plus
    return replace(empty_row(label, fraction, budget_bytes, solver.status, reason),
                   predicted_peak=predicted.peak_bytes, heap=predicted.heap_bytes,
                   non_tiled_arena=predicted.arena_bytes,
                   persistent_bytes=predicted.persistent_bytes, recomputes=predicted.recomputes,
                   recompute_cost=predicted.recompute_cost, cost_increase_pct=predicted.cost_increase_pct,
                   cycles_predicted=predicted.step_cycles, optimizer_cycles_predicted=predicted.optimizer_cycles,
                   persist_on_chip=len(plus["tensors"]) if plus else None,
                   persist_on_chip_bytes=plus["bytes"] if plus else None,
                   parked=len(predicted.parked_tensors) if predicted.parked else None,
                   parked_bytes=predicted.parked["bytes"] if predicted.parked else None,
                   check=check, gap=_finite(solver.gap),
                   seconds=None if seconds is None else round(seconds, 1), schedule=schedule)


def replayed_row(row: PointRow, report: ReplayReport, gvsoc_asked: bool) -> PointRow:
    """`row` completed with what its replay measured."""
    memory = report.memory
    check, host_errors, reason = _verification(report.verification)
    code_check, code_errors, code_reason = _code_run(report.code_verdict, report.model.target, host_errors)
    cycles, gvsoc_errors, gvsoc_reason = _gvsoc(report.gvsoc.get("tiled"), gvsoc_asked)
    if report.budget is not None and not report.budget.fits:
        check, reason = PointCheck.OVER_BUDGET.value, "; ".join(r for r in (reason, f"replayed {report.budget.checked} "
                                                               f"{report.budget.replayed} B is over the budget "
                                                               f"{report.budget.limit} B") if r)
    home = (report.deeploy or {}).get("tiled")
    home_level = home.setup.default_mem_level if home else None
    home_figures = memory.levels.get(home_level) if home_level else None
    optimizer = (report.deeploy_optimizer or {}).get("tiled")
    levels = step_levels(memory.levels, optimizer)
    tiled = report.gvsoc.get("tiled")
    arena = memory.arena_code if memory.arena_code is not None else memory.arena if not report.deeploy else None
    return replace(row, replayed_peak=memory.replayed_peak, heap=memory.heap, deeploy_nontiled=memory.deeploy_non_tiled,
                   non_tiled_arena=arena,
                   arena_predicted=home_figures.predicted_arena if home_figures else None,
                   optimizer_cycles=tiled.optimizer_cycles if tiled is not None and tiled.status is SimStatus.MEASURED
                   else None,
                   device_state=dict(tiled.state) if tiled is not None else {},
                   cycles_draws=list(tiled.draws) if tiled is not None and cycles is not None else [],
                   optimizer_draws=list(tiled.optimizer_draws) if tiled is not None and cycles is not None else [],
                   home=home_level, levels=levels, on_chip=_on_chip(report, home_level, levels),
                   on_chip_parts=_on_chip_parts(report, home_level, levels),
                   on_chip_capacity=_chip_memory(report).capacity if _chip_memory(report) else None,
                   persistent_bytes=memory.persistent_replayed,
                   clones_kept=report.replay.clones_kept,
                   cycles=cycles, errors=gvsoc_errors or code_errors, host_errors=host_errors, code_check=code_check,
                   code_errors=code_errors, gvsoc_errors=gvsoc_errors or "-",
                   check=check, reason="; ".join(r for r in (row.reason, reason, code_reason, gvsoc_reason) if r))


def _chip_memory(report: ReplayReport) -> OnChipNeed | None:
    run = report.gvsoc.get("tiled")
    return run.on_chip if run is not None else None


def step_levels(train: dict[str, LevelMemory], optimizer: FlowFigures | None) -> dict[str, LevelMemory]:
    """The tiled flow's levels for the whole step: a split step's two networks together (each level's constants
    and arenas added, but the arenas the optimizer borrows from the train network (DeeploySetup.optimizer_borrows):
    the larger); a one-network step's as they are."""
    if optimizer is None:
        return dict(train)
    shared = optimizer.setup.optimizer_borrows
    found = {}
    for name in sorted(set(train) | set(optimizer.arena) | set(optimizer.static)):
        own = train.get(name) or LevelMemory(arena=0, static=0)
        arena, static = optimizer.arena.get(name, 0), optimizer.static.get(name, 0)
        merged = max(own.arena or 0, arena) if name in shared else (own.arena or 0) + arena
        found[name] = replace(own, arena=merged if own.arena is not None or arena else own.arena,
                              static=(own.static or 0) + static if own.static is not None or static else own.static)
    return found


def _on_chip(report: ReplayReport, home: str | None, levels: dict[str, LevelMemory] | None = None) -> int | None:
    """The whole step in the chip's on-chip level: as built for the chip, plus, when its tensors live off chip,
    its constants and arena there (the on-chip tiling buffers stay)."""
    need = _chip_memory(report)
    if need is None or home is None:
        return None
    chip = TARGET_TABLE.get(report.model.target)
    levels = report.memory.levels if levels is None else levels
    off_chip = levels.get(home) if chip is None or not chip.is_on_chip(home) else None
    return need.step + (off_chip.total if off_chip is not None and off_chip.total is not None else 0)


def _on_chip_parts(report: ReplayReport, home: str | None, levels: dict[str, LevelMemory]) -> dict[str, int]:
    """`_on_chip` in its parts: the step's code and data, its constants, and its arenas (what it allocates on
    chip, and its home's arena where the home is brought on chip)."""
    need = _chip_memory(report)
    if need is None or home is None:
        return {}
    chip = TARGET_TABLE.get(report.model.target)
    level = levels.get(home) or LevelMemory(arena=0, static=0)
    constants, arena = level.static or 0, level.arena or 0
    if chip is not None and chip.is_on_chip(home):          # the constants are in the program, the arena allocated
        parts = {"code": need.static - need.test_data - constants, "constants": constants, "arena": need.heap}
    else:
        parts = {"code": need.static - need.test_data, "constants": constants, "arena": need.heap + arena}
    return parts | ({"runtime": need.runtime} if need.runtime else {})     # its drivers, file system, open files


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _verification(found: VerificationSection) -> tuple[str, str, str]:
    """(check, Errors, reason): the replay against the graph order, and the golden comparison on the host."""
    if found.status is CheckStatus.SKIPPED:
        return NOT_VERIFIED, NOT_VERIFIED, f"not verified: {found.reason}"
    golden, base = found.golden, found.baseline_golden
    errors = f"{golden.errors}/{golden.compared}" if golden else "no goldens"
    if found.status is CheckStatus.MISWIRED:
        schedule = found.schedule
        return PointCheck.MISWIRED.value, errors, (f"unverified: the replay differs from the graph order "
                                    f"({len(schedule.differing)} tensor versions differ, "
                                    f"{len(schedule.stale_reads)} stale reads)")
    reason = ""
    if golden and base and golden.errors > base.errors:
        reason = f"host executor: golden Errors {golden.errors} above the graph order's {base.errors}"
    elif golden and golden.errors:
        reason = f"host executor: Errors {errors} as in the graph order" \
            + (" (see `ckpt verify`'s hint)" if found.hint else "")
    return PointCheck.BIT_IDENTICAL.value, errors, reason


def _code_run(run: CodeRunRecord | None, target: str, host_errors: str) -> tuple[str, str, str]:
    """(code check, Errors, reason): the generated code's run on this host, the verdict of the point. Target none
    has no generated code: the host executor's Errors stand."""
    if run is None:
        return ("not run", host_errors, "") if not uses_deeploy(target) else ("-", NOT_VERIFIED, "")
    if run.status is not CodeStatus.RAN:
        return run.status.value, run.status.value, f"generated code {run.status}: {run.reason}"
    errors = run.golden.fraction if run.golden else "no goldens"
    reasons = []
    if run.golden and run.golden.errors:
        reasons.append(f"generated code: Errors {errors} (" + ", ".join(
            f"{k} {v}" for k, v in run.golden.errors_by_tensor.items()) + ")")
    if run.graph_order == "differs":
        reasons.append("generated code differs from the graph order's in " + ", ".join(run.differing))
    if run.host is not None and run.host.over_tolerance:
        worst = run.host.worst
        reasons.append(f"generated code and host executor differ by up to {run.host.max_abs_diff:.3g}"
                       + (f" at {worst.tensor}{worst.index}" if worst else ""))
    if run.closeness is not None and run.closeness.line:       # Errors by the harness's rule, yet not near
        reasons.append(f"generated code: {run.closeness.line}")
    check = run.graph_order if run.graph_order in ("bit-identical", "differs") else "not compared"
    return check, errors, "; ".join(reasons)


def _gvsoc(gvsoc: GvsocRecord | None, asked: bool) -> tuple[int | None, str | None, str]:
    """(cycles, gvsoc's Errors or None, reason) of the deployed (tiled) step; why gvsoc did not run is a reason only
    when it was asked for, or when it did not run because the step does not fit."""
    if gvsoc is None:
        return None, None, ""
    if gvsoc.status is SimStatus.MEASURED:
        return gvsoc.cycles, f"{gvsoc.errors}/{gvsoc.total}", ""
    if gvsoc.status is SimStatus.FAILED:     # the deployed step failed: its verdict, not the host's
        return None, "failed", f"gvsoc failed: {gvsoc.reason}"
    return None, None, f"not simulated: {gvsoc.reason}" if asked or gvsoc.on_chip is not None else ""


def over_off_chip(rows: list[PointRow]) -> bool:
    """Whether the rows' overheads are over the off-chip graph order (REFERENCE): the baseline does not fit its
    home, so it has no cycles of its own (several models' rows: every model's; else each baseline's line says)."""
    bases = [r for r in rows if r.status == BASELINE]
    return bool(bases) and all(r.check == PointCheck.DOES_NOT_FIT for r in bases)


def with_overheads(rows: list[PointRow]) -> list[PointRow]:
    """The rows with their cycles over the baseline's, measured and predicted, where both are known; where the
    baseline does not fit its home (over_off_chip), both over the off-chip graph order's measured cycles (it has
    no prediction: the calibration is of the points' deployment), the baseline left without; the reference's own
    row is left as it is."""
    base = next((r for r in rows if r.status == BASELINE), None)
    measured, predicted = (base and base.cycles), (base and base.cycles_predicted)
    if over_off_chip(rows):
        off_chip = next((r for r in rows if r.label == REFERENCE), None)
        measured = predicted = off_chip.cycles if off_chip is not None else None

    def device(row: PointRow) -> str:
        if not row.device_state or base is None or not base.device_state:
            return "-"
        return "bit-identical" if row.device_state == base.device_state else "differs"

    def over(row: PointRow) -> PointRow:
        if row.label == REFERENCE:
            return row
        if over_off_chip(rows) and row is base:
            return replace(row, overhead_pct=None, overhead_pct_predicted=None)
        return replace(row, overhead_pct=_pct(row.cycles, measured),
                       overhead_pct_predicted=_pct(row.cycles_predicted, predicted), device_check=device(row))

    return [over(r) for r in rows]


def _pct(value: int | None, reference: int | None) -> float | None:
    return round(100.0 * (value - reference) / reference, 4) if value is not None and reference else None


def row_from_json(doc: dict) -> PointRow:
    """A row as stored (point.json, solved.json), its level records rebuilt."""
    return record_from_json(PointRow, doc)
