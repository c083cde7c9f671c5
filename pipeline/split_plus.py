"""split+ chosen with the schedule: what persists that a schedule's split step brings on chip, and what it costs then.

The room split+ fills is what the chip's level leaves beside the schedule's arena of activations, so it depends on
the budget: a tighter schedule leaves more room for weights and accumulators, and pays recomputes for it. The choice
is made for each schedule as `ckpt replay --persist-on-chip auto` makes it (replay.predict.chosen_on_chip: the same
room, code and level price), so the schedule's written figures are those of the deployment the replay builds: its
levels with the chosen tensors on chip, and its cycles priced for them by the target's level price (the price the
knapsack weighed them with).
"""
from __future__ import annotations

from dataclasses import replace

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.pipeline.load import LoadedModel
from ckpt.replay.predict import OnChipRoom, TilerTables, chosen_on_chip, level_price, split_home_of
from ckpt.replay.split_run import optimizer_layers
from ckpt.solver.graph.costs import CostModel, measured_price
from ckpt.solver.graph.level_price import priced_at_levels
from ckpt.solver.graph.onnx_loader import read_model
from ckpt.solver.graph.simulate import RunSequence
from ckpt.targets import SPLIT_HOME


def optimizer_layers_of(loaded: LoadedModel) -> dict[str, tuple[str, ...]]:
    """A split step's optimizer layers per train-network buffer (replay.split_run.optimizer_layers); none without
    an optimizer graph."""
    if loaded.optimizer_path is None or not loaded.persistent_io:
        return {}
    return optimizer_layers(read_model(loaded.optimizer_path), loaded.lowered.io_names)


def on_chip_room(loaded: LoadedModel, code: int | None, tables: TilerTables | None = None) -> OnChipRoom:
    """The room split+ fills for `loaded`'s split step with the step's code of `code` bytes (None: not counted) and
    the tiler's tables as `tables` (the code's per layer) gives them (None: not counted)."""
    setup = setup_for(loaded.target, SPLIT_HOME, weights=loaded.weights)
    return OnChipRoom(setup.size(split_home_of(loaded.lowered).default), code or 0, setup.size(setup.innermost),
                      tables)


def chosen_with_schedule(loaded: LoadedModel, seq: RunSequence, code: int | None,
                         tables: TilerTables | None = None) -> frozenset[str]:
    """The persistent tensors (Deeploy's names) split+ brings on chip beside `seq`'s activations."""
    return chosen_on_chip(loaded.lowered, list(seq), loaded.weights, loaded.persistent_io,
                          on_chip_room(loaded, code, tables), level_price(loaded.target), optimizer_layers_of(loaded))


def priced_on_chip(costs: CostModel | None, loaded: LoadedModel, chosen: frozenset[str]) -> CostModel | None:
    """`costs` (measured for the split home, or priced for it) with the `chosen` persistent tensors on chip as well:
    each layer that reads or writes one saves what the level price says, and the optimizer network per update the
    same for its layers (its cycles are measured whole). Unchanged without measured costs or a price."""
    price = level_price(loaded.target)
    if costs is None or costs.measured is None or price is None or not chosen:
        return costs
    home, graph, name = split_home_of(loaded.lowered), loaded.graph, deeploy_bridge.deeploy_tensor_name
    levels = {t: home.default if name(graph.root(t)) in chosen else home.persistent for t in graph.tensor_bytes}
    priced = priced_at_levels(costs, graph, levels, home.default, price, "split+")
    if costs.measured_optimizer is None:
        return priced
    sizes = {name(t): int(b) for t, b in graph.tensor_bytes.items()}
    saved = sum(price.per_layer(kind, sizes.get(tensor, 0))
                for tensor, kinds in optimizer_layers_of(loaded).items() if tensor in chosen for kind in kinds)
    return replace(priced, measured_optimizer=max(1, costs.measured_optimizer - round(saved)))


def step_cycles(costs: CostModel, seq: RunSequence) -> int | None:
    """The step's predicted cycles under `costs`: its measured step + the price of each recompute."""
    if costs.measured_step is None:
        return None
    return costs.measured_step + sum(measured_price(costs, node) for node, again in seq if again)
