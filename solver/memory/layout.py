"""Static memory layout: an offset for every buffer, so that no two buffers alive at once share a byte.

The arena a layout needs is its highest end address; the most bytes alive at one step (the live maximum) is a
floor no layout goes below. Offsets come from omnimalloc (static-allocation heuristics and a branch-and-bound
portfolio with a C++ core), tried in a fixed order:
1. its deterministic first-fit greedies, each ordering the blocks another way; the first that reaches the live
   maximum wins (no layout can be smaller);
2. failing that, supermalloc, single-threaded, whose answer is kept only where it proved itself optimal
   (an answer cut short by its timeout would depend on the machine's load, and the same inputs must give the
   same layout);
3. the smallest valid layout of those tried; stacking every block (the sum of sizes) is the last resort.
Every layout returned is checked here, whoever made it: no overlap in time and space, every offset aligned.
"""
from __future__ import annotations

from dataclasses import dataclass

import omnimalloc as om
from omnimalloc.allocators import SupermallocAllocator

from ckpt.errors import CkptError

GREEDIES = ("greedy_by_conflict_size", "greedy_by_size", "greedy_by_area", "greedy_by_duration", "greedy_by_start",
            "greedy_by_conflict")
EXACT_SECONDS = 2.0


@dataclass(frozen=True)
class Block:
    """A buffer: `size` bytes alive from step `first` to step `last`, both included."""

    name: str
    first: int
    last: int
    size: int


@dataclass(frozen=True)
class Layout:
    offsets: dict[str, int]     # block name -> byte offset in the arena
    size: int                   # the arena: highest end address
    live_max: int               # most (aligned) bytes alive at one step: the floor of any layout
    allocator: str              # what placed it

    @property
    def excess(self) -> int:
        """Bytes the arena spends above the live maximum."""
        return self.size - self.live_max


def aligned(size: int, alignment: int) -> int:
    return -(-size // alignment) * alignment


def live_max(blocks: list[Block]) -> int:
    """The most bytes alive at one step."""
    return peak_step(blocks)[1]


def peak_step(blocks: list[Block]) -> tuple[int, int]:
    """(the first step where the most bytes are alive, those bytes)."""
    events: dict[int, int] = {}
    for b in blocks:
        events[b.first] = events.get(b.first, 0) + b.size
        events[b.last + 1] = events.get(b.last + 1, 0) - b.size
    level, peak, where = 0, 0, 0
    for step in sorted(events):
        level += events[step]
        if level > peak:
            peak, where = level, step
    return where, peak


def lay_out(blocks: list[Block], alignment: int = 4) -> Layout:
    """The smallest valid layout found (see the module doc); sizes are rounded up to `alignment` first."""
    # a canonical order: the allocators' ties then fall the same way whoever lists the blocks
    sized = sorted((Block(b.name, b.first, b.last, aligned(b.size, alignment)) for b in blocks if b.size > 0),
                   key=lambda b: (b.first, b.last, -b.size, b.name))
    names = [b.name for b in sized]
    if len(set(names)) != len(names):
        raise CkptError("two blocks of one layout share a name", "report this: the block list is malformed")
    floor = live_max(sized)
    if not sized:
        return Layout({}, 0, 0, "none")
    requests = [om.Allocation(b.name, b.size, b.first, b.last + 1) for b in sized]
    best: Layout | None = None
    for name in GREEDIES:
        found = _checked(sized, om.allocate(requests, allocator=name), floor, alignment, name)
        best = found if best is None or (found is not None and found.size < best.size) else best
        if best is not None and best.size == floor:
            return best
    exact = SupermallocAllocator(timeout=EXACT_SECONDS, num_threads=1).solve(tuple(requests))
    if exact.proved_optimal:
        found = _checked(sized, exact.allocations, floor, alignment, "supermalloc")
        if found is not None and (best is None or found.size < best.size):
            best = found
    return best or _stacked(sized, floor)


def lay_out_anonymous(blocks: list[Block], alignment: int = 4) -> Layout:
    """`lay_out` of the blocks under names that depend only on their spans and sizes: two lists that differ in
    names alone (a prediction and the generated code, say) get arenas of one size, each block the offset of its
    counterpart (blocks of one span and size, interchangeable, take their offsets in the order of their names)."""
    ranked = sorted((b for b in blocks if b.size > 0), key=lambda b: (b.first, b.last, -aligned(b.size, alignment),
                                                                     b.name))
    renamed = [Block(f"b{k:07d}", b.first, b.last, b.size) for k, b in enumerate(ranked)]
    layout = lay_out(renamed, alignment)
    offsets = {b.name: layout.offsets[f"b{k:07d}"] for k, b in enumerate(ranked)}
    return Layout(dict(sorted(offsets.items())), layout.size, layout.live_max, layout.allocator)


def _checked(blocks: list[Block], placed, floor: int, alignment: int, allocator: str) -> Layout | None:
    """The layout `placed` describes, if it is valid and aligned; None otherwise."""
    offsets = {a.id: a.offset for a in placed}
    if set(offsets) != {b.name for b in blocks} or any(v is None or v % alignment for v in offsets.values()):
        return None
    if overlapping(blocks, offsets) is not None:
        return None
    return Layout(dict(sorted(offsets.items())), max(offsets[b.name] + b.size for b in blocks), floor, allocator)


def _stacked(blocks: list[Block], floor: int) -> Layout:
    offsets, top = {}, 0
    for b in sorted(blocks, key=lambda b: b.name):
        offsets[b.name], top = top, top + b.size
    return Layout(offsets, top, floor, "stacked")


def overlapping(blocks: list[Block], offsets: dict[str, int]) -> tuple[str, str] | None:
    """Two blocks alive at one step whose byte ranges overlap, or None."""
    order = sorted(blocks, key=lambda b: (b.first, b.last, b.name))
    alive: list[Block] = []
    for block in order:
        alive = [a for a in alive if a.last >= block.first]
        low, high = offsets[block.name], offsets[block.name] + block.size
        for other in alive:
            if offsets[other.name] < high and low < offsets[other.name] + other.size:
                return other.name, block.name
        alive.append(block)
    return None
