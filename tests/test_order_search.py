"""`--order search`: a local search over stage orders, each step solved exactly; never worse than where it starts."""
from graphs import make_graph, random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples
from test_milp_invariants import EXACT, assert_sound_and_tight

from ckpt.errors import InfeasibleBudget
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.order_search import moves
from ckpt.solver.solve import solve


def two_branches():
    """The min-memory list order runs n5 before n2 and peaks at 20 B; the order n1 n2 n5 fits 16 B as is."""
    spec = [("n1", "Op", ["x"], ["t1", "t1b"]), ("n2", "Op", ["x"], ["t2", "t2b"]),
            ("n5", "Op", ["t1"], ["t5", "t5b"]), ("n6", "Op", ["t2", "t5"], ["t6"]), ("n7", "Op", ["t1", "t6"], ["t7"]),
            ("upd", "SGD", ["w", "t7"], ["w_new"])]
    sizes = {"x": 4, "w": 4, "t1": 4, "t1b": 4, "t2": 4, "t2b": 8, "t5": 4, "t5b": 4, "t6": 4, "t7": 4, "w_new": 4}
    return make_graph(spec, sizes, {"x", "w", "w_new"})


@settings(max_examples=property_examples(60), deadline=None)
@given(graph=random_graphs(max_ops=10))
def test_every_move_is_a_topological_order_of_the_same_ops(graph):
    order = list(baselines(graph).min_memory_order)
    for moved in moves(graph, order):
        assert sorted(moved) == sorted(order) and moved != order
        place = {name: k for k, name in enumerate(moved)}
        for op in graph.ops:
            assert all(place[graph.ops[graph.producer[t]].name] < place[op.name]
                       for t in op.inputs if t in graph.producer)


def test_the_search_finds_an_order_that_needs_no_recompute():
    graph, budget = two_branches(), 16
    assert baselines(graph).min_memory_peak > budget
    fixed = solve(graph, SolveOptions(budget=budget, backend=EXACT))
    assert fixed.status == "optimal" and fixed.recompute_cost > 0
    searched = solve(graph, SolveOptions(budget=budget, order="search", backend=EXACT))
    assert searched.recompute_cost == 0 and searched.stage_order != fixed.stage_order
    assert "local search" in searched.space and "2 orders solved" in searched.space
    assert_sound_and_tight(graph, searched, budget)


def test_the_search_only_refuses_what_it_did_not_prove():
    """Below the single-op floor no order helps: proven. Above it, no schedule over the orders tried is no proof."""
    graph = two_branches()
    floor = baselines(graph).lower_bound
    try:
        solve(graph, SolveOptions(budget=floor - 1, order="search", backend=EXACT))
    except InfeasibleBudget as err:
        assert err.proven
    else:
        raise AssertionError("a budget below the single-op floor was accepted")


@settings(max_examples=property_examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=8), squeeze=st.floats(0.0, 1.0))
def test_the_search_is_never_costlier_than_its_start_and_stays_sound(graph, squeeze):
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    try:
        start = solve(graph, SolveOptions(budget=budget, backend=EXACT)).recompute_cost
    except InfeasibleBudget:
        start = None
    try:
        searched = solve(graph, SolveOptions(budget=budget, order="search", backend=EXACT))
    except InfeasibleBudget:
        assert start is None
        return
    assert start is None or searched.recompute_cost <= start
    assert_sound_and_tight(graph, searched, budget)
