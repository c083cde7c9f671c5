"""Where the min-memory stage order ends with no schedule and no proof, solve() walks the graph's own order
(solver/solve.py `in_graph_order`): MobileNetV1 tiled for Siracusa at 0.2 of its peak had no schedule in 20 s
over the min-memory order, while the eviction walk over the graph order finds one in milliseconds."""
from graphs import make_graph, random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.errors import InfeasibleBudget
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.simulate import memory_trace, unready_read
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions, Status
from ckpt.solver.solve import solve
from ckpt.solver.stages import greedy_answer

QUICK = BackendOptions(time_limit=10, threads=1)


def late_reader():
    """Near the floor, the min-memory order stages n3 before n4, so the view v2 (pinning t1_0) lives across n3's
    allocation; the heuristics find nothing over that order at 41 B, the graph's order fits as it is."""
    spec = [("n0", "Op", ["x", "w"], ["t0_0", "t0_1"]), ("n1", "Op", ["t0_1"], ["t1_0", "t1_1"]),
            ("n2", "Reshape", ["t1_0"], ["v2"]), ("n3", "Op", ["x", "v2", "w"], ["t3_0", "t3_1"]),
            ("n4", "Op", ["t1_0", "v2", "w"], ["t4_0"]), ("n5", "Reshape", ["t4_0"], ["v5"]),
            ("upd", "SGD", ["w", "v5"], ["w_new"])]
    sizes = {"x": 4, "w": 4, "t0_0": 20, "t0_1": 16, "t1_0": 12, "t1_1": 4, "v2": 12, "t3_0": 16, "t3_1": 8,
             "t4_0": 20, "v5": 20, "w_new": 4}
    return make_graph(spec, sizes, {"x", "w", "w_new"}, {"v2": "t1_0", "v5": "t4_0"},
                      {"n0": 5, "n1": 1, "n2": 1, "n3": 8, "n4": 1, "n5": 4, "upd": 3},
                      {"n1": 4, "n2": 4, "n3": 4, "n4": 8, "n5": 12, "upd": 12})


def test_a_schedule_over_the_graph_order_where_the_min_memory_order_gives_none():
    graph = late_reader()
    result = solve(graph, SolveOptions(budget=41, method="greedy", backend=QUICK))
    assert result.peak_bytes <= 41
    assert result.status is Status.HEURISTIC and result.gap is None      # nothing proven over that order
    assert result.stage_order == tuple(op.name for op in graph.ops)
    assert result.space.startswith("stage order graph (none found over the min-memory order)")


def test_a_proof_over_the_min_memory_order_is_no_refusal_where_the_graph_order_fits():
    """The exact model proves the min-memory order has no schedule at 41 B, yet the graph's own order fits it as
    it is: a proof over one order is no refusal (before: "no schedule fits 41 B: the smallest feasible budget is
    44 B (proven)"); the schedule is over the graph order, and its space says what was proven of the other."""
    graph = late_reader()
    result = solve(graph, SolveOptions(budget=41, backend=QUICK))
    assert result.peak_bytes <= 41
    assert result.status is Status.HEURISTIC and result.gap is None
    assert result.stage_order == tuple(op.name for op in graph.ops)
    assert result.space.startswith("stage order graph (none fits over the min-memory order (proven))")


def test_a_refusal_says_its_proof_is_over_the_order_solved():
    """Where no order tried fits, the refusal's proof names what it holds for: the stage order solved."""
    graph = late_reader()
    order = list(baselines(graph).min_memory_order)
    try:
        solve(graph, SolveOptions(budget=41, backend=QUICK), order=order)
    except InfeasibleBudget as err:
        assert err.proven and "(proven over the stage order solved)" in str(err)
    else:
        raise AssertionError("the exact model proves 41 B infeasible over the min-memory order")


def test_no_fallback_where_the_caller_chose_the_order():
    """An order given to solve() (a model of another graph, say) is the space asked for: none found there stays
    none found."""
    graph = late_reader()
    order = list(baselines(graph).min_memory_order)
    try:
        solve(graph, SolveOptions(budget=41, method="greedy", backend=QUICK), order=order)
    except InfeasibleBudget as err:
        assert not err.proven
    else:
        raise AssertionError("a schedule over an order the caller did not give")


@settings(max_examples=property_examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=8), squeeze=st.floats(0.0, 0.5))
def test_what_the_fallback_returns_fits_and_is_ready(graph, squeeze):
    """Stages that never answer (the greedy's answer with no greedy run before it) send every budget the plain
    min-memory order does not fit to the walk over the graph order."""
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    try:
        result = solve(graph, SolveOptions(budget=budget, backend=QUICK), stages=(greedy_answer,))
    except InfeasibleBudget as err:
        assert not err.proven or budget < base.lower_bound
        return
    assert memory_trace(graph, result.seq).peak_bytes <= budget
    assert unready_read(graph, result.seq) is None
    if result.space.startswith("stage order graph"):
        assert result.status is Status.HEURISTIC
