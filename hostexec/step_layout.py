"""The step data of Deeploy's training branch: positional arrays, gradient-accumulation buffers, mini-batches.

That branch's harness (DeeployTest/generateTrainingNetwork.py, testUtils/trainingUtils.py and
Platforms/Siracusa/src/deeploytraintest.c at commit 8b2e782f) reads inputs.npz as:
- the base arrays (keys that start with neither `mb` nor `meta_`, sorted) fill, in order, the graph inputs
  whose names are not gradient-accumulation buffers (`*_grad.accumulation.buffer`);
- those buffers start at zero;
- the data inputs are the base arrays that have a per-mini-batch variant `mb1_<key>`; mini-batch k > 0 reads
  `mb<k>_<key>` (each present for every k below `meta_data_size`, none beyond), and the run cycles through
  `meta_data_size` of them;
- `meta_n_batches` mini-batches run in all, `meta_n_accum` accumulated per optimizer step
  (n_steps = n_batches // n_accum); `lazy_reset_grad` (the last graph input) is 1 on a step's first mini-batch,
  so the accumulators overwrite, and 0 after, so they add;
- outputs.npz names its arrays: `loss` (one value per mini-batch) and the weights after the last update
  (`check_golden` holds it to that as strictly as a single graph's goldens are held to its outputs).
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


def _meta(arrays: dict[str, np.ndarray], key: str, default: int, where: str) -> int:
    """A count the harness reads from inputs.npz: one integer of at least 1 (ValueError otherwise)."""
    if key not in arrays:
        return default
    value = np.asarray(arrays[key])
    if value.size != 1 or value.dtype.kind not in "iu":
        raise ValueError(f"{where}: '{key}' must be one integer, it holds {value.dtype} values of shape "
                         f"{list(value.shape)}")
    count = int(value.reshape(-1)[0])
    if count < 1:
        raise ValueError(f"{where}: '{key}' is {count}, and the harness needs at least 1")
    return count


def _mini_batch_keys(arrays: dict[str, np.ndarray], base_keys: list[str], size: int, where: str) -> list[str]:
    """The data keys (base arrays that vary per mini-batch), each with its array for every mini-batch 1..size-1
    and none beyond: a missing one would run on other data, one beyond would never run (ValueError)."""
    data = [k for k in base_keys if f"mb1_{k}" in arrays]
    for key in (k for k in arrays if k.startswith("mb")):
        number, _, name = key[2:].partition("_")
        if not number.isdigit() or name not in base_keys or not 1 <= int(number) < size:
            raise ValueError(f"{where}: '{key}' is no mini-batch's array: mb<k>_<base array> for k from 1 to "
                             f"{size - 1} (meta_data_size {size})")
        if name not in data:
            raise ValueError(f"{where}: '{key}' varies '{name}', which mini-batch 1 does not ('mb1_{name}' absent)")
    for number in range(1, size):
        missing = next((k for k in data if f"mb{number}_{k}" not in arrays), None)
        if missing is not None:
            raise ValueError(f"{where}: mini-batch {number} of the {size} meta_data_size gives has no "
                             f"'mb{number}_{missing}'")
    return data


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
    names = {key: info.name for info, key in zip(fed, base_keys)}
    size = _meta(arrays, "meta_data_size", 1 + len({k.split("_")[0] for k in arrays if k.startswith("mb")}), where)
    data = _mini_batch_keys(arrays, base_keys, size, where)
    batches = tuple({names[k]: arrays[f"mb{b}_{k}"] if b else arrays[k] for k in data} for b in range(size))
    for number, batch in enumerate(batches):      # each mini-batch's arrays as the graph declares its inputs
        checked_against({**base, **batch}, fed, where + (f" (mini-batch {number})" if number else ""), graph)
    total = _meta(arrays, "meta_n_batches", len(batches), where)
    n_accum = _meta(arrays, "meta_n_accum", 1, where)
    if total < n_accum:
        raise ValueError(f"{where}: meta_n_batches {total} is fewer than the {n_accum} mini-batches meta_n_accum "
                         "accumulates per update: no update would run")
    reset = inputs[-1].name if inputs and inputs[-1].name not in {b.name for b in buffers} \
        and "reset" in inputs[-1].name else None
    return StepLayout(base=base, batches=batches, n_steps=total // n_accum, n_accum=n_accum,
                      buffers=tuple(b.name for b in buffers), reset=reset)


def check_golden(train: onnx.GraphProto, updated: list[str], layout: StepLayout, golden: dict[str, np.ndarray],
                 where: str) -> None:
    """Hold a split step's outputs.npz to what the run writes, as a single graph's goldens are held to its outputs
    (ValueError naming the first array that does not fit): named arrays (not positional `arr_*`), at least one of
    what the step writes (`loss`, the weights the optimizer graph updates: `updated`), `loss` with one value per
    mini-batch, and each array that names a tensor of the train graph in that tensor's shape and element type.
    What the step writes that outputs.npz lacks, and arrays naming no tensor of the train graph, stay out of the
    count, named by the check that runs."""
    if not golden:
        raise ValueError(f"{where} holds no arrays: a split step's golden is 'loss' (one value per mini-batch) and "
                         "the weights after the last update")
    positional = next((k for k in golden if k.startswith("arr_")), None)
    if positional is not None:
        raise ValueError(f"{where}: '{positional}' is a positional array; a split step's outputs.npz names its "
                         "arrays ('loss' and the weights after the last update)")
    constants = {t.name for t in train.initializer}
    written = ["loss", *(updated or [i.name for i in train.input if i.name not in constants
                                     and i.name not in layout.batches[0] and i.name not in layout.buffers
                                     and i.name != layout.reset])]
    if not any(name in golden for name in written):
        raise ValueError(f"{where} holds none of what the step writes ('loss' and the weights after the last "
                         f"update: {', '.join(written[:4])}{', ...' if len(written) > 4 else ''})")
    loss = train.output[0].type.tensor_type.elem_type if train.output else 0
    declared = {t.name: (t.data_type, list(t.dims)) for t in train.initializer}
    declared.update({i.name: (i.type.tensor_type.elem_type, [d.dim_value for d in i.type.tensor_type.shape.dim])
                     for i in train.input})
    declared["loss"] = (loss, [layout.n_batches])
    for name, value in golden.items():
        if name not in declared:
            continue
        elem, shape = declared[name]
        want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)) if elem else value.dtype
        if list(value.shape) != shape or value.dtype.newbyteorder("=") != want:
            per = f" (one value per mini-batch: {layout.n_batches})" if name == "loss" else ""
            raise ValueError(f"{where}: '{name}' is {value.dtype}{list(value.shape)}, the step writes "
                             f"{want}{shape}{per}")
