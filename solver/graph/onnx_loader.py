"""ONNX training graph -> TrainGraph: names, sizes from value_info, persistent set, aliases, costs."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import onnx_graphsurgeon as gs
from onnx_graphsurgeon.logger import G_LOGGER

from ckpt.errors import CkptError
from ckpt.paths import optimizer_graph
from ckpt.solver.graph.aliases import aliases_by_op_type
from ckpt.solver.graph.costs import CostModel, estimate_costs
from ckpt.solver.graph.graph import OPTIMIZER_OPS, Op, TrainGraph, toposort
from ckpt.solver.graph.in_place import UPDATES_IN_PLACE
from ckpt.solver.graph.model_file import ModelFile, model_path, open_model
from ckpt.solver.graph.step_pair import pair_mismatch

__all__ = ["ModelFile", "model_path", "open_model", "read_model", "load_graph", "check_training_graph",
           "optimizer_path", "data_inputs", "io_names", "check_graph", "constant_value"]


def optimizer_path(model: str | Path, given: str | Path | None = None) -> Path | None:
    """The optimizer graph of a split step (paths.optimizer_graph), refusing in one line one given that is not
    there."""
    found = optimizer_graph(model, given)
    if given is not None and (found is None or not found.is_file()):
        raise CkptError(f"no optimizer graph at '{given}'", "pass an .onnx or a folder holding network.onnx")
    if found is not None:
        mismatch = pair_mismatch(read_model(model_path(model)), read_model(found))
        if mismatch:
            raise CkptError(f"the optimizer graph '{found}' is not the one of train graph '{model}': {mismatch}",
                            "pass the optimizer graph exported with this train graph (--optimizer GRAPH)"
                            if given is not None else "put the optimizer graph exported with this train graph there "
                            "(solve, inspect, replay and verify also take --optimizer GRAPH)")
    return found


MAX_TENSOR_BYTES = 1 << 32      # 4 GiB: more than any device ckpt deploys to holds in all


def data_inputs(graph: onnx.GraphProto) -> list[onnx.ValueInfoProto]:
    """The graph inputs a step is fed (the data): declared inputs that are not initializers, in order."""
    constants = {t.name for t in graph.initializer}
    return [i for i in graph.input if i.name not in constants]


def io_names(graph: onnx.GraphProto) -> tuple[frozenset[str], frozenset[str]]:
    """(data inputs, outputs) of the graph by name: what stays resident whatever a schedule does."""
    return frozenset(i.name for i in data_inputs(graph)), frozenset(o.name for o in graph.output)


def read_model(source: str | Path | ModelFile | onnx.ModelProto) -> onnx.ModelProto:
    """The graph of a model file (read once per process: solver.model_file), with a one-line error for anything
    that is not an ONNX model; a file is also checked as a graph (see `check_graph`). A ModelProto (ckpt's own,
    or Deeploy's lowering) is taken as it is. Callers must not change the graph they get: it is shared."""
    if isinstance(source, onnx.ModelProto):
        return source
    opened = open_model(source)
    path, model = opened.path, opened.proto
    if not model.graph.node:
        raise CkptError(f"'{path}' is not an ONNX model with any nodes", "pass a training graph")
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        model = _with_external_data(model, path)     # the data files are read each time: they may change
    elif (str(path), opened.sha256) in _CHECKED:
        return model
    check_graph(model, str(path))
    _CHECKED.add((str(path), opened.sha256))
    return model


def _with_external_data(model: onnx.ModelProto, path: Path) -> onnx.ModelProto:
    """A copy of `model` with its tensors kept in files beside it read in."""
    found = onnx.ModelProto()
    found.CopyFrom(model)
    _load_external_data(found, path)
    return found


_CHECKED: set[tuple[str, str]] = set()      # model files read and checked in this process


def _load_external_data(model: onnx.ModelProto, path: Path) -> None:
    """Tensors kept in files beside the model are read from the model's folder (never the working directory)."""
    external = [t for t in model.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL]
    if not external:
        return
    for tensor in external:
        location = next((e.value for e in tensor.external_data if e.key == "location"), "")
        target = (path.parent / location).resolve()
        if not location or not target.is_file() or path.parent.resolve() not in target.parents:
            raise CkptError(f"'{path}' keeps tensor '{tensor.name}' in '{location}', which is not a file beside it",
                            "put the external data files next to the model, as the exporter wrote them")
    try:
        onnx.external_data_helper.load_external_data_for_model(model, str(path.parent))
    except Exception as exc:
        raise CkptError(f"cannot read the external data of '{path}' ({type(exc).__name__}: {exc})",
                        "re-export the model with its tensors inside (save_as_external_data=False)") from None


def check_graph(model: onnx.ModelProto, where: str = "the model") -> None:
    """Refuse, in one line, a graph ckpt cannot schedule: unnamed or twice-named nodes, a read of a tensor no
    node writes and the graph neither gives nor holds, a cycle, a tensor larger than any device holds, or
    value_info that contradicts the shapes ONNX shape inference derives (where it can derive them)."""
    graph = model.graph
    names = [n.name for n in graph.node]
    if not all(names):
        index = names.index("")
        raise CkptError(f"{where}: node {index} ({graph.node[index].op_type}) has no name",
                        "name every node: a schedule refers to nodes by name")
    twice = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) < len(names) else []
    if twice:
        raise CkptError(f"{where}: two nodes are named '{twice[0]}'", "give every node a name of its own")
    given = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    written = {t for n in graph.node for t in n.output if t}
    for node in graph.node:
        for tensor in node.input:
            if tensor and tensor not in given and tensor not in written:
                raise CkptError(f"{where}: node '{node.name}' reads '{tensor}', which no node writes and the graph "
                                "neither gives nor holds", "export the whole graph (every input it reads)")
    toposort([Op(n.name, n.op_type, tuple(t for t in n.input if t), tuple(t for t in n.output if t))
              for n in graph.node])
    _check_one_update_per_weight(graph, where)
    for info in list(graph.value_info) + list(graph.input) + list(graph.output):
        _check_size(info, where)
    _check_declared_shapes(model, where)


