"""Human-readable lines for `ckpt inspect`: sizes, baseline peaks, the floor, and what a Deeploy target reserves."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, Flow, WeightUpdate
from ckpt.events import Progress, Step, ignore
from ckpt.pipeline.load import LoadedModel, load_for_target
from ckpt.replay.predict import predicted_levels
from ckpt.solver.graph.baselines import Baselines, baselines
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.simulate import RunSequence, memory_trace, plain_sequence
from ckpt.solver.memory.heap import heap_bytes
from ckpt.solver.memory.static_arena import arena_layout


def inspect_lines(source: str, target: str, top: int, progress: Progress = ignore,
                  weights: WeightUpdate = DEFAULT_SETUP.weights, optimizer: str | None = None,
                  home: str = DEFAULT_SETUP.default_mem_level) -> Iterator[str]:
    loaded = load_for_target(source, target, weights=weights, optimizer=optimizer, home=home)
    graph = loaded.graph
    base = baselines(graph)
    activations = [t for t in graph.tensor_bytes if graph.is_activation(t)]
    yield f"model            {source} (target {target})"
    yield f"nodes            {len(graph.ops)}"
    yield f"tensors          {len(graph.tensor_bytes)} ({len(activations)} activations, {len(graph.aliases)} aliases)"
    yield f"persistent       {graph.persistent_bytes} B (weights, graph I/O; not counted against the budget)"
    plain = plain_sequence(graph)
    non_tiled = _non_tiled(loaded)
    yield f"peak, graph order      {base.graph_order_peak} B ({_deployed(non_tiled, plain)})"
    minmem = plain_sequence(graph, list(base.min_memory_order))
    yield f"peak, min-memory order {base.min_memory_peak} B ({_deployed(non_tiled, minmem)})"
    yield f"single-op lower bound  {base.lower_bound} B (op {base.lower_bound_op})"
    if loaded.lowered is not None and loaded.lowered.transients:
        yield f"op scratch       {sum(loaded.lowered.transients.values())} B on {len(loaded.lowered.transients)} " \
              "ops (Deeploy's transient buffers): the tiled flow keeps them in L1 tiles, so the peaks and the floor " \
              "above leave them out; the non-tiled arena and heap hold each with its layer"
    if loaded.optimizer is not None:
        yield f"optimizer graph  {loaded.optimizer_path}: {loaded.optimizer.line()}"
    if loaded.lowered is not None:
        yield from _lowering_lines(loaded, base, progress)
    result = memory_trace(graph, plain_sequence(graph))
    yield f"largest tensors live at the graph-order peak (after op {graph.ops[result.peak_index].name}):"
    for buf in result.live_at(result.peak_index)[:top]:
        yield f"  {buf.nbytes:>10} B  {buf.tensor}"


def _non_tiled(loaded: LoadedModel) -> TrainGraph:
    """The graph as the non-tiled flow deploys it: every op's scratch beside its layer's buffers."""
    if loaded.lowered is None:
        return loaded.graph
    return replace(loaded.graph, scratch=loaded.lowered.home_scratch(Flow.NON_TILED))


def _deployed(graph: TrainGraph, seq: RunSequence) -> str:
    """What the non-tiled code of `seq` reserves: ckpt's arena, and the first-fit heap of Deeploy's own code."""
    arena = arena_layout(graph, seq)
    excess = f", {arena.excess} B over its live maximum" if arena.excess else ""
    return f"non-tiled arena {arena.size} B{excess}; first-fit heap {heap_bytes(graph, seq)} B"


def _constant_lines(loaded: LoadedModel) -> Iterator[str]:
    """Deeploy's per-reader constant copies, and which of them stay copies when each constant is kept once."""
    plan = loaded.lowered.constants
    yield f"constants: {plan.bytes_before} B as Deeploy copies them per reader, {plan.bytes_after} B kept once " \
          f"({len(plan.merged)} copies merged, {len(plan.views)} read the same bytes under another shape); " \
          f"weights {loaded.weights.value}"
    for copy, (canonical, times) in sorted(plan.repeats.items()):
        yield f"  a copy of its own: {copy} (the bytes of {canonical} repeated {times} times: a reader's " \
              "broadcast; refreshed after an in-place update)"
    for copy in plan.kept:
        yield f"  a copy of its own: {copy} (other bytes than the constant it copies: another layout)"


def _lowering_lines(loaded: LoadedModel, base: Baselines, progress: Progress) -> Iterator[str]:
    lowered = loaded.lowered
    yield f"lowered by Deeploy {lowered.deeploy_version}: {len(lowered.added_nodes)} nodes added, " \
          f"{len(lowered.removed_nodes)} removed, {len(lowered.renamed_nodes)} renamed"
    for name in lowered.added_nodes[:5]:
        yield f"  added  {name}"
    yield from _constant_lines(loaded)
    yield "tiled flow, home level, static + arena = total (ckpt's layout of Deeploy's lifetimes):"
    for label, order in (("graph order", [op.name for op in loaded.graph.ops]),
                         ("min-memory order", list(base.min_memory_order))):
        for level, fig in predicted_levels(lowered, [(name, 0) for name in order], loaded.weights,
                                           loaded.home, loaded.persistent_io).items():
            yield f"  {label:<17} {level}: {fig.static} + {fig.arena} = {fig.total} B (live maximum {fig.live_max} B)"
    progress(Step("laying out Deeploy's non-tiled code for the graph order"))
    figures = deeploy_bridge.deeploy_memory(lowered.model, None, loaded.target, tiled=False, already_lowered=True)
    non_tiled = _non_tiled(loaded)
    predicted = arena_layout(non_tiled, plain_sequence(non_tiled))
    arena, live = sum(figures.arena.values()), sum(figures.live_max.values())
    yield f"graph-order non-tiled arena: ckpt {predicted.size} B, the generated code's {arena} B (its live " \
          f"maximum {live} B; ckpt's live peak {memory_trace(non_tiled, plain_sequence(non_tiled)).peak_bytes} B)"
    counted = sum(figures.worst_case.values())
    if counted != live:
        yield f"  Deeploy's own counter (worstCaseBufferSize) says {counted} B: it also counts Reshape views and " \
              f"alias groups that the code does not allocate"
