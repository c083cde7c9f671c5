"""The local search (solver/realise/search.py): every schedule it keeps fits and is in the space, never dearer
than its start; the randomised greedy it repairs with is the plain one when its spread is nil."""
import math
import random

import onnx
from graphs import random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt import examples
from ckpt.events import ignore
from ckpt.solver import stages
from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.graph.views import collapsed
from ckpt.solver.model import clock
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.model.time_plan import TimePlan
from ckpt.solver.realise.greedy import Jitter, greedy, outside_space, polish
from ckpt.solver.realise.search import searched


def staged(graph):
    return reorder(graph, list(baselines(graph).min_memory_order))


def staged_within(graph, squeeze):
    """The graph in its min-memory order, and a budget `squeeze` of the way from its floor to its min-memory peak."""
    graph = staged(graph)
    base = baselines(graph)
    return graph, int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))


@settings(max_examples=property_examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0))
def test_searched_schedules_fit_and_cost_no_more_than_the_start(graph, squeeze):
    graph, budget = staged_within(graph, squeeze)
    start = greedy(graph, budget)
    if start is None:
        return
    start = polish(graph, start, budget)
    found = searched(graph, budget, start, math.inf).schedule
    assert found.cost(graph) <= start.cost(graph)
    assert memory_trace(graph, found.sequence(graph)).peak_bytes <= budget
    assert not outside_space(graph, found)


@settings(max_examples=property_examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0))
def test_a_greedy_without_spread_is_the_plain_greedy(graph, squeeze):
    graph, budget = staged_within(graph, squeeze)
    assert greedy(graph, budget, jitter=Jitter(random.Random(1), 0.0)) == greedy(graph, budget)


def test_the_search_finds_a_cheaper_schedule_than_the_polished_greedy(tmp_path):
    """The residual CNN at half its graph-order peak: the greedy's schedule, polished, is far above the
    cheapest; the search's rounds find a cheaper one in a second."""
    onnx.save(examples.resnet(), tmp_path / "network.onnx")
    plain = collapsed(load_graph(tmp_path / "network.onnx")).without_views
    graph, budget = staged(plain), int(0.5 * baselines(plain).graph_order_peak)
    start = polish(graph, greedy(graph, budget), budget)
    found = searched(graph, budget, start, math.inf).schedule
    assert found.cost(graph) < start.cost(graph)
    assert memory_trace(graph, found.sequence(graph)).peak_bytes <= budget


def test_the_search_stages_run_only_where_the_models_cannot(tmp_path, monkeypatch):
    """Where the models cannot run, the early search improves the greedy's schedule (as above), kept aside from
    the start the bound's rounds judge their path by; where the models can run, it leaves the schedule to them."""
    onnx.save(examples.resnet(), tmp_path / "network.onnx")
    plain = collapsed(load_graph(tmp_path / "network.onnx")).without_views
    graph, budget = staged(plain), int(0.5 * baselines(plain).graph_order_peak)
    start = polish(graph, greedy(graph, budget), budget)
    options = SolveOptions(budget=budget, backend=BackendOptions(time_limit=60.0))
    for fit in (False, True):
        monkeypatch.setattr(stages, "models_fit", lambda problem, plan, fit=fit: fit)
        attempt = stages.Attempt(graph, baselines(graph), options, TimePlan(clock.now(), 60.0), ignore)
        found = stages.early_search_stage(attempt, stages.Found(start=start))
        improved = found.polished is not None and found.polished.cost(graph) < start.cost(graph)
        assert improved is not fit and found.start == start    # the bound's rounds start from the greedy's
