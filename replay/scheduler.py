"""The replay as Deeploy's scheduler: `deployer = PULPDeployer(..., scheduler=ReplayScheduler.of_schedule(schedule))`.

Deeploy calls `scheduler(graph)` on its lowered onnx-graphsurgeon graph after lowering, once for binding and
again for tiling. The first call rewires that graph in place (clones added, consumers moved, pruned and stale
nodes removed) and returns `[[node], ...]`; a later call returns the same order from the graph it is given and
adds no second set of clones.
"""
from __future__ import annotations

import copy

import onnx_graphsurgeon as gs

from ckpt.replay.graph_view import GraphView, NodeView
from ckpt.replay.matching import MIN_MATCH
from ckpt.replay.plan import Execution, ReplayPlan, plan_replay
from ckpt.schedule_file import Schedule


def view_of_gs(graph) -> GraphView:
    nodes = tuple(NodeView(n.name, tuple(t.name for t in n.inputs), tuple(t.name for t in n.outputs))
                  for n in graph.nodes)
    return GraphView(nodes=nodes, graph_outputs=frozenset(t.name for t in graph.outputs))


class ReplayScheduler:
    """A Deeploy scheduler that replays a recompute schedule; `plan` holds what the first call did."""

    def __init__(self, seq: list[tuple[str, int]], *, fingerprint: str | None = None, force: bool = False,
                 min_match: float = MIN_MATCH) -> None:
        self.seq = [(str(name), int(flag)) for name, flag in seq]
        self.fingerprint = fingerprint
        self.force = force
        self.min_match = min_match
        self.plan: ReplayPlan | None = None
        self.calls = 0
        self.__name__ = "ckpt_replay_scheduler"   # Deeploy's repr reads scheduler.__name__

    @classmethod
    def of_schedule(cls, schedule: Schedule, force: bool = False) -> ReplayScheduler:
        """From a schedule file's record; its graph fingerprint is checked against Deeploy's graph."""
        return cls(list(schedule.seq), fingerprint=schedule.fingerprint, force=force)

    def __call__(self, graph) -> list[list]:
        self.calls += 1
        if self.plan is not None:
            replayed = _nodes_by_name(graph, self.plan.order)
            if replayed is not None:
                return [[node] for node in replayed]
        plan = plan_replay(view_of_gs(graph), self.seq, fingerprint=self.fingerprint, force=self.force,
                           min_match=self.min_match)
        nodes = apply_to_gs(graph, plan)
        self.plan = plan
        return [[node] for node in nodes]


def _nodes_by_name(graph, order: list[str]) -> list | None:
    """The live nodes named `order`, if the graph already holds all of them (it was rewired before)."""
    live = {n.name: n for n in graph.nodes if any(t.name for t in n.outputs)}
    if not all(name in live for name in order):
        return None
    return [live[name] for name in order]


def apply_to_gs(graph, plan: ReplayPlan) -> list:
    """Rewire `graph` in place to the plan; returns its nodes in run order."""
    live = {n.name: n for n in graph.nodes if any(t.name for t in n.outputs)}
    tensors = dict(graph.tensors())
    ordered = []
    for e in plan.executions:
        source = live[e.source]
        if e.clone:
            outputs = [_clone_tensor(gs, tensors, t, new) for t, new in zip(source.outputs, e.outputs)]
            node = gs.Node(op=source.op, name=e.name, attrs=copy.deepcopy(source.attrs),
                           inputs=_inputs(source, e, tensors), outputs=outputs, domain=source.domain)
            graph.nodes.append(node)
        else:
            node = source
            _rewire(node, e, tensors)
        ordered.append(node)
    _remove(graph, [live[e.source] for e in plan.pruned if not e.clone])
    _remove(graph, [n for n in graph.nodes if not any(t.name for t in n.outputs)])
    return ordered


def _inputs(source, e: Execution, tensors: dict) -> list:
    """The tensors a clone reads: the newest versions, and the source's constants shared by name.

    Deeploy 0.2.1 hoists a constant into one global buffer the first time a node reading it is parsed and
    asserts that the gs.Constant object has a single consumer. So a clone gets its own Constant object with
    the same name over the same array (gs's shallow copy): Deeploy finds the name already hoisted and the
    clone reads that one buffer. Nothing is copied, in memory or in the generated code.
    """
    found = []
    for old, new in zip(source.inputs, e.inputs):
        if isinstance(old, gs.Constant) and old.name == new:
            found.append(old.copy())
        else:
            found.append(old if old.name == new else tensors[new])
    return found


def _rewire(node, e: Execution, tensors: dict) -> None:
    for slot, new in enumerate(e.inputs):
        if node.inputs[slot].name != new:
            node.inputs[slot] = tensors[new]


def _clone_tensor(gs, tensors: dict, original, name: str):
    if not name:
        return gs.Variable.empty()
    tensor = gs.Variable(name, dtype=original.dtype, shape=copy.copy(original.shape))
    tensors[name] = tensor
    return tensor


def _remove(graph, nodes: list) -> None:
    """Disconnect and drop nodes, so no tensor lists them as a consumer any more."""
    gone = {id(n) for n in nodes}
    for node in nodes:
        node.inputs.clear()
        node.outputs.clear()
    graph.nodes = [n for n in graph.nodes if id(n) not in gone]
