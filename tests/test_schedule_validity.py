"""A schedule is never invalid: every op's inputs exist when it runs, whatever writes them (a `Shape`, a
`Constant`, a view, a zero-byte or tiny tensor), on every graph ckpt knows and on random graphs."""
from pathlib import Path

import pytest
from graphs import make_graph, shaped_graphs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strength import property_examples
from test_milp_invariants import EXACT, assert_sound_and_tight

from ckpt.errors import InfeasibleBudget
from ckpt.examples import write_example
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.graph.simulate import memory_trace, unready_read
from ckpt.solver.graph.views import collapsed
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.solve import solve

QUICK = BackendOptions(name="highs", time_limit=10, threads=1)


def assert_valid(graph, seq) -> None:
    """Every read finds its tensor, every op whose result is kept runs, and the replay accepts the sequence."""
    assert unready_read(graph, seq) is None
    ran = {name for name, _ in seq}
    for op in graph.ops:
        if any(not graph.is_activation(t) for t in op.outputs):
            assert op.name in ran, f"{op.name} writes a kept tensor but never runs"
    memory_trace(graph, seq)


def solved(graph, fraction: float, views: str = "remade", time_limit: float = 10):
    base = baselines(graph)
    budget = int(base.lower_bound + fraction * (base.graph_order_peak - base.lower_bound))
    try:
        return solve(graph, SolveOptions(budget=budget, views=views,
                                         backend=BackendOptions(name="highs", time_limit=time_limit, threads=1)))
    except InfeasibleBudget:
        return None


@settings(max_examples=property_examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(graph=shaped_graphs(), fraction=st.floats(0.0, 1.0), views=st.sampled_from(["remade", "fixed"]))
def test_random_graphs_with_shapes_and_constants_give_valid_schedules(graph, fraction, views):
    result = solved(graph, fraction, views)
    if result is not None:
        assert_valid(graph, result.seq)
        assert memory_trace(graph, result.seq).peak_bytes == result.peak_bytes


def test_a_late_reshape_of_a_run_time_shape_is_scheduled_after_the_shape():
    """The resnet8/dscnn pattern: Flatten in the forward pass, the gradient reshaped back with the shape a
    `Shape` op took of the pooled tensor; a tight budget recomputes the forward pass."""
    spec = [("f0", "Conv", ["x"], ["a0"]), ("f1", "Relu", ["a0"], ["a1"]), ("pool", "Pool", ["a1"], ["p"]),
            ("shape", "Shape", ["p"], ["s"]), ("flat", "Flatten", ["p"], ["fl"]), ("fc", "Gemm", ["fl"], ["y"]),
            ("dfc", "Grad", ["y", "fl"], ["dfl"]), ("back", "Reshape", ["dfl", "s"], ["dp"]),
            ("dpool", "Grad", ["dp", "a1"], ["da1"]), ("d1", "Grad", ["da1", "a0"], ["da0"]),
            ("upd", "SGD", ["w", "da0"], ["w_new"])]
    sizes = {"x": 64, "w": 64, "a0": 64, "a1": 64, "p": 16, "s": 32, "fl": 16, "y": 8, "dfl": 16, "dp": 16,
             "da1": 64, "da0": 64, "w_new": 64}
    graph = make_graph(spec, sizes, {"x", "w", "w_new"}, {"fl": "p", "dp": "dfl", "w_new": "w"})
    # a view that reads a run-time shape stays a view made once: re-making it late would keep the shape alive
    assert [graph.ops[i].name for i in collapsed(graph).view_ops] == ["flat"]
    for fraction in (0.0, 0.3, 0.6, 1.0):
        result = solved(graph, fraction)
        if result is not None:
            assert_valid(graph, result.seq)


def test_a_reshape_of_a_constant_shape_is_remade_after_the_constant():
    """A shape from a `Constant` op is persistent (no bytes), so its view is re-made where read; the Constant
    must still run before every re-making."""
    spec = [("f0", "Conv", ["x"], ["a0"]), ("f1", "Relu", ["a0"], ["a1"]), ("f2", "Relu", ["a1"], ["a2"]),
            ("const", "Constant", [], ["c"]), ("view", "Reshape", ["a1", "c"], ["v"]),
            ("d2", "Grad", ["a2", "a2"], ["g2"]), ("d1", "Grad", ["g2", "v"], ["g1"]),
            ("d0", "Grad", ["g1", "a0"], ["g0"]), ("upd", "SGD", ["w", "g0"], ["w_new"])]
    sizes = {"x": 64, "w": 64, "a0": 64, "a1": 64, "a2": 64, "c": 16, "v": 64, "g2": 64, "g1": 64, "g0": 64,
             "w_new": 64}
    graph = make_graph(spec, sizes, {"x", "w", "w_new", "c"}, {"v": "a1", "w_new": "w"})
    views = collapsed(graph)
    assert [graph.ops[i].name for i in views.view_ops] == ["view"]
    assert "c" in views.without_views.ops[views.without_views.index["d1"]].inputs
    for fraction in (0.0, 0.5, 1.0):
        result = solved(graph, fraction)
        if result is not None:
            assert_valid(graph, result.seq)


@pytest.mark.slow
@pytest.mark.parametrize("kind, options", [("mlp", {}), ("resnet", {}), ("cct", {"blocks": 1})])
def test_built_in_examples_give_valid_schedules(tmp_path, kind, options):
    write_example(kind, tmp_path, golden=False, **options)
    graph = load_graph(tmp_path)
    for fraction in (0.2, 0.5, 0.8):
        result = solved(graph, fraction, time_limit=10)
        if result is not None:
            assert_valid(graph, result.seq)


TRAINING_BRANCH = ["resnet8_train", "dscnn_train"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cct2_ft2", "cct2_lp", *TRAINING_BRANCH])
def test_shared_models_give_valid_schedules(shared_models: Path, name):
    if not (shared_models / name / "network.onnx").is_file():
        pytest.skip(f"{name} is not among the shared models")
    graph = load_graph(shared_models / name)
    for fraction in (0.3, 0.6, 0.9):
        result = solved(graph, fraction, time_limit=10)
        if result is not None:
            assert_valid(graph, result.seq)


@settings(max_examples=property_examples(60), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(graph=shaped_graphs(), squeeze=st.floats(0.0, 1.0))
def test_the_booking_stays_exact_on_graphs_with_shapes_and_constants(graph, squeeze):
    """Views that read a run-time shape are made once, views of a constant shape re-made: either way what the
    MILP books equals what the schedule uses, stage by stage."""
    base = baselines(graph)
    budget = int(base.lower_bound + squeeze * (base.min_memory_peak - base.lower_bound))
    try:
        result = solve(graph, SolveOptions(budget=budget, backend=EXACT))
    except InfeasibleBudget:
        return
    assert result.status == "optimal"
    assert_sound_and_tight(graph, result, budget)
