"""A proof that no schedule fits, from two neighbouring stages: where a budget is infeasible for a local reason.

The point relaxation (solver/model/relaxation.py) holds for any set of points: every schedule over the stage
order maps onto it. So if the relaxation over a stage and the next, with memory checked while the stage
between them recomputes, has no answer at all, no schedule fits the budget. Near the smallest feasible budget
the reason is often local: an op whose inputs and allocation, with the next op's inputs held across it, leave
no room, and remaking those inputs in between does not fit either. The relaxation over every binding point
finds it too, but it is a model of every point (a residual CNN: a hundred thousand variables, seconds to build
and presolve), where a window of two stages is a few thousand variables and a fraction of a second.

Which windows? Those at the stages with the least room left once what must be held there is counted (the
op's inputs and allocation, the views still read, what cannot run again and is read later, and the next op's
inputs made before it): they come first, each asked only whether any answer exists (no objective: HiGHS
stops at the first one), and the scan stops at the first proof, at `most` windows, or when its time is up. A
stage where that leaves more than a tenth of the budget free is not tried: there the scan would only take time
from the rounds that find a schedule (a CCT at 0.3: half its budget free at its tightest stage). Nor is a window
too big for its even part of the scan's time (judged by its size): the stage between its points may run again
any op made before it whose readers are still to come, each checked against every buffer that may be there, so
on a long graph (MobileNetV1: hundreds of such ops) one window is a model as big as the rounds', and where it
has an answer it only spends the time the rounds need to find the schedule. It proves nothing where no window
is infeasible: that is the cost of a scan, not a verdict.
"""
from __future__ import annotations

import math
from collections.abc import Iterator

from ckpt.solver.model import clock
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.relaxation import Relaxation

MOST_WINDOWS = 8      # windows tried at most, tightest first: a proof, where there is one, is among the first
ROOM_SHARE = 0.1      # a stage with more of the budget left free than this is not tried: too loose to refuse it
# The least a window takes, built and handed to HiGHS, per term of its check of the stage between its points (an
# op that may run again there, times a buffer that may be present at either point): ResNet-8 and MobileNetV1 at
# their tightest windows, both targets, CPU s on a busy machine, measured 1.1e-5 to 2.5e-5, set below all.
SECONDS_PER_TERM = 1e-5


def infeasible_window(problem: Problem, budget: int, binding: list[int], seconds: float | None,
                      threads: int | None = 1, most: int = MOST_WINDOWS) -> tuple[int, ...] | None:
    """Stages over which the relaxation, checked while each segment recomputes, has no answer: a proof that no
    schedule over the stage order fits `budget`. `binding`: the stages whose op alone goes over it (each
    window starts at one). None: no window tried within `seconds` proved it."""
    deadline = math.inf if seconds is None else clock.now() + seconds
    for window in windows(problem, budget, binding, most):
        left = deadline - clock.now()
        if left <= 0:
            return None
        if seconds is not None and least_window_seconds(problem, window[0]) > seconds / most:
            continue
        model = Relaxation(problem, budget, list(window), chained=frozenset(window), threads=threads,
                           feasibility=True)
        if math.isinf(model.solve(None if math.isinf(left) else left)):
            return window
    return None


def windows(problem: Problem, budget: int, binding: list[int], most: int = MOST_WINDOWS
            ) -> Iterator[tuple[int, ...]]:
    """A binding stage and the next, both points, so the segment between them is one stage long and checked
    in op order (the tightest check); the stages with the least room left first, and only those where what
    must be held leaves little room (elsewhere a window takes its time and refuses nothing)."""
    room = {t: budget - held_at(problem, t) for t in binding if t + 1 < problem.n}
    tightest = sorted((t for t in room if room[t] <= ROOM_SHARE * budget), key=lambda t: (room[t], t))
    for t in tightest[:most]:
        yield t, t + 1


def least_window_seconds(problem: Problem, t: int) -> float:
    """The least time the window at stage t (and t+1) takes, judged by its size: the ops that may run again in
    the stage between its points, times the presence variables of both."""
    again = sum(1 for i in range(t + 1) if problem.recomputable(i) and t < problem.graph.deadline[i])
    present = sum(1 for s in (t, t + 1) for x in problem.buffers if problem.producer(x) < s)
    return SECONDS_PER_TERM * again * present


def held_at(problem: Problem, t: int) -> int:
    """Bytes op t's first run holds whatever the schedule: its allocation, its inputs, the buffers views still
    read, and the buffers read after it that nothing can make again by then; and the next op's inputs made
    before it (each kept through op t, or remade in the one stage between them)."""
    g = problem.graph
    read = g.ops[t].inputs + (g.ops[t + 1].inputs if t + 1 < problem.n else ())
    held = {g.root(y) for y in read if g.is_activation(y)}
    held |= {g.root(v) for v in problem.pins
             if problem.producer(v) < t and any(j >= t for j in g.readers.get(v, ()))}
    for x in problem.buffers:
        i = problem.producer(x)
        if i < t and (not problem.recomputable(i) or t >= g.deadline[i]) \
                and any(j > t for j in g.readers.get(x, ())):
            held.add(x)
    return problem.alloc[t] + sum(g.buffer_bytes(x) for x in held
                                  if x in problem.tensor_id and problem.producer(x) < t)
