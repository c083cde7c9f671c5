"""Run a PuLP model on HiGHS (through highspy) or CBC, and say honestly how it ended.

Everything ckpt asks HiGHS beyond PuLP's interface lives here: the warm start, the objective target, the dual
bound, whether an answer is held, whether the time limit ended the run. Runs are single-threaded unless asked
otherwise: HiGHS's parallel search takes a different path per thread count (and a machine, or a CI runner, with
one free core has one), so one thread is what makes the same inputs give the same answer everywhere.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
from dataclasses import dataclass
from enum import StrEnum

import highspy
import pulp

from ckpt.errors import CkptError
from ckpt.solver.model import clock, watchdog
from ckpt.solver.model.options import Backend, Clock

KILL_SHARE = 1.1      # a HiGHS run is killed once it has run this share of its time limit...
KILL_SECONDS = 1.0    # ...plus this: far past where it should have stopped
WATCHED_VARIABLES = 1000   # smaller models solve in milliseconds, less than the fork costs: they run here
BOUND_TOLERANCE = 1e-6     # relative: what a dual bound may be off by (HiGHS's tolerances) before it is rounded


class RunStatus(StrEnum):
    """How one solver run ended."""

    OPTIMAL = "optimal"          # within the gap tolerance
    FEASIBLE = "feasible"        # stopped (time, target) with a solution
    INFEASIBLE = "infeasible"    # proven: no solution exists
    NO_SOLUTION = "no_solution"  # stopped without a solution (proves nothing)


@dataclass(frozen=True)
class BackendOptions:
    name: Backend | str = Backend.HIGHS
    time_limit: float | None = 600.0
    gap: float = 1e-4
    threads: int | None = 1          # None: the solver's choice (HiGHS: one per core, load-dependent paths)
    verbose: bool = False
    ends_by: float | None = None     # clock.now() at which the whole solve ends: a watched run still
                                     # going then is killed, whatever its own time limit allows
    clock: Clock = Clock.WALL        # what time_limit counts, for a whole solve (solver/model/clock.py); a
                                     # single run reads the clock of the solve it is part of
    restart: bool = True             # HiGHS may restart its search after the root (relaxation.py: off)

    @property
    def backend(self) -> Backend:
        try:
            return Backend(self.name)
        except ValueError:
            raise CkptError(f"unknown solver '{self.name}'", f"choose one of {', '.join(b.value for b in Backend)}") \
                from None


@dataclass(frozen=True)
class Outcome:
    status: RunStatus
    gap: float | None
    seconds: float
    dual_bound: float = 0.0          # the best bound the solver proved on the objective (0: none)
    has_answer: bool = False         # the solver holds a feasible solution to read
    timed_out: bool = False          # the time limit ended the run: another machine load may answer otherwise


@contextlib.contextmanager
def _quiet_stdout(enabled: bool):
    """HiGHS prints its banner from C++ when created, whatever output_flag says; keep stdout for ckpt."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 1)
        try:
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


