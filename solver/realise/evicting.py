"""A first schedule near the floor: run the stage order with memory held under the budget by eviction.

The greedy heuristic (greedy.py) adds one recompute at a time and keeps it only if it removes excess memory; near
the floor every single recompute costs memory where it runs (the inputs its chain needs), so it stops with no
schedule. This one walks the stages once, as a rematerialising runtime would (Kirisame et al., "Dynamic Tensor
Rematerialization", ICLR 2021): before each execution whose memory would pass the budget it drops held
buffers, the one whose recompute is cheapest per byte and per stage until it is read again first; an op that
reads a dropped buffer gets its producer recomputed in its own stage, with the producers of the inputs that
chain needs and that are gone too. So a schedule that recomputes as much as it must, from the nearest value
still held, comes out wherever the walk can hold each stage's own working set.

Every schedule it returns is in the MILP's space (recomputes by stage, one version of a buffer at a time: a
buffer some view still reads is never dropped) and fits by `memory_trace`, which is the judge: the walk's own
count is never trusted (it books a dropped buffer until it is dropped, not until its last read, so it errs high).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.memo import per_graph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.model import clock
from ckpt.solver.realise.greedy import outside_space

MAX_WALKS = 32       # walks, each keeping held what made the one before it stuck


class _Stuck(Exception):
    """The walk cannot go on: a stage's working set passes the budget, or a dropped buffer cannot be made again.
    `remade`: (buffer, stage) for each buffer the stuck stage had to make again (dropped before its read there),
    whose drop may be the cause."""

    def __init__(self, remade: frozenset[tuple[str, int]] = frozenset()):
        super().__init__()
        self.remade = remade


@dataclass(frozen=True)
class _Facts:
    """What the walk asks of each op and buffer, looked up once per graph."""

    reads: tuple[tuple[str, ...], ...]       # op -> buffers (roots with bytes) it reads, directly or through a view
    writes: tuple[tuple[str, ...], ...]      # op -> buffers it writes (its own, with bytes)
    readers: dict[str, tuple[int, ...]]      # buffer -> stages of the first runs that read it, in order
    droppable: frozenset[str]                # buffers a recompute can make again
    nbytes: dict[str, int]
    remade_until: dict[str, int]             # droppable buffer -> the last stage a recompute chain can remake it in
    viewed: dict[str, tuple[tuple[int, int], ...]]   # buffer -> (stage a view of it is made in, the view's last
                                                     # first read) for each view made from it: its version pinned

    def pinned(self, x: str, t: int) -> bool:
        """Whether a view made by stage t from x's version is read after stage t (so that version must stay)."""
        return any(made <= t < last for made, last in self.viewed.get(x, ()))

    def writes_of(self, ops: set[int]) -> set[str]:
        return {y for q in ops for y in self.writes[q]}

    @staticmethod
    @per_graph
    def of(graph: TrainGraph) -> _Facts:
        nbytes = {t: graph.buffer_bytes(t) for op in graph.ops for t in op.outputs if graph.buffer_bytes(t) > 0}
        reads = tuple(tuple(dict.fromkeys(r for t in op.inputs if (r := graph.root(t)) in nbytes))
                      for op in graph.ops)
        readers: dict[str, list[int]] = {}
        for i, found in enumerate(reads):
            for r in found:
                readers.setdefault(r, []).append(i)
        droppable = frozenset(t for t in nbytes if graph.recomputable(graph.producer[t]))
        viewed: dict[str, list[tuple[int, int]]] = {}
        for y in graph.aliases:
            if graph.root(y) in nbytes and y in graph.producer:
                last = max((r for a in graph.aliases if a == y or _through(graph, a, y)
                            for r in graph.readers.get(a, ())), default=graph.producer[y])
                viewed.setdefault(graph.root(y), []).append((graph.producer[y], last))
        writes = tuple(tuple(t for t in op.outputs if t in nbytes) for op in graph.ops)
        until: dict[str, int] = {}
        for i in range(len(graph.ops)):          # inputs come first: the ops are in a topological order
            # an input that is never dropped is held until its last first read; one that is, while it can be remade
            held = min((until[z] if z in droppable else readers[z][-1] for z in reads[i]), default=len(graph.ops))
            until.update({t: min(graph.deadline[i], held) for t in writes[i] if t in droppable})
        return _Facts(reads, writes, {t: tuple(v) for t, v in readers.items()}, droppable, nbytes, until,
                      {t: tuple(v) for t, v in viewed.items()})


def _through(graph: TrainGraph, alias: str, view: str) -> bool:
    """Whether `alias` lives in its buffer through `view` (a view of a view of ... it)."""
    seen = set()
    while alias in graph.aliases and alias not in seen:
        seen.add(alias)
        alias = graph.aliases[alias]
        if alias == view:
            return True
    return False


def evicting(graph: TrainGraph, budget: int, deadline: float | None = None) -> Decisions | None:
    """Decisions whose replayed peak fits `budget`, found by walks of the stages (see the module doc), or None
    if they get stuck or `deadline` (a clock.now()) passes. A walk that gets stuck in a stage that had
    to make dropped buffers again is walked again with those buffers held until that stage, until one gets through
    or a walk gets stuck with nothing new to hold."""
    kept: frozenset[tuple[str, int]] = frozenset()
    for _ in range(MAX_WALKS):
        try:
            decisions = _Walk(graph, budget, deadline, kept).run()
            break
        except _Stuck as stuck:
            if stuck.remade <= kept:
                return None
            kept |= stuck.remade
    else:
        return None
    seq = decisions.sequence(graph)
    if outside_space(graph, decisions, seq) or memory_trace(graph, seq).peak_bytes > budget:
        return None
    return decisions


