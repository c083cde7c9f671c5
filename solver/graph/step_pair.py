"""A split training step (Deeploy's training branch): what the optimizer graph adds to the train graph's memory.

The optimizer graph runs after the train graph, when the train graph's activations are dead: it reads the weights
and the accumulated gradients the train graph holds (persistent there), writes the updated weights (the branch's
harness writes them to buffers of their own and copies them back; written in place they reuse the weights'), and
keeps any state of its own (Adam's moments). Its activations peak on their own; the step's activation peak is
the larger of the two graphs' peaks.

The two graphs are one step only if they pair as the branch's harness pairs them, by name
(DeeployTest/testUtils/codeGenerateTraining.py, build_shared_buffer_maps): the optimizer reads the train graph's
weights and accumulated gradients and writes each weight's new value back over it (`<weight>_updated`). `pair_mismatch`
holds the two to that, by name, shape and element type, so another model's optimizer graph is refused before any
work instead of adding its figures to a schedule or failing a sweep's every point.
"""
from __future__ import annotations

from dataclasses import dataclass

import onnx

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.simulate import memory_trace, plain_sequence


@dataclass(frozen=True)
class OptimizerFigures:
    nodes: int
    op_types: tuple[str, ...]
    shared_bytes: int          # persistent tensors it reads that the train graph holds (weights, gradients)
    output_bytes: int          # its outputs (updated weights): added when written out of place
    state_bytes: int           # persistent inputs the train graph does not hold (optimizer state)
    activation_peak: int       # its own activations' peak, graph order

    def as_dict(self) -> dict:
        return {"nodes": self.nodes, "op_types": list(self.op_types), "shared_bytes": self.shared_bytes,
                "output_bytes": self.output_bytes, "state_bytes": self.state_bytes,
                "activation_peak_bytes": self.activation_peak}

    def line(self) -> str:
        state = f", {self.state_bytes} B of state of its own" if self.state_bytes else ""
        return (f"{self.nodes} nodes ({', '.join(self.op_types)}): reads {self.shared_bytes} B the train graph "
                f"holds (weights, accumulated gradients){state}; its outputs add {self.output_bytes} B written "
                f"out of place (as the branch's harness writes them), 0 B in place; its activations peak at "
                f"{self.activation_peak} B, after the train graph's are freed")


def optimizer_figures(train: TrainGraph, optimizer: TrainGraph) -> OptimizerFigures:
    """What `optimizer` adds to the step of `train` (tensors are matched by name, as the harness pairs them)."""
    written = {t for op in optimizer.ops for t in op.outputs}
    read = {t for op in optimizer.ops for t in op.inputs if t not in written}
    shared = {t for t in read if t in train.tensor_bytes}
    outputs = {t for t in written if t in optimizer.persistent}
    return OptimizerFigures(
        nodes=len(optimizer.ops), op_types=tuple(sorted({op.op_type for op in optimizer.ops})),
        shared_bytes=sum(train.tensor_bytes[t] for t in shared),
        output_bytes=sum(optimizer.tensor_bytes[t] for t in outputs),
        state_bytes=sum(optimizer.tensor_bytes[t] for t in read - shared if t in optimizer.persistent),
        activation_peak=memory_trace(optimizer, plain_sequence(optimizer)).peak_bytes)


GRAD_BUFFER = "_grad.accumulation.buffer"     # a gradient-accumulation buffer of the train graph: <weight> + this
UPDATED = "_updated"                            # the branch's name of a weight's new value: <weight> + this


def _signature(info: onnx.ValueInfoProto | onnx.TensorProto) -> tuple[int, tuple]:
    """(element type, shape) of a declared tensor or an initializer; a symbolic dimension by its name."""
    if isinstance(info, onnx.TensorProto):
        return info.data_type, tuple(info.dims)
    tensor = info.type.tensor_type
    return tensor.elem_type, tuple(d.dim_value if d.HasField("dim_value") else d.dim_param or "?"
                                   for d in tensor.shape.dim)


