"""A schedule made cheaper by solving the exact model again over a window of stages around it (a
large-neighbourhood search).

Why: on the graphs where the exact model's branch and bound is slow, its incumbent stays well above the
optimum while the search spreads over every stage at once. Around a known schedule, a model that may change
the recomputes of a few consecutive stages only (elsewhere it may only keep or drop the schedule's own) is a
fraction of the size and is solved to the end in moments; its answer is a schedule of the full space (the
same constraints, fewer variables), never dearer than the start, which it is given as its warm start.
Windows go where the schedule pays most (its dearest stages first), and each cheaper schedule found is the
start of the next window.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.schedule import Decisions, needed_retentions
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.model import clock, milp
from ckpt.solver.model.backends import BackendOptions, RunStatus, run
from ckpt.solver.model.problem import Problem
from ckpt.solver.realise.greedy import outside_space

WINDOW = 12              # stages a window re-solves
WINDOW_SECONDS = 2.0     # the most one window's model runs (it is usually solved to the end far sooner)


@dataclass(frozen=True)
class Window:
    first: int     # the stages first..last-1 are solved afresh
    last: int


def improved(staged: TrainGraph, budget: int, start: Decisions, deadline: float | None, threads: int | None = 1,
             target: float | None = None, width: int = WINDOW) -> Decisions:
    """The cheapest schedule found by re-solving windows of `width` stages around `start` until `deadline` (a
    clock.now()), every window tried once without a gain, or the cost reaches `target` (a proven bound);
    `start` itself when none is cheaper. Each answer is checked by the replay before it is kept."""
    full, best = Problem(staged), start
    tried: set[Window] = set()
    while target is None or best.cost(staged) > target:
        window = next((w for w in _windows(staged, best, width) if w not in tried), None)
        if window is None or (deadline is not None and clock.now() >= deadline):
            return best
        tried.add(window)
        found = _solved_in(full, budget, best, window, deadline, threads)
        if found is not None and found.cost(staged) < best.cost(staged):
            best, tried = found, set()       # a new start: every window may pay again
    return best


def _windows(staged: TrainGraph, schedule: Decisions, width: int) -> Iterator[Window]:
    """Windows of `width` stages ending at each stage that recomputes, dearest stage first (its recomputes'
    cost), then windows starting there; then the rest of the order, in steps of half a window."""
    n, cost = len(staged.ops), staged.op_cost
    paid: dict[int, int] = {}
    for t, i in schedule.recomputes:
        paid[t] = paid.get(t, 0) + cost[staged.ops[i].name]
    for t in sorted(paid, key=lambda t: (-paid[t], t)):
        yield Window(max(0, t + 1 - width), t + 1)
        yield Window(t, min(n, t + width))
    for first in range(0, n, max(1, width // 2)):
        yield Window(first, min(n, first + width))


def _solved_in(full: Problem, budget: int, start: Decisions, window: Window, deadline: float | None,
               threads: int | None) -> Decisions | None:
    """The exact model's optimum over `window` (around `start`), None if it found nothing better in time."""
    kept = {(t, i) for t, i in start.recomputes if not window.first <= t < window.last}
    free = {(t, i) for i in range(full.n) for t in full.recompute_stages(i) if window.first <= t < window.last}
    problem = Problem(full.graph, only=frozenset(kept | free))
    try:
        model = milp.build(problem, budget, deadline=deadline)
    except milp.BuildTimedOut:
        return None
    left = None if deadline is None else deadline - clock.now()
    if left is not None and left <= 0:
        return None
    seconds = WINDOW_SECONDS if left is None else min(WINDOW_SECONDS, left)
    warm = milp.start_values(model, set(start.recomputes),
                             needed_retentions(full.graph, start.sequence(full.graph)))
    cost = start.cost(full.graph)
    outcome = run(model.lp, BackendOptions(time_limit=seconds, gap=1e-6, threads=threads), warm)
    found = _answer(model) if outcome.has_answer else None
    if (found is None or found.cost(full.graph) >= cost) and not outcome.timed_out \
            and outcome.status is not RunStatus.OPTIMAL:
        # something cheaper exists, but HiGHS handed back its start (see backends._stale): once more without it
        outcome = run(model.lp, BackendOptions(time_limit=max(0.0, seconds - outcome.seconds), gap=1e-6,
                                               threads=threads))
        found = _answer(model) if outcome.has_answer else None
    if found is None or found.cost(full.graph) >= cost or outside_space(full.graph, found) \
            or memory_trace(full.graph, found.sequence(full.graph)).peak_bytes > budget:
        return None
    return found


def _answer(model: milp.Model) -> Decisions:
    return Decisions(frozenset(key for key, var in model.R.items() if var.value() > 0.5))
