"""A growing round of the point relaxation starts from the newest answer, repaired over the new round's own model
in the segments beside the points it adds (solver/model/relaxation.py `_repaired_start`, bounds.py `_started`):
the start is an answer of that model, and the round proves what it proves unstarted."""
import math

from test_bounds import staged

from ckpt import examples
from ckpt.solver.bounds import bounds
from ckpt.solver.bounds.bounds import binding_points
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.relaxation import Relaxation


def test_a_round_started_from_the_last_answer_holds_an_answer_of_its_own_model_and_proves_the_same(tmp_path):
    examples.write_example("cct", tmp_path, golden=False, blocks=1, conv_channels=32)
    graph = load_graph(tmp_path / "network.onnx")
    problem = Problem(staged(graph))
    budget = int(0.7 * baselines(graph).graph_order_peak)
    strongest = binding_points(problem, budget)[:3]
    old, new = sorted(strongest[:2]), sorted(strongest)
    last = Relaxation(problem, budget, old)
    assert math.isfinite(last.solve(None)) and last.answered
    answer = tuple(last.answer())

    started = bounds._started(Relaxation(problem, budget, new), bounds._Answer(old, list(answer), frozenset()), 10.0)
    added = new.index(strongest[2])
    assert started.changed == range(max(0, added - 1), added + 1)   # the segments beside the point added
    started.build()
    start = started._repaired_start(None)
    assert start is not None
    for name, row in started.lp.constraints.items():              # an answer of the round's own model
        assert row.valid(1e-6), name
    kept = {(s, i) for (s, i) in started.D if s not in started.changed}
    for s, i in kept:                                              # the last answer, where the segments are its own
        on = any(span.op == i and span.first == started.points[s] for span in answer)
        assert start[started.D[s, i].name] == (1 if on else 0)
    assert all(v.lowBound in (0, None) and v.upBound in (1, None) for v in started.D.values())   # bounds restored

    again = bounds._started(Relaxation(problem, budget, new), bounds._Answer(old, list(answer), frozenset()), 10.0)
    assert again.solve(None) == Relaxation(problem, budget, new).solve(None)


def test_a_round_over_the_same_points_or_without_an_answer_is_not_started():
    relaxation = Relaxation(None, 0, [3, 5])
    assert bounds._started(relaxation, bounds._Answer([3, 5], [], frozenset()), 1.0) is relaxation
    assert bounds._started(relaxation, bounds._Answer([3, 5], ["an answer"], frozenset()), 1.0) is relaxation
    assert bounds._started(relaxation, bounds._Answer([3], [], frozenset()), 1.0) is relaxation
