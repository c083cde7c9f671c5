"""Turning the point relaxation's answers into schedules: the walk (solver/realise/realise.py)."""
import math

import onnx
import pulp
import pytest
from graphs import random_graphs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt import examples
from ckpt.examples import write_example
from ckpt.solver.bounds.bounds import over_budget_points, point_bound
from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.graph.simulate import memory_trace, unready_read
from ckpt.solver.graph.views import collapsed
from ckpt.solver.model import milp
from ckpt.solver.model.backends import BackendOptions, run
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.relaxation import Relaxation
from ckpt.solver.realise.greedy import outside_space
from ckpt.solver.realise.realise import (
    WALK_RISE,
    by_first_reader,
    checked_where_over,
    over_at_own_op,
    overflow,
    placed_exactly,
    walk,
    walked,
)


def staged(graph):
    graph = collapsed(graph).without_views
    return reorder(graph, list(baselines(graph).min_memory_order))


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    path = tmp_path_factory.mktemp("resnet") / "network.onnx"
    onnx.save(examples.resnet(), path)
    return load_graph(path)


def strongest_answer(problem, budget, points=None):
    """The relaxation over `points` (default: the highest binding point): its bound and answer."""
    if points is None:
        levels = memory_trace(problem.graph, [(op.name, False) for op in problem.graph.ops]).levels
        points = [max(over_budget_points(problem, budget), key=lambda t: (levels[t], -t))]
    model = Relaxation(problem, budget, points)
    bound = model.solve(None)
    return points, bound, (model.answer() if model.answered else None)


