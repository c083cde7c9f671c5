"""ckpt's own graph record: what the solver needs to know about a training graph, and nothing else.

A `TrainGraph` is framework-free: ops in a fixed topological order, byte sizes of the tensors they exchange,
which tensors are persistent (weights, graph I/O: never counted against the budget) and which outputs share
an input's buffer (aliases). Everything the MILP and the replay simulator read comes from here.
"""
from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from ckpt.errors import CkptError


def alias_root(aliases: dict[str, str], tensor: str) -> str:
    """The tensor owning the buffer `tensor` lives in: alias hops (output -> input it reuses) followed to the end."""
    seen = set()
    while tensor in aliases and tensor not in seen:
        seen.add(tensor)
        tensor = aliases[tensor]
    return tensor


# Ops that update weights or optimizer state: a training step has at least one (or a gradient op).
OPTIMIZER_OPS = frozenset({"SGD", "Adam", "AdamW", "Momentum", "InPlaceAccumulatorV2", "InPlaceAccumulator"})
# Ops whose re-execution would not reproduce the same values, or that update state.
NEVER_RECOMPUTE_OPS = OPTIMIZER_OPS | frozenset({
    "Dropout", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial",
    "Bernoulli",
    "CkptGraphInputs", "CkptGraphOutputs",        # solver.resident's synthetic ops: graph I/O, written once
})


@dataclass(frozen=True)
class Op:
    """One node: its name, type and the tensors it reads and writes (empty optional slots dropped)."""

    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True)
class TrainGraph:
    """A training graph as the solver sees it.

    ops: topologically ordered; this order is the stage order of the MILP and the "graph order" baseline.
    tensor_bytes: every tensor's size in bytes.
    persistent: tensors held for the whole step (initializers, graph inputs and outputs, optimizer state).
    aliases: output tensor -> the input tensor whose buffer it reuses (Reshape-like views, in-place updates).
    op_cost: estimated cycles of one execution of each op (the recompute price).
    scratch: op -> bytes one execution allocates for itself and frees when it ends (Deeploy's
        TransientBuffers, e.g. a Conv's im2col buffer); counted at that op on every execution.
    must_precede: op -> ops every run of it (recomputes too) must come before: a reader of a weight that an
        in-place update overwrites must run before that update (solver.in_place).
    run_once: ops never run again although what they write is counted: a graph output's producer in a model
        that counts graph outputs as activations (solver.resident), whose first version is the one the step
        ends with.
    """

    ops: tuple[Op, ...]
    tensor_bytes: dict[str, int]
    persistent: frozenset[str]
    aliases: dict[str, str] = field(default_factory=dict)
    op_cost: dict[str, int] = field(default_factory=dict)
    scratch: dict[str, int] = field(default_factory=dict)
    must_precede: dict[str, tuple[str, ...]] = field(default_factory=dict)
    run_once: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        check_topological(self.ops, self.persistent, self.must_precede)

    # --- lookups --------------------------------------------------------------------------------
    @cached_property
    def index(self) -> dict[str, int]:
        return {op.name: i for i, op in enumerate(self.ops)}

    @cached_property
    def producer(self) -> dict[str, int]:
        """Tensor -> index of the op that writes it."""
        return {t: i for i, op in enumerate(self.ops) for t in op.outputs}

    @cached_property
    def readers(self) -> dict[str, tuple[int, ...]]:
        """Tensor -> indices of the ops that read it (each op once, in order)."""
        found: dict[str, list[int]] = {}
        for i, op in enumerate(self.ops):
            for t in dict.fromkeys(op.inputs):
                found.setdefault(t, []).append(i)
        return {t: tuple(v) for t, v in found.items()}

    @cached_property
    def deadline(self) -> tuple[int, ...]:
        """Op i -> the last stage it may run in, recomputes included: the stage of the first op it must precede
        (a recompute in that stage runs before the stage's own op), else the last stage."""
        last = len(self.ops) - 1
        return tuple(min((self.index[k] for k in self.must_precede.get(op.name, ()) if k in self.index),
                         default=last) for op in self.ops)

    @cached_property
    def must_follow(self) -> dict[int, tuple[int, ...]]:
        """Op -> the ops that must run before it beyond what it reads (must_precede turned around)."""
        found: dict[int, list[int]] = {}
        for name, later in self.must_precede.items():
            for k in later:
                if k in self.index and name in self.index:
                    found.setdefault(self.index[k], []).append(self.index[name])
        return {k: tuple(sorted(v)) for k, v in found.items()}

    def is_activation(self, tensor: str) -> bool:
        """Produced by an op and not persistent: the memory the budget is about."""
        return tensor in self.producer and tensor not in self.persistent

    def root(self, tensor: str) -> str:
        """The tensor that owns the buffer `tensor` lives in (itself unless it is an alias)."""
        return alias_root(self.aliases, tensor)

    def buffer_bytes(self, tensor: str) -> int:
        """Bytes a new version of `tensor` allocates: 0 for aliases and persistent tensors."""
        if not self.is_activation(tensor) or tensor in self.aliases:
            return 0
        return self.tensor_bytes[tensor]

    def is_aliasing_op(self, i: int) -> bool:
        return any(t in self.aliases for t in self.ops[i].outputs)

    def recomputable(self, i: int) -> bool:
        """An op may run again only if it is pure, creates its own activation buffers and writes nothing persistent."""
        op = self.ops[i]
        if op.op_type in NEVER_RECOMPUTE_OPS or op.name in self.run_once or self.is_aliasing_op(i):
            return False
        return bool(op.outputs) and all(self.is_activation(t) for t in op.outputs)

    @cached_property
    def persistent_bytes(self) -> int:
        """Bytes of persistent tensors that own a buffer (in-place results reuse their input's)."""
        return sum(self.tensor_bytes.get(t, 0) for t in self.persistent if t not in self.aliases)

    def fingerprint(self) -> str:
        return names_fingerprint(op.name for op in self.ops)


