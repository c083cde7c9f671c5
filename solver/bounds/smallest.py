"""The smallest budget any schedule fits: what a refusal states, exactly wherever the time allows.

A budget is shown feasible by a schedule that fits it (the greedy heuristic's, one the point relaxation
realises, or, failing both, the exact model's first), and infeasible by the relaxation having no answer at all
(solver/bounds/bounds.py: every schedule maps onto it) or the exact model proving none. A schedule found for one
budget fits every budget down to its own peak, so the range's top is always a peak some schedule reaches.

The search goes from the cheap tests to the dear ones. The greedy heuristic (milliseconds a budget) tries the
floor, then bisects the top down; then the relaxation at each binding point alone (a fraction of a second a
budget, and where a single op's forced buffers bind, which is where the smallest budget usually sits, a proof)
bisects the bottom up. What is left between them is probed from its bottom: a schedule found there ends the
search at once, where a bisection would spend seconds a probe walking down from the top. Then both ends bisect
with every test, until they meet or the time is up; a budget none decides in its time leaves a range.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ckpt.solver.bounds.bounds import binding_points, lower_bound, point_bound
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace, plain_sequence
from ckpt.solver.model import clock, milp
from ckpt.solver.model.backends import BackendOptions, RunStatus, run
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.time_plan import MIN_STAGE_SECONDS
from ckpt.solver.realise.greedy import greedy

PROBE_SECONDS = 2.0      # the least time a budget's full probe gets (greedy, the relaxation, the exact model)
PROBE_SHARE = 0.25       # ... and the share of the time left it may take: early probes halve the widest range
FIRST_PROBE_SHARE = 0.5  # the probe at the bottom of what the cheap tests leave: the likeliest answer
SINGLE_SECONDS = 0.5     # the most one binding point alone gets in the cheap bisection


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
    shown infeasible and the smallest peak of a schedule found, each closed in on by bisection (module doc),
    until they meet or the time is up."""
    deadline = math.inf if seconds is None else clock.now() + seconds
    search = _Search(staged, Problem(staged), deadline, threads, floor,
                     memory_trace(staged, plain_sequence(staged)).peak_bytes)
    search.by_greedy(search.low)             # the floor itself often fits: then nothing is left to search
    search.bisect(search.by_greedy, undecided_fits=False)
    search.bisect(search.by_single_points, undecided_fits=True)
    if not search.exact and search.before_deadline():
        search.probe(search.low, FIRST_PROBE_SHARE)
    search.bisect(search.by_every_test, undecided_fits=False)     # the top down, then the bottom up
    search.bisect(search.by_every_test, undecided_fits=True)
    return FeasibleRange(search.low, search.high)


class _Search:
    """The range known so far: no schedule fits below `low` (proven), one fits `high` (a schedule's peak)."""

    def __init__(self, staged: TrainGraph, problem: Problem, deadline: float, threads: int | None, low: int,
                 high: int):
        self.staged, self.problem, self.deadline, self.threads = staged, problem, deadline, threads
        self.low, self.high = low, high
        self.tried: set[int] = set()      # budgets every test was tried on, undecided

    @property
    def exact(self) -> bool:
        return self.low >= self.high

    def before_deadline(self) -> bool:
        return clock.now() < self.deadline

    def bisect(self, test, undecided_fits: bool) -> None:
        """Halve the range with `test` (budget -> True: fits, False: cannot, None: undecided, which counts as
        `undecided_fits`); what a test proves on the way narrows the range itself."""
        lo, hi = self.low - 1, self.high          # lo: taken as not fitting; hi: taken as fitting
        while hi - lo > 1 and self.before_deadline():
            mid = (lo + hi) // 2
            verdict = test(mid)
            lo, hi = (lo, mid) if (undecided_fits if verdict is None else verdict) else (mid, hi)
            lo, hi = max(lo, self.low - 1), min(hi, self.high)

    def found(self, schedule: Decisions | None) -> bool:
        """Lower the top to `schedule`'s peak (if there is one)."""
        if schedule is None:
            return False
        self.high = min(self.high, memory_trace(self.staged, schedule.sequence(self.staged)).peak_bytes)
        return True

    def refuted(self, budget: int) -> bool:
        self.low = max(self.low, budget + 1)
        return False

    def by_greedy(self, budget: int) -> bool | None:
        left = self.deadline - clock.now()
        return self.found(greedy(self.staged, budget, deadline=None if math.isinf(left) else self.deadline)) \
            or None

    def by_single_points(self, budget: int) -> bool | None:
        """False when the relaxation at one binding point alone has no answer (highest level first)."""
        for t in binding_points(self.problem, budget):
            left = self.deadline - clock.now()
            if left <= 0:
                return None
            if math.isinf(point_bound(self.problem, budget, [t], min(SINGLE_SECONDS, left), threads=self.threads
                                      ).cost):
                return self.refuted(budget)
        return None

    def by_every_test(self, budget: int) -> bool | None:
        if budget in self.tried:
            return None
        return self.probe(budget, PROBE_SHARE)

    def probe(self, budget: int, share: float) -> bool | None:
        """Every test on `budget`, on at least PROBE_SECONDS or `share` of the time left."""
        self.tried.add(budget)
        left = self.deadline - clock.now()
        seconds = min(max(PROBE_SECONDS, share * left), left)
        if seconds <= 0:
            return None
        began = clock.now()
        if self.by_greedy(budget):
            return True
        bound = lower_bound(self.problem, budget, max(seconds - (clock.now() - began), 0.1),
                            threads=self.threads, any_schedule=True)
        if math.isinf(bound.cost):
            return self.refuted(budget)
        if self.found(bound.schedule):
            return True
        verdict = _exactly(self.problem, budget, began + seconds, self.threads)
        if verdict is False:
            return self.refuted(budget)
        return self.found(verdict) or None


def _exactly(problem: Problem, budget: int, deadline: float, threads: int | None) -> Decisions | bool | None:
    """The exact model asked only for a schedule (it stops at the first one): the schedule when it finds one
    that fits, False when it proves none does, None when it does neither by `deadline`. Where the greedy
    heuristic finds nothing and the relaxation's answer does not fit, this is what decides a small graph's
    budgets."""
    if deadline - clock.now() < MIN_STAGE_SECONDS:
        return None
    try:
        model = milp.build(problem, budget, deadline=deadline)
    except milp.BuildTimedOut:
        return None
    left = deadline - clock.now()
    if left < MIN_STAGE_SECONDS:
        return None
    any_cost = sum(problem.graph.op_cost.values()) * problem.n     # more than any schedule costs
    outcome = run(model.lp, BackendOptions(time_limit=left, threads=threads), stop_at=any_cost)
    if outcome.status is RunStatus.INFEASIBLE:
        return False
    if not outcome.has_answer:
        return None
    chosen = Decisions(frozenset(key for key, var in model.R.items() if var.value() > 0.5))
    fits = memory_trace(problem.graph, chosen.sequence(problem.graph)).peak_bytes <= budget
    return chosen if fits else None
