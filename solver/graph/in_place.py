"""Weights an optimizer updates in place: what the solver must know of them.

Deployed that way (deeploy_bridge.in_place), an SGD writes the new weight over the old one, in the buffer every
reader of that weight shares, and the copies of one constant that hold the same bytes are one buffer. For a
schedule that means:
- the updated weight owns no bytes: it is an alias of the weight, and a shared copy an alias of its canonical
  one (so no arena block is counted for them, and persistent bytes count each constant once);
- every execution that reads the weight, first runs and recomputes alike, comes before the update
  (`TrainGraph.must_precede`): a recompute after it would read the new weight. The graph's order is made to
  respect that (stably: where it already does, it is unchanged).
"""
from __future__ import annotations

from dataclasses import replace

from ckpt.solver.graph.graph import TrainGraph, alias_root, toposort

UPDATES_IN_PLACE = frozenset({"SGD"})     # optimizer ops whose first input is the weight they overwrite


def with_in_place_updates(graph: TrainGraph, shared: dict[str, str] | None = None) -> TrainGraph:
    """`graph` with its SGD updates in place (see the module doc). `shared`: constant copy -> the copy whose
    bytes it reads (the bridge's constant plan), for the copies present in this graph."""
    aliases = dict(graph.aliases)
    aliases.update({copy: canonical for copy, canonical in (shared or {}).items()
                    if copy in graph.tensor_bytes and canonical in graph.tensor_bytes})

    def root(tensor: str) -> str:
        return alias_root(aliases, tensor)

    updated: dict[str, str] = {}             # weight buffer -> the op that overwrites it
    for op in graph.ops:
        if op.op_type in UPDATES_IN_PLACE and op.inputs and op.outputs and op.inputs[0] not in graph.producer:
            updated[root(op.inputs[0])] = op.name
            aliases[op.outputs[0]] = op.inputs[0]
    precede: dict[str, set[str]] = {}
    for op in graph.ops:
        for tensor in op.inputs:
            update = updated.get(root(tensor))
            if update is not None and update != op.name:
                precede.setdefault(op.name, set()).add(update)
    must_precede = {name: tuple(sorted(ops)) for name, ops in sorted(precede.items())}
    ops = tuple(toposort(list(graph.ops), must_precede))
    return replace(graph, ops=ops, aliases=aliases, must_precede=must_precede)
