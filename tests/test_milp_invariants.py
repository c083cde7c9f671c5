"""The MILP books exactly what the replay uses: sound (never under) and tight (equal, stage by stage)."""
import pulp
import pytest
from graphs import chain, make_graph, random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.errors import InfeasibleBudget
from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.schedule import Decisions, needed_retentions
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.graph.views import collapsed
from ckpt.solver.model import milp
from ckpt.solver.model.accounting import booked_levels
from ckpt.solver.model.backends import BackendOptions, run
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.realise.greedy import outside_space, polish
from ckpt.solver.solve import solve, stage_order

EXACT = BackendOptions(name="highs", time_limit=30, gap=0.0, threads=1)


def staged_graph(graph, result):
    """The graph the solver's decisions are over: its stage order, without views where they are re-made."""
    views = collapsed(graph)
    solved = views.without_views if "views remade" in result.space and views.view_ops else graph
    return reorder(solved, list(result.stage_order))


def assert_sound_and_tight(graph, result, budget):
    """Sound: what runs never exceeds the budget nor the MILP's booking. Tight: the booking of the decisions,
    retentions no later reader needs dropped, equals the replay of the decisions stage by stage."""
    assert memory_trace(graph, result.seq).peak_bytes == result.peak_bytes <= budget
    staged = staged_graph(graph, result)
    full = result.decisions.sequence(staged)
    replayed = memory_trace(staged, full)
    assert result.peak_bytes <= replayed.peak_bytes  # dropping unread runs never raises the peak
    if result.booked_peak_bytes is not None:
        assert replayed.peak_bytes <= result.booked_peak_bytes <= budget
    booked = booked_levels(Problem(staged), set(result.decisions.recomputes), needed_retentions(staged, full))
    by_stage = {t: max(level for _, level in points) for t, points in booked.items()}
    assert by_stage == replayed.stage_peaks()


@settings(max_examples=property_examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(), squeeze=st.floats(0.0, 1.0))
def test_random_graphs_sound_and_tight(graph, squeeze):
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    # over the min-memory order as given, so that solve() walks no other order where it ends without a schedule
    order = stage_order(graph, SolveOptions(budget=budget))
    try:
        result = solve(graph, SolveOptions(budget=budget, backend=EXACT), order=order)
    except InfeasibleBudget:
        # the heuristic searches the same schedules: it must not find one the MILP calls impossible
        with pytest.raises(InfeasibleBudget):
            solve(graph, SolveOptions(budget=budget, method="greedy"), order=order)
        return
    assert result.status == "optimal"
    assert_sound_and_tight(graph, result, budget)
    assert result.planned_cost == result.decisions.cost(staged_graph(graph, result)) == result.cost_lower_bound
    assert result.recompute_cost <= result.planned_cost
    try:   # any schedule of the same space costs at least the proven bound
        quick = solve(graph, SolveOptions(budget=budget, method="greedy"), order=order)
    except InfeasibleBudget:
        return
    assert quick.stage_order == result.stage_order and quick.planned_cost >= result.cost_lower_bound


def test_a_recompute_that_only_moves_an_op_later_runs_free_and_the_proof_is_about_the_plan():
    """The stage order runs n1 before n2; the schedule that fits recomputes n1 after n2, and its first run, then
    read by nobody, is deleted: what runs costs nothing more, while the plan over the order runs n1 twice. The
    bound and the status are the plan's (the result once gave what runs as the proven bound)."""
    spec = [("n0", "Op", ["x"], ["t0"]), ("n1", "Op", ["t0"], ["t1"]), ("n2", "Op", ["t0"], ["t2", "t2b"]),
            ("n3", "Op", ["t1", "t2"], ["t3"]), ("upd", "SGD", ["w", "t3"], ["w_new"])]
    sizes = {"x": 4, "w": 4, "t0": 4, "t1": 4, "t2": 8, "t2b": 4, "t3": 4, "w_new": 4}
    graph = make_graph(spec, sizes, {"x", "w", "w_new"}, {"w_new": "w"})
    base = baselines(graph)
    assert base.min_memory_order == ("n0", "n1", "n2", "n3", "upd") and base.lower_bound < base.min_memory_peak
    result = solve(graph, SolveOptions(budget=base.lower_bound, backend=EXACT))
    assert result.seq == [("n0", 0), ("n2", 0), ("n1", 0), ("n3", 0), ("upd", 0)]
    assert result.status == "optimal" and result.recompute_cost == 0
    assert result.planned_cost == result.cost_lower_bound == 1


@settings(max_examples=property_examples(40), deadline=None)
@given(graph=random_graphs(), picks=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=6))
def test_accounting_matches_replay_for_arbitrary_decisions(graph, picks):
    """Tightness does not depend on the solver: any recompute decisions are booked as the replay uses them."""
    problem = Problem(graph)
    chosen = {(t, i) for t, i in picks if i < t < problem.n and t in problem.recompute_stages(i)}
    decisions = Decisions(frozenset(chosen))
    seq = decisions.sequence(graph)
    try:
        replayed = memory_trace(graph, seq)
    except Exception:
        return
    if outside_space(graph, decisions, seq):
        return   # outside the space (a view keeps the old version while the new one is made): the MILP forbids it
    booked = booked_levels(problem, chosen, needed_retentions(graph, seq))
    assert {t: max(v for _, v in pts) for t, pts in booked.items()} == replayed.stage_peaks()


