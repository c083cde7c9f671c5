"""Run a PuLP model on HiGHS (through highspy) or CBC, and say honestly how it ended."""
from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from dataclasses import dataclass

import pulp

from ckpt.errors import CkptError

SOLVERS = ("highs", "cbc")


@dataclass(frozen=True)
class SolverOptions:
    name: str = "highs"
    time_limit: float | None = 600.0
    gap: float = 1e-4
    threads: int | None = None
    verbose: bool = False


@dataclass(frozen=True)
class Outcome:
    """status: optimal | feasible (stopped with a solution) | infeasible | no_solution (stopped without one)."""

    status: str
    gap: float | None
    seconds: float


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
        import highspy

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
    if options.name == "highs":
        if not pulp.HiGHS().available():
            raise CkptError("HiGHS is not available (highspy is not installed)", "pip install highspy, or use --solver cbc")
        return _HiGHSWithStart(start, stop_at, **common, random_seed=0)
    if options.name == "cbc":
        return pulp.PULP_CBC_CMD(**common, warmStart=bool(start), options=["randomSeed 1", "randomCbcSeed 1"])
    raise CkptError(f"unknown solver '{options.name}'", f"choose one of {', '.join(SOLVERS)}")


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
    if status == "infeasible" and options.name == "cbc" and options.time_limit and seconds >= 0.9 * options.time_limit:
        status = "no_solution"  # CBC's preprocessing says "infeasible" when its time runs out: not a proof
    return Outcome(status=status, gap=_gap(lp, options, status), seconds=seconds)


def _status(lp: pulp.LpProblem) -> str:
    if lp.status == pulp.LpStatusInfeasible or lp.sol_status == pulp.LpSolutionInfeasible:
        return "infeasible"
    if lp.sol_status == pulp.LpSolutionOptimal:
        return "optimal"
    if lp.sol_status == pulp.LpSolutionIntegerFeasible:
        return "feasible"
    return "no_solution"


def _gap(lp: pulp.LpProblem, options: SolverOptions, status: str) -> float | None:
    """Relative gap between the incumbent and the best bound; None where the solver does not tell."""
    model = getattr(lp, "solverModel", None)
    if options.name == "highs" and model is not None:
        try:
            gap = float(model.getInfo().mip_gap)
        except Exception:
            gap = None
        if gap is not None and math.isfinite(gap):   # HiGHS says inf with no finite bound: unknown, not JSON
            return max(0.0, gap)
    # CBC does not say its final gap: "optimal" means within the tolerance, so that is all it proves
    return options.gap if status == "optimal" else None