def _shown(signature: tuple[int, tuple]) -> str:
    elem, shape = signature
    name = onnx.TensorProto.DataType.Name(elem).lower() if elem else "untyped"
    return f"{name}[{', '.join(map(str, shape))}]"


def pair_mismatch(train: onnx.ModelProto, optimizer: onnx.ModelProto) -> str | None:
    """The first way `optimizer` does not complete `train`'s step, in words (None: it does): a gradient buffer or
    weight it reads that the train graph does not take, a tensor both hold with another shape or element type, an
    updated weight that is not the train graph's weight's shape and type, no tensor shared at all, a trained
    weight (one with a gradient buffer) left without its update, an update not computed from its weight, or a
    tensor neither graph holds that it reads and never updates. Tensors the train graph does not hold that the
    optimizer updates are its own state (Adam's moments)."""
    held = {t.name: _signature(t) for t in train.graph.initializer}
    held.update({i.name: _signature(i) for i in train.graph.input})
    own = {t.name for t in optimizer.graph.initializer}
    reads = {i.name: _signature(i) for i in optimizer.graph.input if i.name not in own}
    for name, signature in reads.items():
        if name not in held:
            if name.endswith(GRAD_BUFFER) or name + GRAD_BUFFER in reads:
                kind = "the gradient buffer" if name.endswith(GRAD_BUFFER) else "the weight"
                return f"it reads {kind} '{name}', which the train graph does not take"
            continue
        if held[name] != signature:
            return (f"it reads '{name}' as {_shown(signature)}, the train graph holds it as {_shown(held[name])}")
    if not set(reads) & set(held):
        return "it reads none of the train graph's tensors"
    for node in optimizer.graph.node:              # SGD(weight, gradient) -> <weight>_updated, as the branch writes
        if node.op_type != "SGD" or len(node.input) < 2 or not node.output:
            continue
        weight = node.output[0].removesuffix(UPDATED)
        if weight in held and (node.input[0] != weight or not node.input[1].startswith(weight + GRAD_BUFFER)):
            return (f"its SGD node '{node.name or node.output[0]}' writes '{node.output[0]}' from "
                    f"({', '.join(node.input[:2])}); the update of '{weight}' reads ({weight}, "
                    f"{weight}{GRAD_BUFFER}), in that order")
    updated = set()
    for info in optimizer.graph.output:
        weight = info.name if info.name in held else info.name.removesuffix(UPDATED)
        if weight in held:
            if _signature(info) != held[weight]:
                return (f"it writes '{info.name}' as {_shown(_signature(info))}, the train graph's '{weight}' is "
                        f"{_shown(held[weight])}")
            updated.add(weight)
        elif weight not in reads:
            return f"it writes '{info.name}', which updates no tensor of either graph"
    return _update_mismatch(optimizer, held, reads, updated)


def _update_mismatch(optimizer: onnx.ModelProto, held: dict, reads: dict, updated: set[str]) -> str | None:
    """How the updates fail the train graph's weights (None: they do not): a weight whose gradient the train graph
    accumulates that no output updates (its golden would never be reached), an update computed without reading
    the weight it replaces, or a tensor neither graph holds that the optimizer reads and never updates (no state
    of its own: a weight of another graph)."""
    trained = [name for name in held if name + GRAD_BUFFER in held]
    missed = [name for name in trained if name not in updated]
    if missed:
        return (f"it updates {len(trained) - len(missed)} of the {len(trained)} weights the train graph accumulates "
                f"gradients for ('{missed[0]}' is never updated)")
    writer = {out: node for node in optimizer.graph.node for out in node.output}
    for info in optimizer.graph.output:
        weight = info.name if info.name in held else info.name.removesuffix(UPDATED)
        node = writer.get(info.name)
        if weight in held and node is not None and weight not in node.input:
            return f"it computes '{info.name}' from {', '.join(repr(i) for i in node.input if i)}, not from '{weight}'"
    written = {o.name.removesuffix(UPDATED) for o in optimizer.graph.output}
    foreign = [name for name in reads if name not in held and name not in written]
    if foreign:
        return f"it reads '{foreign[0]}', which the train graph does not take and it never updates"
    return None
