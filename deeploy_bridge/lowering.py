"""``lower``: the graph Deeploy will actually schedule, with aliases and name maps, cached on disk."""
from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import onnx
import onnx_graphsurgeon as gs
from onnx_graphsurgeon.logger import G_LOGGER

from ckpt.paths import lowered_cache_dir
from ckpt.targets import uses_deeploy

from . import branch_forms, softmax_axis, workarounds
from . import cache as _cache
from .aliases import collect_aliases
from .branch_forms import needed as forms_needed
from .branch_forms import to_branch_forms
from .constants import constant_plan
from .deeploy_run import DeployOptions, front_end, mid_end, start
from .errors import BridgeError
from .export import bound_types, export_lowered, strip_mangling
from .input_types import infer_input_types
from .naming import check_c_names, io_mapping, node_diff
from .records import ConstantPlan, LoweredGraph, StageTimings
from .scheduler import make_scheduler
from .setup import DEFAULT_SETUP, TARGETS
from .softmax_axis import along_last_axis
from .sources import LOWERED_META_KEY, ModelLike, load_source
from .transients import collect_transients, constant_bytes, declared_constants, undeclared_constants
from .versions import deeploy_fingerprint, deeploy_label

# Lowered graphs of this process, by cache key and folder: a sweep point's solve, replay and host check share one
# lowering (and one cache read). The records are shared: callers copy a model before changing it.
_LOWERED_HERE: OrderedDict[tuple[str, Path], LoweredGraph] = OrderedDict()
_KEEP_HERE = 4


def _remembered(key: tuple[str, Path]) -> LoweredGraph | None:
    record = _LOWERED_HERE.get(key)
    if record is None:
        return None
    _LOWERED_HERE.move_to_end(key)
    return replace(record, from_cache=True)


def _remember(key: tuple[str, Path], record: LoweredGraph) -> LoweredGraph:
    _LOWERED_HERE[key] = record
    while len(_LOWERED_HERE) > _KEEP_HERE:
        _LOWERED_HERE.popitem(last=False)
    return record


def _import_gs(model: onnx.ModelProto):
    with G_LOGGER.suppress(G_LOGGER.ERROR):     # its warnings (an UNDEFINED type, say) reach no user: ckpt's own
        return gs.import_onnx(model)            # loader handles what they are about


def prepare_graph(source, relower: bool):
    """gs graph to hand to a deployer; already-lowered graphs get their '_tensor' suffixes undone, and optional
    outputs of no declared type that nothing reads (a MaxPool's indices) are dropped, as the training branch's
    runner drops them (DeeployTest/testMVPTraining.py): Deeploy can type no such buffer. A graph to lower gets
    ckpt's rewrites around the installed Deeploy's defects (deeploy_bridge.workarounds); a lowered one has them."""
    model = source.model if relower else strip_mangling(source.model)
    graph = _import_gs(model)
    kept = {t.name for t in graph.outputs}
    for node in graph.nodes:
        unused = [t for t in node.outputs if t.dtype in (None, 0) and not t.outputs and t.name not in kept]
        if unused and len(unused) < len(node.outputs):
            node.outputs = [t for t in node.outputs if t not in unused]
    if relower:
        to_branch_forms(graph)
        if workarounds.is_active(workarounds.Defect.SOFTMAX_GRAD_AXIS):
            along_last_axis(graph)
    return graph


def _record_from_model(model: onnx.ModelProto, target: str, **extra) -> LoweredGraph:
    meta = {}
    for prop in model.metadata_props:
        if prop.key == LOWERED_META_KEY:
            meta = json.loads(prop.value)
    return LoweredGraph(model=model,
                        target=target,
                        deeploy_version=deeploy_label(),     # the cache is keyed by the installed Deeploy's files
                        aliases=meta.get("aliases", {}),
                        alias_ops=meta.get("alias_ops", {}),
                        io_names=meta.get("io_names", {}),
                        node_names=meta.get("node_names", {}),
                        added_nodes=meta.get("added_nodes", []),
                        removed_nodes=meta.get("removed_nodes", []),
                        input_types=meta.get("input_types", {}),
                        tensor_types=meta.get("tensor_types", {}),
                        transients=meta.get("transients", {}),
                        constant_bytes=meta.get("constant_bytes", 0),
                        constants=ConstantPlan.from_dict(meta.get("constants")),
                        constant_sizes=meta.get("constant_sizes", {}),
                        undeclared_constants=tuple(meta.get("undeclared_constants", ())),
                        timings=StageTimings(**meta.get("timings", {})),
                        **extra)


def _lower_none(source) -> LoweredGraph:
    """target 'none': the ONNX as is; names map to themselves."""
    graph = source.model.graph
    names = {n.name: n.name for n in graph.node}
    io = {v.name: v.name for v in list(graph.input) + list(graph.output)}
    return LoweredGraph(model=source.model, target="none", deeploy_version=deeploy_label(), io_names=io,
                        node_names=names)


