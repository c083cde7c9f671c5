"""One schedule for each set of equally good choices: the same inputs give the same file on every machine.

Solvers return any of several schedules of equal cost (HiGHS picks among tied optima by its search path, which
threads and time limits change). Most ties are where a recompute runs: anywhere between the point that needs
its buffer gone and its first reader. `canonical` resolves them with a rule on names: recomputes of one stage
that feed each other move together, as late as they can (up to their first reader) while the schedule still
fits the budget and holds one version of each buffer at a time; groups are visited in the order of their op
names, then stages, until none moves. Cost never changes; memory stays within the budget.
"""
from __future__ import annotations

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.memo import per_graph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.realise.greedy import outside_space


def canonical(graph: TrainGraph, decisions: Decisions, budget: int) -> Decisions:
    """`decisions` with every group of recomputes moved as late as it can go (see the module doc)."""
    current = decisions
    while True:
        moved = _move_one_group(graph, current, budget)
        if moved is None:
            return current
        current = moved


def _fits(graph: TrainGraph, decisions: Decisions, budget: int) -> bool:
    seq = decisions.sequence(graph)
    return not outside_space(graph, decisions, seq) and memory_trace(graph, seq).peak_bytes <= budget


def _move_one_group(graph: TrainGraph, decisions: Decisions, budget: int) -> Decisions | None:
    """The decisions with the first group (in name order) that can move later moved; None if none can."""
    for stage, group in _groups(graph, decisions):
        latest = _first_reader_stage(graph, decisions, stage, group)
        rest = decisions.recomputes - {(stage, i) for i in group}
        for later in range(latest, stage, -1):
            if any((later, i) in rest for i in group):
                continue
            trial = Decisions(rest | {(later, i) for i in group})
            if _fits(graph, trial, budget):
                return trial
    return None


def _reads(graph: TrainGraph, reader: int, writer: int) -> bool:
    """Whether op `reader` reads what op `writer` makes (directly or through a view of it)."""
    return reader in _readers(graph)[writer]


@per_graph
def _readers(graph: TrainGraph) -> tuple[frozenset[int], ...]:
    """Op -> the ops that read what it makes, directly or through a view of it (asked for every pair of runs)."""
    found: list[set[int]] = [set() for _ in graph.ops]
    for j, op in enumerate(graph.ops):
        for t in op.inputs:
            for made in {t, graph.root(t)}:
                if made in graph.producer:
                    found[graph.producer[made]].add(j)
    return tuple(frozenset(readers) for readers in found)


def _groups(graph: TrainGraph, decisions: Decisions) -> list[tuple[int, tuple[int, ...]]]:
    """(stage, ops) for each set of recomputes of one stage connected by what they read, in name order."""
    by_stage: dict[int, set[int]] = {}
    for stage, op in decisions.recomputes:
        by_stage.setdefault(stage, set()).add(op)
    found = []
    for stage, ops in by_stage.items():
        left = set(ops)
        while left:
            group, todo = set(), [min(left)]
            while todo:
                i = todo.pop()
                if i not in group:
                    group.add(i)
                    todo += [j for j in left - group if _reads(graph, j, i) or _reads(graph, i, j)]
            left -= group
            found.append((stage, tuple(sorted(group))))
    return sorted(found, key=lambda g: (sorted(graph.ops[i].name for i in g[1]), g[0]))


def _first_reader_stage(graph: TrainGraph, decisions: Decisions, stage: int, group: tuple[int, ...]) -> int:
    """The stage of the first run outside the group, from `stage` on, that reads what the group makes (or runs
    one of its ops again): the group cannot move past it."""
    members, stages, readers = set(group), [], _readers(graph)
    for i in group:
        stages += [min((j for j in readers[i] if j >= stage and j not in members), default=stage)]
        stages += [s for s, j in decisions.recomputes
                   if j not in members and (s > stage or (s == stage and j > i)) and j in readers[i]]
        stages += [s for s, j in decisions.recomputes if j == i and s > stage]
    return min(stages, default=stage)
