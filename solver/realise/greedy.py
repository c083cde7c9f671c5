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
import random
from dataclasses import dataclass

import numpy as np

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.memo import per_graph
from ckpt.solver.graph.schedule import Decisions, version_spans
from ckpt.solver.graph.simulate import MemoryTrace, RunSequence, memory_trace, stages_of
from ckpt.solver.model import clock

MAX_STEPS = 400


@dataclass(frozen=True)
class Jitter:
    """Each try's score scaled by a factor drawn from [1 - spread, 1 + spread]: a randomised greedy, which
    repairs the same near miss in other ways (solver/realise/search.py), where the plain one always repeats
    itself."""

    rng: random.Random
    spread: float

    def factor(self) -> float:
        return 1 + self.spread * (2 * self.rng.random() - 1)


def greedy(graph: TrainGraph, budget: int, start: Decisions | None = None, deadline: float | None = None,
           jitter: Jitter | None = None) -> Decisions | None:
    """Decisions whose replayed peak fits `budget`, or None if the heuristic cannot get there (by `deadline`,
    a clock.now(), if given). `start`: the recomputes to begin from (say, a near miss to repair). `jitter`:
    scores randomised (None: the plain, deterministic greedy)."""
    decisions = start or Decisions(frozenset())
    if outside_space(graph, decisions):
        return None               # outside the space, and adding recomputes cannot bring it back
    result = memory_trace(graph, decisions.sequence(graph))
    for _ in range(MAX_STEPS):
        if result.peak_bytes <= budget:
            return decisions
        if deadline is not None and clock.now() > deadline:
            return None
        step = _best_step(graph, decisions, result, budget, jitter)
        if step is None:
            return None
        decisions, result = step
    return None


def polish(graph: TrainGraph, decisions: Decisions, budget: int, deadline: float | None = None,
           only: frozenset[tuple[int, int]] | None = None) -> Decisions:
    """Drop recomputes the schedule does not need, dearest first, until none can go (or `deadline`, a
    clock.now(), passes): whatever still fits without one goes without it. A time-limited solver or
    the greedy often leaves one or two behind; on a large graph each try is a replay, so it keeps the time.
    `only`: the recomputes that may go (None: every one; a repair's own, where the rest were polished before)."""
    cost = graph.op_cost
    dropped = True
    while dropped:
        dropped = False
        tried = decisions.recomputes if only is None else decisions.recomputes & only
        for key in sorted(tried, key=lambda k: (-cost[graph.ops[k[1]].name], k)):
            if deadline is not None and clock.now() > deadline:
                return decisions
            trial = Decisions(decisions.recomputes - {key})
            seq = trial.sequence(graph)
            if not outside_space(graph, trial, seq) and memory_trace(graph, seq).peak_bytes <= budget:
                decisions, dropped = trial, True
    return decisions


def excess(result: MemoryTrace, budget: int) -> int:
    return sum(max(0, level - budget) for level in result.levels)


def _best_step(graph: TrainGraph, decisions: Decisions, result: MemoryTrace, budget: int, jitter: Jitter | None = None
               ) -> tuple[Decisions, MemoryTrace] | None:
    """The try with the most excess removed per cycle (the first of equals in candidate order). Tries are
    replayed best bound first, and only while their bound (`_gain_bound`) could still beat the
    best replayed score: the same choice as replaying every try, at a fraction of the replays. With `jitter`,
    each try's bound and score are scaled by the same factor of its own, so the bound still holds."""
    seq = decisions.sequence(graph)
    stage = stages_of(seq)
    now = excess(result, budget)
    over = np.maximum(np.asarray(result.levels, dtype=np.int64) - budget, 0)
    reads, spans, tries = _read_positions(graph, seq), _spans(result), []
    for n, (producer, reader_stage) in enumerate(_candidates(graph, seq, stage, result, budget, reads)):
        added = _with_chain(graph, decisions, spans, stage, producer, reader_stage)
        if added:
            cost = Decisions(added).cost(graph)
            bound = min(now, _gain_bound(graph, over, reads, spans, stage, added, reader_stage))
            scale = jitter.factor() if jitter is not None else 1.0
            tries.append((scale * bound / cost if cost else float("inf"), n, added, cost, scale))
    best, best_score, best_n = None, 0.0, len(tries)
    for bound, n, added, cost, scale in sorted(tries, key=lambda c: (-c[0], c[1])):
        if bound <= 0 or bound < best_score:
            break                 # no try left can beat the best one
        if bound == best_score and n > best_n:
            continue              # at best a tie, and the best one comes first
        trial = Decisions(decisions.recomputes | added)
        trial_seq = trial.sequence(graph)
        new = memory_trace(graph, trial_seq)
        gain = now - excess(new, budget)
        if gain <= 0:
            continue
        score = scale * gain / cost if cost else float("inf")
        better = score > best_score or (score == best_score and n < best_n)
        # the space check after the score: it is the dearer test, and only a better try needs it
        if better and not outside_space(graph, trial, trial_seq):
            best, best_score, best_n = (trial, new), score, n
    return best