def lower(model_dir_or_onnx_path: ModelLike,
          target: str = "siracusa",
          *,
          cache_dir: str | Path | None = None,
          n_cores: int = DEFAULT_SETUP.n_cores,
          use_cache: bool = True,
          inputs=None) -> LoweredGraph:
    """Run Deeploy's front end (+ bind, for alias info) and return the lowered graph.

    ``target``: 'siracusa' (PULPOpen), 'gap9' (only if the installed Deeploy has it) or 'none'.
    Results are cached under ``cache_dir`` (default ckpt.paths.lowered_cache_dir()) and, within this process,
    in memory: the same model and options lower once per process (``use_cache=False`` runs Deeploy again).
    """
    if target not in TARGETS:
        raise BridgeError(f"unknown target {target!r}; expected one of {', '.join(TARGETS)}")
    source = load_source(model_dir_or_onnx_path, inputs)
    if not uses_deeploy(target):
        return _lower_none(source)
    if not source.looks_lowered:
        check_c_names(source.model.graph)

    prior = source.lowered_meta
    input_types = infer_input_types(source.model.graph, source.inputs, (prior or {}).get("input_types"))
    opts = DeployOptions(target=target, setup=replace(DEFAULT_SETUP, n_cores=n_cores), relower=not source.looks_lowered)
    key = _cache.cache_key(source.sha256, target, {"n_cores": n_cores, "relower": opts.relower,
                                                   "input_types": input_types, "workarounds": workarounds.key(),
                                                   "forms": sorted(forms_needed()),
                                                   "rewrites": _rewrites_fingerprint()},
                           deeploy_fingerprint())
    directory = Path(cache_dir) if cache_dir is not None else lowered_cache_dir()
    if not use_cache:
        return _record_from_model(_lowered_model(source, target, n_cores, input_types, opts), target)
    here = (key, directory.resolve())
    known = _remembered(here)
    if known is not None:
        return known
    t0 = time.perf_counter()
    hit = _cache.load(directory, key)
    if hit is not None:
        record = _record_from_model(hit, target, from_cache=True, cache_path=_cache.entry_path(directory, key))
        record.timings.cache_load = time.perf_counter() - t0
        return _remember(here, record)
    model = _lowered_model(source, target, n_cores, input_types, opts)
    path = _cache.store(directory, key, model)
    return _remember(here, _record_from_model(model, target, from_cache=False, cache_path=path))


@lru_cache(maxsize=1)
def _rewrites_fingerprint() -> str:
    """sha256 of the modules that rewrite a graph before Deeploy lowers it: a lowered graph made by other rewrites
    is not this one."""
    digest = hashlib.sha256()
    for module in (branch_forms, softmax_axis):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def _lowered_model(source, target: str, n_cores: int, input_types: dict, opts: DeployOptions) -> onnx.ModelProto:
    """One Deeploy front and mid end over the source: the lowered ONNX model with ckpt's metadata."""
    prior = source.lowered_meta
    graph = prepare_graph(source, opts.relower)
    run = start(graph, input_types, make_scheduler(None), opts)
    try:
        front_end(run)
        plan = constant_plan(run.deployer.ctxt, run.deployer.graph)
        mid_end(run)
        deployer = run.deployer
        aliases, alias_ops = collect_aliases(deployer.ctxt, deployer.graph)
        types = bound_types(deployer.ctxt)
        meta = {
            "deeploy_version": deeploy_label(),
            "target": target,
            "n_cores": n_cores,
            "aliases": aliases,
            "alias_ops": alias_ops,
            "transients": collect_transients(deployer.ctxt),
            "constant_bytes": constant_bytes(deployer.ctxt),
            "constant_sizes": declared_constants(deployer.ctxt),
            "undeclared_constants": undeclared_constants(deployer.ctxt),
            "constants": plan.as_dict(),
            "input_types": input_types,
            "timings": {"front_end": run.timings.front_end, "mid_end": run.timings.mid_end},
        }
        model = export_lowered(deployer.graph, types, meta, opset_model=source.model)
        meta.update(_names_against_source(source, model, prior, opts.relower))
        declared = {vi.name for vi in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output)}
        meta["tensor_types"] = {k: v for k, v in types.items() if k in declared}
        model.metadata_props[0].value = json.dumps(meta, sort_keys=True)
    finally:
        run.close()
    return model


def _names_against_source(source, model: onnx.ModelProto, prior: dict | None, relower: bool) -> dict:
    """Names relative to the original graph (or carried over when the input was already lowered)."""
    if relower:
        kept, added, removed = node_diff(source.model.graph, model.graph)
        io = io_mapping(source.model.graph)
    else:
        kept = (prior or {}).get("node_names", {})
        io = (prior or {}).get("io_names", {})
        present = {n.name for n in model.graph.node}
        added = [n for n in present if n not in set(kept.values())]
        removed = [o for o, n in kept.items() if n not in present]
    return {"io_names": io, "node_names": kept, "added_nodes": added, "removed_nodes": removed}

