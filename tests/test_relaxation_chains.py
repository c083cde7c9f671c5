"""The point relaxation's check of a one-stage segment while it recomputes stays valid where the optimum remakes a
chain of activations in one stage (a recompute feeding the next): the rows that count what a later recompute of
the segment reads (solver/model/relaxation.py `_read_later`) bind only there, and random_graphs' optima hardly
ever recompute so: tests/test_relaxation_cuts.py's property passed with those rows planted invalid (a buffer a
later recompute makes counted while an earlier one runs), this one fails on it. With skips, a chain remade in
one stage reads a buffer kept from before the stage: the rows count it while the run between runs."""
import math

from graphs import chain, recompute_chains, skip_chain
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from strength import property_examples
from test_bounds import exact_optimum, staged

from ckpt.solver.graph.baselines import baselines
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.relaxation import Relaxation


def every_segment_checked(graph, budget: int) -> tuple[float, float]:
    """The relaxation over every stage, every segment checked while it recomputes, and the exact optimum."""
    problem = Problem(staged(graph))
    points = list(range(1, problem.n))   # every stage a point, so every segment is one stage, each checked
    bound = Relaxation(problem, budget, points, chained=frozenset(points)).solve(None)
    return bound, exact_optimum(problem, budget)


def near_the_floor(graph, squeeze: float) -> int:
    """A budget near the floor: there the optimum remakes runs of the forward chain."""
    base = baselines(graph)
    return int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))


@settings(max_examples=property_examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=recompute_chains(), squeeze=st.floats(0.0, 0.1))
@example(graph=chain(6), squeeze=0.0)   # remakes a0..a3 in one stage; the draws shrank a planted bug's failure to it
def test_the_relaxation_checking_every_one_stage_segment_never_exceeds_the_exact_optimum(graph, squeeze):
    bound, optimum = every_segment_checked(graph, near_the_floor(graph, squeeze))
    assert bound <= optimum + 1e-6 or (math.isinf(bound) and math.isinf(optimum))


@settings(max_examples=property_examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=recompute_chains(skips=True), squeeze=st.floats(0.0, 0.4))
@example(graph=skip_chain(), squeeze=0.0)
def test_with_skips_the_relaxation_checking_every_one_stage_segment_never_exceeds_the_exact_optimum(graph, squeeze):
    bound, optimum = every_segment_checked(graph, near_the_floor(graph, squeeze))
    assert bound <= optimum + 1e-6 or (math.isinf(bound) and math.isinf(optimum))


def test_a_buffer_kept_for_a_later_recompute_counts_while_the_run_before_it_is_remade():
    """skip_chain at its floor: remaking a3 holds a0 from before the stage through f1..f3, and no schedule fits.
    Counted only when its producer f0 runs again too, a0 went missing from f1's check, and the relaxation
    found an answer (a bound of 5)."""
    graph = skip_chain()
    bound, optimum = every_segment_checked(graph, baselines(graph).lower_bound)
    assert math.isinf(optimum) and math.isinf(bound)
