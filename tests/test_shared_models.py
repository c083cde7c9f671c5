"""Real graphs from ../shared/models: the loader's figures, and sound and tight schedules on them."""
import pytest
from test_milp_invariants import assert_sound_and_tight

from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.solve import solve


@pytest.fixture(scope="module", params=["cct2_ft2", "cct2_lp"])
def graph(request, shared_models):
    return load_graph(shared_models / request.param)


def test_loader_reads_every_size_and_keeps_weights_out(shared_models):
    g = load_graph(shared_models / "cct2_ft2")
    assert len(g.ops) == 179
    assert all(size > 0 for size in g.tensor_bytes.values())
    assert "classifier_fc_weight" in g.persistent and not g.is_activation("classifier_fc_weight")
    assert {"input", "labels", "classifier_fc_weight_updated"} <= g.persistent  # graph I/O
    assert g.is_activation("output")  # the logits are not a graph output here
    # 4-byte floats: a [1,64,128] activation is 32 KiB
    assert g.tensor_bytes["node_0_classifier_blocks_0_Add__0"] == 32768


def test_floor_and_baselines(shared_models):
    ft2 = baselines(load_graph(shared_models / "cct2_ft2"))
    assert ft2.lower_bound == 524288  # the conv stem's Relu: 256 KiB in, 256 KiB out
    assert ft2.lower_bound <= ft2.min_memory_peak <= ft2.graph_order_peak
    lp = baselines(load_graph(shared_models / "cct2_lp"))
    assert lp.min_memory_peak == lp.lower_bound  # no headroom at all


@pytest.mark.parametrize("fraction", [0.9, 0.8, 0.75, 0.7])
def test_greedy_schedules_are_sound_and_tight(graph, fraction):
    base = baselines(graph)
    budget = max(base.lower_bound, int(fraction * base.graph_order_peak))
    result = solve(graph, SolveOptions(budget=budget, method="greedy"))
    assert_sound_and_tight(graph, result, budget)


def test_milp_schedule_on_cct2_ft2_is_sound_and_tight(shared_models):
    graph = load_graph(shared_models / "cct2_ft2")
    budget = int(0.8 * baselines(graph).graph_order_peak)
    result = solve(graph, SolveOptions(budget=budget, backend=BackendOptions(time_limit=20)))
    assert result.status in ("optimal", "feasible", "heuristic")
    assert_sound_and_tight(graph, result, budget)
