"""The graph a schedule is solved on: Deeploy's lowered graph for a Deeploy target, else the ONNX as it is."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.records import LoweredGraph
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, WeightUpdate
from ckpt.solver.graph.costs import CostModel
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.onnx_loader import check_training_graph, load_graph, open_model, optimizer_path
from ckpt.solver.graph.step_pair import OptimizerFigures, optimizer_figures
from ckpt.targets import uses_deeploy


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


def load_for_target(source: str | Path, target: str = "none", cost_model: CostModel | None = None,
                    weights: WeightUpdate = DEFAULT_SETUP.weights, optimizer: str | Path | None = None,
                    home: str = DEFAULT_SETUP.default_mem_level) -> LoadedModel:
    """Read (one-line errors for a missing or non-ONNX file before Deeploy sees it) and lower for the target;
    with weights updated in place, the graph says so (solver.graph.in_place) and shares each constant's copies. The
    optimizer graph of a split step (`optimizer`, else found beside the model) is read as it is, for what it
    adds to the step's memory."""
    check_training_graph(source)
    sha = open_model(source).sha256
    found = optimizer_path(source, optimizer)
    if not uses_deeploy(target):
        graph = load_graph(source, cost_model=cost_model)
        return LoadedModel(graph, target, sha, costs=cost_model, optimizer=_figures(graph, found),
                           optimizer_path=found)
    lowered = deeploy_bridge.lower(source, target)
    graph = lowered.deployed(load_graph(lowered.model, aliases=lowered.aliases, cost_model=cost_model,
                                        scratch=lowered.transients), weights)
    return LoadedModel(graph, target, sha, lowered, weights, cost_model, home,
                       optimizer=_figures(load_graph(source), found), optimizer_path=found)


def _figures(train: TrainGraph, path: Path | None) -> OptimizerFigures | None:
    if path is None:
        return None
    check_training_graph(path)
    return optimizer_figures(train, load_graph(path))
