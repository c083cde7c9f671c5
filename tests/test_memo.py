import gc
import weakref
from dataclasses import replace

from graphs import chain

from ckpt.solver.graph import memo
from ckpt.solver.graph.memo import per_graph


def test_facts_are_derived_once_per_graph_object_and_never_shared_between_objects():
    calls = []

    @per_graph
    def ops_of(graph):
        calls.append(graph)
        return len(graph.ops)

    first, same_content = chain(4, size=4), chain(4, size=4)
    assert ops_of(first) == ops_of(first) == len(first.ops)
    assert len(calls) == 1
    shorter = replace(first, ops=first.ops[:2])
    assert ops_of(same_content) == len(first.ops) and ops_of(shorter) == 2
    assert len(calls) == 3


def test_the_memo_lets_old_graphs_go_once_it_is_full():
    @per_graph
    def ops_of(graph):
        return len(graph.ops)

    old = chain(3, size=4)
    assert ops_of(old) == len(old.ops)
    gone = weakref.ref(old)
    del old
    graphs = [chain(n, size=4) for n in range(2, 2 + memo.GRAPHS_KEPT + 1)]
    assert [ops_of(g) for g in graphs] == [len(g.ops) for g in graphs]
    gc.collect()
    assert gone() is None
