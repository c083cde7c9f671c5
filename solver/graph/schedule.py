"""A solution in the MILP's decision space, its materialised sequence, and the retentions it really needs."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.simulate import RunSequence, stages_of


@dataclass(frozen=True)
class Decisions:
    """recomputes: (stage t, op i) pairs with i < t. Stage t runs them in op order, then op t."""

    recomputes: frozenset[tuple[int, int]]

    def sequence(self, graph: TrainGraph) -> RunSequence:
        return self.over([op.name for op in graph.ops])

    def over(self, names: Sequence[str]) -> RunSequence:
        """The sequence over the stage order `names` (op i is names[i])."""
        by_stage: dict[int, list[int]] = {}
        for t, i in self.recomputes:
            by_stage.setdefault(t, []).append(i)
        seq: RunSequence = []
        for t, name in enumerate(names):
            seq.extend((names[i], 1) for i in sorted(by_stage.get(t, ())))
            seq.append((name, 0))
        return seq

    @classmethod
    def from_sequence(cls, graph: TrainGraph, seq: RunSequence) -> Decisions | None:
        """The decisions behind a sequence over this stage order: each recompute in the stage of the next first
        run. None when the sequence runs the ops in another order (it is not a schedule of this stage order)."""
        firsts = [name for name, flag in seq if not flag]
        if firsts != [op.name for op in graph.ops]:
            return None
        found, stage = set(), 0
        for name, flag in seq:
            if flag:
                i = graph.index.get(name)
                if i is None or i >= stage:
                    return None
                found.add((stage, i))
            else:
                stage += 1
        return cls(frozenset(found))

    def cost(self, graph: TrainGraph) -> int:
        """Cycles the recomputes add (the objective every solver minimises)."""
        return sum(graph.op_cost[graph.ops[i].name] for _, i in self.recomputes)


def needed_retentions(graph: TrainGraph, seq: RunSequence) -> set[tuple[int, str]]:
    """(stage t, tensor) for every buffer or pin version that is read in stage t or later after entering t.

    This is S with every retention that no later reader needs dropped.
    """
    return {(t, x) for (x, made), last in version_spans(graph, seq).items() for t in range(made + 1, last + 1)}


def version_spans(graph: TrainGraph, seq: RunSequence) -> dict[tuple[str, int], int]:
    """(tensor, stage its version was written in) -> last stage that reads that version, for every buffer or
    pin version that is read. Reading a view reads the buffer version the view was made from, which is not
    the newest one if its producer ran again since."""
    stage = stages_of(seq)
    written: dict[str, int] = {}                   # tensor -> stage of its newest version
    behind: dict[str, list[tuple[str, int]]] = {}  # view -> (tensor, version stage) of each buffer it reads
    last_read: dict[tuple[str, int], int] = {}
    for k, (name, _) in enumerate(seq):
        op = graph.ops[graph.index[name]]
        for t in op.inputs:
            if t in written:
                for key in [(t, written[t])] + behind.get(t, []):
                    last_read[key] = max(last_read.get(key, -1), stage[k])
        for t in op.outputs:
            written[t] = stage[k]
            source = graph.aliases.get(t)
            if source is not None and source in written:
                behind[t] = [(source, written[source])] + behind.get(source, [])
    return {key: last for key, last in last_read.items()
            if graph.is_activation(key[0]) and (graph.buffer_bytes(key[0]) or key[0] in graph.aliases)}
