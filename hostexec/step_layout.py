"""The step data of Deeploy's training branch: positional arrays, gradient-accumulation buffers, mini-batches.

That branch's harness (DeeployTest/generateTrainingNetwork.py, testUtils/trainingUtils.py and
Platforms/Siracusa/src/deeploytraintest.c at commit 8b2e782f) reads inputs.npz as:
- the base arrays (keys that start with neither `mb` nor `meta_`, sorted) fill, in order, the graph inputs
  whose names are not gradient-accumulation buffers (`*_grad.accumulation.buffer`);
- those buffers start at zero;
- the data inputs are the base arrays that have a per-mini-batch variant `mb1_<key>`; mini-batch k > 0 reads
  `mb<k>_<key>` (the base array where that is absent), and the run cycles through `meta_data_size` of them;
- `meta_n_batches` mini-batches run in all, `meta_n_accum` accumulated per optimizer step
  (n_steps = n_batches // n_accum); `lazy_reset_grad` (the last graph input) is 1 on a step's first mini-batch,
  so the accumulators overwrite, and 0 after, so they add;
- outputs.npz names its arrays: `loss` (one value per mini-batch) and the weights after the last update.
Named inputs.npz files (every key a graph input name) are the layout of Deeploy v0.2.1 and are read as before.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx

from ckpt.hostexec.executor import checked_against
from ckpt.solver.graph.step_pair import GRAD_BUFFER


@dataclass(frozen=True)
class StepLayout:
    """How a positional inputs.npz feeds a training graph over its mini-batches."""

    base: dict[str, np.ndarray]                   # graph input -> its value on mini-batch 0 (buffers: zeros)
    batches: tuple[dict[str, np.ndarray], ...]    # data input -> value, per unique mini-batch (batch 0 first)
    n_steps: int
    n_accum: int
    buffers: tuple[str, ...]                      # gradient-accumulation buffers, in graph order
    reset: str | None                             # the lazy_reset_grad input, set per mini-batch

    @property
    def n_batches(self) -> int:
        return self.n_steps * self.n_accum

    def renamed(self, names: dict[str, str]) -> StepLayout:
        """The same layout over a graph whose inputs are renamed (`names`: old -> new; others kept), such as the
        graph Deeploy lowered (input_i)."""
        new = lambda name: names.get(name, name)  # noqa: E731
        return StepLayout({new(k): v for k, v in self.base.items()},
                          tuple({new(k): v for k, v in batch.items()} for batch in self.batches),
                          self.n_steps, self.n_accum, tuple(new(b) for b in self.buffers),
                          new(self.reset) if self.reset is not None else None)

    def feeds(self, batch: int) -> dict[str, np.ndarray]:
        """The inputs mini-batch `batch` (counted over the whole run) changes: its data and the reset flag."""
        changed = dict(self.batches[batch % len(self.batches)])
        if self.reset is not None:
            flag = self.base[self.reset]
            changed[self.reset] = np.full(flag.shape, batch % self.n_accum == 0, dtype=flag.dtype)
        return changed


def is_positional(keys: list[str], input_names: list[str]) -> bool:
    """An inputs.npz in the branch's layout: its keys are not the graph's input names, and positional ones
    (`arr_0000`, ...) are among them."""
    return set(keys) != set(input_names) and any(k.startswith("arr_") for k in keys)


def _meta(arrays: dict[str, np.ndarray], key: str, default: int) -> int:
    return int(np.asarray(arrays[key]).reshape(-1)[0]) if key in arrays else default


def positional_layout(graph: onnx.GraphProto, arrays: dict[str, np.ndarray], where: str) -> StepLayout:
    """Map a positional inputs.npz onto `graph`'s inputs as the branch's harness does (see the module doc).
    Raises ValueError naming what does not fit."""
    constants = {t.name for t in graph.initializer}
    inputs = [i for i in graph.input if i.name not in constants]
    buffers = [i for i in inputs if GRAD_BUFFER in i.name]
    fed = [i for i in inputs if GRAD_BUFFER not in i.name]
    base_keys = sorted(k for k in arrays if not k.startswith("mb") and not k.startswith("meta_"))
    if len(base_keys) != len(fed):
        raise ValueError(f"{where}: {len(base_keys)} base arrays ({', '.join(base_keys[:3])}, ...) for "
                         f"{len(fed)} graph inputs that are not gradient-accumulation buffers")
    base = {info.name: arrays[key] for info, key in zip(fed, base_keys)}
    for info in buffers:
        tensor = info.type.tensor_type
        dims = [d.dim_value for d in tensor.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type) if tensor.elem_type else np.float32
        base[info.name] = np.zeros(dims, dtype=dtype)
    data = [k for k in base_keys if f"mb1_{k}" in arrays]
    names = {key: info.name for info, key in zip(fed, base_keys)}
    size = _meta(arrays, "meta_data_size", 1 + len({k.split("_")[0] for k in arrays if k.startswith("mb")}))
    batches = tuple({names[k]: arrays.get(f"mb{b}_{k}", arrays[k]) if b else arrays[k] for k in data}
                    for b in range(max(1, size)))
    for number, batch in enumerate(batches):      # each mini-batch's arrays as the graph declares its inputs
        checked_against({**base, **batch}, fed, where + (f" (mini-batch {number})" if number else ""), graph)
    total = _meta(arrays, "meta_n_batches", len(batches))
    n_accum = max(1, _meta(arrays, "meta_n_accum", 1))
    reset = inputs[-1].name if inputs and inputs[-1].name not in {b.name for b in buffers} \
        and "reset" in inputs[-1].name else None
    return StepLayout(base=base, batches=batches, n_steps=max(1, total // n_accum), n_accum=n_accum,
                      buffers=tuple(b.name for b in buffers), reset=reset)