class _HiGHSWithStart(pulp.HiGHS):
    """PuLP's highspy interface, plus handing HiGHS a known feasible solution before it starts."""

    def __init__(self, start: dict[str, float] | None, stop_at: float | None = None,
                 cpu_limit: float | None = None, restart: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.start = start
        self.stop_at = stop_at
        self.cpu_limit = cpu_limit
        self.restart = restart

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        with _quiet_stdout(enabled=not self.msg):
            super().createAndConfigureSolver(lp)

    def callSolver(self, lp: pulp.LpProblem) -> None:
        # HiGHS keeps one thread pool per process, sized by the first run; a later run asking for another
        # thread count is refused ("scheduler has already been initialized") and solves nothing.
        reset = getattr(highspy.Highs, "resetThreadScheduler", None)   # absent from old highspy releases
        if reset is not None:
            reset(True)
        if not self.restart:
            lp.solverModel.setOptionValue("mip_allow_restart", False)
        if self.stop_at is not None:   # a schedule this cheap is proven good enough elsewhere: stop there
            lp.solverModel.setOptionValue("objective_target", float(self.stop_at))
        if self.start:
            solution = highspy.HighsSolution()
            solution.col_value = [self.start.get(v.name, 0.0) for v in lp.variables()]
            solution.value_valid = True
            lp.solverModel.setSolution(solution)
        if self.cpu_limit is not None:
            _interrupt_after_cpu(lp.solverModel, self.cpu_limit)
        lp.solverModel.run()


def _interrupt_after_cpu(model: highspy.Highs, seconds: float) -> None:
    """Have HiGHS stop as at its time limit once this run has used `seconds` of CPU: HiGHS's own limit counts
    wall seconds. Asked at its interrupt points (each simplex iteration, each node of the search): as often as
    it reads its own clock."""
    ends = clock.own_cpu_seconds() + seconds

    def past_limit(event) -> None:
        if clock.own_cpu_seconds() > ends:
            event.interrupt()

    model.cbSimplexInterrupt += past_limit
    model.cbIpmInterrupt += past_limit
    model.cbMipInterrupt += past_limit


def make_solver(options: BackendOptions, start: dict[str, float] | None = None,
                stop_at: float | None = None) -> pulp.LpSolver:
    """The solver for one run; on the CPU clock (of the solve this run is part of), HiGHS counts its time limit
    in CPU seconds (CBC cannot: its limit stays in wall seconds)."""
    cpu = clock.current() is Clock.CPU and options.backend is Backend.HIGHS and options.time_limit is not None
    common = dict(msg=options.verbose, timeLimit=None if cpu else options.time_limit, gapRel=options.gap,
                  threads=options.threads)
    if options.backend is Backend.HIGHS:
        return _HiGHSWithStart(start, stop_at, options.time_limit if cpu else None, options.restart, **common,
                               random_seed=0)
    return pulp.PULP_CBC_CMD(**common, warmStart=bool(start), options=["randomSeed 1", "randomCbcSeed 1"])


def run(lp: pulp.LpProblem, options: BackendOptions, start: dict[str, float] | None = None,
        stop_at: float | None = None) -> Outcome:
    """Solve; a `start` (variable name -> value) is given to the solver as its first incumbent, and HiGHS
    stops as soon as it holds a solution of objective `stop_at` or less (CBC runs on). A HiGHS run with a time
    limit on a model of some size runs in a child process that is killed once it overruns the limit by far
    (solver/model/watchdog.py): it then ends with no answer, timed out."""
    if start:
        for var in lp.variables():
            var.setInitialValue(start.get(var.name, 0.0), check=False)
    solver = make_solver(options, start, stop_at)
    began = clock.now()
    if _watched(lp, options):
        report = watchdog.in_child(lambda: _solved(lp, solver), kill_after(options),
                                   cpu=clock.current() is Clock.CPU)
        if report is not None:
            report.apply_to(lp)
    else:
        report = _solved(lp, solver)
    seconds = clock.now() - began
    if report is None:
        return Outcome(status=RunStatus.NO_SOLUTION, gap=None, seconds=seconds, timed_out=True)
    status = report.status()
    timed_out = report.time_limit_hit if report.time_limit_hit is not None else \
        bool(options.time_limit) and seconds >= 0.9 * options.time_limit
    if status is RunStatus.INFEASIBLE and options.backend is Backend.CBC and timed_out:
        status = RunStatus.NO_SOLUTION  # CBC's preprocessing says "infeasible" when its time runs out: not a proof
    return Outcome(status=status, gap=report.gap(options, status), seconds=seconds, dual_bound=report.dual_bound(),
                   has_answer=report.has_answer(status), timed_out=timed_out)


def _watched(lp: pulp.LpProblem, options: BackendOptions) -> bool:
    """Whether the run goes to the watchdog's child: a HiGHS run with a time limit, on a model big enough that
    its run takes longer than the fork."""
    return (options.backend is Backend.HIGHS and options.time_limit is not None and watchdog.can_fork()
            and lp.numVariables() >= WATCHED_VARIABLES)


def kill_after(options: BackendOptions) -> float:
    """Seconds after which a run is stopped from outside. HiGHS overruns its time limit a little in normal
    work (it looks at the clock between steps): only a run far past it is killed, or one still going when
    the whole solve must end (a short run's overrun would otherwise carry the solve past its limit)."""
    seconds = KILL_SHARE * options.time_limit + KILL_SECONDS
    return seconds if options.ends_by is None else max(0.0, min(seconds, options.ends_by - clock.now()))


@dataclass(frozen=True)
class _Report:
    """How a run ended, as plain data (it crosses from the watchdog's child): PuLP's statuses, the variables'
    values by name, and what HiGHS says beyond them (None: the solver does not tell)."""

    lp_status: int
    sol_status: int
    values: dict[str, float | None]
    mip_gap: float | None = None
    mip_dual_bound: float | None = None
    primal_feasible: bool | None = None
    time_limit_hit: bool | None = None
    integral: bool = False      # every solution's objective is an integer (integer variables, integer costs)

    def apply_to(self, lp: pulp.LpProblem) -> None:
        """Write the answer into `lp` as if it had been solved here."""
        for var in lp.variables():   # (PuLP may add a variable of its own while it solves: not ours)
            var.varValue = self.values[var.name]
        lp.assignStatus(self.lp_status, self.sol_status)

    def status(self) -> RunStatus:
        if self.lp_status == pulp.LpStatusInfeasible or self.sol_status == pulp.LpSolutionInfeasible:
            return RunStatus.INFEASIBLE
        if self.sol_status == pulp.LpSolutionOptimal:
            return RunStatus.OPTIMAL
        if self.sol_status == pulp.LpSolutionIntegerFeasible:
            return RunStatus.FEASIBLE
        return RunStatus.NO_SOLUTION

    def gap(self, options: BackendOptions, status: RunStatus) -> float | None:
        """Relative gap between the incumbent and the best bound; None where the solver does not tell."""
        if self.mip_gap is not None and math.isfinite(self.mip_gap):   # HiGHS says inf with no finite bound
            return max(0.0, self.mip_gap)
        # CBC does not say its final gap: "optimal" means within the tolerance, so that is all it proves
        return options.gap if status is RunStatus.OPTIMAL else None

    def dual_bound(self) -> float:
        """HiGHS's proven bound on the objective (valid whether or not the run finished; 0 if none): rounded down,
        or, where every solution's objective is an integer, up to the next one (`integral_bound`)."""
        bound = self.mip_dual_bound
        if bound is None or not math.isfinite(bound) or bound <= 0:
            return 0.0
        return integral_bound(bound) if self.integral else float(math.floor(bound))

    def has_answer(self, status: RunStatus) -> bool:
        if self.primal_feasible is None:
            return status in (RunStatus.OPTIMAL, RunStatus.FEASIBLE)
        return self.primal_feasible


def _solved(lp: pulp.LpProblem, solver: pulp.LpSolver) -> _Report:
    lp.solve(solver)
    values = {var.name: var.varValue for var in lp.variables()}
    model = getattr(lp, "solverModel", None)
    if not isinstance(model, highspy.Highs):
        return _Report(lp.status, lp.sol_status, values)
    info = model.getInfo()
    feasible = info.primal_solution_status == 2   # kSolutionStatusFeasible
    # a run stopped by the CPU clock's interrupt ends as one stopped by HiGHS's own time limit (PuLP reads an
    # interrupted run as holding a solution even when it has none)
    interrupted = model.getModelStatus() == highspy.HighsModelStatus.kInterrupt
    lp_status, sol_status = (pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound) \
        if interrupted and not feasible else (lp.status, lp.sol_status)
    gap = float(info.mip_gap)
    held = _objective_of_values(lp)
    if feasible and held is not None and _stale(held, float(info.objective_function_value), lp):
        # HiGHS 1.16, given a start (setSolution) and presolving, can end "optimal" at a better objective while
        # the values it returns are still the start's: what is held is a schedule, proven only to the dual bound
        sol_status = pulp.LpSolutionIntegerFeasible
        bound = float(info.mip_dual_bound)
        gap = (held - bound) / abs(held) if held and math.isfinite(bound) else math.inf
    return _Report(lp_status, sol_status, values, mip_gap=gap,
                   mip_dual_bound=float(info.mip_dual_bound), primal_feasible=feasible,
                   time_limit_hit=interrupted or model.getModelStatus() == highspy.HighsModelStatus.kTimeLimit,
                   integral=integral_objective(lp))


def integral_objective(lp: pulp.LpProblem) -> bool:
    """Whether every solution of `lp` has an integer objective: only integer (or binary) variables in it, each with
    an integer coefficient, and an integer constant. The recompute cost is one (cycles are whole numbers)."""
    objective = lp.objective
    if objective is None or not float(objective.constant).is_integer():
        return False
    return all(var.cat == pulp.LpInteger and float(coefficient).is_integer() for var, coefficient in objective.items())


def integral_bound(bound: float) -> float:
    """A proven lower bound on an objective that only takes integer values, rounded up to the next integer: no
    solution lies between the two. The bound is first lowered by what HiGHS's tolerances may have lifted it by, so
    4223.99999999998 proves 4224 but 4223.0000001 proves only 4223; never below the bound rounded down (what was
    read before: on millions of cycles the tolerance spans several)."""
    return float(max(math.floor(bound), math.ceil(bound - BOUND_TOLERANCE * max(1.0, abs(bound)))))


def _objective_of_values(lp: pulp.LpProblem) -> float | None:
    """The objective of the values read back (None: a model without an objective, or some variable has none)."""
    if lp.objective is None or any(var.varValue is None for var in lp.objective):
        return None
    return float(lp.objective.value())


def _stale(held: float, reported: float, lp: pulp.LpProblem) -> bool:
    """Whether the values held are worse than the objective HiGHS reports for them, beyond rounding."""
    worse = held - reported if lp.sense == pulp.LpMinimize else reported - held
    return worse > 1e-6 * max(1.0, abs(reported))
