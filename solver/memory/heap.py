"""The heap a schedule needs on the device, not just its live bytes: PMSIS's L2 allocator as a model.

Deeploy's non-tiled code mallocs each buffer with ``pi_l2_malloc`` and frees it with ``pi_l2_free``. PMSIS
serves these from a free list without headers: sizes are rounded up to its chunk size (8 B on 32-bit PULP),
the first free chunk by address that fits is taken and its *end* is handed out, and frees coalesce with their
neighbours. Long-lived buffers left between freed ones fragment the heap, so a schedule can need more heap
than its live-bytes peak (on CCT2_FT2 up to ~12% for heavily recomputed schedules). The events come from the
replay simulator in Deeploy's order: a layer's outputs then its scratch are allocated, then the buffers it
was the last reader of (in input order) and its scratch are freed. Checked against the generated code by
deeploy_bridge/code_memory.py (tests/test_fidelity.py).
"""
from __future__ import annotations

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.simulate import MemoryTrace, RunSequence, memory_trace

Event = tuple[str, int, int]  # ("malloc" | "free", bytes, block id)
GRANULE = 8


def fits(events: list[Event], heap: int, granule: int = GRANULE) -> bool:
    """Whether a first-fit heap of `heap` bytes serves every malloc of `events`."""
    free: list[list[int]] = [[0, heap - heap % granule]]  # address-sorted [start, size] chunks
    where: dict[int, int] = {}
    for kind, nbytes, ident in events:
        size = -(-nbytes // granule) * granule
        if kind == "malloc":
            i = next((i for i, (_, avail) in enumerate(free) if avail >= size), None)
            if i is None:
                return False
            free[i][1] -= size
            where[ident] = free[i][0] + free[i][1]  # the chunk's end, as PMSIS does
            if free[i][1] == 0:
                free.pop(i)
        elif ident in where:
            _release(free, where.pop(ident), size)
    return True


def smallest_heap(events: list[Event], granule: int = GRANULE, lower: int = 0) -> int:
    """Smallest heap (to `granule`) first-fit serves `events` in, by bisection from `lower` (the live peak).

    First-fit is not strictly monotone in the heap size; bisection returns a size that works whose predecessor
    step fails, which is what trying sizes on the device would find."""
    total = sum(-(-n // granule) * granule for kind, n, _ in events if kind == "malloc")
    lo, hi = max(0, lower // granule - 1), -(-total // granule)
    if not fits(events, hi * granule, granule):
        raise ValueError("first-fit failed with room for every block at once")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fits(events, mid * granule, granule):
            hi = mid
        else:
            lo = mid
    return hi * granule


def _release(free: list[list[int]], start: int, size: int) -> None:
    i = next((i for i, (s, _) in enumerate(free) if s > start), len(free))
    free.insert(i, [start, size])
    if i + 1 < len(free) and start + size == free[i + 1][0]:
        free[i][1] += free.pop(i + 1)[1]
    if i > 0 and free[i - 1][0] + free[i - 1][1] == start:
        free[i - 1][1] += free.pop(i)[1]


def malloc_events(graph: TrainGraph, seq: RunSequence, result: MemoryTrace | None = None) -> list[Event]:
    """The malloc/free sequence the replay implies, in the order Deeploy's code issues it."""
    result = result or memory_trace(graph, seq)
    made: dict[int, list[int]] = {}
    dying: dict[int, list[int]] = {}
    for b, buf in enumerate(result.buffers):
        made.setdefault(buf.written_at, []).append(b)
        dying.setdefault(buf.last_read, []).append(b)
    n, events = len(result.buffers), []
    for k, (name, _) in enumerate(seq):
        events += [("malloc", result.buffers[b].nbytes, b) for b in made.get(k, ())]
        scratch = result.scratch[k] if result.scratch else 0
        if scratch:
            events.append(("malloc", scratch, n + k))
        position = {graph.root(t): j for j, t in reversed(list(enumerate(graph.ops[graph.index[name]].inputs)))}
        order = sorted(dying.get(k, ()), key=lambda b: position.get(result.buffers[b].tensor, len(position)))
        events += [("free", result.buffers[b].nbytes, b) for b in order]
        if scratch:
            events.append(("free", scratch, n + k))
    return events


def heap_bytes(graph: TrainGraph, seq: RunSequence, granule: int = GRANULE) -> int:
    """Smallest PMSIS L2 heap that runs `seq`: its live-bytes peak plus rounding and fragmentation."""
    result = memory_trace(graph, seq)
    return smallest_heap(malloc_events(graph, seq, result), granule, lower=result.peak_bytes)
