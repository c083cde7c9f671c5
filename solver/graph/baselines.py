"""Orders without recompute, and the floor no schedule can go below."""
from __future__ import annotations

from dataclasses import dataclass, replace

from ckpt.solver.graph.graph import Op, TrainGraph
from ckpt.solver.graph.memo import per_graph
from ckpt.solver.graph.simulate import memory_trace, plain_sequence


@dataclass(frozen=True)
class Baselines:
    graph_order_peak: int
    min_memory_order: tuple[str, ...]
    min_memory_peak: int
    lower_bound: int
    lower_bound_op: str


def graph_order_peak(graph: TrainGraph) -> int:
    """Peak of the graph's own order without recompute: what budget fractions are fractions of."""
    return memory_trace(graph, plain_sequence(graph)).peak_bytes


def graph_order(graph: TrainGraph) -> list[str]:
    return [op.name for op in graph.ops]


def single_op_lower_bound(graph: TrainGraph) -> tuple[int, str]:
    """Largest working set of one op (input buffers, new output buffers, scratch): every schedule runs it."""
    best, best_op = 0, ""
    for op in graph.ops:
        roots = {graph.root(t) for t in op.inputs if graph.is_activation(graph.root(t))}
        need = sum(graph.buffer_bytes(t) for t in roots) + sum(graph.buffer_bytes(t) for t in op.outputs)
        need += graph.scratch.get(op.name, 0)
        if need > best:
            best, best_op = need, op.name
    return best, best_op


# Which rules min_memory_order and deferred follow: a proof (optimal, infeasible) holds for one stage order, so
# whatever keeps a solve's answer keys it with this and solves again once the rules change what they return.
STAGE_ORDER_RULES = 2           # 2: an op reading no activation runs right before its first reader


def min_memory_order(graph: TrainGraph) -> list[str]:
    """Greedy list schedule: of the ready ops, run the one that grows memory least (ties: graph order).

    Growth = bytes it allocates minus bytes of buffers it is the last reader of. Running weight updates right
    after their gradients, for example, frees those gradients early. Views (aliasing ops) run only right before
    their first reader: a view made early pins the version it was made from and would stop a later recompute
    from freeing it.
    """
    n = len(graph.ops)
    pending = {}  # buffer root -> ops still to read it (directly or through an alias)
    for t, readers in graph.readers.items():
        root = graph.root(t)
        if graph.buffer_bytes(root):
            pending.setdefault(root, set()).update(readers)
    is_view = [_is_view(graph, i) for i in range(n)]
    deps = [_real_deps(graph, i, is_view) for i in range(n)]
    waiting = [len(d) for d in deps]
    dependants = [[] for _ in range(n)]
    for i, d in enumerate(deps):
        for j in d:
            dependants[j].append(i)
    ready = {i for i in range(n) if waiting[i] == 0 and not is_view[i]}
    order: list[int] = []
    done = [False] * n
    while ready:
        i = min(ready, key=lambda j: (_growth(graph, j, pending, _views_needed(graph, j, is_view, done)), j))
        ready.remove(i)
        for j in _views_needed(graph, i, is_view, done) + [i]:
            done[j] = True
            order.append(j)
            for root in {graph.root(t) for t in graph.ops[j].inputs}:
                pending.get(root, set()).discard(j)
            for k in dependants[j]:
                waiting[k] -= 1
                if waiting[k] == 0 and not is_view[k]:
                    ready.add(k)
    order += [i for i in range(n) if not done[i]]  # views nobody reads
    return [graph.ops[i].name for i in order]


def _is_view(graph: TrainGraph, i: int) -> bool:
    """An op whose output is an activation living in another activation's buffer (not an in-place update)."""
    return any(t in graph.aliases and graph.is_activation(t) for t in graph.ops[i].outputs)


def _real_deps(graph: TrainGraph, i: int, is_view: list[bool]) -> set[int]:
    """Non-view ops that must run before op i, looking through views (and the readers an update must follow)."""
    found = set(graph.must_follow.get(i, ()))
    todo = [graph.producer[t] for t in graph.ops[i].inputs if t in graph.producer]
    while todo:
        j = todo.pop()
        if j == i or j in found:
            continue
        if is_view[j]:
            todo.extend(graph.producer[t] for t in graph.ops[j].inputs if t in graph.producer)
        else:
            found.add(j)
    return found


def _views_needed(graph: TrainGraph, i: int, is_view: list[bool], done: list[bool]) -> list[int]:
    """Views not yet made that op i reads (directly or through other views), producers first."""
    needed: list[int] = []

    def visit(j: int) -> None:
        for t in graph.ops[j].inputs:
            k = graph.producer.get(t)
            if k is not None and is_view[k] and not done[k] and k not in needed:
                visit(k)
                needed.append(k)
    visit(i)
    return needed


def _growth(graph: TrainGraph, i: int, pending: dict[str, set[int]], views: list[int]) -> int:
    """Bytes running op i (with the views it needs, made right before it) adds minus the bytes it frees."""
    op = graph.ops[i]
    grows = sum(graph.buffer_bytes(t) for t in op.outputs)
    run = {i, *views}
    roots = {graph.root(t) for j in run for t in graph.ops[j].inputs}
    frees = sum(graph.buffer_bytes(r) for r in roots if r in pending and pending[r] <= run)
    return grows - frees


