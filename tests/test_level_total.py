"""A level total as the live-byte problem on the arena model (solver.memory.resident, pipeline.level_total).

What makes the reduction exact: for every schedule, the most bytes the home arena's blocks hold at once (what
ckpt's layout reaches, and the generated code reserves) is the live peak of the arena model on that schedule,
where every op writes one activation; at least that peak otherwise. And the model is solved in the real
graph's stage order, so what it proves holds for every schedule a live-byte solve can return.
"""
from __future__ import annotations

import random
from dataclasses import replace
from types import SimpleNamespace

import pytest
from graphs import chain, make_graph, random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt import deeploy_bridge
from ckpt.errors import InfeasibleBudget
from ckpt.pipeline import level_total
from ckpt.pipeline.level_total import LiveProbe, _bounded_by, probed_live_budgets
from ckpt.replay.graph_view import GraphView, NodeView
from ckpt.replay.onnx_graph import rewired_aliases
from ckpt.replay.plan import plan_replay
from ckpt.schedule_file import clone_of
from ckpt.solver.budget import parse_total
from ckpt.solver.graph.baselines import reorder
from ckpt.solver.graph.graph import Op, TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import drop_dead, memory_trace
from ckpt.solver.graph.views import collapsed, expanded
from ckpt.solver.memory.heap import GRANULE
from ckpt.solver.memory.layout import aligned, live_max
from ckpt.solver.memory.resident import (
    INPUTS_OP,
    OUTPUTS_OP,
    arena_resident,
    real_sequence,
    resident_order,
    resident_sequence,
)
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.realise.greedy import outside_space
from ckpt.solver.realise.result import planned_sequence, result_on
from ckpt.solver.solve import solve, stage_order

ALIGNMENT = 4
OPTIONS = SolveOptions(backend=BackendOptions(time_limit=20, gap=0.0))


@st.composite
def deployed_graphs(draw, max_outputs: int = 2) -> tuple[TrainGraph, frozenset[str], frozenset[str]]:
    """A random training graph with its graph inputs and outputs: the weight updated in place (an alias of the
    weight, as ckpt deploys it) or out of place (a buffer of its own), and sometimes an activation that is also
    a graph output (persistent, as the loader makes graph outputs)."""
    graph = draw(random_graphs(max_ops=8, max_outputs=max_outputs))
    outputs = {"w_new"}
    if not draw(st.booleans()):
        graph = replace(graph, aliases={t: s for t, s in graph.aliases.items() if t != "w_new"})
    made = [t for op in graph.ops for t in op.outputs if graph.is_activation(t) and t not in graph.aliases]
    if made and draw(st.booleans()):
        extra = draw(st.sampled_from(made))
        outputs.add(extra)
        graph = replace(graph, persistent=graph.persistent | {extra})
    return joined(graph), frozenset({"x"}), frozenset(outputs)


def joined(graph: TrainGraph) -> TrainGraph:
    """The graph with every activation nothing reads read by one more op before the update (a lowered graph
    has no unread node: Deeploy's front end removes them), so the step needs all of it."""
    read = {t for op in graph.ops for t in op.inputs}
    unread = tuple(t for op in graph.ops for t in op.outputs if graph.is_activation(t) and t not in read)
    if not unread:
        return graph
    *body, update = graph.ops
    ops = (*body, Op("join", "Op", unread, ("j",)), replace(update, inputs=(*update.inputs, "j")))
    return replace(graph, ops=ops, tensor_bytes={**graph.tensor_bytes, "j": 4}, op_cost={**graph.op_cost, "join": 1})


def random_schedule(graph: TrainGraph, rnd: random.Random, rate: float) -> list[tuple[str, int]]:
    """A schedule of the graph's own order with recomputes drawn at random, as it runs (unread runs dropped)."""
    picks = {(t, i) for t in range(len(graph.ops)) for i in range(t) if graph.recomputable(i) and rnd.random() < rate}
    return drop_dead(graph, Decisions(frozenset(picks)).sequence(graph))


