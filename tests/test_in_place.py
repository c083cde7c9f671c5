"""Weights updated in place (solver.graph.in_place): the update owns no bytes, and no run reads a weight after it."""
from __future__ import annotations

import pytest
from graphs import make_graph
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples
from test_milp_invariants import EXACT, assert_sound_and_tight

from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.in_place import with_in_place_updates
from ckpt.solver.graph.simulate import check_in_place, in_place_violation, plain_sequence
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.solve import solve, stage_order


def _layer() -> TrainGraph:
    """f reads w (its copy w_copy, the same bytes); a later op g reads f's output after the update of w."""
    spec = [("f", "MatMul", ["x", "w_copy"], ["a"]),
            ("h", "Relu", ["a"], ["b"]),
            ("dw", "Mul", ["b", "a"], ["gw"]),
            ("upd", "SGD", ["w", "gw"], ["w_new"]),
            ("g", "Mul", ["b", "a"], ["y"])]
    sizes = {"x": 4, "w": 8, "w_copy": 8, "a": 16, "b": 16, "gw": 8, "w_new": 8, "y": 4}
    return make_graph(spec, sizes, {"x", "w", "w_copy", "w_new", "y"})


def test_the_update_and_the_shared_copy_own_no_bytes_and_readers_come_first():
    graph = with_in_place_updates(_layer(), {"w_copy": "w"})
    assert graph.aliases["w_new"] == "w" and graph.aliases["w_copy"] == "w"
    assert graph.must_precede == {"f": ("upd",)}
    assert graph.persistent_bytes == _layer().persistent_bytes - 8 - 8      # w_copy and w_new hold no bytes
    upd = graph.index["upd"]
    assert graph.deadline[graph.index["f"]] == upd and graph.deadline[graph.index["h"]] == len(graph.ops) - 1
    # f could otherwise be recomputed for g, after the update: the MILP's domain stops at the update
    assert Problem(graph).last_stage[graph.index["f"]] == upd < Problem(_layer()).last_stage[graph.index["f"]]


def test_a_sequence_that_reads_a_weight_after_its_update_is_refused():
    graph = with_in_place_updates(_layer(), {"w_copy": "w"})
    late = plain_sequence(graph) + [("f", 1)]
    assert in_place_violation(graph, plain_sequence(graph)) is None
    assert "op 'f' runs after 'upd'" in in_place_violation(graph, late)
    with pytest.raises(CkptError, match="--weights out-of-place"):
        check_in_place(graph, late)


def test_an_order_with_the_update_first_is_made_to_respect_it():
    spec = [("upd", "SGD", ["w", "x"], ["w_new"]), ("f", "MatMul", ["x", "w"], ["a"])]
    graph = with_in_place_updates(make_graph(spec, {"x": 4, "w": 4, "w_new": 4, "a": 4}, {"x", "w", "w_new"}))
    assert [op.name for op in graph.ops] == ["f", "upd"]
    with pytest.raises(CkptError, match="runs after 'upd', which overwrites a weight it reads"):
        make_graph(spec, {"x": 4, "w": 4, "w_new": 4, "a": 4}, {"x", "w", "w_new"}).__class__(
            ops=tuple(reversed(graph.ops)), tensor_bytes=graph.tensor_bytes, persistent=graph.persistent,
            aliases=graph.aliases, must_precede=graph.must_precede)


@st.composite
def graphs_with_updates(draw) -> TrainGraph:
    """Random DAGs reading two weights, each updated in place somewhere in the middle; readers of a weight's
    readers may run after its update, where recomputing them would read the new weight."""
    n = draw(st.integers(3, 8))
    spec, sizes, available = [], {"x": 4, "w0": 4, "w1": 4}, ["x"]
    updates = {draw(st.integers(1, n - 1)): "w0", draw(st.integers(1, n - 1)): "w1"}
    for i in range(n):
        if i in updates:
            w = updates[i]
            spec.append((f"u{i}", "SGD", [w, draw(st.sampled_from(available))], [f"{w}_new"]))
            sizes[f"{w}_new"] = 4
        ins = draw(st.lists(st.sampled_from(available), min_size=1, max_size=min(3, len(available))))
        ins += [w for w in ("w0", "w1") if draw(st.booleans())]
        out = f"t{i}"
        sizes[out] = 4 * draw(st.integers(1, 6))
        spec.append((f"n{i}", "Op", ins, [out]))
        available.append(out)
    costs = {name: draw(st.integers(1, 9)) for name, *_ in spec}
    persistent = {"x", "w0", "w1"} | {f"{w}_new" for w in updates.values()}
    return with_in_place_updates(make_graph(spec, sizes, persistent, costs=costs))


@settings(max_examples=property_examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs_with_updates(), squeeze=st.floats(0.0, 1.0))
def test_schedules_never_read_a_weight_after_its_update(graph, squeeze):
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    order = stage_order(graph, SolveOptions(budget=budget))   # the MILP's proofs over the min-memory order
    for method in ("milp", "greedy"):
        try:
            result = solve(graph, SolveOptions(budget=budget, method=method, backend=EXACT), order=order)
        except InfeasibleBudget:
            continue
        assert in_place_violation(graph, result.seq) is None
        if method == "milp":
            assert result.status == "optimal"
            assert_sound_and_tight(graph, result, budget)