def _check_one_update_per_weight(graph: onnx.GraphProto, where: str) -> None:
    """A step updates each weight once: refuse a weight two optimizer nodes write (side by side, or one updating
    what the other wrote), which the deployed code would apply twice."""
    updates = [n for n in graph.node if n.op_type in UPDATES_IN_PLACE and n.input and n.output]
    by_weight: dict[str, str] = {}
    written = {n.output[0]: n for n in updates}
    for node in updates:
        weight = node.input[0]
        first = by_weight.setdefault(weight, node.name)
        if first != node.name:
            raise CkptError(f"{where}: nodes '{first}' and '{node.name}' both update the weight '{weight}'",
                            "a step updates each weight once: give it one optimizer node (sum the gradients first)")
        if weight in written:
            raise CkptError(f"{where}: node '{node.name}' updates '{weight}', which node '{written[weight].name}' "
                            f"already updated from '{written[weight].input[0]}'",
                            "a step updates each weight once: give it one optimizer node (sum the gradients first)")


def _check_size(info: onnx.ValueInfoProto, where: str) -> None:
    dims = [d.dim_value for d in info.type.tensor_type.shape.dim if d.HasField("dim_value")]
    elem = info.type.tensor_type.elem_type
    itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem)).itemsize if elem else 1
    if math.prod(dims) * itemsize > MAX_TENSOR_BYTES:
        raise CkptError(f"{where}: tensor '{info.name}' of shape {dims} would take {math.prod(dims) * itemsize} B",
                        f"ckpt schedules graphs for devices: tensors up to {MAX_TENSOR_BYTES} B")


# ops these training graphs use in Deeploy's form rather than ONNX's (SoftmaxCrossEntropyLoss: its one output is
# the log-probabilities): ONNX shape inference would contradict their declared shapes, rightly by its own rules
OWN_FORM_OPS = frozenset({"SoftmaxCrossEntropyLoss", "SoftmaxCrossEntropyLossGrad"})