@settings(max_examples=property_examples(15), deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(fraction=st.floats(0.28, 0.98))
def test_a_walked_schedule_fits_and_costs_at_least_the_bound(resnet, fraction):
    problem = Problem(staged(resnet))
    budget = int(fraction * baselines(resnet).graph_order_peak)
    if not over_budget_points(problem, budget):
        return
    points, bound, answer = strongest_answer(problem, budget)
    schedule = None if answer is None else walked(problem, budget, points, answer, 10)
    if schedule is not None:
        assert memory_trace(problem.graph, schedule.sequence(problem.graph)).peak_bytes <= budget
        assert not outside_space(problem.graph, schedule)
        assert schedule.cost(problem.graph) >= bound


def test_the_walk_turns_an_overflowing_answer_into_a_schedule_at_its_cost(resnet):
    """Residual CNN at 0.92: the answer over the highest point, each recompute before its first reader,
    goes over the budget at another stage; one step of the walk fits it at the bound's cost."""
    problem = Problem(staged(resnet))
    budget = int(0.92 * baselines(resnet).graph_order_peak)
    points, bound, answer = strongest_answer(problem, budget)
    assert overflow(problem.graph, by_first_reader(problem.graph, answer), budget)[0]
    schedule = walked(problem, budget, points, answer, 10)
    assert schedule is not None and schedule.cost(problem.graph) == bound > 0
    assert memory_trace(problem.graph, schedule.sequence(problem.graph)).peak_bytes <= budget


def test_segments_outside_the_free_ones_keep_the_answer(resnet):
    """With no segment free, the relaxation can only give back the answer it keeps (a local repair's
    premise: what is outside the window does not move)."""
    problem = Problem(staged(resnet))
    budget = int(0.5 * baselines(resnet).graph_order_peak)
    points = over_budget_points(problem, budget)[-3:]
    _, _, answer = strongest_answer(problem, budget, points)
    model = Relaxation(problem, budget, points, kept=frozenset(answer), free=range(0))
    model.solve(None)
    assert model.answered and set(model.answer()) == set(answer)


@pytest.mark.slow
def test_the_walk_turns_an_answer_that_goes_over_into_a_schedule_that_fits_near_the_bound(tmp_path):
    """4-block CCT at 0.38: the relaxation over six points proves the optimum, but its answer, placed, goes
    over at stages those points do not check. Walking it (the segments next to each such stage solved again,
    the rest kept) gives a schedule that fits, no dearer than a step may rise above the bound."""
    write_example("cct", tmp_path, golden=False, blocks=4, conv_channels=32)
    graph = load_graph(tmp_path / "network.onnx")
    problem = Problem(staged(graph))
    budget = int(0.38 * baselines(graph).graph_order_peak)
    points, bound, answer = strongest_answer(problem, budget, [103, 104, 105, 109, 127, 140])
    over = overflow(problem.graph, by_first_reader(problem.graph, answer), budget)[0]
    assert over and set(over).isdisjoint(points)
    schedule = walked(problem, budget, points, answer, 20)
    assert schedule is not None and not overflow(problem.graph, schedule, budget)[0]
    assert bound <= schedule.cost(problem.graph) <= bound * (1 + WALK_RISE)


def test_a_recompute_remade_next_to_its_reader_moves_earlier_where_memory_is_lower():
    """Gelu's output g is dropped after its first reader and remade for the second, which also reads a big t.
    Placed by rule, right before that reader, the recompute keeps its input a alive beside t and goes over;
    moved before t is made, only g is held and the same recompute fits, at the same cost."""
    from graphs import make_graph

    from ckpt.solver.model.relaxation import Span
    from ckpt.solver.realise.realise import moved_earlier
    graph = make_graph([("lin", "Gemm", ["x"], ["a"]), ("gelu", "Gelu", ["a"], ["g"]), ("use1", "Relu", ["g"], ["u"]),
                        ("big", "Gemm", ["x"], ["t"]), ("use2", "Mul", ["g", "t"], ["v"])],
                       {"x": 8, "a": 8, "g": 8, "u": 4, "t": 16, "v": 4}, persistent={"x", "u", "v"})
    answer = [Span(op=1, first=2, last=4)]
    by_rule = by_first_reader(graph, answer)
    assert by_rule.recomputes == {(4, 1)} and memory_trace(graph, by_rule.sequence(graph)).peak_bytes == 32
    moved = moved_earlier(graph, answer, 24, None)
    assert moved.recomputes == {(3, 1)} and memory_trace(graph, moved.sequence(graph)).peak_bytes == 24
    assert moved.cost(graph) == by_rule.cost(graph) and not outside_space(graph, moved)
    assert moved_earlier(graph, answer, 23, None) is None       # nowhere does it fit: no schedule, say so


def test_a_recompute_whose_reader_comes_after_its_deadline_is_placed_by_its_deadline():
    """With weights updated in place, a recompute of an op that reads a weight must run before the weight's update
    (its deadline). Its reader comes later: the rule places it at the deadline, held to the reader, and the
    relaxation never puts it in a segment that starts at or after the deadline."""
    from dataclasses import replace as with_fields

    from graphs import make_graph

    from ckpt.solver.model.relaxation import Span
    graph = make_graph([("f", "Gemm", ["x", "w"], ["a"]), ("g", "Relu", ["a"], ["b"]), ("h", "Relu", ["b"], ["c"]),
                        ("upd", "SGD", ["w", "c"], ["w_new"]), ("late", "Mul", ["a", "c"], ["d"])],
                       {"x": 4, "w": 4, "a": 4, "b": 4, "c": 4, "w_new": 4, "d": 4},
                       persistent={"x", "w", "w_new", "d"}, aliases={"w_new": "w"})
    graph = with_fields(graph, must_precede={"f": ("upd",)})
    assert graph.deadline[0] == 3
    placed = by_first_reader(graph, [Span(op=0, first=1, last=4)])
    assert placed.recomputes == {(3, 0)} and not outside_space(graph, placed)
    model = Relaxation(Problem(graph), 12, [1, 3])
    assert model._recompute(0, 0) != 0 and model._recompute(1, 0) == 0      # the segment from stage 3 is too late


@settings(max_examples=property_examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0))
def test_an_exact_placement_capped_below_a_known_cost_is_cheaper_or_none(graph, squeeze):
    """`below` only cuts off placements no cheaper than a schedule already known: the cheapest placement
    stays when the cap is above it, and none is given when the cap is at it."""
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    problem = Problem(reorder(graph, list(base.min_memory_order)))
    points = over_budget_points(problem, budget)
    assume(points)
    model = Relaxation(problem, budget, points)
    assume(math.isfinite(model.solve(None)) and model.answered)
    answer = model.answer()
    placed = placed_exactly(problem.graph, answer, budget, None)
    assume(placed is not None)
    cost = placed.cost(problem.graph)
    assert placed_exactly(problem.graph, answer, budget, None, below=cost) is None
    assert placed_exactly(problem.graph, answer, budget, None, below=cost + 1).cost(problem.graph) == cost


