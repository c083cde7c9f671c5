"""A replay plan applied to an ONNX model: the rewired graph ckpt writes, runs on the host and sizes.

The rewired model lists its nodes in the replayed order, so its own graph order is the replay (load_graph and
the host executor then need no separate order). Clones read the original's initializers by name: weights are
shared, never copied. Metadata (Deeploy's lowering record) is kept, so Deeploy still sees a lowered graph.
"""
from __future__ import annotations

import onnx

from ckpt.replay.graph_view import GraphView, NodeView
from ckpt.replay.plan import ReplayPlan


def view_of_model(model: onnx.ModelProto) -> GraphView:
    graph = model.graph
    nodes = tuple(NodeView(n.name, tuple(n.input), tuple(n.output)) for n in graph.node)
    return GraphView(nodes=nodes, graph_outputs=frozenset(o.name for o in graph.output))


def apply_to_model(model: onnx.ModelProto, plan: ReplayPlan) -> onnx.ModelProto:
    """A copy of `model` whose nodes are the plan's executions, in run order, with value_info for clones."""
    rewired = onnx.ModelProto()
    rewired.CopyFrom(model)
    graph = rewired.graph
    by_name = {n.name: n for n in model.graph.node if any(n.output)}
    infos = {v.name: v for v in list(graph.input) + list(graph.value_info) + list(graph.output)}
    nodes, extra_infos = [], []
    for e in plan.executions:
        node = onnx.NodeProto()
        node.CopyFrom(by_name[e.source])
        node.name = e.name
        node.input[:] = list(e.inputs)
        node.output[:] = list(e.outputs)
        nodes.append(node)
        if e.clone:
            for new, old in zip(e.outputs, by_name[e.source].output):
                if new and old in infos:
                    info = onnx.ValueInfoProto()
                    info.CopyFrom(infos[old])
                    info.name = new
                    extra_infos.append(info)
    del graph.node[:]
    graph.node.extend(nodes)
    graph.value_info.extend(extra_infos)
    return rewired


def rewired_aliases(view: GraphView, plan: ReplayPlan, aliases: dict[str, str]) -> dict[str, str]:
    """The alias map of the rewired graph: each execution of an aliasing node aliases the versions it touches.

    `aliases` is the original graph's (output -> input it shares a buffer with); an alias keeps its slots, so
    a Reshape reading a clone aliases that clone's buffer.
    """
    slots: dict[str, list[tuple[int, int]]] = {}
    for i in view.live:
        node = view.nodes[i]
        for j, out in enumerate(node.outputs):
            if out in aliases and aliases[out] in node.inputs:
                slots.setdefault(node.name, []).append((j, node.inputs.index(aliases[out])))
    found = {}
    for e in plan.executions:
        for j, p in slots.get(e.source, ()):
            found[e.outputs[j]] = e.inputs[p]
    return found


def rewired_scratch(plan: ReplayPlan, scratch: dict[str, int]) -> dict[str, int]:
    """Per-execution scratch bytes (Deeploy's transient buffers): a clone needs its original's, every time."""
    return {e.name: scratch[e.source] for e in plan.executions if scratch.get(e.source)}
