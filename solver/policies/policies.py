"""Recompute policies of Deeploy's training branch, as baselines ckpt's solve is measured against.

- The branch's ordering (DeeployTest/testUtils/gcpScheduler.py at a0e1e531, `defaultScheduler`): the forward pass
  in graph order, then the backward pass in graph order with each recomputed node emitted just before the first
  backward node that reads it, a chain of recomputed nodes producers first. In ckpt's terms a recompute of op i
  runs in the stage of its first backward reader (for a chain, the stage of the recomputed reader), over the graph
  order; views are re-made where they are read (solver.views), as the branch recomputes the Reshapes and
  Transposes inside a chain.
- Top-K forward recomputation: the branch's variants ("UNI_K") recompute K forward nodes; how it picks them is not
  public. Here: the K recomputable forward nodes whose recomputation frees the most bytes per cycle (the bytes of
  their outputs that backward nodes read, over the op's cost).
A node is a backward node by the branch's rule: its op type says Grad, or its name says Grad or _backward.
"""
from __future__ import annotations

from collections.abc import Iterable

from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.graph import Op, TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import RunSequence, check_ready, drop_dead, memory_trace
from ckpt.solver.graph.views import collapsed, expanded, view_cost
from ckpt.solver.model.records import SolveResult, Status


def is_backward(op: Op) -> bool:
    """The branch's test (gcpScheduler.py): a Grad op type, or Grad or _backward in the node's name."""
    return "Grad" in op.op_type or "Grad" in op.name or "_backward" in op.name


def branch_order(graph: TrainGraph, recompute: Iterable[str]) -> RunSequence:
    """The sequence the branch's rule makes of recomputing the ops named in `recompute` (see the module doc); an
    op with no backward reader is not recomputed (the branch could not place it either)."""
    views = collapsed(graph)
    staged = views.without_views
    chosen = {staged.index[name] for name in recompute if name in staged.index}
    stage: dict[int, int] = {}
    for i in sorted(chosen, reverse=True):             # a recomputed reader is placed before its producers
        readers = {j for t in staged.ops[i].outputs for j in staged.readers.get(t, ())}
        places = [j for j in readers if j not in chosen and is_backward(staged.ops[j])]
        places += [stage[j] for j in readers if j in stage]
        if places and min(places) > i:
            stage[i] = min(places)
    seq = drop_dead(staged, Decisions(frozenset((t, i) for i, t in stage.items())).sequence(staged))
    seq = expanded(views, seq) if views.view_ops else seq
    check_ready(graph, seq)
    return seq


def top_k(graph: TrainGraph, k: int | None = None) -> list[str]:
    """The K recomputable forward ops whose recomputation frees the most bytes per cycle (ties: graph order);
    without K, every candidate, so ranked."""
    staged = collapsed(graph).without_views
    scored = []
    for i, op in enumerate(staged.ops):
        if is_backward(op) or not staged.recomputable(i):
            continue
        freed = sum(staged.buffer_bytes(t) for t in op.outputs
                    if any(is_backward(staged.ops[j]) for j in staged.readers.get(t, ())))
        if freed:
            scored.append((-freed / max(1, staged.op_cost[op.name]), i, op.name))
    return [name for _, _, name in sorted(scored)[:k]] if k is not None else [name for _, _, name in sorted(scored)]


def policy_result(graph: TrainGraph, seq: RunSequence, space: str) -> SolveResult:
    """A policy's sequence as a solve's result: its figures on `graph`, nothing proven (status heuristic)."""
    views = collapsed(graph)
    cost = view_cost(graph, seq, views) if views.view_ops else sum(graph.op_cost[n] for n, f in seq if f)
    decisions = Decisions.from_sequence(graph, seq) or Decisions(frozenset())
    return SolveResult(
        seq=seq, decisions=decisions, stage_order=tuple(op.name for op in graph.ops),
        peak_bytes=memory_trace(graph, seq).peak_bytes, booked_peak_bytes=None,
        baselines=baselines(graph), persistent_bytes=graph.persistent_bytes, recomputes=sum(f for _, f in seq),
        recompute_cost=cost, planned_cost=cost, base_cost=sum(graph.op_cost.values()), status=Status.HEURISTIC,
        gap=None, seconds=0.0, variables=0, constraints=0, variables_unpruned=0, space=space)
