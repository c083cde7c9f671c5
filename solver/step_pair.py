"""A split training step (Deeploy's training branch): what the optimizer graph adds to the train graph's memory.

The optimizer graph runs after the train graph, when the train graph's activations are dead: it reads the weights
and the accumulated gradients the train graph holds (persistent there), writes the updated weights (the branch's
harness writes them to buffers of their own and copies them back; written in place they reuse the weights'), and
keeps any state of its own (Adam's moments). Its activations peak on their own; the step's activation peak is
the larger of the two graphs' peaks.
"""
from __future__ import annotations

from dataclasses import dataclass

from ckpt.solver.graph import TrainGraph
from ckpt.solver.simulate import memory_trace, plain_sequence


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
