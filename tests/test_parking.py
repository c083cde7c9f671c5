"""Parking activations off chip beside recomputing them (solver/model/parking.py): the exact model's choice is the
cheapest of every schedule and parking of a tiny graph, parking never costs more than not parking at the same
budget, the chip's level never exceeds the budget, and without parking the solve is the one it always was."""
import itertools
import os

import pytest
from cli_support import ckpt_here
from graphs import chain, make_graph, random_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.schedule_file import Predicted, Schedule, write_schedule
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.costs import CostModel
from ckpt.solver.graph.level_price import LevelPrice, park_prices, priced_at_levels
from ckpt.solver.graph.schedule import Decisions, needed_retentions
from ckpt.solver.graph.simulate import check_in_place, check_ready, memory_trace, plain_sequence
from ckpt.solver.model import milp
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.parking import first_runs_price, park_start_values, parked_retentions
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.park_stage import chip_graph, parked_in_order, parking_cycles
from ckpt.solver.realise.greedy import outside_space
from ckpt.solver.solve import solve

EXACT = BackendOptions(name="highs", time_limit=30, gap=0.0, threads=1)
EXAMPLES = int(os.environ.get("CKPT_EXAMPLES", 0)) or property_examples(30)   # a third in the fast tier


@st.composite
def priced_graphs(draw, max_ops: int = 8):
    """A random graph, a budget up to its graph order's peak (below its single-op floor too: parking an op's inputs
    takes them off the chip), and a price (whole cycles)
    per run of each op that writes or reads an activation buffer, for parking that buffer."""
    graph = draw(random_graphs(max_ops=max_ops))
    prices: dict[str, dict[str, int]] = {}
    for op in graph.ops:
        for t in dict.fromkeys((*op.inputs, *op.outputs)):
            root = graph.root(t)
            if graph.buffer_bytes(root) > 0:
                prices.setdefault(root, {})[op.name] = draw(st.integers(0, 4))
    base = baselines(graph)
    room = max(0, base.graph_order_peak - base.lower_bound)
    budget = base.lower_bound + draw(st.sampled_from([0, room // 4, room // 2]) | st.integers(-base.lower_bound // 2,
                                                                                             room))
    return graph, prices, budget


def options(budget: int) -> SolveOptions:
    return SolveOptions(budget=budget, order="graph", views="fixed", backend=EXACT)


def cheapest_by_enumeration(graph, prices, budget) -> int | None:
    """The least recompute cycles plus parking cycles over every recompute set of the exact model's space and every
    set of parked buffers (a parked buffer's producer never recomputed; the chip holds all but the parked)."""
    problem = Problem(graph)
    pairs = [(t, i) for i in range(problem.n) for t in problem.recompute_stages(i)]
    parkable = [e for e in problem.buffers if e in prices]
    best = None
    for n in range(len(pairs) + 1):
        for chosen in itertools.combinations(pairs, n):
            decisions = Decisions(frozenset(chosen))
            seq = decisions.sequence(graph)
            try:
                check_ready(graph, seq)
                check_in_place(graph, seq)
            except CkptError:
                continue
            if outside_space(graph, decisions, seq):
                continue
            rerun = {i for _, i in chosen}
            recompute = decisions.cost(graph)
            for k in range(len(parkable) + 1):
                for parked in itertools.combinations(parkable, k):
                    if any(problem.producer(e) in rerun for e in parked):
                        continue
                    if memory_trace(chip_graph(graph, parked), seq).peak_bytes > budget:
                        continue
                    park = sum(sum(prices[e].values()) + sum(prices[e].get(graph.ops[j].name, 0)
                                                             for _, j in chosen if j != problem.producer(e))
                               for e in parked)
                    cost = recompute + park
                    best = cost if best is None else min(best, cost)
    return best


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(priced_graphs(max_ops=4))
def test_the_exact_models_choice_is_the_cheapest_of_every_schedule_and_parking(case):
    graph, prices, budget = case
    problem = Problem(graph)
    if len([1 for i in range(problem.n) for _ in problem.recompute_stages(i)]) > 10:
        return                                              # the enumeration's size
    expected = cheapest_by_enumeration(graph, prices, budget)
    try:
        result = solve(graph, options(budget), park=prices)
    except InfeasibleBudget:
        assert expected is None
        return
    assert result.status == "optimal"
    assert result.planned_cost + result.park_cost == expected


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(priced_graphs())
def test_parking_never_costs_more_and_the_chip_stays_within_the_budget(case):
    graph, prices, budget = case
    try:
        plain = solve(graph, options(budget))
    except InfeasibleBudget:
        plain = None
    try:
        parked = solve(graph, options(budget), park=prices)
    except InfeasibleBudget:
        assert plain is None                                # parking only adds schedules
        return
    assert parked.peak_bytes == memory_trace(chip_graph(graph, parked.parked), parked.seq).peak_bytes <= budget
    assert parked.booked_peak_bytes is None or parked.peak_bytes <= parked.booked_peak_bytes <= budget
    producers = {graph.producer[e] for e in parked.parked}
    assert not any(i in producers for _, i in parked.decisions.recomputes)     # written once
    if plain is not None:
        assert parked.planned_cost + parked.park_cost <= plain.planned_cost


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(priced_graphs())
def test_without_parking_the_solve_and_the_model_are_what_they_were(case):
    graph, _, budget = case
    problem = Problem(graph)
    assert str(milp.build(problem, budget).lp) == str(milp.build(problem, budget, park=None).lp)
    try:
        before = solve(graph, options(budget))
    except InfeasibleBudget:
        with pytest.raises(InfeasibleBudget):
            solve(graph, options(budget), park=None)
        return
    after = solve(graph, options(budget), park=None)
    assert after.parked == frozenset() and after.park_cost == 0
    assert (after.seq, after.decisions, after.peak_bytes, after.planned_cost) == \
        (before.seq, before.decisions, before.peak_bytes, before.planned_cost)


def test_an_activation_cheaper_to_park_than_to_recompute_is_parked():
    """A chain at its single-op floor recomputes; with parking cheaper than a recompute, the exact model parks the
    activations it would otherwise recompute, and the chip's peak is what is left."""
    graph = chain(4, 8)
    base = baselines(graph)
    prices = {}
    for op in graph.ops:
        for t in (*op.inputs, *op.outputs):
            if graph.buffer_bytes(t) > 0:
                prices.setdefault(t, {})[op.name] = 0
    plain = solve(graph, options(base.lower_bound))
    parked = solve(graph, options(base.lower_bound), park=prices)
    assert plain.planned_cost > 0 and parked.planned_cost == 0 and parked.parked
    assert parked.peak_bytes <= base.lower_bound
    expensive = {t: {name: 100 for name in ops} for t, ops in prices.items()}
    assert solve(graph, options(base.lower_bound), park=expensive).parked == frozenset()


def test_parking_is_refused_without_a_budget():
    graph = chain(3)
    with pytest.raises(CkptError, match="budget"):
        solve(graph, SolveOptions(objective="peak", backend=EXACT), park={})


def test_park_auto_is_refused_without_the_split_home_and_a_live_budget(tmp_path):
    out = str(tmp_path / "s.json")
    done = ckpt_here("solve", "--target", "siracusa", "--park", "auto", "--budget", "0.8", "-o", out)
    assert done.returncode == 1 and "--home split" in done.stderr and "Traceback" not in done.stderr
    done = ckpt_here("solve", "--target", "siracusa", "--home", "split", "--park", "auto", "--objective", "peak",
                     "-o", out)
    assert done.returncode == 1 and "--objective peak" in done.stderr
    assert not (tmp_path / "s.json").exists()


def test_a_schedule_that_parks_activations_is_refused_by_a_replay_under_another_home_before_any_work(tmp_path):
    schedule = tmp_path / "parked.json"
    write_schedule(schedule, Schedule((("n0", 0),), predicted=Predicted(
        peak_bytes=4, parked={"tensors": ["t0"], "bytes": 4, "cycles": 10})))
    for home in (("--home", "L2"), ("--home", "split", "--persist-on-chip", "auto")):
        done = ckpt_here("replay", str(schedule), "--target", "siracusa", *home, "-o", str(tmp_path / "out"))
        assert done.returncode == 1 and "parks 1 activation(s) off chip" in done.stderr, done.stderr
        assert not (tmp_path / "out").exists()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=random_graphs(), per_tensor=st.floats(10, 3000), per_byte=st.floats(0, 20), tiles=st.integers(1, 4),
       pick=st.integers(0, 100))
