"""Turning an answer of the point relaxation (solver/bounds/bounds.py) into a real schedule.

The relaxation says which ops run again between two points, not where: an answer is a list of `Span`s, each
"op i runs again in one of stages first+1..last". Two ways to place them:
- by rule: each right before the first op that reads it in its span (a stage-order op, or another recompute
  of the span); instant, and usually right;
- by walking: add the stage where the placed answer goes over as a point and solve the relaxation again
  only around it, the rest kept; repeated while the overflow moves on. Each step is a small model, and where
  the answer has equal-cost alternatives it often finds one that fits at the answer's own cost;
- exactly: the Checkmate MILP restricted to those spans (and the producers of the ops' inputs), which also
  chooses the stage and what to keep. It is small (a few hundred recompute variables), so it takes a second
  or two, and it finds a placement whenever one exists for these ops.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ckpt.errors import CkptError
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.model import clock, milp
from ckpt.solver.model.backends import Backend, BackendOptions, run
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.relaxation import Relaxation, Span
from ckpt.solver.realise.greedy import outside_space

WALK_STEPS = 12   # points a walk adds at most
WALK_WIDTH = 1    # segments on either side of the added point solved afresh; the others keep the answer
WALK_RISE = 0.01  # a step dearer than this (a share of the answer's cost) is solved again with more segments free


def by_first_reader(graph: TrainGraph, answer: list[Span]) -> Decisions:
    """Each recompute right before the first op of its span that reads it, else at the span's end; no later than
    its deadline (the update of a weight it reads), where that comes first: it is then held to its reader."""
    return _decisions(_first_reader_stages(graph, answer))


def _first_reader_stages(graph: TrainGraph, answer: list[Span]) -> dict[tuple[int, int], int]:
    """(span start, op) -> the stage `by_first_reader` places that recompute in."""
    placed: dict[tuple[int, int], int] = {}
    for span in sorted(answer, key=lambda s: -s.op):   # readers come after the op they read: place them first
        stages = [span.last]
        for x in graph.ops[span.op].outputs:
            for j in graph.readers.get(x, ()):
                stages += [j] if span.first < j <= span.last else []
                stages += [placed[span.first, j]] if (span.first, j) in placed else []
        deadline = graph.deadline[span.op]
        placed[span.first, span.op] = min(stages) if deadline <= span.first else min(*stages, deadline)
    return placed


def _decisions(placed: dict[tuple[int, int], int]) -> Decisions:
    return Decisions(frozenset((t, i) for (_, i), t in placed.items()))


def moved_earlier(graph: TrainGraph, answer: list[Span], budget: int, deadline: float | None) -> Decisions | None:
    """The answer placed by rule, then, while it goes over, the recompute (with the recomputes of its stage it
    reads) moved to the earlier stage of its span that takes the most excess off, if one does: the same ops at
    the same cost, made where memory is lower and held to their reader. Placed next to its reader, a recompute
    keeps its input alive until then (a Gelu remade right before the backward Gemm that reads it, where its input
    and its output both sit beside the Gemm's other operand); made early, only its output is held. None when no
    move makes it fit by `deadline`."""
    placed = _first_reader_stages(graph, answer)
    now = _replayed_excess(graph, _decisions(placed), budget)
    while now:
        if now < 0 or (deadline is not None and clock.now() > deadline):
            return None
        best, best_excess = None, now
        for (first, op), stage in sorted(placed.items()):
            for earlier in range(max(first, op) + 1, stage):
                trial = _moved(graph, placed, first, op, stage, earlier)
                found = _replayed_excess(graph, _decisions(trial), budget)
                if 0 <= found < best_excess:
                    best, best_excess = trial, found
        if best is None:
            return None
        placed, now = best, best_excess
    return _decisions(placed)


def _moved(graph: TrainGraph, placed: dict[tuple[int, int], int], first: int, op: int, stage: int, earlier: int
           ) -> dict[tuple[int, int], int]:
    """`placed` with (first, op) at stage `earlier`, and with it the recomputes of its span placed in `stage`
    whose outputs it reads (and theirs in turn): they must run before it."""
    trial, todo = dict(placed), [op]
    while todo:
        i = todo.pop()
        trial[first, i] = earlier
        for x in graph.ops[i].inputs:
            j = graph.producer.get(x)
            if j is not None and trial.get((first, j)) == stage:
                todo.append(j)
    return trial


def _replayed_excess(graph: TrainGraph, decisions: Decisions, budget: int) -> int:
    """Bytes over the budget summed over every step of the replay; -1 for a sequence outside the space."""
    seq = decisions.sequence(graph)
    try:
        result = memory_trace(graph, seq)
    except CkptError:
        return -1
    if outside_space(graph, decisions, seq):
        return -1
    return sum(max(0, level - budget) for level in result.levels)


@dataclass(frozen=True)
class Walk:
    """What a walk gave: a schedule that fits (None: none), and the bound its last step proves where that step
    had every segment free (the relaxation itself over its points, so any schedule costs at least that)."""

    schedule: Decisions | None
    proven: float = 0.0
    points: tuple[int, ...] = ()     # the points of that proof


def walked(problem: Problem, budget: int, points: list[int], answer: list[Span], seconds: float | None,
           threads: int | None = 1, cap: float = math.inf, chained: frozenset[int] = frozenset()
           ) -> Decisions | None:
    """The answer (of the relaxation over `points`) made to fit by walking (`walk`, local steps only), or None."""
    return walk(problem, budget, points, answer, seconds, threads, cap, chained).schedule


def walk(problem: Problem, budget: int, points: list[int], answer: list[Span], seconds: float | None,
         threads: int | None = 1, cap: float = math.inf, chained: frozenset[int] = frozenset(), whole: bool = False
         ) -> Walk:
    """The answer (of the relaxation over `points`) made to fit by walking, unless it does not within WALK_STEPS,
    `seconds`, and a cost below `cap` (a schedule that dear is known already). The whole relaxation over one
    point more takes many seconds on a big graph; a step here is a model of a few segments. Where the kept
    segments force a much dearer answer, the step is solved again with twice as many free, short of all of them;
    with `whole`, up to all of them: that step is the relaxation itself over its points, so its answer is taken
    whatever it costs (nothing kept forced it dearer), and the bound it proves holds (where the relaxation's
    answer goes over at a stage or two, its next step is often the optimum). `chained`: as in the relaxation."""
    ends = None if seconds is None else clock.now() + seconds
    graph, points, proof = problem.graph, sorted(points), Walk(None)
    for _ in range(WALK_STEPS):
        sketch = by_first_reader(graph, answer)
        stages = overflow(graph, sketch, budget)[0]
        if not stages and not outside_space(graph, sketch):
            return replace(proof, schedule=sketch)
        over = [t for t in stages if t not in points]
        cost = sketch.cost(graph)
        if not over or cost >= cap:
            return proof
        points = sorted([*points, over[0]])
        step = _stepped(problem, budget, points, points.index(over[0]), answer, ends, threads, chained, cost, whole)
        if step is None:
            return proof
        answer, proven = step
        if proven > proof.proven:
            proof = Walk(None, proven, tuple(points))
    return proof


def checked_where_over(problem: Problem, budget: int, points: list[int], answer: list[Span], chained: frozenset[int],
                       seconds: float | None, threads: int | None = 1) -> Decisions | None:
    """The answer made to fit where it goes over only while the recomputes before some of its `points` run, in
    segments not yet `chained` (checked while they recompute): each such segment checked in turn (furthest over
    first), with the segments around it solved afresh and the rest kept, as a walk does for a new point; or None
    if a step finds nothing as cheap, or by `seconds`. The round that checks those segments everywhere is a
    whole relaxation again; a step is a model of a few segments. Not a bound: the kept segments are one
    answer's choice."""
    ends = None if seconds is None else clock.now() + seconds
    graph, points = problem.graph, sorted(points)
    for _ in range(WALK_STEPS):
        sketch = by_first_reader(graph, answer)
        stages, during = overflow(graph, sketch, budget)
        if not stages and not outside_space(graph, sketch):
            return sketch
        unchecked = sorted((t for t in during if t in points and t not in chained), key=lambda t: (-during[t], t))
        if not unchecked or set(stages) - set(during):
            return None     # over at an op's own run too: a point the round lacks, not a segment to check
        chained = chained | {unchecked[0]}
        step = _stepped(problem, budget, points, points.index(unchecked[0]), answer, ends, threads, chained,
                        sketch.cost(graph), rise=0.0)
        if step is None:
            return None
        answer = step[0]
    return None


def _stepped(problem: Problem, budget: int, points: list[int], k: int, answer: list[Span], ends: float | None,
             threads: int | None, chained: frozenset[int], cost: int, whole: bool = False, rise: float = WALK_RISE
             ) -> tuple[list[Span], float] | None:
    """One step of a walk: the answer over `points`, where point k is new, with the segments around it free, if it
    costs at most `rise` more than `cost`; and the bound it proves (0 unless every segment was free). Widened to
    every segment only if `whole` (then its answer is taken whatever it costs)."""
    width = WALK_WIDTH
    while True:
        left = None if ends is None else ends - clock.now()
        if left is not None and left <= 0:
            return None
        every = k - width <= 0 and k + width >= len(points)
        if every and width > WALK_WIDTH and not whole:
            return None     # every segment free: that is the next round of the relaxation itself
        model = Relaxation(problem, budget, points, chained=chained, threads=threads,
                           kept=frozenset() if every else frozenset(answer),
                           free=None if every else range(k - width, k + width))
        proven = model.solve(left)
        found = model.answer() if model.answered else None
        if found is not None and ((every and whole) or by_first_reader(problem.graph, found).cost(problem.graph)
                                  <= cost * (1 + rise)):
            return found, proven if every else 0.0
        if every:
            return None
        width *= 2


def overflow(graph: TrainGraph, schedule: Decisions, budget: int) -> tuple[list[int], dict[int, int]]:
    """Stages where `schedule` replays above the budget, furthest over first; and, for those where it is
    over while a recompute runs, by how much."""
    seq = schedule.sequence(graph)
    result = memory_trace(graph, seq)
    peaks, during = result.stage_peaks(), {}
    for (_, is_recompute), stage, level in zip(seq, result.stage_of, result.levels):
        if is_recompute and level > budget:
            during[stage] = max(during.get(stage, 0), level - budget)
    return sorted((t for t, peak in peaks.items() if peak > budget), key=lambda t: (-peaks[t], t)), during


def over_at_own_op(graph: TrainGraph, schedule: Decisions, budget: int) -> set[int]:
    """Stages whose own op (not a recompute before it) runs above the budget in `schedule`: the stages where a
    point of the relaxation cuts its answer off. Elsewhere it goes over only while recomputes run, which a
    point over that stage does not see."""
    seq = schedule.sequence(graph)
    result = memory_trace(graph, seq)
    return {stage for (_, is_recompute), stage, level in zip(seq, result.stage_of, result.levels)
            if not is_recompute and level > budget}


def placed_exactly(graph: TrainGraph, answer: list[Span], budget: int, seconds: float | None,
                   threads: int | None = 1, enough: float | None = None, below: int | None = None
                   ) -> Decisions | None:
    """The cheapest schedule that recomputes only these ops, or the producers of their inputs, within their
    spans, if one fits the budget; or the first found that costs `enough` or less (a proven bound: nothing
    cheaper exists, so the search for one need not go on). `below`: only schedules cheaper than that (one
    known already costs it): a placement no cheaper is of no use, and the cap lets HiGHS prune early. The
    producers let a chain's input be remade rather than kept (a residual CNN at 0.5 needs that); going further
    up costs ten times the time and found nothing more here."""
    began = clock.now()
    spans = _with_input_producers(graph, answer)
    allowed = frozenset((t, s.op) for s in spans for t in range(max(s.first, s.op) + 1, s.last + 1))
    problem = Problem(graph, only=allowed)
    try:   # the model's build counts against the time given: on big graphs it takes longer than the solve
        model = milp.build(problem, budget, deadline=None if seconds is None else began + seconds)
    except milp.BuildTimedOut:
        return None
    if below is not None:
        model.lp += model.recompute_cost() <= below - 1, "cheaper_than_known"   # costs are whole cycles
    left = None if seconds is None else seconds - (clock.now() - began)
    if left is not None and left <= 0:
        return None
    outcome = run(model.lp, BackendOptions(name=Backend.HIGHS, time_limit=left, gap=1e-6, threads=threads),
                  stop_at=enough)
    if not outcome.has_answer:
        return None
    return Decisions(frozenset(key for key, var in model.R.items() if var.value() > 0.5))


def _with_input_producers(graph: TrainGraph, answer: list[Span]) -> list[Span]:
    spans = dict.fromkeys(answer)
    for span in answer:
        for x in graph.ops[span.op].inputs:
            if graph.is_activation(x) and x in graph.producer and graph.recomputable(graph.producer[x]):
                spans.setdefault(Span(graph.producer[x], span.first, span.last))
    return list(spans)
