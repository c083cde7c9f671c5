"""`solve --target siracusa` works on Deeploy's lowered graph itself: no name drift is possible."""
import pytest
from replay_support import FT2, LP, needs_models

from ckpt.deeploy_bridge import lower
from ckpt.pipeline.deployed_solve import solve_model
from ckpt.solver.backends import SolverOptions
from ckpt.solver.budget import parse_budget
from ckpt.solver.onnx_loader import load_graph
from ckpt.solver.records import SolveOptions


@needs_models
@pytest.mark.deeploy
@pytest.mark.parametrize("model", [FT2, LP], ids=["cct2_ft2", "cct2_lp"])
def test_every_scheduled_name_is_a_lowered_node(model, lowering_cache):
    options = SolveOptions(budget=None, method="greedy", backend=SolverOptions(time_limit=20))
    budget = parse_budget("0.9" if model == FT2 else "1")
    doc, _ = solve_model(model, budget, "siracusa", options)
    lowered = lower(model, "siracusa")
    names = {node.name for node in lowered.model.graph.node}
    assert {name for name, _ in doc.seq} <= names
    assert doc.graph.names_sha256 == load_graph(lowered.model).fingerprint()
    assert doc.graph.nodes == len(names) and doc.graph.target == "siracusa"
    assert doc.predicted.peak_bytes <= budget.resolve(doc.predicted.baseline_peak_bytes)
