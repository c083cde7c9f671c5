"""The greedy heuristic replays only the tries whose bound could beat the best one: that bound must hold."""
import numpy as np
from graphs import random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace, stages_of
from ckpt.solver.realise import greedy as g


def staged(graph):
    return reorder(graph, list(baselines(graph).min_memory_order))


def every_try(graph, decisions, budget):
    """(candidate number, added recomputes, cost, bound, replayed gain) of every try of one greedy step."""
    seq = decisions.sequence(graph)
    stage, result = stages_of(seq), memory_trace(graph, seq)
    now = g.excess(result, budget)
    over = np.maximum(np.asarray(result.levels, dtype=np.int64) - budget, 0)
    reads, spans = g._read_positions(graph, seq), g._spans(result)
    found = []
    for n, (producer, t) in enumerate(g._candidates(graph, seq, stage, result, budget, reads)):
        added = g._with_chain(graph, decisions, spans, stage, producer, t)
        if added:
            trial = Decisions(decisions.recomputes | added)
            gain = now - g.excess(memory_trace(graph, trial.sequence(graph)), budget)
            bound = g._gain_bound(graph, over, reads, spans, stage, added, t)
            found.append((n, trial, Decisions(added).cost(graph), bound, gain))
    return found


@settings(max_examples=property_examples(80), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0), steps=st.integers(0, 3))
def test_no_try_removes_more_excess_than_its_bound(graph, squeeze, steps):
    """Checked along the greedy's own path, so tries over schedules that already recompute are covered."""
    graph = staged(graph)
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    decisions = Decisions(frozenset())
    for _ in range(steps + 1):
        tries = every_try(graph, decisions, budget)
        for _, _, _, bound, gain in tries:
            assert gain <= bound
        step = g._best_step(graph, decisions, memory_trace(graph, decisions.sequence(graph)), budget)
        scored = [(gain / cost, -n, trial) for n, trial, cost, _, gain in tries
                  if gain > 0 and cost and not g.outside_space(graph, trial)]
        if not scored:
            assert step is None
            return
        assert step is not None and step[0] == max(scored, key=lambda s: s[:2])[2]   # what replaying all picks
        decisions = step[0]
