"""The large-neighbourhood search (solver/realise/neighbourhood.py): whatever windows it re-solves, its schedule is
valid under the exact model's rules (every op's inputs present when it runs, memory within the budget, inside the
model's space) and never dearer than its start; over one window of every stage it is the exact optimum."""
import pulp
from graphs import chain, random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace, unready_read
from ckpt.solver.model import milp
from ckpt.solver.model.backends import BackendOptions, RunStatus, run
from ckpt.solver.model.problem import Problem
from ckpt.solver.realise import neighbourhood
from ckpt.solver.realise.evicting import evicting
from ckpt.solver.realise.greedy import greedy, outside_space
from ckpt.solver.realise.neighbourhood import improved

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _budget(graph, fraction: float) -> int:
    base = baselines(graph)
    return int(base.lower_bound + fraction * (base.graph_order_peak - base.lower_bound))


def _optimum(graph, budget: int) -> float | None:
    model = milp.build(Problem(graph), budget)
    outcome = run(model.lp, BackendOptions(time_limit=None, gap=0.0))
    return pulp.value(model.lp.objective) or 0.0 if outcome.status is RunStatus.OPTIMAL else None


@SETTINGS
@given(graph=random_graphs(max_ops=9), fraction=st.floats(0.0, 0.8), width=st.integers(1, 5))
def test_the_schedule_is_valid_and_never_dearer_than_its_start(graph, fraction, width):
    budget = _budget(graph, fraction)
    start = greedy(graph, budget) or evicting(graph, budget)
    if start is None:
        return
    found = improved(graph, budget, start, deadline=None, width=width)
    seq = found.sequence(graph)
    assert unready_read(graph, seq) is None
    assert memory_trace(graph, seq).peak_bytes <= budget
    assert not outside_space(graph, found)
    assert found.cost(graph) <= start.cost(graph)


@SETTINGS
@given(graph=random_graphs(max_ops=8), fraction=st.floats(0.0, 0.8))
def test_one_window_over_every_stage_finds_the_exact_optimum(graph, fraction):
    budget = _budget(graph, fraction)
    start = greedy(graph, budget) or evicting(graph, budget)
    if start is None:
        return
    best = _optimum(graph, budget)
    found = improved(graph, budget, start, deadline=None, width=len(graph.ops))
    assert best is not None and found.cost(graph) == round(best)


def test_windows_start_at_the_dearest_stage():
    """The stage whose recomputes cost most is re-solved first, then the rest of the order."""
    graph = chain(6)
    cheap, dear = graph.ops[0].name, graph.ops[3].name
    graph.op_cost[cheap], graph.op_cost[dear] = 1, 100
    windows = list(neighbourhood._windows(graph, Decisions(frozenset({(5, 0), (8, 3)})), 4))
    assert windows[0] == neighbourhood.Window(5, 9)
    assert {w.first for w in windows[4:]} == set(range(0, len(graph.ops), 2))
