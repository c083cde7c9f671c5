"""Turn a node order (names, or a callable) into the scheduler callable Deeploy's deployers accept.

Deeploy calls ``scheduler(graph)`` on the *lowered* onnx-graphsurgeon graph, more than once (binding,
then tiling). The non-tiled flow accepts nodes or lists of nodes (``NetworkContainer._bindLayers``
flattens); the tiler (``TilerDeployerWrapper.tile``) needs one list per pattern, so we always return
``[[node], [node], ...]`` - valid for both. Every call re-resolves names against the graph it is given,
because Deeploy may hand over a different graph object each time.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from .errors import BridgeError

Order = Sequence[str] | Callable | None


def _as_nodes(result) -> list:
    """Flatten whatever a user callable returned (nodes or lists of nodes) into a node list."""
    flat = []
    for item in result:
        if isinstance(item, (list, tuple)):
            flat.extend(item)
        else:
            flat.append(item)
    return flat


def _check_topological(graph, nodes: list) -> None:
    """Refuse orders that use a tensor before it is produced: Deeploy would silently mis-count them."""
    produced = {t.name for t in graph.inputs}
    for tensor in graph.tensors().values():
        if not tensor.inputs:  # constants and graph inputs have no producer
            produced.add(tensor.name)
    seen = set()
    for node in nodes:
        if node.name in seen:
            raise BridgeError(f"schedule lists node {node.name} twice")
        seen.add(node.name)
        for tensor in node.inputs:
            if tensor.name and tensor.name not in produced:
                raise BridgeError(f"schedule runs {node.name} before its input {tensor.name} is produced")
        produced.update(t.name for t in node.outputs)
    missing = [n.name for n in graph.nodes if n.name not in seen]
    if missing:
        raise BridgeError(f"schedule misses {len(missing)} node(s) of the lowered graph, e.g. {missing[0]}")


def make_scheduler(order: Order = None, *, check: bool = True) -> Callable:
    """Build ``scheduler(graph) -> [[node], ...]``.

    ``order``: lowered-graph node names in execution order, or a callable ``graph -> nodes`` (or lists
    of nodes), or None for the graph's own order (Deeploy's default).
    """

    def scheduler(graph) -> list[list]:
        if order is None:
            nodes = list(graph.nodes)
        elif callable(order):
            nodes = _as_nodes(order(graph))
        else:
            by_name = {n.name: n for n in graph.nodes}
            unknown = [name for name in order if name not in by_name]
            if unknown:
                raise BridgeError(f"schedule names {len(unknown)} node(s) not in the lowered graph, e.g. {unknown[0]}")
            nodes = [by_name[name] for name in order]
        if check:
            _check_topological(graph, nodes)
        return [[node] for node in nodes]

    scheduler.__name__ = "ckpt_scheduler"  # Deeploy's repr() reads scheduler.__name__
    return scheduler


def order_names(order: Order, graph) -> list[str]:
    """The node names a scheduler built from ``order`` would run on ``graph`` (for records)."""
    return [group[0].name for group in make_scheduler(order, check=False)(graph)]