def _check_declared_shapes(model: onnx.ModelProto, where: str) -> None:
    """Compare value_info with ONNX shape inference wherever inference gives a static shape of the same rank (it
    fails on some training graphs, knows no custom op, and follows ONNX's form of ops used in Deeploy's: those
    tensors are left as declared)."""
    own_form = {t for n in model.graph.node if n.op_type in OWN_FORM_OPS for t in n.output}
    declared = {v.name: v for v in model.graph.value_info if v.name not in own_form}
    if not declared:
        return
    bare = onnx.ModelProto()
    bare.CopyFrom(model)
    del bare.graph.value_info[:]
    try:
        inferred = onnx.shape_inference.infer_shapes(bare, strict_mode=False).graph.value_info
    except Exception:
        return
    for info in inferred:
        if info.name not in declared:
            continue
        ours = _static_shape(info)
        theirs = _static_shape(declared[info.name])
        if ours is not None and theirs is not None and len(ours) == len(theirs) and ours != theirs:
            raise CkptError(f"{where}: value_info declares '{info.name}' as {theirs}, but the op that writes it "
                            f"makes {ours}", "correct the model's value_info (or export it again)")


def _static_shape(info: onnx.ValueInfoProto) -> list[int] | None:
    tensor = info.type.tensor_type
    if not tensor.HasField("shape") or not all(d.HasField("dim_value") for d in tensor.shape.dim):
        return None
    return [d.dim_value for d in tensor.shape.dim]


def load_graph(source: str | Path | onnx.ModelProto, *, aliases: dict[str, str] | None = None,
               cost_model: CostModel | None = None, scratch: dict[str, int] | None = None) -> TrainGraph:
    """Build the solver's graph record. `aliases` overrides the op-type default (the bridge passes Deeploy's);
    `scratch` is each op's per-execution working memory (the bridge passes Deeploy's transient buffers)."""
    model = read_model(source)
    with G_LOGGER.suppress(G_LOGGER.ERROR):     # its warnings (an UNDEFINED type, say) are handled below
        graph = gs.import_onnx(model)
    ops = toposort([_op(node, i) for i, node in enumerate(graph.nodes)])
    tensors = graph.tensors()
    if _missing_sizes(ops, tensors):
        tensors = _tensors_after_inference(model)
    used = _used_tensors(ops)
    _type_constant_outputs(graph, tensors)
    _resolve_undefined_types(ops, tensors)
    sizes = {name: _bytes(tensors[name]) for name in used}
    unknown = sorted(name for name, size in sizes.items() if size is None)
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise CkptError(f"size of tensor '{unknown[0]}'{more} is unknown",
                        "add its shape and type to the model's value_info (or export with static shapes)")
    persistent = _persistent(graph, ops)
    alias_map = aliases_by_op_type(ops) if aliases is None else dict(aliases)
    names = {op.name for op in ops}
    return TrainGraph(ops=tuple(ops), tensor_bytes=sizes, persistent=persistent, aliases=alias_map,
                      op_cost=estimate_costs(ops, {n: _shape(tensors[n]) for n in used}, cost_model),
                      scratch={op: int(b) for op, b in (scratch or {}).items() if op in names and b})


def check_training_graph(source: str | Path) -> None:
    """A training step updates weights: refuse a model with neither an optimizer nor a gradient op."""
    if not any(node.op_type in OPTIMIZER_OPS or "Grad" in node.op_type for node in read_model(source).graph.node):
        raise CkptError(f"'{source}' has no backward or optimizer op: it is not a training graph",
                        "export the whole training step (forward, backward and the optimizer update)")


def constant_value(node: gs.Node) -> np.ndarray | None:
    """The value a `Constant` node makes, from whichever of its attributes holds it (None: not a Constant, or a
    form without a dense value)."""
    if node.op != "Constant":
        return None
    attrs = node.attrs
    if isinstance(attrs.get("value"), gs.Constant):
        return np.asarray(attrs["value"].values)
    for name, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                        ("value_ints", np.int64)):
        if name in attrs:
            return np.asarray(attrs[name], dtype=dtype)
    return None


