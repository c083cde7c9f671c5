"""The window proof (solver/bounds/windows.py): a few neighbouring points that no schedule gets through."""
import math

import pytest
from graphs import random_graphs, shaped_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.errors import InfeasibleBudget
from ckpt.solver.bounds.bounds import over_budget_points
from ckpt.solver.bounds.windows import MOST_WINDOWS, infeasible_window, least_window_seconds, windows
from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.model import milp
from ckpt.solver.model.backends import BackendOptions, RunStatus, run
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.model.relaxation import Relaxation
from ckpt.solver.solve import solve

EXACT = BackendOptions(name="highs", time_limit=30, gap=0.0, threads=1)


def staged(graph):
    return reorder(graph, list(baselines(graph).min_memory_order))


def exact_optimum(problem: Problem, budget: int) -> float:
    outcome = run(milp.build(problem, budget).lp, EXACT)
    if outcome.status is RunStatus.INFEASIBLE:
        return math.inf
    assert outcome.status is RunStatus.OPTIMAL
    return outcome.dual_bound


@settings(max_examples=property_examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=st.one_of(random_graphs(max_ops=10), shaped_graphs(max_ops=9)), squeeze=st.floats(0.0, 1.0),
       data=st.data())
def test_any_points_checked_while_recomputing_never_refuse_a_budget_the_exact_model_fits(graph, squeeze, data):
    """Any set of stages as points (binding or not, next to each other or not), each segment checked while it
    recomputes: its answer-less verdict is a proof only if the exact model has no schedule either, and its
    bound never passes the exact optimum."""
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    problem = Problem(staged(graph))
    points = sorted(data.draw(st.sets(st.integers(0, problem.n - 1), min_size=1, max_size=problem.n)))
    optimum = exact_optimum(problem, budget)
    feasible = Relaxation(problem, budget, points, chained=frozenset(points), feasibility=True).solve(None)
    assert not math.isinf(feasible) or math.isinf(optimum)
    bound = Relaxation(problem, budget, points, chained=frozenset(points)).solve(None)
    assert bound <= optimum * (1 + 1e-6) + 1e-6
    window = infeasible_window(problem, budget, over_budget_points(problem, budget), None)
    assert window is None or math.isinf(optimum)


def test_a_residual_cnn_below_its_smallest_budget_is_refused_by_a_window(shared_models):
    """ResNet-8 at 0.3 of its graph-order peak: no schedule fits, for a local reason (a ConvGrad whose inputs and
    the gradient held across it leave no room for the next op's). The relaxation over every binding point proves
    it only in many seconds (a hundred thousand variables); a window of two stages in a fraction of one, so a
    10-second solve refuses it, proven."""
    graph = load_graph(shared_models / "resnet8_train")
    budget = int(0.3 * baselines(graph).graph_order_peak)
    with pytest.raises(InfeasibleBudget) as refused:
        solve(graph, SolveOptions(budget=budget, explain=False, backend=BackendOptions(time_limit=10)))
    assert refused.value.proven, str(refused.value)


def test_a_window_too_big_for_its_share_of_the_scan_is_not_built(shared_models, monkeypatch):
    """A window whose least time (by its size) is over its even part of the scan's time is passed over unbuilt:
    on a long graph one window is a model as big as the rounds', and where it has an answer it only spends their
    time (MobileNetV1 on Siracusa at 0.2). Given enough time, the same scan still proves ResNet-8 at 0.3."""
    graph = load_graph(shared_models / "resnet8_train")
    budget = int(0.3 * baselines(graph).graph_order_peak)
    problem = Problem(staged(graph))
    binding = over_budget_points(problem, budget)
    least = max(least_window_seconds(problem, t) for t, _ in windows(problem, budget, binding))
    built = []

    class Counted(Relaxation):
        def build(self):
            built.append(self.points)
            super().build()

    monkeypatch.setattr("ckpt.solver.bounds.windows.Relaxation", Counted)
    assert infeasible_window(problem, budget, binding, MOST_WINDOWS * least / 2) is None
    assert not built
    assert infeasible_window(problem, budget, binding, 60.0) is not None
