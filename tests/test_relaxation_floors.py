"""The single-point floors of the point relaxation (solver/model/relaxation.py `_floor`): a cut, not a new bound.
They must never change the relaxation's integer optimum (so never lift it above the exact optimum), and they
must lift its LP where a recompute is spread over segments."""
import math

import onnx
import pulp
import pytest
from graphs import random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_bounds import exact_optimum, staged

from ckpt import examples
from ckpt.solver.bounds.bounds import over_budget_points
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.relaxation import Relaxation


def singles(problem, budget, points):
    return {t: Relaxation(problem, budget, [t]).solve(None) for t in points}


def relaxed(problem, budget, points, chained=(), floors=None):
    """The relaxation's integer optimum (inf: infeasible)."""
    return Relaxation(problem, budget, points, chained=frozenset(chained), floors=floors or {}).solve(None)


def floors_keep_the_optimum(graph, squeeze, chains):
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    problem = Problem(staged(graph))
    points = over_budget_points(problem, budget)
    floors = singles(problem, budget, points)
    if any(math.isinf(f) for f in floors.values()):
        return                                   # one point alone proves no schedule fits: nothing to cut
    chained = points if chains else ()
    plain, cut = relaxed(problem, budget, points, chained), relaxed(problem, budget, points, chained, floors)
    assert math.isclose(cut, plain, rel_tol=1e-5, abs_tol=1.0), (plain, cut)
    assert cut <= exact_optimum(problem, budget) + 1e-6


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0), chains=st.booleans())
def test_floors_keep_the_relaxation_optimum_and_stay_below_the_exact_one(graph, squeeze, chains):
    floors_keep_the_optimum(graph, squeeze, chains)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=14), squeeze=st.floats(0.0, 1.0), chains=st.booleans())
def test_floors_keep_the_optimum_on_larger_graphs(graph, squeeze, chains):
    """Larger graphs, more of them: a floor over the wrong variables (what is recomputed in segment s only,
    not what runs again after point s) shows here, not on the small ones."""
    floors_keep_the_optimum(graph, squeeze, chains)


def lp_value(model):
    """The LP of a built relaxation (every binary relaxed)."""
    lp = model.lp.deepcopy()
    for var in lp.variables():
        var.cat = pulp.LpContinuous
    lp.solve(pulp.HiGHS(msg=False, threads=1))
    return pulp.value(lp.objective) or 0.0


def test_floors_lift_the_lp_where_it_spreads_a_recompute_over_segments(tmp_path):
    """Residual CNN at 0.44, the binding points of the bound's first rounds: the LP over them falls below the
    strongest single point's integer bound (the recompute of a block is split between two segments, each
    point paying part of its knapsack); with the floors it is at least that bound."""
    onnx.save(examples.resnet(), tmp_path / "network.onnx")
    graph = load_graph(tmp_path / "network.onnx")
    problem = Problem(staged(graph))
    budget = int(0.44 * baselines(graph).graph_order_peak)
    points = sorted(over_budget_points(problem, budget))[:12]
    floors = singles(problem, budget, points)
    plain, cut = Relaxation(problem, budget, points), Relaxation(problem, budget, points, floors=floors)
    plain._fits_by_count = cut._fits_by_count = lambda *args: None     # the floors alone
    plain.build()
    cut.build()
    assert lp_value(plain) < max(floors.values()) <= lp_value(cut)


def test_rounded_knapsacks_lift_the_lp_of_a_point_of_equal_buffers(tmp_path):
    """Residual CNN at 0.44, stage 26 alone: its buffers are all 4,096 B and 4.88 of them fit, so the LP keeps
    0.88 of one it cannot keep and pays 12% of the convolution that remakes it; rounded, the LP is the integer
    bound (232,448)."""
    onnx.save(examples.resnet(), tmp_path / "network.onnx")
    graph = load_graph(tmp_path / "network.onnx")
    problem = Problem(staged(graph))
    budget = int(0.44 * baselines(graph).graph_order_peak)
    plain, cut = Relaxation(problem, budget, [26]), Relaxation(problem, budget, [26])
    plain._fits_by_count = lambda *args: None
    plain.build()
    cut.build()
    bound = Relaxation(problem, budget, [26]).solve(None)
    assert lp_value(plain) < 0.8 * bound and lp_value(cut) >= bound - 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0), chains=st.booleans())
def test_the_rounded_knapsacks_keep_the_relaxation_optimum(graph, squeeze, chains):
    """The knapsack of each point divided by a buffer's size and rounded down (`_fits_by_count`) cuts no
    integer answer: with and without it the relaxation proves the same bound."""
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    problem = Problem(staged(graph))
    points = over_budget_points(problem, budget)
    chained = points if chains else ()
    cut = relaxed(problem, budget, points, chained)
    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(Relaxation, "_fits_by_count", lambda *args: None)
        plain = relaxed(problem, budget, points, chained)
    assert cut == plain or math.isclose(cut, plain, rel_tol=1e-5, abs_tol=1.0), (plain, cut)