def _answer_over_the_highest_point(graph, squeeze: float):
    """A budget `squeeze` of the way from the floor to the min-memory peak, the graph staged in that order, and the
    relaxation's answer over its highest binding point: (problem, budget, points, bound, answer); the draw is
    skipped where no point binds or no answer comes."""
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    problem = Problem(reorder(graph, list(base.min_memory_order)))
    points = over_budget_points(problem, budget)
    assume(points)
    points, bound, answer = strongest_answer(problem, budget, points[:1])
    assume(answer is not None)
    return problem, budget, points, bound, answer


@settings(max_examples=property_examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0))
def test_a_stage_is_over_at_its_own_op_or_only_while_recomputes_run(graph, squeeze):
    """The stages an answer's realised schedule goes over split in two: those where the stage's own op runs above
    the budget (a point there cuts the answer off), and those where only recomputes do (only a check while
    they run sees them); and where its own op runs, the replay is above the budget."""
    problem, budget, _, _, answer = _answer_over_the_highest_point(graph, squeeze)
    sketch = by_first_reader(problem.graph, answer)
    over, during = overflow(problem.graph, sketch, budget)
    at_ops = over_at_own_op(problem.graph, sketch, budget)
    assert at_ops <= set(over)
    assert set(over) - at_ops <= set(during)
    seq = sketch.sequence(problem.graph)
    trace = memory_trace(problem.graph, seq)
    own = {stage: level for (_, again), stage, level in zip(seq, trace.stage_of, trace.levels) if not again}
    assert at_ops == {t for t, level in own.items() if level > budget}


def test_a_walk_that_frees_every_segment_takes_that_answer_and_its_proof(resnet):
    """Residual CNN at 0.64: the answer over the highest point goes over at stages its own ops run. Walking it
    adds them as points until a step frees every segment: that step is the relaxation itself over its points,
    so its answer is taken although it costs more than a step may rise, and the bound it proves holds. Its
    schedule fits at that bound: optimal. Before, the walk gave up there (the answer rose too much)."""
    problem = Problem(staged(resnet))
    budget = int(0.64 * baselines(resnet).graph_order_peak)
    points, bound, answer = strongest_answer(problem, budget)
    assert walked(problem, budget, points, answer, 30) is None            # local steps only: it gives up
    found = walk(problem, budget, points, answer, 30, whole=True)
    assert found.schedule is not None
    cost = found.schedule.cost(problem.graph)
    assert cost > bound * (1 + WALK_RISE) and found.proven == cost
    assert memory_trace(problem.graph, found.schedule.sequence(problem.graph)).peak_bytes <= budget
    assert point_bound(problem, budget, list(found.points)).cost == found.proven


