"""The smallest budget any schedule fits: what a refusal states, exactly wherever the time allows.

A budget is shown feasible by a schedule that fits it (the greedy heuristic's, one the point relaxation
realises, or, failing both, the exact model's first), and infeasible by the relaxation having no answer at all
(solver/bounds.py: every schedule maps onto it) or the exact model proving none. Between the single-op floor
(no schedule goes below it) and the stage order's own peak (which needs no recompute), a bisection on those
tests closes in on the smallest feasible budget; a budget none decides in its time leaves a range.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

from ckpt.solver import milp
from ckpt.solver.backends import BackendOptions, RunStatus, run
from ckpt.solver.bounds import lower_bound
from ckpt.solver.graph import TrainGraph
from ckpt.solver.greedy import greedy
from ckpt.solver.problem import Problem
from ckpt.solver.schedule import Decisions
from ckpt.solver.simulate import memory_trace, plain_sequence
from ckpt.solver.time_plan import MIN_STAGE_SECONDS

PROBE_SECONDS = 2.0      # the least time a budget's probe gets (greedy, then the relaxation)
PROBE_SHARE = 0.25       # ... and the share of the time left it may take: early probes halve the widest range


@dataclass(frozen=True)
class FeasibleRange:
    """No schedule fits below `low`; one fits `high`. Exact when they meet."""

    low: int
    high: int

    @property
    def exact(self) -> bool:
        return self.low == self.high


def smallest_feasible_budget(staged: TrainGraph, floor: int, seconds: float | None,
                             threads: int | None = 1) -> FeasibleRange:
    """Between `floor` (proven: no schedule fits below it) and the stage order's own peak: the largest budget
    shown infeasible and the smallest shown feasible, each found by its own bisection (a budget neither test
    decides counts against both), until they meet or the time is up."""
    deadline = math.inf if seconds is None else time.perf_counter() + seconds
    low, high = floor, memory_trace(staged, plain_sequence(staged)).peak_bytes
    if _fits(staged, low, min(deadline, time.perf_counter() + _probe_seconds(deadline))):
        return FeasibleRange(low, low)
    problem = Problem(staged)
    verdicts: dict[int, bool | None] = {}

    def decide(budget: int) -> bool | None:
        if budget not in verdicts:
            left = min(_probe_seconds(deadline), deadline - time.perf_counter())
            verdicts[budget] = _decide(staged, problem, budget, left, threads) if left > 0 else None
        return verdicts[budget]

    lo, hi = low, high                      # feasibility: the smallest budget shown to fit lies in (lo, hi]
    while hi - lo > 1 and time.perf_counter() < deadline:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if decide(mid) is True else (mid, hi)
    high = hi
    lo, hi = low, high                      # infeasibility: the largest budget shown not to fit lies in [lo, hi)
    while hi - lo > 1 and time.perf_counter() < deadline:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if decide(mid) is False else (lo, mid)
    return FeasibleRange(lo + 1 if decide(lo) is False else low, high)


def _probe_seconds(deadline: float) -> float:
    return max(PROBE_SECONDS, PROBE_SHARE * (deadline - time.perf_counter()))


def _fits(staged: TrainGraph, budget: int, deadline: float) -> bool:
    """Whether the greedy heuristic fits `budget` by `deadline` (False also when it ran out of time)."""
    return greedy(staged, budget, deadline=None if math.isinf(deadline) else deadline) is not None


def _decide(staged: TrainGraph, problem: Problem, budget: int, seconds: float, threads: int | None) -> bool | None:
    """True: a schedule fits `budget`; False: none can; None: undecided in the time given."""
    began = time.perf_counter()
    if _fits(staged, budget, began + seconds):
        return True
    bound = lower_bound(problem, budget, max(seconds - (time.perf_counter() - began), 0.1), threads=threads)
    if math.isinf(bound.cost):
        return False
    if bound.schedule is not None:
        return True
    return _exactly(problem, budget, began + seconds, threads)


def _exactly(problem: Problem, budget: int, deadline: float, threads: int | None) -> bool | None:
    """The exact model asked only for a schedule (it stops at the first one): True when it finds one that fits,
    False when it proves none does, None when it does neither by `deadline`. Where the greedy heuristic finds
    nothing and the relaxation's answer does not fit, this is what decides a small graph's budgets."""
    if deadline - time.perf_counter() < MIN_STAGE_SECONDS:
        return None
    try:
        model = milp.build(problem, budget, deadline=deadline)
    except milp.BuildTimedOut:
        return None
    left = deadline - time.perf_counter()
    if left < MIN_STAGE_SECONDS:
        return None
    any_cost = sum(problem.graph.op_cost.values()) * problem.n     # more than any schedule costs
    outcome = run(model.lp, BackendOptions(time_limit=left, threads=threads), stop_at=any_cost)
    if outcome.status is RunStatus.INFEASIBLE:
        return False
    if not outcome.has_answer:
        return None
    chosen = Decisions(frozenset(key for key, var in model.R.items() if var.value() > 0.5))
    return memory_trace(problem.graph, chosen.sequence(problem.graph)).peak_bytes <= budget or None
