"""`--park auto` beside `--home split`: the activations the exact model may park off chip, and what a schedule records
of those it parked.

A parked activation's home is the split home's off-chip level for the whole step, as what persists has: each layer
that writes or reads it moves its tiles from there, at the target's level price (solver.graph.level_price.park_prices,
the price the cost model prices the split home with). The solver weighs that against recomputing
(solver.model.parking); the schedule file names what it parked (`predicted.parked`), and its `step_cycles` include
the parking's cycles.
"""
from __future__ import annotations

from dataclasses import replace

from ckpt import deeploy_bridge
from ckpt.errors import CkptError
from ckpt.pipeline.load import LoadedModel
from ckpt.replay.predict import level_price
from ckpt.schedule_file import Schedule
from ckpt.solver.graph.level_price import park_prices
from ckpt.solver.model.parking import ParkPrices
from ckpt.solver.model.records import SolveResult


def park_prices_of(loaded: LoadedModel) -> ParkPrices:
    """What parking each activation of `loaded`'s split step costs per run of each layer that writes or reads it; a
    target without a level price is refused (nothing says what parking costs there)."""
    price = level_price(loaded.target)
    if not loaded.split_home or price is None:
        raise CkptError(f"--park auto prices parked activations with the split home's level price, which target "
                        f"{loaded.target}{'' if loaded.split_home else ' with this home'} does not have",
                        "use --home split with --target siracusa, or drop --park")
    costs = loaded.costs
    prices = park_prices(loaded.graph, price, costs.tiles if costs else None, costs.transfers if costs else None,
                         costs.lines if costs else None)
    return {e: per_op for e, per_op in prices.items() if e not in unmovable(loaded, prices)}


def unmovable(loaded: LoadedModel, candidates) -> frozenset[str]:
    """The `candidates` the split home's tiler cannot move from off chip: where a layer's first output stays on chip,
    it moves each off-chip tensor it tiles at the output's place (deeploy_bridge.split_codegen), which holds only
    for a tensor of the output's shape; a tensor some layer reads or writes beside a first output of another shape
    (or whose shape the lowered graph does not say) stays on chip."""
    shapes = _shapes(loaded)
    graph, found = loaded.graph, set()
    for op in graph.ops:
        first = shapes.get(op.outputs[0]) if op.outputs else None
        for name in dict.fromkeys((*op.inputs, *op.outputs)):
            root = graph.root(name)
            if root in candidates and (first is None or shapes.get(root) != first):
                found.add(root)
    return frozenset(found)


def _shapes(loaded: LoadedModel) -> dict[str, tuple[int, ...]]:
    """Tensor -> its shape without unit dimensions, as the lowered graph gives it."""
    if loaded.lowered is None:
        return {}
    graph = loaded.lowered.model.graph
    return {v.name: tuple(d.dim_value for d in v.type.tensor_type.shape.dim if d.dim_value != 1)
            for v in (*graph.value_info, *graph.input, *graph.output)}


def parked_names(result: SolveResult) -> frozenset[str]:
    """The activations `result` parked, by Deeploy's names."""
    return frozenset(deeploy_bridge.deeploy_tensor_name(t) for t in result.parked)


def with_parked(doc: Schedule, loaded: LoadedModel, result: SolveResult) -> Schedule:
    """The schedule's record naming the activations `result` parked (Deeploy's names), their bytes and the cycles they
    add, its step cycles with them."""
    if not result.parked:
        return doc
    graph = loaded.graph
    record = {"tensors": sorted(parked_names(result)),
              "bytes": sum(int(graph.tensor_bytes[t]) for t in result.parked), "cycles": result.park_cost}
    step = doc.predicted.step_cycles
    return replace(doc, predicted=replace(doc.predicted, parked=record,
                                          step_cycles=None if step is None else step + result.park_cost))