def test_parking_is_priced_as_the_cost_model_prices_an_off_chip_tensor(graph, per_tensor, per_byte, tiles, pick):
    """One definition: what parking a buffer adds to each layer that writes or reads it is what the cost model
    (priced_at_levels, the split home's pricing) adds to that layer when the buffer's level goes off chip."""
    price = LevelPrice(per_tensor, per_byte)
    prices = park_prices(graph, price, {op.name: tiles for op in graph.ops})
    if not prices:
        return
    chosen = sorted(prices)[pick % len(prices)]
    measured = {op.name: 10 ** 9 for op in graph.ops}                  # no layer's cap reached
    costs = CostModel(measured=measured, tiles={op.name: tiles for op in graph.ops})
    on_chip = {t: "L2" for t in graph.tensor_bytes if graph.buffer_bytes(graph.root(t)) > 0}
    parked = {t: ("L3" if graph.root(t) == chosen else level) for t, level in on_chip.items()}
    before = priced_at_levels(costs, graph, on_chip, "L2", price, "split").measured
    after = priced_at_levels(costs, graph, parked, "L2", price, "split").measured
    added = {name: after[name] - before[name] for name in measured if after[name] != before[name]}
    assert added == pytest.approx({name: round(c) for name, c in prices[chosen].items()}, abs=1)