def test_chain_needs_recompute_and_gets_the_cheapest():
    graph = chain(6, size=4)
    base = baselines(graph)
    budget = base.min_memory_peak - 4
    result = solve(graph, SolveOptions(budget=budget, backend=EXACT))
    assert result.status == "optimal" and result.recomputes >= 1
    assert_sound_and_tight(graph, result, budget)


def test_cbc_agrees_with_highs_on_the_exact_model():
    """CBC runs the same model (no bound shortcut: focus off, and an MILP-only budget) to the same optimum."""
    graph = chain(7, size=4)
    budget = baselines(graph).min_memory_peak - 8
    problem = Problem(reorder(graph, list(baselines(graph).min_memory_order)))
    costs = {}
    for name in ("highs", "cbc"):
        model = milp.build(problem, budget)
        outcome = run(model.lp, BackendOptions(name=name, time_limit=60, gap=0.0, threads=1))
        assert outcome.status == "optimal"
        costs[name] = round(pulp.value(model.lp.objective))
    assert costs["highs"] == costs["cbc"] > 0


def test_greedy_and_milp_share_one_signature():
    graph = chain(6, size=4)
    budget = baselines(graph).min_memory_peak - 4
    exact = solve(graph, SolveOptions(budget=budget, backend=EXACT))
    quick = solve(graph, SolveOptions(budget=budget, method="greedy"))
    assert quick.peak_bytes <= budget and quick.recompute_cost >= exact.recompute_cost


def test_scratch_is_booked_as_the_replay_uses_it():
    from dataclasses import replace
    graph = replace(chain(6, size=4), scratch={"f2": 3, "b1": 5})
    base = baselines(graph)
    budget = base.min_memory_peak - 4
    result = solve(graph, SolveOptions(budget=budget, backend=EXACT))
    assert result.status == "optimal"
    assert_sound_and_tight(graph, result, budget)


def test_peak_objective_trades_cycles_for_memory():
    graph = chain(6, size=4)
    no_cycles = solve(graph, SolveOptions(objective="peak", cost_cap=0, backend=EXACT))
    some = solve(graph, SolveOptions(objective="peak", cost_cap=3, backend=EXACT))
    assert no_cycles.recomputes == 0 and no_cycles.peak_bytes == baselines(graph).min_memory_peak
    assert some.peak_bytes < no_cycles.peak_bytes and some.recompute_cost <= 3
    assert some.status == "optimal"


@settings(max_examples=property_examples(60), deadline=None)
@given(graph=random_graphs(), picks=st.lists(st.tuples(st.integers(0, 20), st.integers(0, 20)), max_size=6))
def test_polish_only_drops_recomputes_the_budget_does_not_need(graph, picks):
    problem = Problem(graph)
    chosen = Decisions(frozenset((t, i) for t, i in picks if i < t < problem.n and t in problem.recompute_stages(i)))
    if outside_space(graph, chosen):
        return
    budget = memory_trace(graph, chosen.sequence(graph)).peak_bytes
    polished = polish(graph, chosen, budget)
    assert polished.recomputes <= chosen.recomputes
    assert memory_trace(graph, polished.sequence(graph)).peak_bytes <= budget
    assert not outside_space(graph, polished)
    for key in polished.recomputes:   # nothing left that could go on its own
        rest = Decisions(polished.recomputes - {key})
        assert outside_space(graph, rest) or memory_trace(graph, rest.sequence(graph)).peak_bytes > budget


def test_a_view_with_scratch_made_from_a_remade_view_keeps_its_buffer():
    """A view op with scratch stays in the graph the solver sees, while the view it is made from is taken out
    (re-made where read): what it reads is that view's root buffer, which it keeps alive as before (hypothesis
    found the solver booking that buffer as dead, and a schedule 4 B over the budget)."""
    spec = [("n0", "Op", ["x"], ["t0"]), ("n4", "Op", ["x"], ["t4", "t4b"]),
            ("n5", "Reshape", ["t0"], ["v5"]), ("n6", "Reshape", ["v5"], ["v6"]),
            ("n7", "Op", ["t4", "v6"], ["t7"]), ("upd", "SGD", ["w", "t7"], ["w_new"])]
    sizes = {"x": 4, "w": 4, "t0": 4, "t4": 4, "t4b": 8, "v5": 4, "v6": 4, "t7": 4, "w_new": 4}
    graph = make_graph(spec, sizes, {"x", "w", "w_new"}, {"v5": "t0", "v6": "v5", "w_new": "w"},
                       scratch={"n6": 4})
    views = collapsed(graph)
    assert [graph.ops[i].name for i in views.view_ops] == ["n5"]
    assert views.without_views.root("v6") == "t0"
    base = baselines(graph)
    for budget in range(base.lower_bound, base.min_memory_peak + 1, 4):
        try:
            result = solve(graph, SolveOptions(budget=budget, backend=EXACT))
        except InfeasibleBudget:
            continue
        assert_sound_and_tight(graph, result, budget)
