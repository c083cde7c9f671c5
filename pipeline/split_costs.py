"""The split home's op costs where its own graph order cannot be calibrated: its activations overflow the chip.

The models the split home is for are those whose graph order does not fit on chip, so their calibration is the one
with every tensor off chip, priced per layer for the tensors the split home keeps on chip (solver.graph.level_price,
with the target's measured price). Deeploy's lowering gives the graph; the placement (solver.memory.placement) gives
each tensor's level, as the replay deploys it.
"""
from __future__ import annotations

from pathlib import Path

from ckpt.deeploy_bridge.setup import DeeploySetup
from ckpt.pipeline.load import LoadedModel, load_for_target
from ckpt.replay.predict import level_price, predicted_split_levels, split_home_of
from ckpt.solver.graph.costs import CostModel
from ckpt.solver.graph.level_price import priced_at_levels
from ckpt.solver.graph.onnx_loader import io_names
from ckpt.solver.memory.placement import split_levels
from ckpt.targets import SPLIT_HOME


def load_split(source: str | Path, target: str, setup: DeeploySetup) -> LoadedModel:
    return load_for_target(source, target, None, setup.weights, None, SPLIT_HOME)


def graph_order_overflow(loaded: LoadedModel, setup: DeeploySetup) -> str | None:
    """Why the split home's graph order cannot run on chip (its activations' arena alone overflows the chip's level,
    in words with the bytes), None where it fits."""
    lowered = loaded.lowered
    chip = split_home_of(lowered).default
    order = [(name, 0) for name in lowered.node_order]
    arena = predicted_split_levels(lowered, order, setup.weights, loaded.persistent_io)[chip].arena
    capacity = setup.size(chip)
    if arena <= capacity:
        return None
    return (f"the graph order's activations alone need {arena:,} B of {chip}, {arena - capacity:,} B more than the "
            f"{capacity:,} B {chip} gives")


def priced_for_split(costs: CostModel, loaded: LoadedModel) -> CostModel:
    """`costs`, measured with every tensor off chip, priced for the split home's placement of `loaded`'s tensors."""
    price = level_price(loaded.target)
    if price is None:
        return costs
    lowered = loaded.lowered
    inputs, _ = io_names(lowered.model.graph)
    home = split_home_of(lowered)
    levels = split_levels(loaded.graph, inputs, home, loaded.persistent_io)
    return priced_at_levels(costs, loaded.graph, levels, home.default, price, SPLIT_HOME)