def _gain_bound(graph: TrainGraph, over, reads: dict[str, list[int]], spans: dict[str, list[tuple[int, int]]],
                stage: list[int], added: frozenset[tuple[int, int]], t: int) -> int:
    """At most the excess that recomputing `added` in stage t can remove: of their outputs, only a version
    live into stage t can die earlier (between its last use before the stage and the stage's own op), and
    no level drops by more than those versions' bytes (the recomputes themselves only add memory)."""
    first = bisect.bisect_left(stage, t)
    own = bisect.bisect_right(stage, t) - 1            # stage t's own (first) execution closes the stage
    start, freed = own, 0
    for x in (x for _, i in added for x in graph.ops[i].outputs):
        for written, last in spans.get(x, ()):
            if written < first <= last:
                read = reads.get(x, [])
                before = bisect.bisect_left(read, first)
                start = min(start, max(written, read[before - 1] if before else -1))
                freed += graph.buffer_bytes(x)
    return int(np.minimum(over[start + 1:own], freed).sum()) if freed else 0


def outside_space(graph: TrainGraph, decisions: Decisions, seq: RunSequence | None = None) -> bool:
    """Whether the decisions leave the MILP's schedule space: a recompute runs past its deadline (after the
    in-place update of a weight it reads), or while the version it replaces must stay live (kept by a view made
    from it).

    The MILP's schedules hold one version of a buffer at a time; keeping the heuristic inside the same space
    means the two search the same schedules, and an infeasible verdict means the same thing for both.
    seq: the decisions' sequence, if the caller has it already.
    """
    if any(t > graph.deadline[i] for t, i in decisions.recomputes):
        return True
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


def _candidates(graph: TrainGraph, seq, stage, result: MemoryTrace, budget: int, reads: dict[str, list[int]]
                ) -> list[tuple[int, int]]:
    """(producer op, stage to recompute it in) for buffers held across an over-budget point, in the order they
    are first met: by point, then largest buffer first (then by name)."""
    over = [k for k, level in enumerate(result.levels) if level > budget]
    facts = _Facts.of(graph)
    roots_read = [facts.roots_read[graph.index[name]] for name, _ in seq]
    found: dict[tuple[int, int], tuple[int, int, str]] = {}
    for buf in result.buffers:
        producer = graph.producer[buf.tensor]
        if not buf.nbytes or not facts.recomputable[producer]:
            continue
        positions = reads.get(buf.tensor, [])
        n, end = bisect.bisect_right(over, buf.written_at), bisect.bisect_right(over, buf.last_read)
        while n < end:
            k = over[n]
            if buf.tensor in roots_read[k]:
                n += 1
                continue
            j = bisect.bisect_right(positions, k)
            if j == len(positions):
                break                  # nothing reads it later
            read = positions[j]
            if stage[read] > stage[k]:
                key, met = (producer, stage[read]), (k, -buf.nbytes, buf.tensor)
                if met < found.get(key, (len(seq),)):
                    found[key] = met
            n = bisect.bisect_left(over, read, n, end)   # points before that read give the same try, met later
    return sorted(found, key=found.__getitem__)


@dataclass(frozen=True)
class _Facts:
    """What the greedy asks of each op, thousands of times per step, looked up once per graph."""

    recomputable: tuple[bool, ...]
    roots_read: tuple[frozenset[str], ...]                 # buffers each op reads, directly or through a view
    inputs: tuple[tuple[tuple[str, bool, bool, int], ...], ...]   # (root, an activation, a view, root's producer)

    @staticmethod
    @per_graph
    def of(graph: TrainGraph) -> _Facts:
        ops = range(len(graph.ops))
        return _Facts(
            tuple(graph.recomputable(i) for i in ops),
            tuple(frozenset(graph.root(t) for t in graph.ops[i].inputs) for i in ops),
            tuple(tuple((graph.root(x), graph.is_activation(graph.root(x)), x in graph.aliases,
                         graph.producer.get(x, -1)) for x in graph.ops[i].inputs) for i in ops))


def _read_positions(graph: TrainGraph, seq) -> dict[str, list[int]]:
    """Tensor -> positions in `seq` of the executions that read it, in order."""
    reads: dict[str, list[int]] = {}
    for k, (name, _) in enumerate(seq):
        for t in dict.fromkeys(graph.ops[graph.index[name]].inputs):
            reads.setdefault(t, []).append(k)
    return reads


def _spans(result: MemoryTrace) -> dict[str, list[tuple[int, int]]]:
    """Tensor -> (written at, last read) of each of its buffer versions."""
    found: dict[str, list[tuple[int, int]]] = {}
    for b in result.buffers:
        found.setdefault(b.tensor, []).append((b.written_at, b.last_read))
    return found


def _with_chain(graph: TrainGraph, decisions: Decisions, spans: dict[str, list[tuple[int, int]]], stage: list[int],
                op: int, t: int) -> frozenset | None:
    """Recompute `op` in stage t, plus producers of its inputs that have no version live into stage t."""
    facts, first = _Facts.of(graph), bisect.bisect_left(stage, t)
    chosen: set[tuple[int, int]] = set()
    todo = [op]
    while todo:
        i = todo.pop()
        if (t, i) in chosen or (t, i) in decisions.recomputes:
            continue
        if not facts.recomputable[i] or i >= t or t > graph.deadline[i]:
            return None
        chosen.add((t, i))
        for root, activation, view, producer in facts.inputs[i]:
            if not activation or any(w < first <= r for w, r in spans.get(root, ())):
                continue
            if view:
                return None  # a view made earlier cannot be re-made: its op is never recomputed
            todo.append(producer)
    return frozenset(chosen)
