"""canonical(): one schedule per set of tied choices, at the same cost and within the budget."""
from graphs import random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.realise.canonical import canonical
from ckpt.solver.realise.greedy import greedy, outside_space


@settings(max_examples=property_examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(), squeeze=st.floats(0.0, 1.0))
def test_canonical_keeps_cost_and_budget_and_is_its_own_fixpoint(graph, squeeze):
    base = baselines(graph)
    staged = reorder(graph, list(base.min_memory_order))
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    found = greedy(staged, budget)
    if found is None:
        return
    settled = canonical(staged, found, budget)
    assert settled.cost(staged) == found.cost(staged)
    assert {i for _, i in settled.recomputes} == {i for _, i in found.recomputes}
    seq = settled.sequence(staged)
    assert memory_trace(staged, seq).peak_bytes <= budget and not outside_space(staged, settled, seq)
    assert canonical(staged, settled, budget) == settled
