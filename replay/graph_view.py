"""The little a replay needs to know about a graph, whatever holds it (an ONNX file or Deeploy's gs graph).

Keeping the replay rules on this neutral record lets the same code rewire the ONNX ckpt writes and the graph
Deeploy hands its scheduler, so the two cannot drift apart.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ckpt.errors import CkptError
from ckpt.solver.graph.graph import names_fingerprint, stable_order


@dataclass(frozen=True)
class NodeView:
    """One node: name and the tensor names it reads and writes ("" marks an omitted optional slot)."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    @property
    def live(self) -> bool:
        """Produces something. Lowering can leave a same-named node with its outputs cleared: never run it."""
        return any(self.outputs)


@dataclass(frozen=True)
class GraphView:
    """Nodes in the holder's order, plus which tensors are graph outputs (their producers are never pruned)."""

    nodes: tuple[NodeView, ...]
    graph_outputs: frozenset[str]

    @cached_property
    def index(self) -> dict[str, int]:
        """Name -> node index, preferring a node that still produces something over a stale namesake."""
        found: dict[str, int] = {}
        for i, node in enumerate(self.nodes):
            if not node.live:
                continue
            if node.name in found:
                raise CkptError(f"two nodes named '{node.name}' produce outputs",
                                "node names must be unique to replay a schedule by name")
            found[node.name] = i
        return found

    @cached_property
    def live(self) -> tuple[int, ...]:
        """Indices of the nodes that will run (the live ones), in the holder's order."""
        chosen = set(self.index.values())
        return tuple(i for i in range(len(self.nodes)) if i in chosen)

    @cached_property
    def stale(self) -> tuple[str, ...]:
        """Names of nodes that produce nothing: never scheduled, whether or not a live namesake exists."""
        chosen = set(self.live)
        return tuple(node.name for i, node in enumerate(self.nodes) if i not in chosen)

    @cached_property
    def producer(self) -> dict[str, int]:
        return {t: i for i in self.live for t in self.nodes[i].outputs if t}

    @cached_property
    def read(self) -> frozenset[str]:
        return frozenset(t for i in self.live for t in self.nodes[i].inputs if t)

    @cached_property
    def available(self) -> frozenset[str]:
        """Tensors readable before anything runs: graph inputs and constants (read, but produced by no node)."""
        return frozenset(t for t in self.read if t not in self.producer)

    def fingerprint(self) -> str:
        """The fingerprint of the nodes that run: equals TrainGraph.fingerprint() of this graph."""
        return names_fingerprint(self.nodes[i].name for i in self.live)

    def topological(self) -> list[int]:
        """Live node indices in a stable topological order (file order unless a producer comes later)."""
        deps = {i: {self.producer[t] for t in self.nodes[i].inputs if t in self.producer} - {i} for i in self.live}
        order = stable_order(deps)
        if len(order) != len(self.live):
            stuck = min(set(self.live) - set(order))
            raise CkptError(f"the graph has a cycle through node '{self.nodes[stuck].name}'",
                            "a training graph must be acyclic; re-export it")
        return order
