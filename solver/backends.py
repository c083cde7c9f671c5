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
import time
from dataclasses import dataclass
from enum import StrEnum

import highspy
import pulp

from ckpt.errors import CkptError
from ckpt.solver.options import Backend


class RunStatus(StrEnum):
    """How one solver run ended."""

    OPTIMAL = "optimal"          # within the gap tolerance
    FEASIBLE = "feasible"        # stopped (time, target) with a solution
    INFEASIBLE = "infeasible"    # proven: no solution exists
    NO_SOLUTION = "no_solution"  # stopped without a solution (proves nothing)


@dataclass(frozen=True)
class SolverOptions:
    name: Backend | str = Backend.HIGHS
    time_limit: float | None = 600.0
    gap: float = 1e-4
    threads: int | None = 1          # None: the solver's choice (HiGHS: one per core, load-dependent paths)
    verbose: bool = False

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

    def __init__(self, start: dict[str, float] | None, stop_at: float | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.start = start
        self.stop_at = stop_at

    def createAndConfigureSolver(self, lp: pulp.LpProblem) -> None:
        with _quiet_stdout(enabled=not self.msg):
            super().createAndConfigureSolver(lp)

    def callSolver(self, lp: pulp.LpProblem) -> None:
        # HiGHS keeps one thread pool per process, sized by the first run; a later run asking for another
        # thread count is refused ("scheduler has already been initialized") and solves nothing.
        reset = getattr(highspy.Highs, "resetThreadScheduler", None)   # absent from old highspy releases
        if reset is not None:
            reset(True)
        if self.stop_at is not None:   # a schedule this cheap is proven good enough elsewhere: stop there
            lp.solverModel.setOptionValue("objective_target", float(self.stop_at))
        if self.start:
            solution = highspy.HighsSolution()
            solution.col_value = [self.start.get(v.name, 0.0) for v in lp.variables()]
            solution.value_valid = True
            lp.solverModel.setSolution(solution)
        lp.solverModel.run()


def make_solver(options: SolverOptions, start: dict[str, float] | None = None,
                stop_at: float | None = None) -> pulp.LpSolver:
    common = dict(msg=options.verbose, timeLimit=options.time_limit, gapRel=options.gap, threads=options.threads)
    if options.backend is Backend.HIGHS:
        return _HiGHSWithStart(start, stop_at, **common, random_seed=0)
    return pulp.PULP_CBC_CMD(**common, warmStart=bool(start), options=["randomSeed 1", "randomCbcSeed 1"])


def run(lp: pulp.LpProblem, options: SolverOptions, start: dict[str, float] | None = None,
        stop_at: float | None = None) -> Outcome:
    """Solve; a `start` (variable name -> value) is given to the solver as its first incumbent, and HiGHS
    stops as soon as it holds a solution of objective `stop_at` or less (CBC runs on)."""
    if start:
        for var in lp.variables():
            var.setInitialValue(start.get(var.name, 0.0), check=False)
    solver = make_solver(options, start, stop_at)
    began = time.perf_counter()
    lp.solve(solver)
    seconds = time.perf_counter() - began
    status = _status(lp)
    timed_out = _timed_out(lp, options, seconds)
    if status is RunStatus.INFEASIBLE and options.backend is Backend.CBC and timed_out:
        status = RunStatus.NO_SOLUTION  # CBC's preprocessing says "infeasible" when its time runs out: not a proof
    return Outcome(status=status, gap=_gap(lp, options, status), seconds=seconds, dual_bound=_dual_bound(lp),
                   has_answer=_has_answer(lp, status), timed_out=timed_out)


def _status(lp: pulp.LpProblem) -> RunStatus:
    if lp.status == pulp.LpStatusInfeasible or lp.sol_status == pulp.LpSolutionInfeasible:
        return RunStatus.INFEASIBLE
    if lp.sol_status == pulp.LpSolutionOptimal:
        return RunStatus.OPTIMAL
    if lp.sol_status == pulp.LpSolutionIntegerFeasible:
        return RunStatus.FEASIBLE
    return RunStatus.NO_SOLUTION


def _highs(lp: pulp.LpProblem):
    return getattr(lp, "solverModel", None) if isinstance(getattr(lp, "solverModel", None), highspy.Highs) else None


def _gap(lp: pulp.LpProblem, options: SolverOptions, status: RunStatus) -> float | None:
    """Relative gap between the incumbent and the best bound; None where the solver does not tell."""
    model = _highs(lp)
    if model is not None:
        gap = float(model.getInfo().mip_gap)
        if math.isfinite(gap):   # HiGHS says inf with no finite bound: unknown, not JSON
            return max(0.0, gap)
    # CBC does not say its final gap: "optimal" means within the tolerance, so that is all it proves
    return options.gap if status is RunStatus.OPTIMAL else None


def _dual_bound(lp: pulp.LpProblem) -> float:
    """HiGHS's proven bound on the objective, rounded down (valid whether or not the run finished); 0 if none."""
    model = _highs(lp)
    if model is None:
        return 0.0
    bound = float(model.getInfo().mip_dual_bound)
    return float(math.floor(bound)) if math.isfinite(bound) and bound > 0 else 0.0


def _has_answer(lp: pulp.LpProblem, status: RunStatus) -> bool:
    model = _highs(lp)
    if model is None:
        return status in (RunStatus.OPTIMAL, RunStatus.FEASIBLE)
    return model.getInfo().primal_solution_status == 2   # kSolutionStatusFeasible


def _timed_out(lp: pulp.LpProblem, options: SolverOptions, seconds: float) -> bool:
    model = _highs(lp)
    if model is not None:
        return model.getModelStatus() == highspy.HighsModelStatus.kTimeLimit
    return bool(options.time_limit) and seconds >= 0.9 * options.time_limit