@pytest.mark.deeploy
def test_a_split_solve_below_the_single_op_floor_parks_and_lays_the_parked_out_off_chip(tmp_path, lowering_cache):
    """The built-in MLP's split step at 0.6: no schedule fits without parking (its single-op floor is above the
    budget); with --park auto one does, the file names what it parks, and the predicted levels hold the parked in
    L3, not in L2's arena."""
    import json

    model = tmp_path / "mlp"
    assert ckpt_here("example", "mlp", "--layers", "2", "--width", "32", "-o", str(model)).returncode == 0
    args = ("solve", str(model), "--target", "siracusa", "--home", "split", "--budget", "0.6", "--costs", "estimate")
    plain = ckpt_here(*args, "-o", str(tmp_path / "plain.json"))
    assert plain.returncode == 2 and "single-op lower bound" in plain.stderr
    parked = ckpt_here(*args, "--park", "auto", "-o", str(tmp_path / "parked.json"))
    assert parked.returncode == 0, parked.stderr
    doc = json.loads((tmp_path / "parked.json").read_text())
    predicted, budget = doc["predicted"], doc["budget"]["bytes"]
    record = predicted["parked"]
    assert record["tensors"] and record["bytes"] > 0 and record["cycles"] > 0
    assert predicted["peak_bytes"] <= budget and predicted["levels"]["L2"]["activations_at_peak"] <= budget
    assert predicted["levels"]["L3"]["arena"] >= max(record["bytes"] // len(record["tensors"]), 1)


@pytest.mark.deeploy
@pytest.mark.slow
def test_the_generated_code_keeps_each_parked_activation_where_the_solver_parked_it(branch, shared_models,
                                                                                     lowering_cache, tmp_path):
    """SimpleMLP's split step solved at 0.8 with --park auto (below its single-op floor: it parks): Deeploy's
    context, after its annotation passes, gives every parked activation L3 and every other buffer the level ckpt
    decided; the train network's arena in L3 grows by them."""
    import json
    from dataclasses import replace
    from pathlib import Path

    from ckpt.deeploy_bridge import lower
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.replay.predict import predicted_buffer_levels
    from ckpt.replay.split_run import deploy_split, split_step
    from ckpt.solver.graph.onnx_loader import read_model

    folder = shared_models / "simplemlp_train"
    out = tmp_path / "parked.json"
    done = ckpt_here("solve", str(folder), "--target", "siracusa", "--home", "split", "--budget", "0.8",
                     "--costs", "estimate", "--park", "auto", "-o", str(out))
    assert done.returncode == 0, done.stderr
    parked = tuple(json.loads(out.read_text())["predicted"]["parked"]["tensors"])
    assert parked
    lowered = lower(folder, "siracusa")
    step = split_step(folder, read_model(folder / "network.onnx"), lowered.io_names, None, lowered.model)
    arenas = {}
    for name, setup in (("split", setup_for("siracusa", "split")),
                        ("parked", replace(setup_for("siracusa", "split"), parked=parked))):
        train, _ = deploy_split(lowered.model, lowered.node_order, step, "siracusa", True, setup,
                                Path(tmp_path) / name)
        arenas[name] = train.arena
    decided = predicted_buffer_levels(lowered, step.persistent_io, parked=frozenset(parked))
    generated = train.buffer_levels
    assert {generated[name] for name in parked} == {"L3"}
    compared = sorted(set(decided) & set(generated))
    assert {name: generated[name] for name in compared} == {name: decided[name] for name in compared}
    assert arenas["parked"]["L3"] > arenas["split"]["L3"]


@pytest.mark.deeploy
@pytest.mark.slow
def test_a_replay_of_a_parked_schedule_reserves_what_ckpt_predicted_in_each_level_and_computes_right(
        branch, shared_models, lowering_cache, tmp_path):
    """SimpleMLP's split step at 0.8 (below its single-op floor), parked: the replay homes the parked activations in
    L3, the code's whole-network blocks in L2 and in L3 are what ckpt predicted, L2's without the parked, the budget
    holds on the chip's peak, and the tiled code computes what the graph order does (host, both flows)."""
    import re

    folder = shared_models / "simplemlp_train"
    out = tmp_path / "parked.json"
    done = ckpt_here("solve", str(folder), "--target", "siracusa", "--home", "split", "--budget", "0.8",
                     "--costs", "estimate", "--park", "auto", "-o", str(out))
    assert done.returncode == 0, done.stderr
    run = ckpt_here("replay", str(out), "--model", str(folder), "--target", "siracusa", "--no-simulate",
                    "-o", str(tmp_path / "replay"))
    assert run.returncode == 0, run.stdout + run.stderr
    blocks = dict(re.findall(r"^\s+(L[23]):.*whole-network blocks ([\d,]+ B \(ckpt predicted [\d,]+ B)", run.stdout,
                             re.M))
    assert set(blocks) == {"L2", "L3"}
    for level, text in blocks.items():
        replayed, predicted = re.findall(r"[\d,]+", text)
        assert replayed == predicted, (level, text)
    assert "activations parked in L3" in run.stdout and "fits" in run.stdout
    assert "generated tiled code on this host: Errors: 0 out of" in run.stdout


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(priced_graphs())
def test_parking_in_the_stage_order_fits_where_parking_everything_does_and_starts_the_model_feasibly(case):
    """The stage order with activations parked (and the greedy's recomputes for what parking cannot bring under the
    budget): found wherever parking every parkable activation fits the order; within the budget on the chip, no
    parked activation's producer recomputed, priced as the model prices it; and as the exact model's warm start it
    meets every row of the model with parking (a start with the parked bytes still on chip would break the budget
    rows, and HiGHS would drop it)."""
    graph, prices, budget = case
    problem = Problem(graph)
    found = parked_in_order(problem, prices, budget)
    everything = [e for e in problem.buffers if e in prices]
    if memory_trace(chip_graph(graph, everything), plain_sequence(graph)).peak_bytes <= budget:
        assert found is not None and not found.decisions.recomputes
    if found is None:
        return
    order = found.decisions.sequence(graph)
    assert memory_trace(chip_graph(graph, found.parked), order).peak_bytes <= budget
    assert not {problem.producer(e) for e in found.parked} & {i for _, i in found.decisions.recomputes}
    assert found.cycles == found.decisions.cost(graph) + parking_cycles(problem, prices, found.parked, found.decisions)
    model = milp.build(problem, budget, park=prices)
    retained = needed_retentions(graph, order) | parked_retentions(problem, found.parked)
    values = milp.start_values(model, set(found.decisions.recomputes), retained)
    values = park_start_values(model, values, found.parked)
    for name, row in model.lp.constraints.items():
        side = sum(c * values.get(v.name, 0.0) for v, c in row.items()) + row.constant
        assert (side <= 1e-6 if row.sense <= 0 else True) and (side >= -1e-6 if row.sense >= 0 else True), name
    objective = sum(c * values.get(v.name, 0.0) for v, c in model.lp.objective.items())
    assert round(objective) == found.cycles


def test_below_the_floor_parking_answers_even_where_the_model_gets_no_time():
    """Below its single-op floor a chain has no schedule without parking; with too little time for the exact model to
    run, the stage order with activations parked is still an answer (it used to be 'no schedule found')."""
    graph = chain(4, 8)
    base = baselines(graph)
    prices = {t: {name: 1 for name in ops} for t, ops in _zero_prices(graph).items()}
    budget = base.lower_bound - 1
    no_time = SolveOptions(budget=budget, order="graph", views="fixed",
                           backend=BackendOptions(name="highs", time_limit=1e-3, gap=0.0, threads=1))
    result = solve(graph, no_time, park=prices)
    assert result.parked and result.planned_cost == 0 and result.peak_bytes <= budget
    assert result.park_cost == round(sum(first_runs_price(prices, e) for e in result.parked))


def _zero_prices(graph):
    prices = {}
    for op in graph.ops:
        for t in (*op.inputs, *op.outputs):
            if graph.buffer_bytes(t) > 0:
                prices.setdefault(t, {})[op.name] = 0
    return prices


def test_only_tensors_of_their_layers_first_output_shape_are_offered_for_parking():
    """The split home's tiler moves an off-chip tensor of a layer whose first output stays on chip at that output's
    place (deeploy_bridge.split_codegen refuses one of another shape: DS-CNN's stem Conv with its transposed input
    parked), so parking offers only tensors every layer that touches them sees in its first output's shape (unit
    dimensions aside), and none whose shape the lowered graph does not give."""
    from types import SimpleNamespace

    from onnx import TensorProto, helper

    from ckpt.pipeline.parking import unmovable
    graph = make_graph([("conv", "Conv", ["x", "w"], ["y"]), ("relu", "Relu", ["y"], ["z"]),
                        ("grad", "ReluGrad", ["z", "y"], ["gy"]), ("upd", "SGD", ["w", "gy"], ["w_new"])],
                       {"x": 16, "w": 16, "y": 32, "z": 32, "gy": 32, "w_new": 16}, {"x", "w", "w_new"},
                       {"w_new": "w"})
    shapes = {"x": [1, 2, 2], "y": [1, 8], "z": [8, 1], "gy": [8], "w_new": [8]}
    info = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()]
    lowered = SimpleNamespace(model=helper.make_model(helper.make_graph([], "g", [], [], value_info=info)))
    loaded = SimpleNamespace(graph=graph, lowered=lowered)
    assert unmovable(loaded, {"x", "y", "z", "gy", "unnamed"}) == {"x"}   # the conv writes y of another shape
    assert unmovable(SimpleNamespace(graph=graph, lowered=None), {"y"}) == {"y"}
