"""Stage order and recompute together: a local search over list orders whose every step is solved exactly.

Why: a proof over one stage order says nothing of the others, and the min-memory list order is chosen without
recompute in mind (an op that makes a small buffer early, a weight transpose for the backward pass say, holds
it through every stage a recompute must then fit around).

A move takes one op to the earliest or the latest place its dependencies allow. All moves of the current order
are screened by the greedy heuristic (a replay each: milliseconds on graphs of a few hundred ops); of those it
finds cheaper than the current order, the few cheapest are solved exactly (`exact`: the solver over that
order); the best exact answer becomes the current order when it beats it (cheaper, or a schedule where the
current order has none). It stops when a round improves nothing, no recompute is left, or the time is up.
The answer is optimal, if proven, for the order it ends at: over all orders it is a local optimum, and the
result's `space` says so.

The search knows the solver only as `exact(order, seconds)`, so it sits below solver.solve (no import cycle).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from ckpt.errors import InfeasibleBudget
from ckpt.events import Progress, Step, ignore
from ckpt.solver.graph.baselines import reorder
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.model import clock
from ckpt.solver.realise.greedy import greedy, polish

R = TypeVar("R")

SOLVED_PER_ROUND = 3     # moves solved exactly per round, cheapest screened first
FIRST_SHARE = 0.4        # of the time: the starting order's own solve


@dataclass(frozen=True)
class Searched(Generic[R]):
    """The best answer found, its order, and how many orders were solved exactly."""

    result: R | None                  # None: no order tried had a schedule
    order: tuple[str, ...]
    solved: int
    rounds: int


def moves(graph: TrainGraph, order: list[str]) -> list[list[str]]:
    """Every order one move away: each op taken to the first or the last place its inputs and readers allow."""
    position = {name: k for k, name in enumerate(order)}
    found: list[list[str]] = []
    for name in order:
        op = graph.ops[graph.index[name]]
        here = position[name]
        index = graph.index[name]
        before = [graph.producer[t] for t in op.inputs if t in graph.producer] + list(graph.must_follow.get(index, ()))
        after = [j for t in op.outputs for j in graph.readers.get(t, ())] \
            + [graph.index[k] for k in graph.must_precede.get(name, ())]
        earliest = max((position[graph.ops[j].name] for j in before), default=-1) + 1
        latest = min((position[graph.ops[j].name] for j in after), default=len(order)) - 1
        rest = order[:here] + order[here + 1:]
        for place in sorted({earliest, latest} - {here}):
            found.append(rest[:place] + [name] + rest[place:])   # the latest place: right before the reader
    return found


def screened_cost(graph: TrainGraph, order: list[str], budget: int, deadline: float | None) -> float:
    """The greedy heuristic's polished cost over `order` (inf: it found no schedule)."""
    staged = reorder(graph, order)
    found = greedy(staged, budget, deadline=deadline)
    return math.inf if found is None else polish(staged, found, budget, deadline).cost(staged)


def search(graph: TrainGraph, budget: int, start: list[str], exact: Callable[[list[str], float | None], R],
           cost: Callable[[R], int], seconds: float | None, progress: Progress = ignore) -> Searched[R]:
    """Local search from `start` (see the module doc); `exact` raises InfeasibleBudget where an order has no
    schedule, and `cost` reads an answer's recompute cost."""
    began = clock.now()
    deadline = None if seconds is None else began + seconds

    def left() -> float | None:
        return None if deadline is None else max(0.0, deadline - clock.now())

    def solved(order: list[str], share: float) -> R | None:
        limit = left()
        try:
            return exact(order, None if limit is None else limit * share)
        except InfeasibleBudget:
            return None

    order, best = list(start), solved(list(start), FIRST_SHARE)
    count, rounds = 1, 0
    while (left() is None or left() > 0) and (best is None or cost(best) > 0):   # nothing beats no recompute
        rounds += 1
        current = math.inf if best is None else cost(best)
        here, screen = screened_cost(graph, order, budget, deadline), []
        for candidate in moves(graph, order):
            if deadline is not None and clock.now() > deadline:
                break
            guess = screened_cost(graph, candidate, budget, deadline)
            if guess < here or (math.isinf(here) and best is None and not math.isinf(guess)):
                screen.append((guess, candidate))
        screen.sort(key=lambda s: s[0])
        progress(Step(f"order search round {rounds}: {len(screen)} moves look cheaper to the greedy heuristic"))
        improved = None
        for k, (_, candidate) in enumerate(screen[:SOLVED_PER_ROUND]):
            if left() == 0 or (improved is not None and cost(improved[0]) == 0):
                break
            found = solved(candidate, 1 / (min(SOLVED_PER_ROUND, len(screen)) - k))
            count += 1
            if found is not None and cost(found) < (current if improved is None else cost(improved[0])):
                improved = (found, candidate)
        if improved is None:
            break
        best, order = improved
        progress(Step(f"order search: {cost(best)} cycles after round {rounds}"))
    return Searched(best, tuple(order), count, rounds)
