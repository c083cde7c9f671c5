"""Turning an answer of the point relaxation (solver/bounds.py) into a real schedule.

The relaxation says which ops run again between two points, not where: an answer is a list of `Span`s, each
"op i runs again in one of stages first+1..last". Two ways to place them:
- by rule: each right before the first op that reads it in its span (a stage-order op, or another recompute
  of the span); instant, and usually right;
- exactly: the Checkmate MILP restricted to those spans (and the producers of the ops' inputs), which also
  chooses the stage and what to keep. It is small (a few hundred recompute variables), so it takes a second
  or two, and it finds a placement whenever one exists for these ops.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from ckpt.solver import milp
from ckpt.solver.backends import Backend, SolverOptions, run
from ckpt.solver.graph import TrainGraph
from ckpt.solver.problem import Problem
from ckpt.solver.schedule import Decisions


@dataclass(frozen=True)
class Span:
    op: int
    first: int    # the op runs again after stage `first`'s own op...
    last: int     # ...and no later than stage `last` (before its op)


def by_first_reader(graph: TrainGraph, answer: list[Span]) -> Decisions:
    """Each recompute right before the first op of its span that reads it, else at the span's end."""
    placed: dict[tuple[int, int], int] = {}   # (span start, op) -> stage
    for span in sorted(answer, key=lambda s: -s.op):   # readers come after the op they read: place them first
        stages = [span.last]
        for x in graph.ops[span.op].outputs:
            for j in graph.readers.get(x, ()):
                stages += [j] if span.first < j <= span.last else []
                stages += [placed[span.first, j]] if (span.first, j) in placed else []
        placed[span.first, span.op] = min(stages)
    return Decisions(frozenset((t, i) for (_, i), t in placed.items()))


def placed_exactly(graph: TrainGraph, answer: list[Span], budget: int, seconds: float | None,
                   threads: int | None = 1) -> Decisions | None:
    """The cheapest schedule that recomputes only these ops, or the producers of their inputs, within their
    spans, if one fits the budget. The producers let a chain's input be remade rather than kept (a residual
    CNN at 0.5 needs that); going further up costs ten times the time and found nothing more here."""
    began = time.perf_counter()
    spans = _with_input_producers(graph, answer)
    allowed = frozenset((t, s.op) for s in spans for t in range(max(s.first, s.op) + 1, s.last + 1))
    problem = Problem(graph, only=allowed)
    try:   # the model's build counts against the time given: on big graphs it takes longer than the solve
        model = milp.build(problem, budget, deadline=None if seconds is None else began + seconds)
    except milp.BuildTimedOut:
        return None
    left = None if seconds is None else seconds - (time.perf_counter() - began)
    if left is not None and left <= 0:
        return None
    outcome = run(model.lp, SolverOptions(name=Backend.HIGHS, time_limit=left, gap=1e-6, threads=threads))
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
