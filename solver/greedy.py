"""A fast heuristic in the MILP's own decision space: recompute what is live at the peak but not used there.

Each step replays the current decisions, looks at the buffers live at the peak that the peak's op does not
read, and tries recomputing each one's producer in the stage of its next reader (with the chain of producers
whose inputs died meanwhile). It keeps the try that lowers the peak most per cycle spent. Its answer is a
feasible start for the MILP and a fallback when the MILP finds nothing in time.
"""
from __future__ import annotations

from ckpt.solver.graph import TrainGraph
from ckpt.solver.schedule import Decisions
from ckpt.solver.simulate import replay, stages_of

MAX_STEPS = 400


def greedy(graph: TrainGraph, budget: int) -> Decisions | None:
    """Decisions whose replayed peak fits `budget`, or None if the heuristic cannot get there."""
    decisions = Decisions(frozenset())
    for _ in range(MAX_STEPS):
        seq = decisions.sequence(graph)
        result = replay(graph, seq)
        if result.peak_bytes <= budget:
            return decisions
        best = _best_step(graph, decisions, seq, result)
        if best is None:
            return None
        decisions = best
    return None


def _best_step(graph: TrainGraph, decisions: Decisions, seq, result) -> Decisions | None:
    stage = stages_of(seq)
    peak_k = result.peak_index
    peak_stage = stage[peak_k]
    reading = {graph.root(t) for t in graph.ops[graph.index[seq[peak_k][0]]].inputs}
    best, best_score = None, 0.0
    for buf in result.live_at(peak_k):
        if buf.tensor in reading or buf.written_at == peak_k:
            continue
        producer = graph.producer[buf.tensor]
        reader_stage = _next_read_stage(graph, buf.tensor, seq, stage, peak_k)
        if reader_stage is None or not graph.recomputable(producer):
            continue
        added = _with_chain(graph, decisions, producer, reader_stage)
        if added is None:
            continue
        trial = Decisions(decisions.recomputes | added)
        new = replay(graph, trial.sequence(graph))
        gain = result.peak_bytes - new.peak_bytes
        cost = sum(graph.op_cost[graph.ops[i].name] for _, i in added)
        if gain > 0 and gain / cost > best_score:
            best, best_score = trial, gain / cost
    return best


def _next_read_stage(graph: TrainGraph, tensor: str, seq, stage, after: int) -> int | None:
    for k in range(after + 1, len(seq)):
        op = graph.ops[graph.index[seq[k][0]]]
        if tensor in op.inputs:
            return stage[k] if stage[k] > stage[after] else None
    return None


def _with_chain(graph: TrainGraph, decisions: Decisions, op: int, t: int) -> frozenset | None:
    """Recompute `op` in stage t, plus producers of its inputs that are no longer live there."""
    seq = decisions.sequence(graph)
    live = _live_entering(graph, seq, t)
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
            if graph.is_activation(root) and root not in live and x not in graph.aliases:
                todo.append(graph.producer[x])
            elif x in graph.aliases and graph.is_activation(x) and root not in live:
                return None
    return frozenset(chosen)


def _live_entering(graph: TrainGraph, seq, t: int) -> set[str]:
    """Buffers whose newest version entering stage t is still read in stage t or later."""
    stage = stages_of(seq)
    result = replay(graph, seq)
    first_k = stage.index(t)
    return {b.tensor for b in result.buffers if b.written_at < first_k <= b.last_read}
