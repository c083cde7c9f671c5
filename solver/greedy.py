"""A fast heuristic in the MILP's own decision space: recompute what is live where memory is over budget.

Each step replays the current decisions and, for every buffer live at an over-budget point that the op there
does not read, tries recomputing its producer in the stage of its next reader (with the producers of inputs
that died meanwhile). It keeps the try that removes the most excess memory (bytes above the budget, summed over
all points) per cycle spent. Scoring the whole excess rather than the peak alone lets it cross plateaus where no
single recompute lowers the maximum. Its answer warm-starts the MILP and is the fallback when the MILP finds
nothing in time.
"""
from __future__ import annotations

import bisect
import time

from ckpt.solver.graph import TrainGraph
from ckpt.solver.schedule import Decisions, version_spans
from ckpt.solver.simulate import MemoryTrace, Sequence, memory_trace, stages_of

MAX_STEPS = 400


def greedy(graph: TrainGraph, budget: int, start: Decisions | None = None, deadline: float | None = None
           ) -> Decisions | None:
    """Decisions whose replayed peak fits `budget`, or None if the heuristic cannot get there (by `deadline`,
    a time.perf_counter(), if given). `start`: the recomputes to begin from (say, a near miss to repair)."""
    decisions = start or Decisions(frozenset())
    if holds_two_versions(graph, decisions):
        return None               # outside the space, and adding recomputes cannot bring it back
    result = memory_trace(graph, decisions.sequence(graph))
    for _ in range(MAX_STEPS):
        if result.peak_bytes <= budget:
            return decisions
        if deadline is not None and time.perf_counter() > deadline:
            return None
        step = _best_step(graph, decisions, result, budget)
        if step is None:
            return None
        decisions, result = step
    return None


def polish(graph: TrainGraph, decisions: Decisions, budget: int) -> Decisions:
    """Drop recomputes the schedule does not need, dearest first, until none can go: whatever still fits
    without one goes without it. A time-limited solver or the greedy often leaves one or two behind."""
    cost = graph.op_cost
    dropped = True
    while dropped:
        dropped = False
        for key in sorted(decisions.recomputes, key=lambda k: (-cost[graph.ops[k[1]].name], k)):
            trial = Decisions(decisions.recomputes - {key})
            seq = trial.sequence(graph)
            if not holds_two_versions(graph, trial, seq) and memory_trace(graph, seq).peak_bytes <= budget:
                decisions, dropped = trial, True
    return decisions


def excess(result: MemoryTrace, budget: int) -> int:
    return sum(max(0, level - budget) for level in result.levels)


def _best_step(graph: TrainGraph, decisions: Decisions, result: MemoryTrace, budget: int
               ) -> tuple[Decisions, MemoryTrace] | None:
    seq = decisions.sequence(graph)
    stage = stages_of(seq)
    now = excess(result, budget)
    best, best_score = None, 0.0
    for producer, reader_stage in _candidates(graph, seq, stage, result, budget):
        added = _with_chain(graph, decisions, result, seq, stage, producer, reader_stage)
        if not added:
            continue
        cost = Decisions(added).cost(graph)
        if cost and now / cost <= best_score:
            continue              # even removing all the excess would not beat the best try: skip the replay
        trial = Decisions(decisions.recomputes | added)
        trial_seq = trial.sequence(graph)
        new = memory_trace(graph, trial_seq)
        gain = now - excess(new, budget)
        # the space check after the score: it is the dearer test, and only a better try needs it
        if gain > 0 and gain / cost > best_score and not holds_two_versions(graph, trial, trial_seq):
            best, best_score = (trial, new), gain / cost
    return best


def holds_two_versions(graph: TrainGraph, decisions: Decisions, seq: Sequence | None = None) -> bool:
    """Whether a recompute runs while the version it replaces must stay live (kept by a view made from it).

    The MILP's schedules hold one version of a buffer at a time; keeping the heuristic inside the same space
    means the two search the same schedules, and an infeasible verdict means the same thing for both.
    seq: the decisions' sequence, if the caller has it already.
    """
    stages_of_op: dict[int, list[int]] = {}
    for t, i in decisions.recomputes:
        stages_of_op.setdefault(i, []).append(t)
    if not stages_of_op:
        return False
    for (tensor, made), last in version_spans(graph, seq or decisions.sequence(graph)).items():
        rerun = stages_of_op.get(graph.producer[tensor], ())
        if rerun and graph.buffer_bytes(tensor) > 0 and any(made < t <= last for t in rerun):
            return True
    return False


def _candidates(graph: TrainGraph, seq, stage, result: MemoryTrace, budget: int) -> list[tuple[int, int]]:
    """(producer op, stage to recompute it in) for buffers held across an over-budget point."""
    reads = _read_positions(graph, seq)
    found: dict[tuple[int, int], None] = {}
    for k, level in enumerate(result.levels):
        if level <= budget:
            continue
        reading = {graph.root(t) for t in graph.ops[graph.index[seq[k][0]]].inputs}
        for buf in result.live_at(k):
            if buf.tensor in reading or buf.written_at == k:
                continue
            producer = graph.producer[buf.tensor]
            reader_stage = _next_read_stage(reads.get(buf.tensor, []), stage, k)
            if reader_stage is not None and graph.recomputable(producer):
                found[producer, reader_stage] = None
    return list(found)


def _read_positions(graph: TrainGraph, seq) -> dict[str, list[int]]:
    """Tensor -> positions in `seq` of the executions that read it, in order."""
    reads: dict[str, list[int]] = {}
    for k, (name, _) in enumerate(seq):
        for t in dict.fromkeys(graph.ops[graph.index[name]].inputs):
            reads.setdefault(t, []).append(k)
    return reads


def _next_read_stage(positions: list[int], stage, after: int) -> int | None:
    k = bisect.bisect_right(positions, after)
    if k == len(positions):
        return None
    return stage[positions[k]] if stage[positions[k]] > stage[after] else None


def _with_chain(graph: TrainGraph, decisions: Decisions, result: MemoryTrace, seq, stage, op: int, t: int
                ) -> frozenset | None:
    """Recompute `op` in stage t, plus producers of its inputs that are no longer live there."""
    first_k = stage.index(t)
    live = {b.tensor for b in result.buffers if b.written_at < first_k <= b.last_read}
    chosen: set[tuple[int, int]] = set()
    todo = [op]
    while todo:
        i = todo.pop()
        if (t, i) in chosen or (t, i) in decisions.recomputes:
            continue
        if not graph.recomputable(i) or i >= t:
            return None
        chosen.add((t, i))
        for x in graph.ops[i].inputs:
            root = graph.root(x)
            if not graph.is_activation(root) or root in live:
                continue
            if x in graph.aliases:
                return None  # a view made earlier cannot be re-made: its op is never recomputed
            todo.append(graph.producer[x])
    return frozenset(chosen)
