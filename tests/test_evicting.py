"""The eviction walk (solver/realise/evicting.py): every schedule it returns fits by the replay and lies in the
MILP's space, it never finds one where the exact model proves none, and it finds one where the greedy cannot."""
import pulp
import pytest
from graphs import make_graph, random_graphs, shaped_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.errors import InfeasibleBudget
from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.schedule import needed_retentions
from ckpt.solver.graph.simulate import memory_trace, unready_read
from ckpt.solver.graph.views import collapsed
from ckpt.solver.model import milp
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.realise.evicting import evicting
from ckpt.solver.realise.greedy import greedy, outside_space
from ckpt.solver.solve import solve

EXACT = BackendOptions(name="highs", time_limit=30, gap=0.0, threads=1)


def staged(graph):
    """The graph solve() stages by default: views taken out (re-made), in the memory-minimising order."""
    without = collapsed(graph).without_views
    return reorder(without, list(baselines(without).min_memory_order))


@settings(max_examples=property_examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=st.one_of(random_graphs(max_ops=10), shaped_graphs()), squeeze=st.floats(0.0, 0.6))
def test_what_the_walk_returns_fits_is_valid_and_costs_no_less_than_the_exact_optimum(graph, squeeze):
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    order = staged(graph)
    found = evicting(order, budget)
    if found is None:           # allowed: a heuristic may say none
        return
    seq = found.sequence(order)
    assert not outside_space(order, found, seq)
    assert unready_read(order, seq) is None
    assert memory_trace(order, seq).peak_bytes <= budget
    try:
        exact = solve(graph, SolveOptions(budget=budget, backend=EXACT))
    except InfeasibleBudget:    # the walk searches the MILP's schedules: a proof of none must hold for it too
        pytest.fail("the walk found a schedule where the exact model proves none")
    assert found.cost(order) >= exact.cost_lower_bound


def near_the_floor():
    """A forward op of two outputs, a view of one, a shape read late, and a backward pass reading all of them: at
    the single-op floor, staged with the shape made first, the greedy (one recompute at a time, each kept only if
    it removes excess) finds nothing, though recomputing the forward op twice, as the walk does, fits."""
    spec = [("n0", "Op", ["x"], ["t0_0", "t0_1"]), ("n1", "Reshape", ["t0_0"], ["v1"]),
            ("n2", "Shape", ["x"], ["s2"]), ("b0", "Grad", ["v1", "v1", "s2"], ["g0"]),
            ("b1", "Grad", ["g0", "t0_1"], ["g1"]), ("b2", "Grad", ["g1", "t0_0", "s2"], ["g2"]),
            ("upd", "SGD", ["w", "g2"], ["w_new"])]
    sizes = {"x": 16, "w": 16, "t0_0": 20, "t0_1": 20, "v1": 20, "s2": 32, "g0": 24, "g1": 20, "g2": 12,
             "w_new": 16}
    costs = {"n0": 2, "n1": 7, "n2": 9, "b0": 4, "b1": 2, "b2": 2, "upd": 3}
    return make_graph(spec, sizes, {"x", "w", "w_new"}, {"v1": "t0_0", "w_new": "w"}, costs)


def test_near_the_floor_the_heuristics_find_the_schedule_the_greedy_alone_misses():
    graph = near_the_floor()
    floor = baselines(graph).lower_bound
    order = ["n2", "n0", "b0", "b1", "b2", "upd"]     # the view n1 is re-made where it is read
    assert greedy(reorder(collapsed(graph).without_views, order), floor) is None
    result = solve(graph, SolveOptions(budget=floor, method="greedy"), order=order)
    assert memory_trace(graph, result.seq).peak_bytes <= floor
    exact = solve(graph, SolveOptions(budget=floor, backend=EXACT), order=order)
    assert result.planned_cost >= exact.planned_cost


@settings(max_examples=property_examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=st.one_of(random_graphs(max_ops=10), shaped_graphs()), squeeze=st.floats(0.0, 0.6))
def test_the_walks_schedule_handed_to_the_exact_model_is_a_feasible_start_of_its_cost(graph, squeeze):
    """The models start from the heuristics' schedule (solver/model/model_run.py): the values it is handed as must
    satisfy every constraint of the exact model, at the schedule's own cost, or HiGHS drops the start."""
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    order = staged(graph)
    found = evicting(order, budget)
    if found is None:
        return
    model = milp.build(Problem(order), budget)
    values = milp.start_values(model, set(found.recomputes), needed_retentions(order, found.sequence(order)))
    assert {key for key in found.recomputes} <= set(model.R)
    for var in model.lp.variables():
        var.varValue = values.get(var.name, 0.0)
    assert model.lp.valid(1e-6)
    assert pulp.value(model.lp.objective) == pytest.approx(found.cost(order))
