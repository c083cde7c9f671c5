"""Facts derived from a graph, computed once per graph object: solvers ask for them thousands of times.

A TrainGraph holds dicts, so it is not hashable; the memo keys on its identity and keeps the graph itself, so
an id reused by a later object is never mistaken for it. Bounded: a long sweep makes many graphs.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TypeVar

from ckpt.solver.graph.graph import TrainGraph

T = TypeVar("T")
GRAPHS_KEPT = 64      # graph objects whose facts stay memoised (a solve makes a few; a sweep, one per point)


def per_graph(derive: Callable[[TrainGraph], T]) -> Callable[[TrainGraph], T]:
    """`derive`, memoised on the graph object it is given."""
    known: dict[int, tuple[TrainGraph, T]] = {}

    @functools.wraps(derive)
    def memoised(graph: TrainGraph) -> T:
        hit = known.get(id(graph))
        if hit is not None and hit[0] is graph:
            return hit[1]
        value = derive(graph)
        if len(known) >= GRAPHS_KEPT:
            known.clear()
        known[id(graph)] = (graph, value)
        return value

    return memoised