def deferred(graph: TrainGraph, order: list[str]) -> list[str]:
    """`order` with ops moved later, each to right before its first reader, wherever that lowers the bytes the
    order holds over the step (the sum of its levels: what recomputes have to bring under a budget) without
    raising its peak. The list schedule runs an op as soon as it grows memory least, which can be long before
    anything reads it (a Transpose Deeploy split off for one backward Gemm, say); a recompute solver would then
    pay a recompute to have it late, where moving it costs nothing. Each move is judged from the current
    order's trace (`_Levels`: only the levels between the op and its reader change), which is replayed again
    only when a move is taken.

    An op that reads no activation (a weight's Transpose) moves wherever the peak does not rise, whatever the
    summed levels say (they can rise: its one level moves from a quiet point to a busy one). The stage order is
    also the order a stage's recomputes run in, so such an op left early is held through every chain a stage
    rebuilds before its reader: DS-CNN's four depthwise weight Transposes, first in the list schedule, held
    together through the stem whenever a backward stage rebuilt the forward pass. Moved, it loses no schedule:
    each run of it in a schedule of the old order can run later, right before the next run of its reader or at
    its new place in its stage, holding nothing longer (it reads nothing that lives)."""
    order = list(order)
    levels = _Levels(graph, order)
    for name in reversed(list(order)):          # the latest first: a moved op's producers then see its new place
        op = graph.ops[graph.index[name]]
        position = levels.position
        readers = [position[graph.ops[j].name] for t in op.outputs for j in graph.readers.get(t, ())]
        here = position[name]
        readers += [position[k] for k in graph.must_precede.get(name, ())]
        if not readers or min(readers) <= here + 1 or graph.is_aliasing_op(graph.index[name]):
            continue
        first = min(readers)
        peak, held = levels.moved(here, first)
        if peak <= levels.peak and (held < levels.held or _reads_no_activation(graph, op)):
            order = order[:here] + order[here + 1:first] + [name] + order[first:]
            levels = _Levels(graph, order)
    return order


def _reads_no_activation(graph: TrainGraph, op: Op) -> bool:
    return not any(graph.is_activation(graph.root(t)) for t in op.inputs)


class _Levels:
    """The levels of an order without recompute, and what they become when one op moves later (`moved`)."""

    def __init__(self, graph: TrainGraph, order: list[str]) -> None:
        trace = memory_trace(graph, plain_sequence(graph, order))
        n = len(order)
        self.graph, self.order = graph, order
        self.position = {name: k for k, name in enumerate(order)}
        self.levels = list(trace.levels)
        self.scratch = list(trace.scratch) or [0] * n
        self.peak, self.held = trace.peak_bytes, sum(trace.levels)
        self.buffer = {b.tensor: b for b in trace.buffers}
        self.dying = [0] * n                                   # bytes whose last reader is op k
        self.read_outputs, self.unread_outputs = [0] * n, [0] * n
        for b in trace.buffers:
            self.dying[b.last_read] += b.nbytes
            if b.written_at < b.last_read:
                self.read_outputs[b.written_at] += b.nbytes
            else:
                self.unread_outputs[b.written_at] += b.nbytes
        self.before, self.after = [0] * (n + 1), [0] * (n + 1)   # the highest level before k / from k on
        for k in range(n):
            self.before[k + 1] = max(self.before[k], self.levels[k])
        for k in reversed(range(n)):
            self.after[k] = max(self.after[k + 1], self.levels[k])

    def moved(self, here: int, first: int) -> tuple[int, int]:
        """(peak, summed levels) of the order with the op at `here` moved right before the op at `first`: the ops
        between run one step earlier, without its outputs, and with each input it reads that no op from `first`
        on reads kept until it runs; at its new place it has what crosses into `first`, those inputs, its unread
        outputs and its scratch."""
        graph = self.graph
        op = graph.ops[graph.index[self.order[here]]]
        kept = {}                                   # input buffer it now reads last -> (its old last read, bytes)
        for t in op.inputs:
            b = self.buffer.get(graph.root(t))
            if b is not None and b.written_at < here and b.last_read < first:
                kept[b.tensor] = (b.last_read, b.nbytes)
        window = [self.levels[k] - self.read_outputs[here] + sum(n for last, n in kept.values() if last < k)
                  for k in range(here + 1, first)]
        crossing = self.levels[first - 1] - self.scratch[first - 1] - self.dying[first - 1]
        window.append(crossing + sum(n for _, n in kept.values()) + self.unread_outputs[here] + self.scratch[here])
        peak = max(self.before[here], self.after[first], max(window))
        return peak, self.held - sum(self.levels[here:first]) + sum(window)


@per_graph
def baselines(graph: TrainGraph) -> Baselines:
    """The graph's baselines, computed once per graph object (solvers ask for them several times)."""
    order = deferred(graph, min_memory_order(graph))
    bound, bound_op = single_op_lower_bound(graph)
    return Baselines(
        graph_order_peak=graph_order_peak(graph),
        min_memory_order=tuple(order),
        min_memory_peak=memory_trace(graph, plain_sequence(graph, order)).peak_bytes,
        lower_bound=bound, lower_bound_op=bound_op)


def reorder(graph: TrainGraph, order: list[str]) -> TrainGraph:
    """The same graph with its ops in another topological order (the MILP's stage order)."""
    return replace(graph, ops=tuple(graph.ops[graph.index[name]] for name in order))
