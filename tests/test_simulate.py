"""The replay semantics on graphs small enough to count by hand."""
import pytest
from graphs import chain, make_graph, random_graphs, shaped_graphs
from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.errors import CkptError
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.simulate import memory_trace, plain_sequence


def test_chain_holds_every_forward_activation_until_backward():
    g = chain(3, size=4)
    # After f2: a0,a1,a2 live (12). b2 allocates g2 while reading a2 (16 at its peak point).
    result = memory_trace(g, plain_sequence(g))
    assert result.peak_bytes == 16
    assert result.levels[:3] == (4, 8, 12)


def test_recompute_frees_the_original_at_its_last_forward_use():
    g = chain(3, size=4)
    seq = plain_sequence(g)
    # recompute f0 (reads persistent x) just before b0, its only backward reader
    at = [name for name, _ in seq].index("b0")
    seq.insert(at, ("f0", 1))
    result = memory_trace(g, seq)
    original_a0 = [b for b in result.buffers if b.tensor == "a0"][0]
    assert original_a0.last_read == 1  # read by f1 only; b0 reads the clone
    assert result.peak_bytes == 12


def test_alias_costs_nothing_but_keeps_its_buffer_alive():
    g = make_graph([("p", "Relu", ["x"], ["a"]), ("v", "Reshape", ["a"], ["va"]),
                    ("q", "Relu", ["x"], ["b"]), ("r", "Add", ["va", "b"], ["c"])],
                   {"x": 4, "a": 8, "va": 8, "b": 2, "c": 1}, {"x", "c"}, {"va": "a"})
    result = memory_trace(g, plain_sequence(g))
    assert result.levels == (8, 8, 10, 10)  # a lives until r reads it through va; va adds nothing


def test_multi_output_tensors_die_separately():
    g = make_graph([("ln", "LayerNormalization", ["x"], ["y", "stats"]), ("u", "Relu", ["y"], ["z"]),
                    ("late", "Add", ["z", "stats"], ["out"])],
                   {"x": 4, "y": 100, "stats": 1, "z": 4, "out": 4}, {"x", "out"})
    result = memory_trace(g, plain_sequence(g))
    assert result.levels == (101, 105, 5)  # y dies after u; stats lives on


def test_unread_output_dies_at_once():
    g = make_graph([("p", "Op", ["x"], ["a", "unused"]), ("q", "Op", ["a"], ["out"])],
                   {"x": 1, "a": 2, "unused": 50, "out": 1}, {"x", "out"})
    assert memory_trace(g, plain_sequence(g)).levels == (52, 2)


def test_reading_before_writing_is_an_error():
    g = chain(2)
    with pytest.raises(CkptError, match="reads 'a0' before any op writes it"):
        memory_trace(g, [("f1", 0), ("f0", 0)])


def test_unknown_op_is_an_error():
    with pytest.raises(CkptError, match="does not have"):
        memory_trace(chain(2), [("nope", 0)])


def test_min_memory_order_sees_frees_through_a_view():
    """An op that reads its input through a view frees that input as surely as a direct reader: the list
    schedule must count it (else weight-gradient Gemms, which read activations through Reshapes, sink to the
    end of the backward pass holding everything they read)."""
    graph = make_graph(
        [("split", "Split", ["x"], ["a", "b"]), ("view", "Reshape", ["a"], ["v"]),
         ("grad", "Gemm", ["v"], ["g"]), ("other", "Relu", ["b"], ["c"]), ("join", "Add", ["g", "c"], ["out"])],
        {"x": 4, "a": 8, "b": 8, "v": 8, "g": 4, "c": 6, "out": 4}, {"x", "out"}, {"v": "a"})
    base = baselines(graph)
    order = list(base.min_memory_order)
    assert order.index("grad") < order.index("other")   # frees 8 B for 4 B: the better first step
    assert base.min_memory_peak == 20                    # a, b, g; the other way round a, b, c is 22


@settings(max_examples=property_examples(150), deadline=None)
@given(st.one_of(random_graphs(max_ops=12), shaped_graphs()))
def test_an_op_moved_later_is_judged_from_the_trace_as_its_replay_judges_it(graph):
    """The min-memory order's deferral judges each move from the current trace (only the levels between the op
    and its first reader change): every move of every op of the order gives the peak and summed levels a replay
    of the moved order gives."""
    from ckpt.solver.graph.baselines import _Levels, min_memory_order
    for order in (min_memory_order(graph), [op.name for op in graph.ops]):
        levels = _Levels(graph, order)
        for here, name in enumerate(order):
            op = graph.ops[graph.index[name]]
            readers = [levels.position[graph.ops[j].name] for t in op.outputs for j in graph.readers.get(t, ())]
            readers += [levels.position[k] for k in graph.must_precede.get(name, ())]
            first = min(readers, default=here)
            if first > here + 1:
                trial = order[:here] + order[here + 1:first] + [name] + order[first:]
                replayed = memory_trace(graph, plain_sequence(graph, trial))
                assert levels.moved(here, first) == (replayed.peak_bytes, sum(replayed.levels))
