"""The replay semantics: what memory a sequence of executions really uses. The one definition ckpt trusts.

Rules (the MILP's accounting is built to equal these, and tests hold it to that):
- Run order is the materialised sequence `[(op name, is_recompute), ...]`.
- Every execution writes a new version of each output. A reader uses the newest version of each input at the
  time it runs (so consumers scheduled after a recompute read the clone).
- A version owns a buffer of the tensor's bytes, except an alias (a view or in-place result), which lives in
  the buffer of the version it was made from, and persistent tensors (weights, graph I/O), which are not
  counted at all.
- A buffer dies right after the last execution that reads it directly or through any alias of it; a buffer
  nobody reads dies right after the execution that wrote it.
- An op may also need scratch memory for itself (`TrainGraph.scratch`, e.g. Deeploy's im2col buffer of a
  Conv): allocated with its outputs, freed when it ends, on every execution including recomputes.
- Memory is measured after an execution's outputs (and scratch) are allocated and before its dead buffers
  are freed; the peak is the largest such level.
- With weights updated in place (`TrainGraph.must_precede`), no execution may read a weight after its update
  ran (`check_in_place`): the solvers stay inside that space, and a sequence outside it is refused.

On Deeploy's non-tiled code these rules reproduce the live bytes of the generated malloc/free sequence
exactly (see deeploy_bridge/code_memory.py and tests/test_fidelity.py). One rule differs where no graph here
reaches it: Deeploy drops an op none of whose outputs is read, but never frees an unread output of an op
that has other, read outputs (every op of the lowered CCT graphs has a single output).
"""
from __future__ import annotations

from dataclasses import dataclass

from ckpt.errors import CkptError
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.memo import per_graph

RunSequence = list[tuple[str, int]]   # (node, 0 first run | 1 recompute) in run order: what a schedule says


@dataclass(frozen=True)
class Buffer:
    tensor: str
    nbytes: int
    written_at: int
    last_read: int


@dataclass(frozen=True)
class MemoryTrace:
    """Memory level after each execution's allocations, and the buffers behind it."""

    levels: tuple[int, ...]
    buffers: tuple[Buffer, ...]
    stage_of: tuple[int, ...]
    scratch: tuple[int, ...] = ()          # scratch bytes counted in each level (not in `buffers`)

    @property
    def peak_bytes(self) -> int:
        return max(self.levels, default=0)

    @property
    def peak_index(self) -> int:
        return self.levels.index(self.peak_bytes) if self.levels else -1

    def live_at(self, k: int) -> list[Buffer]:
        """Buffers counted in the level after execution k, largest first."""
        live = [b for b in self.buffers if b.written_at <= k <= b.last_read and b.nbytes]
        return sorted(live, key=lambda b: (-b.nbytes, b.tensor))

    def stage_peaks(self) -> dict[int, int]:
        """Stage -> peak level within it. A stage ends at each first (non-recompute) execution."""
        peaks: dict[int, int] = {}
        for level, stage in zip(self.levels, self.stage_of):
            peaks[stage] = max(peaks.get(stage, 0), level)
        return peaks


def stages_of(seq: RunSequence) -> list[int]:
    """Stage index of each execution: a stage is a run of recomputes closed by one first execution."""
    stages, current = [], 0
    for _, is_recompute in seq:
        stages.append(current)
        if not is_recompute:
            current += 1
    return stages


def memory_trace(graph: TrainGraph, seq: RunSequence) -> MemoryTrace:
    """Run the memory side of `seq` on `graph`. Raises CkptError if an op reads a tensor not yet written.
    (The solvers call this thousands of times per solve: each op's reads and writes are looked up once per graph,
    in `_tables`, and the loop touches nothing else.)"""
    table = _tables(graph)
    newest: dict[str, int] = {}            # tensor -> buffer id of its newest version (-1: no buffer)
    owners: list[list] = []                # buffer id -> [tensor, bytes, written_at, last_read]
    allocated: list[list[int]] = []        # execution -> buffer ids it allocates
    for k, (name, _) in enumerate(seq):
        entry = table.get(name)
        if entry is None:
            raise CkptError(f"schedule names op '{name}', which the graph does not have",
                            "solve the schedule on this graph")
        reads, writes = entry
        for tensor, must_exist in reads:
            buf = newest.get(tensor, -1) if tensor in newest or not must_exist else _unwritten(name, tensor)
            if buf >= 0:
                owners[buf][3] = k
        fresh: list[int] = []
        for tensor, owns, nbytes, source in writes:
            if owns:                       # a buffer of its own
                owners.append([tensor, nbytes, k, k])
                fresh.append(len(owners) - 1)
                newest[tensor] = len(owners) - 1
            else:                          # an alias lives in its source's newest version; -1: no buffer
                newest[tensor] = newest.get(source, -1) if source else -1
        allocated.append(fresh)
    scratch = [graph.scratch.get(name, 0) for name, _ in seq]
    levels = [level + extra for level, extra in zip(_levels(len(seq), owners, allocated), scratch)]
    buffers = tuple(Buffer(t, n, w, r) for t, n, w, r in owners)
    return MemoryTrace(levels=tuple(levels), buffers=buffers, stage_of=tuple(stages_of(seq)), scratch=tuple(scratch))