def _type_constant_outputs(graph: gs.Graph, tensors: dict[str, gs.Tensor]) -> None:
    """A `Constant` node's output takes its element type (and, where value_info gives none, its shape) from the
    value the node holds: exporters write weights that way with value_info that leaves the type out."""
    for node in graph.nodes:
        value = constant_value(node)
        if value is None or not node.outputs:
            continue
        tensor = tensors.get(node.outputs[0].name)
        if tensor is None or isinstance(tensor, gs.Constant):
            continue
        if not _known_dtype(tensor.dtype):
            tensor.dtype = value.dtype
        if tensor.shape is None:
            tensor.shape = list(value.shape)


def _resolve_undefined_types(ops: list[Op], tensors: dict[str, gs.Tensor]) -> None:
    """Give a tensor whose element type the file leaves UNDEFINED the type of its producer's first typed input,
    which is what the ops of these graphs compute in (arithmetic, activations and their gradients)."""
    producer = {t: op for op in ops for t in op.outputs}
    for op in ops:
        for name in op.outputs:
            tensor = tensors.get(name)
            if tensor is None or isinstance(tensor, gs.Constant) or _known_dtype(tensor.dtype):
                continue
            typed = [tensors[t].dtype for t in producer[name].inputs
                     if t in tensors and _known_dtype(tensors[t].dtype)]
            if not typed:
                raise CkptError(f"tensor '{name}' has an undefined element type and op '{op.name}' has no typed "
                                "input to take one from", "give it an elem_type in the model's value_info")
            tensor.dtype = typed[0]


def _known_dtype(dtype) -> bool:
    if dtype is None:
        return False
    if isinstance(dtype, (int, np.integer)):
        return int(dtype) in onnx.mapping.TENSOR_TYPE_MAP
    return True


def _op(node: gs.Node, index: int) -> Op:
    name = node.name or f"{node.op}_{index}"
    return Op(name=name, op_type=node.op,
              inputs=tuple(t.name for t in node.inputs if t.name),
              outputs=tuple(t.name for t in node.outputs if t.name))


def _used_tensors(ops: list[Op]) -> list[str]:
    return list(dict.fromkeys(t for op in ops for t in op.inputs + op.outputs))


def _missing_sizes(ops: list[Op], tensors: dict[str, gs.Tensor]) -> bool:
    return any(_bytes(tensors[t]) is None for t in _used_tensors(ops))


def _tensors_after_inference(model: onnx.ModelProto) -> dict[str, gs.Tensor]:
    """Shape inference only where shapes are missing: it fails on some training graphs, so failures are soft."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:
        inferred = model
    return gs.import_onnx(inferred).tensors()


def _bytes(tensor: gs.Tensor) -> int | None:
    if isinstance(tensor, gs.Constant):
        return int(tensor.values.nbytes)
    shape, dtype = tensor.shape, tensor.dtype
    if shape is None or not _known_dtype(dtype) or any(not isinstance(d, (int, np.integer)) or d < 0 for d in shape):
        return None
    try:
        itemsize = np.dtype(dtype).itemsize
    except TypeError:
        itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(dtype)).itemsize
    return itemsize * math.prod(int(d) for d in shape)


def _shape(tensor: gs.Tensor) -> tuple[int, ...]:
    shape = tensor.values.shape if isinstance(tensor, gs.Constant) else tensor.shape
    return tuple(int(d) for d in shape)


def _persistent(graph: gs.Graph, ops: list[Op]) -> frozenset[str]:
    """Initializers, constants, graph inputs and outputs: alive for the whole step whatever the schedule."""
    held = {t.name for t in graph.inputs} | {t.name for t in graph.outputs}
    held |= {name for name, t in graph.tensors().items() if isinstance(t, gs.Constant)}
    held |= {t for op in ops if op.op_type == "Constant" for t in op.outputs}
    return frozenset(held)
