"""How one solve shares its time limit among its stages (the shares are in the module doc of solver/solve.py).

Every deadline keeps a share of the limit in reserve: a HiGHS run checks its own time limit only now and then.
Whether the models get their share at all is judged by their size, not by a clock, so the same inputs take
the same path under any load.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ckpt.solver.model import clock
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.problem import Problem

GREEDY_UNTIL = 0.5       # the greedy heuristic (seconds on big graphs, where its schedule may be all there is)
BOUND_UNTIL = 0.8        # the relaxation: its bound is the proof, and its answer often the optimum
EARLY_SEARCH_UNTIL = 0.15  # when the models cannot run: the local search from the greedy's schedule (search.py)
BOUND_ALONE_UNTIL = 0.85  # ... when the models could not be built and run in the time after it: the rest is repair
SEARCH_UNTIL = 0.95       # ... and the local search again, from the best schedule the repairs leave
FOCUS_UNTIL = 0.9        # the focused model, which finds good schedules far sooner than the exact one
MIN_STAGE_SECONDS = 0.5  # a stage with less time left than this does not start
RESERVE_SHARE = 0.05     # kept back from every deadline: a HiGHS run checks its time limit only now and then
# A model's cost by its size, in CPU seconds, from bench/model_cost.py's table (issue 56, zoo cells at 0.2-0.5:
# ResNet-8, DS-CNN, CCT, CCT-LoRA; 3k-24k recomputes, 21k-128k variables; a busy machine), rounded up:
HANDOVER_SECONDS_PER_VARIABLE = 8e-5   # handing a built model to HiGHS (PuLP's copy, HiGHS's presolve, which no
                                       # limit interrupts) and reading its answer back: measured 6.0e-5 to 1.1e-4
BUILD_SECONDS_PER_RECOMPUTE = 3e-4     # building a model, per recompute variable: measured 2.1e-4 to 3.7e-4
VARIABLES_PER_RECOMPUTE = 7            # the models' variables, per recompute variable: measured 5.4 to 7.5


@dataclass(frozen=True)
class TimePlan:
    """Wall-clock deadlines of one solve."""

    start: float
    limit: float | None

    def left(self, until: float = 1.0) -> float | None:
        """Seconds left until `until` of the limit (None: no limit)."""
        deadline = self.at(until)
        return None if deadline is None else max(0.0, deadline - clock.now())

    def allows(self, until: float = 1.0, overhead: float = 0.0) -> bool:
        """Whether a stage that needs `overhead` seconds before it does any work can still start."""
        left = self.left(until)
        return left is None or left >= MIN_STAGE_SECONDS + overhead

    def at(self, until: float = 1.0) -> float | None:
        """The clock.now() of that deadline (None: no limit)."""
        return None if self.limit is None else self.start + until * (1 - RESERVE_SHARE) * self.limit

    def backend(self, options: BackendOptions, until: float = 1.0) -> BackendOptions:
        """Options for a run that stops by `until`, and is killed at the limit if it overruns that far."""
        ends_by = None if self.limit is None else self.start + self.limit
        return replace(options, time_limit=self.left(until), ends_by=ends_by)


def models_fit(problem: Problem, plan: TimePlan) -> bool:
    """Whether the focused and the exact model can each be built, handed to HiGHS and run for a stage's least
    time in the share of the limit the bound leaves them. Where they cannot, a model is built and then not run
    (or run for nothing): that share then goes to the bound."""
    return plan.limit is None or plan.limit >= limit_for_models(problem)


def limit_for_models(problem: Problem) -> float:
    """The least time limit at which the focused and the exact model get their share (models_fit)."""
    return 2 * model_seconds(problem) / ((1 - BOUND_UNTIL) * (1 - RESERVE_SHARE))


def model_seconds(problem: Problem) -> float:
    """The least time one model takes to be of use, judged by its size: its build, its handover to HiGHS and a
    stage's least run."""
    recomputes = sum(len(problem.recompute_stages(i)) for i in range(problem.n))
    per_recompute = BUILD_SECONDS_PER_RECOMPUTE + VARIABLES_PER_RECOMPUTE * HANDOVER_SECONDS_PER_VARIABLE
    return recomputes * per_recompute + MIN_STAGE_SECONDS
