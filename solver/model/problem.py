"""The index sets of the rematerialisation MILP, derived once from a TrainGraph in its stage order.

Stage t computes op t for the first time and may recompute ops i < t. Memory is tracked per buffer (a tensor
that owns bytes), not per op, so outputs of one op can die at different times. Aliases (views, in-place
results) own no bytes: they pin the buffer of the version they were made from.

Everything here is a provable reduction: a variable is only created where it can take a value that matters.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from ckpt.solver.graph.graph import TrainGraph


@dataclass(frozen=True)
class Problem:
    """focus=True keeps only recomputes in stages where a reader of the op's outputs may run: much smaller,
    usually as good, but it can cut off the optimum, so it only seeds the exact model or runs behind --focus.
    """

    graph: TrainGraph
    focus: bool = False
    only: frozenset[tuple[int, int]] | None = None   # (stage, op): the only recomputes allowed, if given

    @property
    def n(self) -> int:
        return len(self.graph.ops)

    # --- what exists ------------------------------------------------------------------------------
    @cached_property
    def buffers(self) -> tuple[str, ...]:
        """Activation tensors that own bytes, in producer order."""
        return tuple(t for op in self.graph.ops for t in op.outputs if self.graph.buffer_bytes(t) > 0)

    @cached_property
    def pins(self) -> tuple[str, ...]:
        """Alias tensors whose root is an activation buffer: they keep that buffer alive."""
        g = self.graph
        return tuple(t for op in g.ops for t in op.outputs
                     if t in g.aliases and g.is_activation(t) and g.buffer_bytes(g.root(t)) > 0)

    @cached_property
    def tensor_id(self) -> dict[str, int]:
        """Short stable ids for variable and constraint names."""
        return {t: n for n, t in enumerate(self.buffers + self.pins)}

    @cached_property
    def alloc(self) -> tuple[int, ...]:
        """Bytes op i allocates each time it runs: its output buffers and its scratch."""
        return tuple(sum(self.graph.buffer_bytes(t) for t in op.outputs) + self.scratch[i]
                     for i, op in enumerate(self.graph.ops))

    @cached_property
    def scratch(self) -> tuple[int, ...]:
        """Bytes op i needs only while it runs (freed right after it, with its dead inputs)."""
        return tuple(self.graph.scratch.get(op.name, 0) for op in self.graph.ops)

    def producer(self, tensor: str) -> int:
        return self.graph.producer[tensor]

    def recomputable(self, i: int) -> bool:
        return self.graph.recomputable(i)

    # --- how far ahead things can matter --------------------------------------------------------
    @cached_property
    def last_stage(self) -> tuple[int, ...]:
        """Latest stage in which op i can run: itself if it cannot be recomputed, else its direct readers' latest,
        and never past its deadline (the update of a weight it reads).

        Readers through an alias do not count: a recompute after the alias was made does not reach them.
        """
        g, last = self.graph, [0] * self.n
        for i in reversed(range(self.n)):
            last[i] = i
            if g.recomputable(i):
                for t in g.ops[i].outputs:
                    for j in g.readers.get(t, ()):
                        last[i] = max(last[i], last[j])
                last[i] = max(i, min(last[i], g.deadline[i]))
        return tuple(last)

    @cached_property
    def users(self) -> dict[str, tuple[int, ...]]:
        """Buffer or pin -> ops that read it, directly or through aliases made from it."""
        g = self.graph
        found: dict[str, set[int]] = {t: set(g.readers.get(t, ())) for t in self.buffers + self.pins}
        for t in self.pins:  # a reader of a pin also reads every buffer or pin up its chain
            source = g.aliases[t]
            while True:
                if source in found:
                    found[source] |= set(g.readers.get(t, ()))
                if source not in g.aliases:
                    break
                source = g.aliases[source]
        return {t: tuple(sorted(v)) for t, v in found.items()}

    def made_at(self, tensor: str) -> int:
        return self.producer(tensor)

    def needed_until(self, tensor: str) -> int:
        """Last stage that may read `tensor`; retention past it is never needed."""
        return max((self.last_stage[j] for j in self.users[tensor]), default=-1)

    def free_points(self, buffer: str) -> tuple[int, ...]:
        """Ops after which `buffer` may be freed: its producer (nobody reads this version) and its users."""
        return tuple(sorted({self.producer(buffer), *self.users[buffer]}))

    # --- variable domains -------------------------------------------------------------------------
    def recompute_stages(self, i: int) -> range | tuple[int, ...]:
        """Stages t > i in which op i may be recomputed."""
        if not self.recomputable(i):
            return range(0)
        if self.only is not None or self.focus:
            chosen = self.allowed_stages.get(i, ()) if self.only is not None else self.reader_stages[i]
            return tuple(t for t in chosen if t <= self.graph.deadline[i])
        return range(i + 1, self.last_stage[i] + 1)

    @cached_property
    def input_buffers(self) -> tuple[tuple[str, ...], ...]:
        """Op -> the activation buffers it reads, directly or through views, each once."""
        g, buffers = self.graph, set(self.buffers)
        return tuple(tuple(dict.fromkeys(g.root(y) for y in op.inputs if g.root(y) in buffers)) for op in g.ops)

    @cached_property
    def allowed_stages(self) -> dict[int, tuple[int, ...]]:
        """Op -> the stages `only` allows it to be recomputed in."""
        found: dict[int, list[int]] = {}
        for t, i in sorted(self.only or ()):
            found.setdefault(i, []).append(t)
        return {i: tuple(stages) for i, stages in found.items()}

    @cached_property
    def reader_stages(self) -> tuple[tuple[int, ...], ...]:
        """Op i -> stages after i where a reader of its outputs runs or may be recomputed (focus mode)."""
        g, found = self.graph, [set() for _ in range(self.n)]
        for i in reversed(range(self.n)):
            for t in g.ops[i].outputs:
                for j in g.readers.get(t, ()):
                    found[i].add(j)
                    if g.recomputable(j):
                        found[i] |= found[j]
        return tuple(tuple(sorted(t for t in stages if t > i)) for i, stages in enumerate(found))

    def retain_stages(self, tensor: str) -> range:
        """Stages t into which `tensor` may be carried from stage t-1."""
        return range(self.made_at(tensor) + 1, self.needed_until(tensor) + 1)

    def present_stages(self, buffer: str) -> list[int]:
        """Stages in which `buffer` may exist at some point."""
        i = self.producer(buffer)
        stages = {i, *self.recompute_stages(i), *self.retain_stages(buffer)}
        return sorted(stages)

    # --- lookups the accounting needs in its inner loops ---------------------------------------------
    @cached_property
    def frees_at(self) -> dict[int, tuple[str, ...]]:
        """Op k -> buffers that may be freed right after it."""
        found: dict[int, list[str]] = {k: [] for k in range(self.n)}
        for e in self.buffers:
            for k in self.free_points(e):
                found[k].append(e)
        return {k: tuple(v) for k, v in found.items()}

    @cached_property
    def present_set(self) -> dict[str, frozenset[int]]:
        return {e: frozenset(self.present_stages(e)) for e in self.buffers}

    @cached_property
    def retain_set(self) -> dict[str, frozenset[int]]:
        return {x: frozenset(self.retain_stages(x)) for x in self.buffers + self.pins}
