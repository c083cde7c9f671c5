"""The graph a schedule is solved on: Deeploy's lowered graph for a Deeploy target, else the ONNX as it is."""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.records import LoweredGraph
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, Flow, WeightUpdate
from ckpt.solver.graph.costs import CostModel, measured_price
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.onnx_loader import (
    check_training_graph,
    io_names,
    load_graph,
    open_model,
    optimizer_path,
    read_model,
)
from ckpt.solver.graph.step_pair import OptimizerFigures, optimizer_figures
from ckpt.targets import SPLIT_HOME, TARGET_TABLE, uses_deeploy


@dataclass(frozen=True)
class LoadedModel:
    graph: TrainGraph
    target: str
    model_sha256: str
    lowered: LoweredGraph | None = None     # when a Deeploy target lowered it
    weights: WeightUpdate = WeightUpdate.OUT_OF_PLACE   # how the deployment writes weights (the graph models it)
    costs: CostModel | None = None          # the op costs the graph carries (None: the built-in estimate)
    home: str = DEFAULT_SETUP.default_mem_level   # the tiled deployment's home level (where its tensors live)
    optimizer: OptimizerFigures | None = None          # a split step's optimizer graph: what it adds
    optimizer_path: Path | None = None
    persistent_io: frozenset[str] = frozenset()   # a split step's graph I/O that persists (what its optimizer reads)
    flow: Flow | None = None                # the flow the graph's sizes are of (None: the target's default)

    @property
    def deployed_flow(self) -> Flow:
        return self.flow or Flow.default_for(self.target)

    @property
    def split_home(self) -> bool:
        """Whether the home is split: what persists off chip, the rest on chip (solver.memory.placement)."""
        return self.home == SPLIT_HOME

    @property
    def home_level(self) -> str:
        """The level the home's arena of activations is held in (the split home's: its on-chip level)."""
        spec = TARGET_TABLE.get(self.target)
        return spec.home_levels(self.home).default if spec is not None and spec.levels else self.home

    def home_constants(self) -> int:
        """The constants the home level holds (the split home keeps them off chip)."""
        return 0 if self.split_home or self.lowered is None else self.lowered.static_bytes(self.weights)

    def with_costs(self, costs: CostModel | None) -> LoadedModel | None:
        """This model with the op costs `costs` where they need no tensor shapes (a calibration's measured cycles, or
        the costs it was loaded with), so a model loaded once serves the calibration and the solve; None where the
        graph must be loaded again to estimate them."""
        if costs is self.costs:
            return self
        if costs is None or costs.measured is None:
            return None
        op_cost = {op.name: measured_price(costs, op.name) for op in self.graph.ops}
        return replace(self, graph=replace(self.graph, op_cost=op_cost), costs=costs)

    def arena_io(self) -> tuple[frozenset[str], frozenset[str]]:
        """The graph inputs and outputs the home level's arena holds (the split home: the per-mini-batch ones)."""
        inputs, outputs = io_names(self.lowered.model.graph)
        if not self.split_home:
            return inputs, outputs
        return inputs - self.persistent_io, outputs - self.persistent_io


def load_for_target(source: str | Path, target: str = "none", cost_model: CostModel | None = None,
                    weights: WeightUpdate = DEFAULT_SETUP.weights, optimizer: str | Path | None = None,
                    home: str = DEFAULT_SETUP.default_mem_level, flow: Flow | None = None) -> LoadedModel:
    """Read (one-line errors for a missing or non-ONNX file before Deeploy sees it) and lower for the target;
    with weights updated in place, the graph says so (solver.graph.in_place) and shares each constant's copies. An
    op's scratch counts where `flow` (None: the target's default) holds it in the home level (the non-tiled flow;
    the tiled one keeps it in L1 tiles). The optimizer graph of a split step (`optimizer`, else found beside the
    model) is read as it is, for what it adds to the step's memory."""
    check_training_graph(source)
    sha = open_model(source).sha256
    found = optimizer_path(source, optimizer)
    if not uses_deeploy(target):
        graph = load_graph(source, cost_model=cost_model)
        return LoadedModel(graph, target, sha, costs=cost_model, optimizer=_figures(graph, found),
                           optimizer_path=found)
    lowered = deeploy_bridge.lower(source, target)
    graph = lowered.deployed(load_graph(lowered.model, aliases=lowered.aliases, cost_model=cost_model,
                                        scratch=lowered.home_scratch(flow or Flow.default_for(target))), weights)
    return LoadedModel(graph, target, sha, lowered, weights, cost_model, home,
                       optimizer=_figures(load_graph(source), found), optimizer_path=found,
                       persistent_io=persistent_io(lowered, found), flow=flow)


def persistent_io(lowered: LoweredGraph, optimizer: Path | None) -> frozenset[str]:
    """A split step's train-graph I/O that persists across mini-batches (lowered names): the weights and gradient
    accumulators its optimizer graph reads (the rest is the harness's per-mini-batch data, flag and loss)."""
    if optimizer is None or not lowered.persistent_inputs:
        return frozenset()
    return frozenset(lowered.io_names[i.name] for i in read_model(optimizer).graph.input if i.name in lowered.io_names)


def _figures(train: TrainGraph, path: Path | None) -> OptimizerFigures | None:
    if path is None:
        return None
    check_training_graph(path)
    return optimizer_figures(train, load_graph(path))