def arena_blocks(graph: TrainGraph, seq, inputs: frozenset[str], outputs: frozenset[str]):
    """The home level's blocks for `seq` as the deployment makes them: replayed as `ckpt replay` does (clones,
    rewired aliases), then Deeploy's block rules (deeploy_bridge.home_blocks), sizes aligned as laid out."""
    view = GraphView(tuple(NodeView(op.name, op.inputs, op.outputs) for op in graph.ops), outputs)
    plan = plan_replay(view, list(seq))
    types = {op.name: op.op_type for op in graph.ops}
    ops = tuple(Op(e.name, types[e.source], e.inputs, e.outputs) for e in plan.executions)
    sizes = {**graph.tensor_bytes, **{t: graph.tensor_bytes[clone_of(t)[0]] for e in plan.executions
                                      for t in e.outputs if clone_of(t)}}
    rewired = TrainGraph(ops, sizes, graph.persistent, rewired_aliases(view, plan, graph.aliases))
    order = [(e.name, e.inputs, e.outputs) for e in plan.executions]
    blocks = deeploy_bridge.home_blocks(order, rewired, inputs, outputs)
    return [replace(b, size=aligned(b.size, ALIGNMENT)) for b in blocks]


def model_peak(graph: TrainGraph, seq, inputs, outputs) -> int:
    return memory_trace(arena_resident(graph, inputs, outputs, ALIGNMENT), resident_sequence(seq)).peak_bytes


@settings(max_examples=property_examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deployed=deployed_graphs(max_outputs=1), seed=st.integers(0, 2**16), rate=st.floats(0.0, 0.4))
def test_the_arenas_live_maximum_is_the_arena_models_live_peak(deployed, seed, rate):
    """Ops of one output each (Deeploy's lowered CCTs): equal, schedule by schedule, recomputes and all."""
    graph, inputs, outputs = deployed
    seq = random_schedule(graph, random.Random(seed), rate)
    assert live_max(arena_blocks(graph, seq, inputs, outputs)) == model_peak(graph, seq, inputs, outputs)


@settings(max_examples=property_examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deployed=deployed_graphs(max_outputs=2), seed=st.integers(0, 2**16), rate=st.floats(0.0, 0.4))
def test_the_arena_models_live_peak_never_exceeds_the_arenas_live_maximum(deployed, seed, rate):
    """Ops of several outputs: Deeploy keeps an unread output of a run whose other output is read to the last
    layer, the model frees it at once; so the model's peak is a floor of the arena (its bounds stay bounds)."""
    graph, inputs, outputs = deployed
    seq = random_schedule(graph, random.Random(seed), rate)
    assert model_peak(graph, seq, inputs, outputs) <= live_max(arena_blocks(graph, seq, inputs, outputs))


def test_an_update_in_place_is_no_output_of_the_arena_and_stays_where_the_graph_has_it():
    """The double count of issue 41: counted as an arena output, the update of a weight in place (an alias of the
    weight) made its SGD a view, which the min-memory order ran last, right before the outputs' sink, holding
    the weight's gradient to the end of the step."""
    graph = chain(4)                                   # upd: SGD(w, g0) -> w_new, an alias of w
    model = arena_resident(graph, frozenset({"x"}), frozenset({"w_new"}))
    assert "w_new" in model.persistent and model.ops[-1].inputs == ()
    assert resident_order(stage_order(graph, OPTIONS)) == [INPUTS_OP, *stage_order(graph, OPTIONS), OUTPUTS_OP]
    out_of_place = arena_resident(replace(graph, aliases={}), frozenset({"x"}), frozenset({"w_new"}))
    assert out_of_place.ops[-1].inputs == ("w_new",) and out_of_place.is_activation("w_new")


def test_a_graph_outputs_producer_runs_once_in_the_model_as_in_the_graph():
    """An output written by a pure op is persistent in the graph (never recomputed) and an activation in the
    model: recomputing it there would let the version the step ends with die early."""
    graph = make_graph([("f", "Relu", ["x"], ["a"]), ("g", "Relu", ["a"], ["y"]), ("h", "Relu", ["a"], ["z"])],
                       {"x": 4, "a": 8, "y": 4, "z": 4}, {"x", "z"})
    model = arena_resident(graph, frozenset({"x"}), frozenset({"z"}))
    assert not graph.recomputable(graph.index["h"]) and not model.recomputable(model.index["h"])
    assert model.recomputable(model.index["f"]) and model.is_activation("z")


def test_sizes_take_the_arenas_alignment():
    graph = make_graph([("f", "Relu", ["x"], ["a"]), ("g", "Relu", ["a", "y"], ["b"])],
                       {"x": 4, "y": 1, "a": 6, "b": 4}, {"x", "y", "b"})
    model = arena_resident(graph, frozenset({"x", "y"}), frozenset({"b"}), ALIGNMENT)
    assert model.tensor_bytes["y"] == 4 and model.tensor_bytes["a"] == 8
    assert memory_trace(model, resident_sequence([("f", 0), ("g", 0)])).peak_bytes == 4 + 8 + 4   # y, a, b at g