def names_fingerprint(names: Iterable[str]) -> str:
    """sha256 over the sorted node names: what a schedule is keyed on (independent of the order)."""
    return hashlib.sha256("\n".join(sorted(names)).encode()).hexdigest()


def check_topological(ops: tuple[Op, ...], persistent: frozenset[str],
                      must_precede: dict[str, tuple[str, ...]] | None = None) -> None:
    """Every op reads only tensors that are persistent or written by an earlier op, and runs before the ops it
    must precede."""
    written = {t for op in ops for t in op.outputs}
    seen: set[str] = set()
    ran: set[str] = set()
    for op in ops:
        for t in op.inputs:
            if t in written and t not in seen:
                raise CkptError(f"op '{op.name}' reads '{t}' before it is written",
                                "the graph must be in topological order (toposort it)")
        late = [k for k in (must_precede or {}).get(op.name, ()) if k in ran]
        if late:
            raise CkptError(f"op '{op.name}' runs after '{late[0]}', which overwrites a weight it reads",
                            "order the graph so every reader of a weight runs before its in-place update")
        seen.update(op.outputs)
        ran.add(op.name)


def toposort(ops: list[Op], must_precede: dict[str, tuple[str, ...]] | None = None) -> list[Op]:
    """Stable topological order: whenever several ops are ready, the one listed first goes first. `must_precede`
    adds order without data (op -> ops it must run before).

    Raises a CkptError naming an op on a cycle.
    """
    writer = {t: i for i, op in enumerate(ops) for t in op.outputs}
    deps = {i: {writer[t] for t in op.inputs if t in writer and writer[t] != i} for i, op in enumerate(ops)}
    position = {op.name: i for i, op in enumerate(ops)}
    for name, later in (must_precede or {}).items():
        for k in later:
            deps[position[k]].add(position[name])
    order = stable_order(deps)
    if len(order) != len(ops):
        stuck = min(set(range(len(ops))) - set(order))
        raise CkptError(f"the graph has a cycle through op '{ops[stuck].name}'",
                        "a training graph must be acyclic; re-export it")
    return [ops[i] for i in order]


def stable_order(deps: dict[int, set[int]]) -> list[int]:
    """Kahn's algorithm taking the smallest ready key first; keys on a cycle are left out."""
    waiting = {i: len(d) for i, d in deps.items()}
    dependants: dict[int, list[int]] = {i: [] for i in deps}
    for i, d in deps.items():
        for j in d:
            dependants[j].append(i)
    ready = [i for i, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for j in dependants[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, j)
    return order
