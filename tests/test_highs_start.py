"""HiGHS 1.16, given a start and presolving, can end "optimal" at a better objective while the values it returns
are still the start's (found on a 7-op graph by the neighbourhood search's property test). Those values are what
ckpt reads as the schedule: the run must not call them optimal, only proven to the dual bound."""
from dataclasses import replace

import pytest
from graphs import make_graph

from ckpt.solver.graph.schedule import Decisions, needed_retentions
from ckpt.solver.model import milp
from ckpt.solver.model.backends import BackendOptions, RunStatus, run
from ckpt.solver.model.problem import Problem


def _graph():
    spec = [("n0", "Op", ["x"], ["t0"]), ("n1", "Op", ["t0"], ["t1"]), ("n2", "Op", ["x"], ["t2"]),
            ("n3", "Op", ["x"], ["t3"]), ("n4", "Reshape", ["t1"], ["v4"]), ("n5", "Op", ["t0"], ["t5", "u5"]),
            ("upd", "SGD", ["w", "u5"], ["w_new"])]
    sizes = {"x": 4, "w": 4, "t0": 16, "t1": 4, "t2": 4, "t3": 24, "v4": 4, "t5": 4, "u5": 4, "w_new": 4}
    graph = make_graph(spec, sizes, {"x", "w", "w_new"}, {"v4": "t1", "w_new": "w"})
    return replace(graph, scratch={"n3": 12}, op_cost=dict.fromkeys(graph.op_cost, 1))


@pytest.mark.parametrize("warm", [False, True])
def test_a_run_given_a_start_is_optimal_only_if_its_values_are(warm):
    graph = _graph()
    start = Decisions(frozenset({(4, 0), (5, 0), (4, 1)}))
    only = frozenset({(1, 0), (2, 0), (2, 1), (3, 0), (3, 1), (4, 0), (4, 1), (5, 0), (6, 0), (6, 5)})
    model = milp.build(Problem(graph, only=only), 36)
    values = milp.start_values(model, set(start.recomputes), needed_retentions(graph, start.sequence(graph)))
    outcome = run(model.lp, BackendOptions(time_limit=None, gap=0.0), values if warm else None)
    held = Decisions(frozenset(key for key, var in model.R.items() if var.value() > 0.5)).cost(graph)
    assert outcome.dual_bound == 2
    if outcome.status is RunStatus.OPTIMAL:
        assert held == 2
    else:        # the start's values came back: what is held is proven to the bound only
        assert (held, outcome.status) == (3, RunStatus.FEASIBLE) and outcome.gap == pytest.approx(1 / 3)
