"""Every tensor of a graph Deeploy parses has a declared shape, or the graph is refused before Deeploy parses it.

Deeploy infers no shape: after its lowering its front end asserts that every tensor has one. ckpt adds
`RefuseShapeless` as a lowering pass after its last one (the graph it checks is the one Deeploy's assertion would
see) and says it in one line. ckpt does not fill the gaps with ONNX's shape inference: that knows none of the
training ops (GeluGrad, SGD, the gradient ops Deeploy's exporters write) and follows ONNX's form of
SoftmaxCrossEntropyLoss, whose first output is the loss, where these graphs use Deeploy's (the log-probabilities),
so what it filled in would be wrong rather than missing.
"""
from __future__ import annotations

from .errors import BridgeError

MANGLING = "_tensor"    # the suffix Deeploy's preprocessing gives every tensor name


def shapeless_tensors(graph) -> list[str]:
    """The source names of a graphsurgeon graph's tensors that have no shape (omitted optional inputs aside)."""
    return [name.removesuffix(MANGLING) for name, tensor in graph.tensors().items()
            if name and tensor.shape is None]


class RefuseShapeless:
    """A lowering pass (`apply(graph) -> graph`, as Deeploy's TopologyOptimizer runs them): refuses a graph with
    tensors of no shape, naming the first and counting the rest."""

    def apply(self, graph):
        missing = shapeless_tensors(graph)
        if missing:
            which = f"tensor '{missing[0]}' has" if len(missing) == 1 else \
                f"{len(missing)} tensors ('{missing[0]}' first) have"
            raise BridgeError(f"{which} no shape in the model's value_info, and Deeploy infers none (nor can ONNX's "
                              "shape inference for the training ops): export the model with the shape and type of "
                              "every tensor its ops compute in value_info")
        return graph