def planned_schedules(graph: TrainGraph, rnd: random.Random, count: int):
    """Random schedules of the graph's stage order as a live-byte solve stages it, in that space: (planned
    cost, the sequence that runs them with the views re-made)."""
    views = collapsed(graph)
    staged = reorder(views.without_views, stage_order(graph, OPTIONS))
    found = []
    for _ in range(count):
        rate = rnd.choice((0.05, 0.15, 0.3))
        picks = {(t, i) for t in range(len(staged.ops)) for i in range(t)
                 if staged.recomputable(i) and t <= staged.deadline[i] and rnd.random() < rate}
        decisions = Decisions(frozenset(picks))
        if not outside_space(staged, decisions):
            found.append((decisions.cost(staged), expanded(views, decisions.sequence(staged))))
    return found


@settings(max_examples=property_examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(deployed=deployed_graphs(), squeeze=st.floats(0.0, 1.0), below=st.booleans(), seed=st.integers(0, 2**16))
def test_what_the_model_proves_holds_for_every_schedule_that_fits_the_arena(deployed, squeeze, below, seed):
    """Solved in the graph's stage order, the model's lower bound is at most the cost of every schedule of that
    order whose arena fits (random ones, and the live-byte answer at the same budget, which it never loses to);
    an infeasible budget has no such schedule."""
    graph, inputs, outputs = deployed
    model = arena_resident(graph, inputs, outputs, ALIGNMENT)
    order = resident_order(stage_order(graph, OPTIONS))
    schedules = planned_schedules(graph, random.Random(seed), 40)
    peaks = sorted({memory_trace(model, resident_sequence(seq)).peak_bytes for _, seq in schedules})
    budget = peaks[int(squeeze * (len(peaks) - 1))] - 4 * below   # a schedule's own peak, or a word less
    try:
        live = solve(graph, replace(OPTIONS, budget=budget, explain=False))
        schedules.append((live.planned_cost, expanded(collapsed(graph), planned_sequence(live))))
    except InfeasibleBudget:
        live = None
    fitting = [(cost, seq) for cost, seq in schedules
               if memory_trace(model, resident_sequence(seq)).peak_bytes <= budget]
    seeds = [resident_sequence(planned_sequence(live))] if live is not None else []
    try:
        answer = solve(model, replace(OPTIONS, budget=budget), incumbents=seeds, order=order)
    except InfeasibleBudget as err:
        assert not fitting and err.proven
        return
    assert list(answer.stage_order)[0] == INPUTS_OP and answer.stage_order[-1] == OUTPUTS_OP
    assert memory_trace(model, answer.seq).peak_bytes <= budget
    on_graph = result_on(graph, answer, real_sequence(answer.seq))    # the same decisions, over the graph's order
    assert planned_sequence(on_graph) == real_sequence(planned_sequence(answer))
    bound = answer.cost_lower_bound
    assert bound is not None and all(cost >= bound for cost, _ in fitting)
    if answer.status == "optimal":
        assert all(cost >= answer.planned_cost for cost, _ in fitting)


def test_a_schedule_solved_at_a_tightened_budget_keeps_the_bound_of_the_total_asked_for():
    """Where the layout misses its live maximum the arena's budget is tightened; what a solve there proves is
    no bound at the total asked for, so the answer states the bound of the solve at the total's own budget."""
    graph = chain(6)
    proof = solve(graph, replace(OPTIONS, budget=20))
    tighter = solve(graph, replace(OPTIONS, budget=16))
    assert tighter.cost_lower_bound > proof.cost_lower_bound                 # the tighter proof bounds more
    stated = _bounded_by(tighter, proof, OPTIONS)
    assert stated.cost_lower_bound == proof.cost_lower_bound and stated.planned_cost == tighter.planned_cost
    assert stated.status == "feasible" and stated.gap > 0
    assert _bounded_by(proof, proof, OPTIONS).status == "optimal"


@st.composite
def live_budget_landscapes(draw, monotone: bool):
    """A graph's `--budget` schedules as the live budget sees them: schedule i is what every budget from its live
    peak p_i up to the next one's gives (none below p_0), with the level total t_i its layout needs; peaks lie
    more than the search's granule apart (the last one as far below the ceiling), as aligned sizes are. With
    `monotone`, totals grow with the peak."""
    count = draw(st.integers(1, 10))
    gaps = draw(st.lists(st.integers(GRANULE + 1, 50_000), min_size=count, max_size=count))
    peaks = [sum(gaps[:k + 1]) for k in range(count)]
    totals = draw(st.lists(st.integers(1, 200_000), min_size=count, max_size=count))
    if monotone:
        totals = sorted(totals)
    ceiling = peaks[-1] + draw(st.integers(GRANULE, 50_000))
    return peaks, totals, ceiling


def _probe_of(peaks: list[int], totals: list[int]):
    def probe(budget: int) -> LiveProbe | None:
        below = [k for k, peak in enumerate(peaks) if peak <= budget]
        return LiveProbe(budget, peaks[below[-1]], totals[below[-1]]) if below else None
    return probe


@settings(max_examples=property_examples(300), deadline=None)
@given(live_budget_landscapes(monotone=True), st.integers(1, 10**6), st.integers(1, 200_000))
def test_the_live_budget_search_finds_the_largest_budget_whose_schedule_fits(landscape, start, total):
    """Where totals grow with the live budget, the search reaches the schedule of the largest budget that fits
    (the cheapest), from any start: a budget with no schedule, or one over the total, never ends it."""
    peaks, totals, ceiling = landscape
    probed = probed_live_budgets(start % ceiling + 1, ceiling, total, _probe_of(peaks, totals), tries=256)
    fitting = [k for k, t in enumerate(totals) if t <= total]
    found = {peaks.index(p.peak) for p in probed if p.total <= total}
    assert (max(found) if found else None) == (max(fitting) if fitting else None)


@settings(max_examples=property_examples(300), deadline=None)
@given(live_budget_landscapes(monotone=False), st.integers(1, 10**6), st.integers(1, 200_000))
def test_the_live_budget_search_ends_only_where_its_interval_closes_or_its_tries_run_out(landscape, start, total):
    """Whatever the totals, the search probes each budget once and ends with the budgets it has not settled
    within a granule, or after its tries; and it never probes above the ceiling."""
    peaks, totals, ceiling = landscape
    calls: list[int] = []
    probe = _probe_of(peaks, totals)

    def counted(budget: int) -> LiveProbe | None:
        calls.append(budget)
        return probe(budget)
    probed_live_budgets(start % ceiling + 1, ceiling, total, counted, tries=256)
    assert len(calls) == len(set(calls)) and all(0 < b <= ceiling for b in calls)
    assert len(calls) < 256     # closed before the tries ran out: each step settles an eighth or a schedule


GRAPH_ORDER_TOTAL = 10**6


@settings(max_examples=property_examples(200), deadline=None)
@given(st.data())
def test_a_refusal_states_the_smallest_total_a_schedule_found_needs_and_advises_one_a_solve_fits(data):
    """After a refusal at a total, `_checked` solves again at the total it would state. Each solve at a total
    either fits (its answer's total at most that) or misses, naming the total its closest schedule needs, which
    is more, and which a solve at that total need not find again (the search is no monotone function of the
    total). The refusal then names the least total of any schedule found on the way, and advises a total a solve
    was seen to fit (else that least total, said as not checked)."""
    first = data.draw(st.integers(101, 10_000), label="closest total of the first refusal")
    schedules = [first]      # the totals schedules found need
    fitted = []              # the totals a solve was seen to fit

    def solve_at(loaded, total, code, options, starts, progress):
        if data.draw(st.booleans(), label=f"a solve at {total.nbytes} fits"):
            schedules.append(data.draw(st.integers(1, total.nbytes), label="its answer's total"))
            fitted.append(total.nbytes)
            return SimpleNamespace(total=schedules[-1])
        schedules.append(total.nbytes + data.draw(st.integers(1, 5_000), label="the closest total it found"))
        raise level_total.MissedTotal("missed", floor=schedules[-1], proven=False)

    def graph_order_total(loaded, code):
        schedules.append(GRAPH_ORDER_TOTAL)
        return GRAPH_ORDER_TOTAL

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(level_total, "_solve_total", solve_at)
        patch.setattr(level_total, "_graph_order_total", graph_order_total)
        err = level_total.MissedTotal("missed", floor=first, proven=False)
        stated = level_total._checked(None, parse_total("L3=100"), 0, OPTIONS, [], lambda e: None, err)
    smallest = min(schedules)
    if fitted:
        assert stated.floor == fitted[0] and (stated is err or f"need is {smallest} B" in stated.problem)
    else:
        assert stated.floor == smallest and f"need is {smallest} B (no solve at it was checked" in stated.problem
