"""Human-readable lines for `ckpt inspect`: sizes, baseline peaks, the floor, and Deeploy's view when lowered."""
from __future__ import annotations

from collections.abc import Iterator

from ckpt.solver.baselines import baselines
from ckpt.solver.simulate import plain_sequence, replay
from ckpt.workflow import load_for_target


def inspect_lines(source: str, target: str, top: int, progress=lambda msg: None) -> Iterator[str]:
    loaded = load_for_target(source, target)
    graph = loaded.graph
    base = baselines(graph)
    activations = [t for t in graph.tensor_bytes if graph.is_activation(t)]
    yield f"model            {source} (target {target})"
    yield f"nodes            {len(graph.ops)}"
    yield f"tensors          {len(graph.tensor_bytes)} ({len(activations)} activations, {len(graph.aliases)} aliases)"
    yield f"persistent       {graph.persistent_bytes} B (weights, graph I/O; not counted against the budget)"
    yield f"peak, graph order      {base.graph_order_peak} B"
    yield f"peak, min-memory order {base.min_memory_peak} B"
    yield f"single-op lower bound  {base.lower_bound} B (op {base.lower_bound_op})"
    if loaded.lowered is not None:
        yield from _lowering_lines(loaded, base.graph_order_peak, progress)
    result = replay(graph, plain_sequence(graph))
    yield f"largest tensors live at the graph-order peak (after op {graph.ops[result.peak_index].name}):"
    for buf in result.live_at(result.peak_index)[:top]:
        yield f"  {buf.nbytes:>10} B  {buf.tensor}"


def _lowering_lines(loaded, predicted: int, progress) -> Iterator[str]:
    import tempfile

    from ckpt.deeploy_bridge import generate_code
    from ckpt.deeploy_bridge.code_memory import code_memory

    lowered = loaded.lowered
    yield f"lowered by Deeploy {lowered.deeploy_version}: {len(lowered.added_nodes)} nodes added, " \
          f"{len(lowered.removed_nodes)} removed, {len(lowered.renamed_nodes)} renamed"
    for name in lowered.added_nodes[:5]:
        yield f"  added  {name}"
    progress("generating Deeploy's non-tiled code for the graph order")
    with tempfile.TemporaryDirectory(prefix="ckpt_inspect_") as out:
        figures = generate_code(lowered.model, None, out, loaded.target, tiled=False, already_lowered=True)
        code = code_memory(out)
    ratio = predicted / code.peak_bytes if code.peak_bytes else float("nan")
    yield f"graph-order peak: ckpt {predicted} B, Deeploy's generated code {code.peak_bytes} B live " \
          f"(ratio {ratio:.4f}; {code.heap_bytes()} B of first-fit L2 heap)"
    counted = sum(figures.worst_case.values())
    if counted != code.peak_bytes:
        yield f"  Deeploy's own counter (worstCaseBufferSize) says {counted} B: it also counts Reshape views and " \
              f"alias groups that the code does not allocate"
