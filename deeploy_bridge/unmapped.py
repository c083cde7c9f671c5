"""Ops a target maps to no kernel, named before Deeploy parses the graph.

Deeploy's parser stops at the first node no engine maps ("No mapping found for node ..."), after preprocessing,
lowering and the start of parsing. ckpt adds `RefuseUnmapped` as the lowering's last pass: the graph Deeploy is
about to parse is the lowered one (a com.microsoft ConvGrad is three ops by then), and every op type in it that
the platform maps to no kernel is named at once, with a node of each, before any parsing.
"""
from __future__ import annotations

from .errors import BridgeError

FOLDED_OPS = frozenset({"Constant", "Shape", "Identity"})   # Deeploy's front end folds these: they need no mapping


def mapped_ops(platform) -> set[str]:
    """Every op type some engine of `platform` maps."""
    return {op for engine in platform.engines for op in engine.Mapping}


def unmapped_nodes(graph, platform) -> dict[str, str]:
    """Op type -> the first node of that type `platform` maps to no kernel (folded ops aside)."""
    known = mapped_ops(platform) | FOLDED_OPS
    missing: dict[str, str] = {}
    for node in graph.nodes:
        if node.op not in known:
            missing.setdefault(node.op, node.name)
    return missing


class RefuseUnmapped:
    """The lowering's last pass (a Deeploy TopologyOptimizer pass: `apply(graph) -> graph`): refuses a graph with
    ops `platform` does not map, naming them, where `platform` is what `what` says."""

    def __init__(self, platform, target: str, what: str) -> None:
        self.platform, self.target, self.what = platform, target, what

    def apply(self, graph):
        missing = unmapped_nodes(graph, self.platform)
        if missing:
            named = ", ".join(f"{op} (node {name})" for op, name in sorted(missing.items()))
            raise BridgeError(f"{self.what} maps no kernel for {named}: ckpt cannot deploy this graph for "
                              f"{self.target}; lower it with a Deeploy that maps these ops, or solve with "
                              "--target none")
        return graph
