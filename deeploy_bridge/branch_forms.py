"""The release's training graphs in the forms the installed Deeploy parses.

The release (0.2.1) and Deeploy's training branch write two training ops differently:

- SoftmaxCrossEntropyLoss: the release's has one output, the log-probabilities its gradient reads; the branch's
  has two, as ONNX Runtime exports it (the mean loss, then the log-probabilities);
- LayerNormalizationGrad: the release's reads (dY, X, scale, bias) and gives dX alone; the branch's reads
  (dY, X, scale, mean, inv_std_dev), the statistics its forward LayerNormalization keeps (its outputs 1 and 2),
  and gives (dX, dscale, dbias); its LayerNormalization always writes those statistics.

Where the installed Deeploy's parsers take only the branch's form (asked with a node of each form), a graph in the
release's form is rewritten to it before Deeploy sees it: the loss gets its first output (which nothing reads),
each LayerNormalization keeps its statistics (which its gradient then reads), and the gradient gets the
scale and bias gradients (which nothing reads). The step computes what it computed: dX is the gradient in both
(a graph that declares the release kernel's own dX, `form="deeploy"`, is told apart: the branch's kernel computes
the gradient, so the rewritten node says so).
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import onnx_graphsurgeon as gs
from Deeploy.Targets.Generic import Parsers

SUFFIX = "_ckpt_branch"


def _accepts(parser_cls, inputs: int, outputs: int) -> bool:
    node = gs.Node("Probe", name="probe", attrs={"epsilon": 1e-5},
                   inputs=[gs.Variable(f"i{k}") for k in range(inputs)],
                   outputs=[gs.Variable(f"o{k}") for k in range(outputs)])
    try:
        return bool(parser_cls().parseNode(node))
    except Exception:       # a parser that cannot even look at the other form does not take it
        return False


@lru_cache(maxsize=1)
def needed() -> frozenset[str]:
    """The ops whose release form the installed Deeploy cannot parse while it parses the branch's."""
    ops = set()
    sce = getattr(Parsers, "SoftmaxCrossEntropyLossParser", None)
    if sce is not None and not _accepts(sce, 2, 1) and _accepts(sce, 2, 2):
        ops.add("SoftmaxCrossEntropyLoss")
    grad = getattr(Parsers, "LayerNormGradParser", None)
    if grad is not None and not _accepts(grad, 4, 1) and _accepts(grad, 5, 3):
        ops.add("LayerNormalizationGrad")
    return frozenset(ops)


def _loss_with_two_outputs(graph: gs.Graph, node) -> bool:
    if len(node.outputs) != 1 or len(node.inputs) != 2:
        return False
    loss = gs.Variable(f"{node.name}{SUFFIX}_loss", dtype=np.float32, shape=[])
    node.outputs = [loss, node.outputs[0]]
    return True


def _statistics_kept(forward) -> bool:
    """A one-output LayerNormalization given the outputs the branch's kernel always writes (mean, inv_std_dev)."""
    x = forward.inputs[0]
    if len(forward.outputs) != 1 or not x.shape:
        return False
    stats = list(x.shape[:-1]) + [1]
    forward.outputs = [forward.outputs[0],
                       gs.Variable(f"{forward.name}{SUFFIX}_mean", dtype=np.float32, shape=stats),
                       gs.Variable(f"{forward.name}{SUFFIX}_inv_std_dev", dtype=np.float32, shape=stats)]
    return True


def _layer_norm_with_statistics(graph: gs.Graph, grad, forward_of: dict) -> bool:
    if len(grad.inputs) != 4 or len(grad.outputs) != 1:
        return False
    dy, x, scale, _bias = grad.inputs
    forward = forward_of.get((x.name, scale.name))
    if forward is None or len(forward.outputs) < 3:
        return False
    grad.inputs = [dy, x, scale, forward.outputs[1], forward.outputs[2]]
    grad.outputs = [grad.outputs[0],
                    gs.Variable(f"{grad.name}{SUFFIX}_dscale", dtype=np.float32, shape=list(scale.shape or [])),
                    gs.Variable(f"{grad.name}{SUFFIX}_dbias", dtype=np.float32, shape=list(scale.shape or []))]
    grad.attrs.pop("form", None)
    return True


def to_branch_forms(graph: gs.Graph, ops: frozenset[str] | None = None) -> list[str]:
    """Rewrite the nodes of `graph` in the release's form of `ops` (default: those the installed Deeploy needs)
    into the branch's; returns the names of the nodes rewritten."""
    ops = needed() if ops is None else ops
    forward_of = {(n.inputs[0].name, n.inputs[1].name): n for n in graph.nodes
                  if n.op == "LayerNormalization" and len(n.inputs) >= 2}
    rewritten = []
    if "LayerNormalizationGrad" in ops:      # the branch's LayerNormalization writes its statistics, read or not
        rewritten += [n.name for n in forward_of.values() if _statistics_kept(n)]
    for node in graph.nodes:
        if node.op not in ops:
            continue
        done = _loss_with_two_outputs(graph, node) if node.op == "SoftmaxCrossEntropyLoss" else \
            _layer_norm_with_statistics(graph, node, forward_of)
        if done:
            rewritten.append(node.name)
    return rewritten
