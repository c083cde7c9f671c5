"""A training step of the branch's split form: the train graph over the mini-batches, then the optimizer graph.

As the branch's harness runs it: for each optimizer step, `n_accum` mini-batches through the train graph
(forward, backward, gradients accumulated into the buffers), then the optimizer graph on the weights and the
accumulated gradients, its outputs (the updated weights, in order) copied back over the train graph's weights.
The loss of every mini-batch (the train graph's first output) is recorded.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ckpt.hostexec.executor import HostExecutor
from ckpt.hostexec.step_layout import StepLayout


@dataclass
class StepOutcome:
    """What a whole run computed: per-mini-batch losses, the final weights and buffers, and the train graph's
    outputs (every tensor, with `return_all`) on its first mini-batch."""

    losses: np.ndarray
    weights: dict[str, np.ndarray]
    buffers: dict[str, np.ndarray]
    first_batch: dict[str, np.ndarray] = field(default_factory=dict)

    def as_outputs(self) -> dict[str, np.ndarray]:
        """Named as outputs.npz names them: `loss` and each weight."""
        return {"loss": self.losses, **self.weights}


def optimizer_weights(train: HostExecutor, optimizer: HostExecutor) -> list[str]:
    """The train-graph weights the optimizer updates, in the order of its outputs: its inputs that the train
    graph also takes and that are not gradient buffers. Raises ValueError when the graphs do not pair."""
    shared = [n for n in optimizer.input_names if n in train.input_names]
    missing = [n for n in optimizer.input_names if n not in train.input_names]
    if missing:
        raise ValueError(f"the optimizer graph reads {missing[0]!r}, which the train graph does not take "
                         f"({len(missing)} such input(s))")
    weights = [n for n in shared if n not in train.updated_inputs]
    if len(weights) != len(optimizer.output_names):
        raise ValueError(f"the optimizer graph writes {len(optimizer.output_names)} outputs for "
                         f"{len(weights)} weights")
    return weights


def run_step(train: HostExecutor, optimizer: HostExecutor | None, layout: StepLayout,
             order: Sequence[str] | None = None, *, return_all: bool = False) -> StepOutcome:
    """Run every mini-batch of `layout` (the train graph in `order`, graph order by default) and, after every
    `n_accum` of them, the optimizer graph."""
    state = dict(layout.base)
    weights = optimizer_weights(train, optimizer) if optimizer is not None else []
    losses, first = [], {}
    loss_name = train.output_names[0]
    for batch in range(layout.n_batches):
        state.update(layout.feeds(batch))
        result = train.run(state, order, return_all=return_all or batch == 0)
        if batch == 0:
            first = result
        losses.append(np.asarray(result[loss_name]).reshape(-1)[0])
        for name in train.updated_inputs:
            state[name] = result[name]
        if optimizer is not None and batch % layout.n_accum == layout.n_accum - 1:
            updated = optimizer.run({n: state[n] for n in optimizer.input_names})
            for name, output in zip(weights, optimizer.output_names):
                state[name] = updated[output]
    dtype = np.asarray(losses[0]).dtype if losses else np.float32
    return StepOutcome(losses=np.asarray(losses, dtype=dtype),
                       weights={n: state[n] for n in weights} or {n: state[n] for n in layout.base
                                                                 if n not in layout.buffers},
                       buffers={n: state[n] for n in layout.buffers}, first_batch=first)