@settings(max_examples=property_examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(max_ops=10), squeeze=st.floats(0.0, 1.0))
def test_a_walk_returns_a_schedule_that_fits_and_a_bound_below_the_optimum(graph, squeeze):
    """Whatever the walk returns fits the budget, stays in the MILP's space and reads nothing before it is made;
    the bound it proves is never above the exact MILP's optimum, nor above its own schedule's cost."""
    problem, budget, points, _, answer = _answer_over_the_highest_point(graph, squeeze)
    found = walk(problem, budget, points, answer, 30, whole=True)
    if found.schedule is not None:
        seq = found.schedule.sequence(problem.graph)
        assert memory_trace(problem.graph, seq).peak_bytes <= budget
        assert not outside_space(problem.graph, found.schedule) and unready_read(problem.graph, seq) is None
        assert found.proven <= found.schedule.cost(problem.graph) + 1
    if found.proven > 0:
        model = milp.build(problem, budget)
        outcome = run(model.lp, BackendOptions(name="highs", time_limit=30, gap=0.0, threads=1))
        assert outcome.status in ("optimal", "infeasible")     # infeasible: every bound holds
        if outcome.status == "optimal":
            assert found.proven <= (pulp.value(model.lp.objective) or 0.0) + 1e-6


def test_the_repair_stage_walks_the_floors_answer_to_a_proven_optimum(tmp_path):
    """1-block CCT at 0.64, with the bound of its highest point alone (as in a solve whose rounds ran out of time
    after it): that answer goes over only where stages' own ops run, so the repair stage walks it to a schedule
    that meets the bound the walk's last step proves (every segment free): optimal. The greedy's repairs of the
    same answer do not prove it."""
    from ckpt.events import LowerBound
    from ckpt.solver.bounds.bounds import Bound
    from ckpt.solver.model.records import SolveOptions
    from ckpt.solver.model.time_plan import TimePlan
    from ckpt.solver.realise.greedy import greedy
    from ckpt.solver.stages import Attempt, Found, repair_stage
    write_example("cct", tmp_path, golden=False, blocks=1, conv_channels=32)
    graph = load_graph(tmp_path / "network.onnx")
    budget = int(0.64 * baselines(graph).graph_order_peak)
    graph = staged(graph)
    points, bound, answer = strongest_answer(Problem(graph), budget)
    heard = []
    attempt = Attempt(graph, baselines(graph), SolveOptions(budget=budget), TimePlan(0.0, None), heard.append)
    start = greedy(graph, budget)
    found = repair_stage(attempt, Found(start=start, floor=Bound(bound, tuple(points), answer=tuple(answer))))
    assert found.answer is not None and found.answer.outcome.status == "optimal"
    cost = found.answer.decisions.cost(graph)
    assert bound < cost and found.floor.cost == cost
    assert memory_trace(graph, found.answer.decisions.sequence(graph)).peak_bytes <= budget
    assert any(isinstance(e, LowerBound) and e.cycles == cost for e in heard)


@pytest.mark.slow
def test_an_answer_at_its_bound_is_made_to_fit_by_checking_the_segment_it_goes_over_in(resnet):
    """Residual CNN at 0.44: the round that checks five segments while they recompute proves the optimum, and
    its answer costs that much, but goes over while the recomputes of one segment it does not check run. That
    segment checked with its neighbours solved afresh, the rest of the answer kept, gives a schedule that fits
    at that cost (the next whole round took longer than the limit left)."""
    problem = Problem(staged(resnet))
    budget = int(0.44 * baselines(resnet).graph_order_peak)
    points, chained = [12, 13, 26, 27, 28, 32, 33, 34, 38, 39, 40, 41, 46, 47], frozenset({28, 34, 39, 41, 47})
    model = Relaxation(problem, budget, points, chained=chained)
    bound = model.solve(None)
    answer = model.answer()
    stages, during = overflow(problem.graph, by_first_reader(problem.graph, answer), budget)
    assert stages and set(stages) == set(during) and set(stages) <= set(points) - chained
    assert by_first_reader(problem.graph, answer).cost(problem.graph) == bound
    placed = checked_where_over(problem, budget, points, answer, chained, None)
    assert placed is not None and not outside_space(problem.graph, placed)
    assert memory_trace(problem.graph, placed.sequence(problem.graph)).peak_bytes <= budget
    assert placed.cost(problem.graph) == bound
