"""The library's front door: model -> (Deeploy bridge) lowered graph -> solver -> schedule document.

The CLI only parses arguments and prints; everything a library user would need is here.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ckpt.budgets.parse import Budget
from ckpt.solver.costs import CostModel
from ckpt.solver.graph import TrainGraph
from ckpt.solver.onnx_loader import load_graph, read_model
from ckpt.solver.solve import SolveOptions, SolveResult, solve

TARGETS = ("none", "siracusa", "gap9")


@dataclass(frozen=True)
class LoadedModel:
    graph: TrainGraph
    target: str
    model_sha256: str
    lowered: object | None = None          # deeploy_bridge.LoweredGraph when a Deeploy target lowered it


def model_path(source: str | Path) -> Path:
    path = Path(source)
    return path / "network.onnx" if path.is_dir() else path


def load_for_target(source: str | Path, target: str = "none", cost_model: CostModel | None = None) -> LoadedModel:
    """The graph the schedule will run on: Deeploy's lowered graph for a Deeploy target, else the ONNX as is."""
    read_model(source)  # one-line error for a missing or non-ONNX file before Deeploy sees it
    sha = hashlib.sha256(model_path(source).read_bytes()).hexdigest()
    if target == "none":
        return LoadedModel(load_graph(source, cost_model=cost_model), target, sha)
    from ckpt.deeploy_bridge import lower

    lowered = lower(source, target)
    graph = load_graph(lowered.model, aliases=lowered.aliases, cost_model=cost_model, scratch=lowered.transients)
    return LoadedModel(graph, target, sha, lowered)


def schedule_document(loaded: LoadedModel, budget: Budget | None, result: SolveResult, options: SolveOptions,
                      record_time: bool = False) -> dict:
    """The seq.json content. Wall-clock seconds only with record_time: same inputs, byte-identical file."""
    base_peak = result.baselines.graph_order_peak
    solver = {"name": options.backend.name if result.variables else "none", "method": options.method,
              "status": result.status, "gap": None if result.gap is None else round(result.gap, 6),
              "cost_lower_bound": result.cost_lower_bound,
              "variables": result.variables, "variables_unpruned": result.variables_unpruned,
              "constraints": result.constraints, "time_limit": options.backend.time_limit,
              "stage_order": options.order, "objective": options.objective}
    if record_time:
        solver["seconds"] = round(result.seconds, 3)
    return {
        "seq": [[name, flag] for name, flag in result.seq],
        "graph": {"nodes": len(loaded.graph.ops), "names_sha256": loaded.graph.fingerprint(),
                  "model_sha256": loaded.model_sha256, "target": loaded.target},
        "budget": budget.as_dict(base_peak) if budget else {"text": None, "fraction": None, "bytes": None},
        "predicted": {
            "peak_bytes": result.peak_bytes,
            "heap_bytes": result.heap_bytes,
            "booked_peak_bytes": result.booked_peak_bytes,
            "baseline_peak_bytes": base_peak,
            "min_memory_order_peak_bytes": result.baselines.min_memory_peak,
            "persistent_bytes": result.persistent_bytes,
            "lower_bound_bytes": result.baselines.lower_bound,
            "recomputes": result.recomputes,
            "recompute_cost": result.recompute_cost,
            "cost_increase_pct": round(result.cost_increase_pct, 4),
        },
        "solver": solver,
    }


def solve_model(source: str | Path, budget: Budget | None, target: str = "none",
                options: SolveOptions | None = None, cost_model: CostModel | None = None,
                progress=lambda msg: None) -> tuple[LoadedModel, SolveResult, SolveOptions]:
    """Load (lowering for a Deeploy target), resolve the budget against the graph's baseline, solve."""
    from dataclasses import replace

    from ckpt.solver.baselines import graph_order_peak

    progress(f"loading {source} for target {target}")
    loaded = load_for_target(source, target, cost_model)
    options = options or SolveOptions(budget=None)
    if budget is not None:
        options = replace(options, budget=budget.resolve(graph_order_peak(loaded.graph)))
    return loaded, solve(loaded.graph, options, progress), options