def in_place_violation(graph: TrainGraph, seq: RunSequence) -> str | None:
    """The first execution of `seq` that reads a weight after its in-place update ran, said in a line; None when
    every reader runs before the update (or nothing is updated in place)."""
    if not graph.must_precede:
        return None
    ran: set[str] = set()
    for name, _ in seq:
        late = [k for k in graph.must_precede.get(name, ()) if k in ran]
        if late:
            return f"op '{name}' runs after '{late[0]}', which overwrote a weight it reads in place"
        ran.add(name)
    return None


def check_in_place(graph: TrainGraph, seq: RunSequence) -> None:
    """Refuse a sequence that reads a weight after its in-place update (see in_place_violation)."""
    found = in_place_violation(graph, seq)
    if found:
        raise CkptError(found, "solve the schedule for this deployment (its weights are updated in place), or "
                               "deploy with --weights out-of-place")


def unready_read(graph: TrainGraph, seq: RunSequence) -> str | None:
    """The first execution of `seq` that reads a tensor an op of the graph writes before any execution of `seq`
    wrote it, said in a line; None when every read finds its tensor. Stricter than `memory_trace`, which checks
    only activations: a shape, a `Constant`'s value or a graph output an op writes must exist too."""
    written: set[str] = set()
    for name, _ in seq:
        op = graph.ops[_op_index(graph, name)]
        missing = next((t for t in op.inputs if t in graph.producer and t not in written), None)
        if missing is not None:
            return f"op '{name}' reads '{missing}' before any op writes it"
        written.update(op.outputs)
    return None


def check_ready(graph: TrainGraph, seq: RunSequence) -> None:
    """Refuse a sequence in which an op reads a tensor not yet written (see unready_read): a solver's fault."""
    found = unready_read(graph, seq)
    if found:
        raise CkptError(f"internal error: the solver made an invalid schedule: {found}",
                        "please report it with the model; `--views fixed` may avoid it meanwhile")


def _unwritten(reader: str, tensor: str) -> int:
    raise CkptError(f"op '{reader}' reads '{tensor}' before any op writes it",
                    "the sequence is not a valid order for this graph")


@per_graph
def _tables(graph: TrainGraph) -> dict[str, tuple[tuple, tuple]]:
    """Op name -> (reads: (tensor, is an activation), writes: (tensor, owns a buffer, its bytes, the activation
    it aliases or None)), for every op of `graph`, computed once per graph object."""
    table = {}
    for op in graph.ops:
        reads = tuple((t, graph.is_activation(t)) for t in dict.fromkeys(op.inputs))
        writes = []
        for t in op.outputs:
            if not graph.is_activation(t):
                writes.append((t, False, 0, None))
            elif t in graph.aliases:
                source = graph.aliases[t]
                writes.append((t, False, 0, source if graph.is_activation(source) else None))
            else:
                writes.append((t, True, graph.tensor_bytes[t], None))
        table[op.name] = (reads, tuple(writes))
    return table


def _op_index(graph: TrainGraph, name: str) -> int:
    try:
        return graph.index[name]
    except KeyError:
        raise CkptError(f"schedule names op '{name}', which the graph does not have",
                        "solve the schedule on this graph") from None


def _levels(n: int, owners: list[list], allocated: list[list[int]]) -> list[int]:
    dying: list[list[int]] = [[] for _ in range(n)]
    for _, nbytes, _, last in owners:
        dying[last].append(nbytes)
    level, levels = 0, []
    for k in range(n):
        level += sum(owners[b][1] for b in allocated[k])
        levels.append(level)
        level -= sum(dying[k])
    return levels


def drop_dead(graph: TrainGraph, seq: RunSequence) -> RunSequence:
    """`seq` without executions whose outputs nobody reads, as the deployed graph will run it.

    Checkmate-style schedules run every op in its own stage, so an op whose every reader comes after a
    recompute of it runs once for nothing. Deeploy's front end removes such a node (onnx-graphsurgeon
    `cleanup()`), and its producers' executions if they fed only it. The first execution that survives is
    the op's first (flag 0), the rest recomputes. Graph outputs and persistent writes always survive.
    """
    newest: dict[str, int] = {}
    reads: list[list[tuple[int, str]]] = []          # execution -> (writer execution, tensor) it reads
    for k, (name, _) in enumerate(seq):
        op = graph.ops[_op_index(graph, name)]
        reads.append([(newest[t], t) for t in dict.fromkeys(op.inputs) if t in newest])
        newest.update({t: k for t in op.outputs})
    needed: set[tuple[int, str]] = set()
    live = [False] * len(seq)
    for k in range(len(seq) - 1, -1, -1):
        op = graph.ops[graph.index[seq[k][0]]]
        keeps = not op.outputs or any(not graph.is_activation(t) or (k, t) in needed for t in op.outputs)
        if keeps:
            live[k] = True
            needed.update(reads[k])
    seen: set[str] = set()
    kept: RunSequence = []
    for k, (name, _) in enumerate(seq):
        if live[k]:
            kept.append((name, int(name in seen)))
            seen.add(name)
    return kept


def plain_sequence(graph: TrainGraph, order: list[str] | None = None) -> RunSequence:
    """The no-recompute sequence of an order (graph order by default)."""
    return [(name, 0) for name in (order or [op.name for op in graph.ops])]
