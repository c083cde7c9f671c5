"""The smallest feasible budget a refusal states: a range that holds the true one, exact on small graphs."""
from graphs import random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.solver.bounds.smallest import smallest_feasible_budget
from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.model import milp
from ckpt.solver.model.backends import BackendOptions, run
from ckpt.solver.model.problem import Problem

EXACT = BackendOptions(name="highs", time_limit=30, gap=0.0, threads=1)


def fits(problem: Problem, budget: int) -> bool:
    """Whether any schedule over the stage order fits `budget` (the exact model, solved to the end)."""
    outcome = run(milp.build(problem, budget).lp, EXACT)
    assert outcome.status in ("optimal", "infeasible")
    return outcome.status == "optimal"


@settings(max_examples=property_examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=8), from_zero=st.booleans())
def test_the_range_holds_the_smallest_budget_the_exact_model_fits(graph, from_zero):
    """From the single-op floor, or from 0 (a floor that proves nothing: the search's own proofs must find the
    bottom, which the single-op floor on a small graph mostly is already)."""
    base = baselines(graph)
    staged = reorder(graph, list(base.min_memory_order))
    problem = Problem(staged)
    floor = 0 if from_zero else base.lower_bound
    found = smallest_feasible_budget(staged, floor, seconds=30)
    assert floor <= found.low <= found.high
    assert fits(problem, found.high)                       # a schedule reaches the top...
    if found.low > floor:
        assert not fits(problem, found.low - 1)            # ... and nothing fits below the bottom
    assert found.exact                                     # small graphs: every budget is decided in time
