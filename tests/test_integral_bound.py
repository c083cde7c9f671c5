"""A bound on a recompute cost rounds up to the next whole cycle: every schedule costs whole cycles, so no schedule
lies between a dual bound just under an integer and that integer (DS-CNN tiled for Siracusa at 0.9: HiGHS proved
4,223.99999999998, floored to 4,223, and the schedule of 4,224 stayed 0.02% from proof)."""
import dataclasses
import math

import pulp
import pytest
from graphs import chain, random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples
from test_bounds import exact_optimum, staged

from ckpt.solver.bounds.bounds import lower_bound, over_budget_points
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.model import milp
from ckpt.solver.model.backends import _Report, integral_bound, integral_objective
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.relaxation import Relaxation


def report(bound: float, integral: bool) -> _Report:
    return _Report(pulp.LpStatusOptimal, pulp.LpSolutionOptimal, {}, mip_gap=0.0, mip_dual_bound=bound,
                   integral=integral)


def test_a_dual_bound_of_an_integral_objective_rounds_up_past_the_solvers_error_only():
    assert report(4223.999999999979, integral=True).dual_bound() == 4224     # DS-CNN Siracusa 0.9's
    assert report(4223.999999999979, integral=False).dual_bound() == 4223    # cycles could be fractions: floor
    assert report(4223.0000001, integral=True).dual_bound() == 4223          # within the tolerance of 4,223
    assert report(4223.5, integral=True).dual_bound() == 4224
    assert report(0.0, integral=True).dual_bound() == 0.0 and report(math.inf, integral=True).dual_bound() == 0.0
    assert integral_bound(1e-9) == 0.0 and integral_bound(7.0) == 7.0
    assert integral_bound(19641343.9) == 19641343    # the tolerance spans 20 cycles here: as floored before


def test_the_recompute_cost_is_an_integral_objective_and_the_peak_is_not():
    problem = Problem(staged(chain(5)))
    budget = baselines(problem.graph).min_memory_peak - 4
    relaxation = Relaxation(problem, budget, over_budget_points(problem, budget))
    relaxation.build()
    assert integral_objective(relaxation.lp)
    assert integral_objective(milp.build(problem, budget).lp)
    assert not integral_objective(milp.build(problem, None).lp)             # the peak: a continuous variable
    fractional = Problem(dataclasses.replace(problem.graph, op_cost={**problem.graph.op_cost,
                                                                      problem.graph.ops[0].name: 1.5}))
    assert not integral_objective(milp.build(fractional, budget).lp)


@settings(max_examples=property_examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0), scale=st.integers(1, 10**6))
def test_the_rounded_bound_never_exceeds_the_exact_optimum(graph, squeeze, scale):
    """Costs of up to millions of cycles (where a float's error is largest): the bound, rounded up, is a whole
    number and never above the exact MILP's optimum."""
    graph = dataclasses.replace(graph, op_cost={name: cost * scale + scale % 7 for name, cost in graph.op_cost.items()})
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    problem = Problem(staged(graph))
    optimum = exact_optimum(problem, budget)
    bound = lower_bound(problem, budget, seconds=None).cost
    assert bound <= optimum
    assert math.isinf(bound) or bound == int(bound)


@pytest.mark.deeploy
def test_dscnn_tiled_for_siracusa_at_0_9_is_proven_optimal(shared_models, lowering_cache):
    from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label
    from ckpt.pipeline.load import load_for_target
    from ckpt.solver.model.backends import BackendOptions
    from ckpt.solver.model.records import SolveOptions
    from ckpt.solver.solve import solve
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip(f"the installed Deeploy is {deeploy_label()}: dscnn_train needs the training branch")
    graph = load_for_target(shared_models / "dscnn_train", "siracusa").graph
    budget = int(0.9 * baselines(graph).graph_order_peak)
    result = solve(graph, SolveOptions(budget=budget, backend=BackendOptions(time_limit=20, clock="cpu")))
    assert result.status == "optimal" and result.recompute_cost == 4224 and result.gap == 0.0
