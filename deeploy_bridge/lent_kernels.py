"""GAP9's training ops, lent at run time from PULPOpen: PULPOpen's binding of each op with GAP9's code transformers.

GAP9 runs PULPOpen's kernels (its CMake list compiles TargetLibraries/PULPOpen/src beside its own DMA and memory
files); what differs is the code around a kernel call: the DMA (GAP9's `mchan_transfer_t` pushes in place of
Siracusa's mchan calls), its L3 copies and its include list, which GAP9's code transformers write. The training
branch maps few training ops for GAP9 (SoftmaxGrad, the loss's gradient, SGD): no ConvGrad, BatchNorm or pool
gradient, no InPlaceAccumulatorV2, and LayerNormalization and SoftmaxCrossEntropyLoss only in their one-output
inference form. Deeploy's pull request 174 closed that gap by hand, a GAP9 binding per op that wraps PULPOpen's
template and tile constraint in GAP9's transformers. ckpt composes the same thing from what the installed Deeploy
holds, so it follows that Deeploy rather than a copy of it:

- every kernel PULPOpen maps for an op (its signature and tile constraint) that GAP9's own mapping of the op lacks
  is lent: a binding with PULPOpen's type checker and template (its tile constraint rides on the template) and
  the GAP9 transformer that stands where PULPOpen's stood (`GAP9_TRANSFORMERS`). That covers the ops GAP9 lacks,
  the training forms of ops it maps in their inference form (LayerNormalization with three outputs, the loss with
  two) and the tiled forms of ops it maps untiled (ReduceSum, SoftmaxGrad: GAP9's untiled constraint refuses a
  tensor kept in L3, which a training step's are);
- where GAP9 maps the op too, the lent bindings are tried first, as on Siracusa, each mapper for nodes of its
  bindings' output count only (`OutputCountMapper`): Deeploy's type checker does not count outputs, and GAP9's
  one-output binding, given a three-output node, fails with an AttributeError instead of declining it;
- PULPOpen's transformers are told apart by their passes (TilingReadyNodeBindings deep-copies each binding, so
  none is the module's object any more); a binding whose transformer is none of them is not lent;
- an op that neither platform maps stays unmapped: deeploy_bridge.unmapped names it once Deeploy's lowering has
  made the graph it will parse, before parsing.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import Deeploy.Targets.PULPOpen.Bindings as PULPBindings
from Deeploy.DeeployTypes import NodeBinding, NodeMapper

# PULPOpen's transformer (Deeploy.Targets.PULPOpen.Bindings) -> GAP9's in its place (Deeploy.Targets.GAP9.Bindings),
# as GAP9's deployer swaps them (its Transformer, ClusterTransformer, SimpleTransformer) and its own bindings use them
GAP9_TRANSFORMERS = {
    "ForkTransformer": "GAP9Transformer",
    "ClusterTransformer": "GAP9ClusterTransformer",
    "SimpleTransformer": "GAP9SimpleTransformer",
    "SkipTransformer": "GAP9SkipTransformer",
    "MemoryAwareForkTransformer": "MemoryAwareForkTransformer",
}


def _pass_signature(step) -> tuple:
    """What tells one code transformation pass from another: its class and the settings that name what it makes."""
    return (type(step).__name__, getattr(step, "closureSuffix", None), getattr(step, "regex", None),
            getattr(step, "targetMemLevel", None))


def transformer_signature(transformer) -> tuple:
    return tuple(_pass_signature(step) for step in transformer.passes)


@dataclass(frozen=True)
class Lent:
    """What ckpt lent GAP9: per op, the kernel signatures (Deeploy's binding repr) it took from PULPOpen."""

    ops: tuple[tuple[str, tuple[str, ...]], ...]     # (op, signatures lent), ops in name order
    refused: tuple[tuple[str, str], ...] = ()        # (op, signature) PULPOpen maps with a transformer ckpt cannot pair

    @property
    def op_names(self) -> tuple[str, ...]:
        return tuple(op for op, _ in self.ops)


class OutputCountMapper(NodeMapper):
    """A mapper that declines (its parser is not asked) a node with another number of outputs than its bindings
    write: it stands before another platform's mapper of the same op, which then takes the node."""

    def __init__(self, parser, bindings, outputs: int) -> None:
        super().__init__(parser, bindings)
        self.outputs = outputs

    def _parse(self, ctxt, node, default_channels_first=True, ioParse=True):
        if len(node.outputs) != self.outputs:
            return ctxt, False
        return super()._parse(ctxt, node, default_channels_first, ioParse)


def _gap9_transformers(gap9_bindings) -> dict[tuple, object]:
    """PULPOpen transformer signature -> GAP9's transformer in its place."""
    found = {}
    for pulp_name, gap9_name in GAP9_TRANSFORMERS.items():
        found[transformer_signature(getattr(PULPBindings, pulp_name))] = getattr(gap9_bindings, gap9_name)
    return found


def kernel_key(binding) -> tuple[str, str]:
    """What a binding deploys: its template and signature (Deeploy's repr) and its tile constraint's kind."""
    return repr(binding), type(getattr(binding.template, "tileConstraint", None)).__name__


def _kernels(layer) -> set[tuple[str, str]]:
    return {kernel_key(binding) for mapper in layer.maps for binding in mapper.bindings}


def lend(pulp_mapping: dict, gap9_mapping: dict, gap9_bindings) -> tuple[dict, Lent]:
    """GAP9's mapping with PULPOpen's bindings it lacks lent to it (see the module doc), and what was lent.
    The mappings given are left as they are: the layers returned are new, their bindings deep copies."""
    transformers = _gap9_transformers(gap9_bindings)
    composed, lent, refused = dict(gap9_mapping), [], []
    for op in sorted(pulp_mapping):
        pulp_layer, own = pulp_mapping[op], gap9_mapping.get(op)
        has = _kernels(own) if own is not None else set()
        mappers, signatures = [], []
        for mapper in pulp_layer.maps:
            bindings = []
            for binding in mapper.bindings:
                signature = repr(binding)
                if kernel_key(binding) in has:
                    continue
                transformer = transformers.get(transformer_signature(binding.codeTransformer))
                if transformer is None or type(binding) is not NodeBinding:
                    refused.append((op, signature))
                    continue
                bindings.append(NodeBinding(binding.typeChecker, binding.template, transformer))
                signatures.append(signature)
            mappers += _mappers(mapper.parser, bindings, guarded=own is not None)
        if not mappers:
            continue
        maps = [*mappers, *(own.maps if own is not None else [])]
        composed[op] = type(pulp_layer if own is None else own)(maps)
        lent.append((op, tuple(signatures)))
    return composed, Lent(tuple(lent), tuple(refused))


def _mappers(parser, bindings: list, guarded: bool) -> list[NodeMapper]:
    """Mappers of `parser` over the lent `bindings` (deep copies, as Deeploy's TilingReadyNodeBindings makes them:
    no state shared with PULPOpen's): one, or, `guarded`, one per output count of the bindings."""
    if not bindings:
        return []
    if not guarded:
        return [NodeMapper(copy.deepcopy(parser), copy.deepcopy(bindings))]
    counts = sorted({len(b.typeChecker.output_types) for b in bindings})
    return [OutputCountMapper(copy.deepcopy(parser),
                              copy.deepcopy([b for b in bindings if len(b.typeChecker.output_types) == n]), n)
            for n in counts]
