"""Views that are re-made where they are read: a larger schedule space, solved on a graph without views.

A view (a Reshape-like output living in its input's buffer) costs no bytes and no cycles to make: Deeploy emits
`out = in;`. But a view made once pins the version of the buffer it was made from: a reader late in the
backward pass that reads an early view keeps that version alive, whatever is recomputed meanwhile. Re-making
the view right before such a reader, from the buffer's newest version, removes the pin at no cost.

So the solver works on the graph with every activation view taken out and its readers reading the view's root
buffer directly (`collapsed`): there, memory is what the schedule with views re-made on demand uses. `expanded`
then writes the views back into a schedule: each view runs first right before its first reader, and again (a
recompute, flagged 1, free) right before any reader whose root has been recomputed since the view was made; a
view nobody reads does not run (as no unread execution does).
Views of weights or graph inputs, views that are graph outputs, and a view op with scratch memory of its own
(not free to re-make) are left as they are. So is a view op that reads an activation besides its source (a
Reshape whose shape a `Shape` op computes at run time): re-made before a late reader, it would keep that tensor
alive until then, which the graph without views cannot book exactly. A view op's other inputs that cost no bytes
(a shape held as a constant, or made by a `Constant` op) are read, in the graph without views, by every reader
of the view: the op that writes them then runs before any of those readers, as the view's re-making needs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

from ckpt.solver.graph.graph import Op, TrainGraph
from ckpt.solver.graph.simulate import RunSequence


@dataclass(frozen=True)
class Collapsed:
    """The graph without its activation views, and what `expanded` needs to put them back."""

    graph: TrainGraph                      # the original
    view_ops: tuple[int, ...]              # indices (in `graph`) of the views taken out

    @cached_property
    def without_views(self) -> TrainGraph:
        g, gone = self.graph, set(self.view_ops)
        views = {t for i in gone for t in g.ops[i].outputs}
        ops = tuple(Op(op.name, op.op_type, tuple(dict.fromkeys(r for t in op.inputs for r in self.reads(t))),
                       op.outputs) for i, op in enumerate(g.ops) if i not in gone)
        # a view that stays, made from one taken out, is made from that one's root now
        aliases = {t: g.root(s) if s in views else s for t, s in g.aliases.items() if t not in views}
        costs = {op.name: g.op_cost[op.name] for op in ops}
        return replace(g, ops=ops, aliases=aliases, op_cost=costs)

    def reads(self, tensor: str) -> tuple[str, ...]:
        """What reading `tensor` reads in the graph without views: a view's root buffer and the other inputs of
        every view op on the way to it (a shape, say), else the tensor itself."""
        if tensor not in self.maker:
            return (tensor,)
        op = self.graph.ops[self.graph.index[self.maker[tensor]]]
        extra = tuple(t for t in op.inputs if t != self.source[tensor])
        return (*self.reads(self.source[tensor]), *extra)

    @cached_property
    def source(self) -> dict[str, str]:
        """View tensor -> the tensor it is made from (a root buffer, or another view)."""
        g = self.graph
        return {t: g.aliases[t] for i in self.view_ops for t in g.ops[i].outputs if t in g.aliases}

    @cached_property
    def maker(self) -> dict[str, str]:
        """View tensor -> the name of the op that makes it."""
        return {t: self.graph.ops[i].name for i in self.view_ops for t in self.graph.ops[i].outputs}


def collapsed(graph: TrainGraph) -> Collapsed:
    """Take out the views whose root is an activation buffer (see the module doc), and whose source is that
    buffer or a view taken out too (a view made from a view that stays must stay)."""
    views = {i for i, op in enumerate(graph.ops)
             if graph.is_aliasing_op(i) and not graph.scratch.get(op.name) and all(
                 t in graph.aliases and graph.is_activation(t) and graph.buffer_bytes(graph.root(t)) > 0
                 for t in op.outputs) and not _reads_other_activations(graph, op)}
    while True:
        kept = {i for i in views if all(graph.aliases[t] not in graph.aliases
                                        or graph.producer.get(graph.aliases[t]) in views for t in graph.ops[i].outputs)}
        if kept == views:
            return Collapsed(graph, tuple(sorted(views)))
        views = kept


def _reads_other_activations(graph: TrainGraph, op: Op) -> bool:
    """A view op reading an activation besides the tensors its outputs are views of (a run-time shape)."""
    sources = {graph.aliases[t] for t in op.outputs if t in graph.aliases}
    return any(graph.is_activation(t) for t in op.inputs if t not in sources)


def expanded(view: Collapsed, seq: RunSequence) -> RunSequence:
    """A schedule of the graph without views, with the views made (and re-made) where they are read."""
    g = view.graph
    changed: dict[str, int] = {}               # tensor -> position of its newest version (or the view's making)
    made: set[str] = set()                     # views made at least once
    out: RunSequence = []

    def ensure(tensor: str) -> None:
        """Make `tensor` (a view) current: its source first, then itself if it predates its source's version."""
        if tensor not in view.source:
            return
        source = view.source[tensor]
        ensure(source)
        if tensor in made and changed.get(tensor, -1) >= changed.get(source, -1):
            return
        out.append((view.maker[tensor], int(tensor in made)))
        made.add(tensor)
        changed[tensor] = len(out) - 1

    for name, flag in seq:
        op = g.ops[g.index[name]]
        for tensor in op.inputs:
            ensure(tensor)
        out.append((name, flag))
        for tensor in op.outputs:
            changed[tensor] = len(out) - 1
    return out          # a view nobody reads is not run, as solver.simulate.drop_dead drops any such run


def view_cost(graph: TrainGraph, seq: RunSequence, views: Collapsed) -> int:
    """Cycles the recomputes of `seq` add, a view's re-making being free (a pointer copy)."""
    free = {graph.ops[i].name for i in views.view_ops}
    return sum(graph.op_cost[name] for name, flag in seq if flag and name not in free)
