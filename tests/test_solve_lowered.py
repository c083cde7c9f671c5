"""`solve --target siracusa` works on Deeploy's lowered graph itself: no name drift is possible."""
import pytest
from replay_support import FT2, LP, needs_models

from ckpt.deeploy_bridge import lower
from ckpt.pipeline.deployed_solve import solve_model
from ckpt.solver.budget import parse_budget
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions


@needs_models
@pytest.mark.deeploy
@pytest.mark.parametrize("model", [FT2, LP], ids=["cct2_ft2", "cct2_lp"])
def test_every_scheduled_name_is_a_lowered_node(model, lowering_cache):
    options = SolveOptions(method="greedy", backend=BackendOptions(time_limit=20))
    budget = parse_budget("0.9" if model == FT2 else "1")
    doc, _ = solve_model(model, budget, "siracusa", options)
    lowered = lower(model, "siracusa")
    names = {node.name for node in lowered.model.graph.node}
    assert {name for name, _ in doc.seq} <= names
    assert doc.graph.names_sha256 == load_graph(lowered.model).fingerprint()
    assert doc.graph.nodes == len(names) and doc.graph.target == "siracusa"
    assert doc.predicted.peak_bytes <= budget.resolved(doc.predicted.baseline_peak_bytes).nbytes


@needs_models
@pytest.mark.deeploy
def test_a_point_solved_and_replayed_in_one_process_is_lowered_once(lowering_cache, tmp_path, monkeypatch):
    """Solve and replay of one point read Deeploy's lowered graph at most once in a process (a Deeploy run or one
    read of the on-disk cache): the rest comes from memory."""
    from ckpt.deeploy_bridge import cache, lowering
    from ckpt.replay.run import ReplayOptions, replay_schedule
    from ckpt.schedule_file import write_schedule

    reads = []

    def counted(module, name):
        real = getattr(module, name)

        def call(*args, **kwargs):
            found = real(*args, **kwargs)
            if found is not None:              # a cache miss is not a read
                reads.append(name)
            return found
        monkeypatch.setattr(module, name, call)

    counted(lowering, "_lowered_model")
    counted(cache, "load")
    doc, _ = solve_model(LP, parse_budget("1"), "siracusa",
                         SolveOptions(method="greedy", backend=BackendOptions(time_limit=20)))
    write_schedule(tmp_path / "seq.json", doc)
    replay_schedule(tmp_path / "seq.json", LP, tmp_path / "out", ReplayOptions(verify=False))
    assert len(reads) <= 1, reads
