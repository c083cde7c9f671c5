"""Host reference executor for ONNX training graphs: run the nodes in a given order with numpy.

A recompute schedule is only trustworthy if replaying it gives the same updated weights as
the plain graph.  This executor runs any node order (including clone nodes already present in
the model), refuses orders that read a tensor before it exists, and returns the graph outputs
so they can be compared with the golden outputs.npz or with another order's results.
"""

from __future__ import annotations

import heapq
import time
import zipfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import numpy_helper

from ckpt.hostexec.op_registry import BindContext, BoundNode, bind_node
from ckpt.solver.graph.onnx_loader import data_inputs


class OrderError(ValueError):
    """The node order cannot be executed: unknown node, tensor read before produced, or a
    graph output left unproduced."""


def _default_opset(model: onnx.ModelProto) -> int:
    """Highest default-domain version: these models list ('', 19) twice and ('', 12) once."""
    versions = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    return max(versions) if versions else onnx.defs.onnx_opset_version()


def _declared_shapes(graph: onnx.GraphProto) -> dict[str, tuple[int, ...]]:
    shapes: dict[str, tuple[int, ...]] = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = tuple(d.dim_value for d in tt.shape.dim)
    return shapes


def _declared_types(graph: onnx.GraphProto) -> dict[str, int]:
    return {vi.name: vi.type.tensor_type.elem_type for vi in list(graph.input) + list(graph.value_info)
            + list(graph.output) if vi.type.tensor_type.elem_type}


def _declared_ranks(graph: onnx.GraphProto) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            ranks[vi.name] = len(tt.shape.dim)
    return ranks


class HostExecutor:
    """Binds every node of a model once; `run` then replays any order of them."""

    def __init__(self, model: onnx.ModelProto) -> None:
        graph = model.graph
        self.opset = _default_opset(model)
        ctx = BindContext(opset=self.opset, declared_rank=_declared_ranks(graph),
                          declared_shape=_declared_shapes(graph), declared_type=_declared_types(graph))
        self.nodes: list[BoundNode] = [bind_node(n, self.opset, ctx) for n in graph.node]
        self.by_name: dict[str, BoundNode] = {}
        for bn in self.nodes:
            if not bn.name or bn.name in self.by_name:
                raise ValueError(f"node names must be unique and non-empty to run by name: {bn.name!r}")
            self.by_name[bn.name] = bn
        self.producer: dict[str, str] = {o: bn.name for bn in self.nodes for o in bn.outputs if o}
        self.initializers: dict[str, np.ndarray] = {
            t.name: numpy_helper.to_array(t) for t in graph.initializer
        }
        self.input_names: list[str] = [i.name for i in graph.input if i.name not in self.initializers]
        self.output_names: list[str] = [o.name for o in graph.output]
        # graph inputs an op updates in place (accumulation buffers): a run returns their final values too
        self.updated_inputs: list[str] = list(dict.fromkeys(
            bn.inputs[p] for bn in self.nodes for p in bn.writes_back if bn.inputs[p] in self.input_names))
        self.default_order: list[str] = graph_order(model)

    def impl_summary(self) -> dict[str, str]:
        """'domain::op_type' -> implementation used (ckpt or the onnx.reference class)."""
        return {f"{bn.domain or 'ai.onnx'}::{bn.op_type}": bn.impl for bn in self.nodes}

    def run(
        self,
        feeds: Mapping[str, np.ndarray],
        order: Sequence[str] | None = None,
        *,
        return_all: bool = False,
        timings: dict[str, float] | None = None,
    ) -> dict[str, np.ndarray]:
        """Execute `order` (node names; None = `graph_order`) and return the graph outputs, and the final value
        of every graph input an op updates in place (`updated_inputs`).

        return_all=True returns every tensor (initializers, feeds, all node outputs) instead.
        timings, if given, accumulates seconds per op_type.
        """
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise ValueError(f"missing feeds for graph inputs {missing}")
        env: dict[str, np.ndarray] = dict(self.initializers)
        env.update({k: np.asarray(v) for k, v in feeds.items()})
        if order is None:
            order = self.default_order
        steps = [self._lookup(n, i) for i, n in enumerate(order)]
        for pos, bn in enumerate(steps):
            args = []
            for t in bn.inputs:
                if not t:
                    args.append(None)
                    continue
                if t not in env:
                    raise OrderError(self._explain_unready(bn, t, pos))
                args.append(env[t])
            while args and args[-1] is None:
                args.pop()
            t0 = time.perf_counter() if timings is not None else 0.0
            with np.errstate(all="ignore"):      # IEEE results as the device computes them; a NaN or Inf in the
                results = bn.kernel(*args)       # inputs is said by the comparison (compare.VerifyResult)
            if timings is not None:
                timings[bn.op_type] = timings.get(bn.op_type, 0.0) + time.perf_counter() - t0
            if len(results) < len([o for o in bn.outputs if o]):
                raise RuntimeError(f"node {bn.name!r} ({bn.impl}) returned {len(results)} outputs, "
                                   f"the graph declares {len(bn.outputs)}")
            for name, value in zip(bn.outputs, results):
                if name:
                    env[name] = np.asarray(value)
            for position, value in zip(bn.writes_back, results[len(bn.outputs):]):
                env[bn.inputs[position]] = np.asarray(value)    # a new binding: the caller's feeds stay as given
        unproduced = [o for o in self.output_names if o not in env]
        if unproduced:
            raise OrderError(
                "graph outputs never produced: "
                + ", ".join(f"{o!r} (producer {self.producer.get(o)!r})" for o in unproduced)
            )
        if return_all:
            return env
        return {o: env[o] for o in [*self.output_names, *self.updated_inputs]}

    def _lookup(self, name: str, pos: int) -> BoundNode:
        try:
            return self.by_name[name]
        except KeyError:
            raise OrderError(f"order position {pos}: no node named {name!r} in the model") from None

    def _explain_unready(self, bn: BoundNode, tensor: str, pos: int) -> str:
        producer = self.producer.get(tensor)
        why = (f"its producer {producer!r} has not run yet" if producer
               else "no node produces it and it is neither an initializer nor a feed")
        return (f"order position {pos}: node {bn.name!r} ({bn.op_type}) reads tensor {tensor!r} "
                f"before it exists; {why}")