class _Walk:
    """One walk of the stages: the buffers held, their bytes, and the recomputes made so far."""

    def __init__(self, graph: TrainGraph, budget: int, deadline: float | None,
                 kept: frozenset[tuple[str, int]] = frozenset()):
        self.graph, self.budget, self.deadline, self.kept = graph, budget, deadline, kept
        self.facts = _Facts.of(graph)
        self.held: dict[str, int] = {}          # buffer -> bytes, for each buffer whose newest version is held
        self.spent: dict[str, None] = {}        # held buffers no first run reads again, oldest first: a chain
                                                # may still read one, and they are the first dropped
        self.level = 0                          # bytes held
        self.recomputes: set[tuple[int, int]] = set()

    def run(self) -> Decisions:
        for t in range(len(self.graph.ops)):
            if self.deadline is not None and clock.now() > self.deadline:
                raise _Stuck
            self.stage(t)
        return Decisions(frozenset(self.recomputes))

    def stage(self, t: int) -> None:
        """Stage t: the recomputes its op needs (producers of dropped inputs, in op order), then the op."""
        chain: set[int] = set()
        for x in self.facts.reads[t]:
            self.need(x, t, chain)
        runs = [*sorted(chain), t]
        pending: dict[str, int] = {}            # buffer -> reads left in this stage
        for q in runs:
            for x in self.facts.reads[q]:
                pending[x] = pending.get(x, 0) + 1
        for q in runs:
            try:
                self.execute(q, t, pending)
            except _Stuck:
                if q == t:       # the stage's own op: what it reads was made, and no more can be dropped
                    raise
                made = self.facts.writes_of(chain)
                raise _Stuck(frozenset((x, t) for x in self.facts.reads[t] if x in made)) from None
            if q != t:
                self.recomputes.add((t, q))

    def need(self, x: str, t: int, chain: set[int]) -> None:
        """Make sure buffer x is there in stage t: held, or its producer recomputed there (with what it needs)."""
        if x in self.held:
            return
        p = self.graph.producer[x]
        if p in chain:
            return
        if x not in self.facts.droppable or t > self.facts.remade_until[x]:
            raise _Stuck
        chain.add(p)
        for z in self.facts.reads[p]:
            self.need(z, t, chain)

    def execute(self, q: int, t: int, pending: dict[str, int]) -> None:
        """Run op q in stage t: drop buffers until its outputs and scratch fit, then hold what is read later."""
        facts = self.facts
        for y in facts.writes[q]:               # a new version replaces the held one (its last read is behind)
            if y in self.held:
                self.drop(y)
        needs = sum(facts.nbytes[y] for y in facts.writes[q]) + self.graph.scratch.get(self.graph.ops[q].name, 0)
        while self.level + needs > self.budget:
            self.drop(self.victim(t, pending))
        for y in facts.writes[q]:
            if pending.get(y) or self.next_read(y, t) is not None:
                self.held[y] = facts.nbytes[y]
                self.level += facts.nbytes[y]
        for x in facts.reads[q]:
            pending[x] -= 1
            if not pending[x] and x in self.held and self.next_read(x, t) is None:
                self.spent.pop(x, None)
                self.spent[x] = None

    def next_read(self, x: str, t: int) -> int | None:
        """The stage of the first run after stage t that reads x, None if none does."""
        readers = self.facts.readers.get(x, ())
        k = bisect.bisect_right(readers, t)
        return readers[k] if k < len(readers) else None

    def victim(self, t: int, pending: dict[str, int]) -> str:
        """The held buffer to drop: the least recompute cost per byte and per stage until its next read (its
        producer's cost, and the inputs' that are gone too), among those that can be made again then; before
        any, the oldest spent one."""
        spent = next((x for x in self.spent if not pending.get(x)), None)
        if spent is not None:
            return spent
        best, best_score = None, None
        memo: dict[str, int] = {}
        for x, nbytes in self.held.items():
            if pending.get(x) or x not in self.facts.droppable or x in self.spent or self.facts.pinned(x, t):
                continue
            read = self.next_read(x, t)
            if read is None or read > self.facts.remade_until[x] or (x, read) in self.kept:
                continue
            score = (self.remake_cost(x, memo) / (nbytes * (read - t)), x)
            if best_score is None or score < best_score:
                best, best_score = x, score
        if best is None:
            raise _Stuck
        return best

    def remake_cost(self, x: str, memo: dict[str, int]) -> int:
        """Cycles to make x again now: its producer, and the producers of its inputs that are not held."""
        if x in memo:
            return memo[x]
        memo[x] = 0                              # a cycle cannot happen (a DAG); this only guards recursion
        p = self.graph.producer[x]
        cost = self.graph.op_cost.get(self.graph.ops[p].name, 0)
        cost += sum(self.remake_cost(z, memo) for z in self.facts.reads[p] if z not in self.held)
        memo[x] = cost
        return cost

    def drop(self, x: str) -> None:
        self.level -= self.held.pop(x)
        self.spent.pop(x, None)