def run_graph(
    model: onnx.ModelProto,
    feeds: Mapping[str, np.ndarray],
    order: Sequence[str] | None = None,
    *,
    return_all: bool = False,
) -> dict[str, np.ndarray]:
    """One-shot convenience over HostExecutor (bind + run); bind once yourself for many orders."""
    return HostExecutor(model).run(feeds, order, return_all=return_all)


def _dependencies(model: onnx.ModelProto) -> tuple[list[set[int]], dict[int, list[int]]]:
    """(predecessors, successors) of each node index by tensor flow."""
    nodes = model.graph.node
    producer = {o: i for i, n in enumerate(nodes) for o in n.output if o}
    preds: list[set[int]] = [{producer[t] for t in n.input if t in producer} for n in nodes]
    succs: dict[int, list[int]] = defaultdict(list)
    for i, ps in enumerate(preds):
        for p in sorted(ps):
            succs[p].append(i)
    return preds, succs


def _kahn(model: onnx.ModelProto, pick) -> list[str]:
    nodes = model.graph.node
    preds, succs = _dependencies(model)
    indeg = [len(p) for p in preds]
    ready = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(ready)
    out: list[str] = []
    while ready:
        i = pick(ready)
        out.append(nodes[i].name)
        for s in succs[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, s)
    if len(out) != len(nodes):
        raise ValueError("graph has a cycle")
    return out


def graph_order(model: onnx.ModelProto) -> list[str]:
    """The model's node order, made executable: a stable topological sort of the file order.

    The CCT files are NOT topologically sorted (fused Gemm nodes were appended at the end), so
    each node is taken at its file position unless a producer comes later; then it waits.
    """
    return _kahn(model, heapq.heappop)


# --------------------------------------------------------------------------- npz name mapping


def read_npz(npz_path: str | Path) -> dict[str, np.ndarray]:
    """Every array of an npz file by key, with a ValueError for anything that is not one."""
    try:
        with np.load(npz_path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except (OSError, EOFError, ValueError, zipfile.BadZipFile, KeyError) as exc:
        raise ValueError(f"{npz_path} is not an npz file of arrays ({type(exc).__name__}: {exc})") from None
    # byte order is how a file stores the values, not which: every reader gets them in this machine's order
    return {k: v.astype(v.dtype.newbyteorder("=")) if not v.dtype.isnative else v for k, v in arrays.items()}


def _map_npz(names: list[str], npz_path: str | Path, what: str) -> dict[str, np.ndarray]:
    """Key npz arrays by graph names: by name when the key sets agree, else by position.

    The originals' npz keys equal their graph I/O names; Deeploy's lowered graphs rename I/O
    to input_i/output_i but keep the order, so position is the fallback.
    """
    arrays = read_npz(npz_path)
    keys = list(arrays)
    if set(keys) == set(names):
        return {n: arrays[n] for n in names}
    if len(keys) != len(names):
        raise ValueError(f"{npz_path}: {len(keys)} arrays {keys} cannot map onto {len(names)} graph "
                         f"{what} {names}: names differ and counts differ")
    return {n: arrays[k] for n, k in zip(names, keys)}


def checked_against(values: Mapping[str, np.ndarray], declared: Sequence[onnx.ValueInfoProto], where,
                    graph: onnx.GraphProto | None = None) -> dict[str, np.ndarray]:
    """Refuse arrays whose shape or element type is not the one the graph declares for them (a float label fed
    to an integer input, float64 data for a float32 input, an image of another size), and, given the graph,
    class labels a loss cannot index (ValueError naming the array)."""
    for info in declared:
        if info.name not in values:
            continue
        tensor = info.type.tensor_type
        value = np.asarray(values[info.name])
        dims = [d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim]
        if tensor.HasField("shape") and (len(dims) != value.ndim
                                         or any(d is not None and d != n for d, n in zip(dims, value.shape))):
            raise ValueError(f"{where}: '{info.name}' has shape {list(value.shape)}, the graph declares {dims}")
        if tensor.elem_type:
            want = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type))
            if value.dtype.newbyteorder("=") != want:
                raise ValueError(f"{where}: '{info.name}' holds {value.dtype} values, the graph declares {want}")
    if graph is not None:
        problem = label_problem(graph, values)
        if problem:
            raise ValueError(f"{where}: {problem}")
    return dict(values)


LOSSES_BY_LABEL = frozenset({"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})   # labels: input 1


def label_problem(graph: onnx.GraphProto, values: Mapping[str, np.ndarray]) -> str | None:
    """Why the class labels `values` feeds a loss cannot be indices into its scores (a label outside 0..C-1
    that is not the loss's ignore_index), or None. The class count is the scores' declared axis 1."""
    shapes = _declared_shapes(graph)
    for node in graph.node:
        if node.op_type not in LOSSES_BY_LABEL or len(node.input) < 2 or node.input[1] not in values:
            continue
        scores = shapes.get(node.input[0])
        if not scores or len(scores) < 2:
            continue
        classes = scores[1]
        ignore = next((a.i for a in node.attribute if a.name == "ignore_index"), None)
        labels = np.asarray(values[node.input[1]])
        if labels.dtype.kind not in "iu":
            continue
        bad = (labels < 0) | (labels >= classes)
        if ignore is not None:
            bad &= labels != ignore
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            return (f"'{node.input[1]}' holds the label {int(labels[at])} at {list(at)}, outside the {classes} "
                    f"classes (0..{classes - 1}) of {node.name or node.op_type}"
                    + (f" and not its ignore_index {ignore}" if ignore is not None else ""))
    return None


def feeds_from_npz(model: onnx.ModelProto, npz_path: str | Path) -> dict[str, np.ndarray]:
    """inputs.npz keyed by the model's (non-initializer) graph input names, checked against their declarations."""
    declared = data_inputs(model.graph)
    return checked_against(_map_npz([i.name for i in declared], npz_path, "inputs"), declared, npz_path,
                           model.graph)


def golden_from_npz(model: onnx.ModelProto, npz_path: str | Path) -> dict[str, np.ndarray]:
    """outputs.npz keyed by the model's graph output names, checked against their declarations."""
    outputs = list(model.graph.output)
    return checked_against(_map_npz([o.name for o in outputs], npz_path, "outputs"), outputs, npz_path)


# --------------------------------------------------------------------------- orders for testing


def random_topological_order(model: onnx.ModelProto, seed: int = 0) -> list[str]:
    """Kahn's algorithm taking a random ready node each step: another valid schedule, used to
    test that results do not depend on the order."""
    rng = np.random.default_rng(seed)

    def pick(ready: list[int]) -> int:
        i = ready.pop(int(rng.integers(len(ready))))
        heapq.heapify(ready)
        return i

    return _kahn(model, pick)


def lifo_topological_order(model: onnx.ModelProto) -> list[str]:
    """Depth-first flavoured order (newest ready node first): far from the file order."""
    return _kahn(model, lambda ready: ready.pop(ready.index(max(ready))) if ready else 0)
