"""What the tiler's own lifetimes say about the home level (L3), apart from how its allocator packs them.

The tiled flow places every home-level buffer at a static offset in one arena
(``Tiler._convertCtxtToStaticSchedule``: arena = highest end address). Two things make that arena larger than
ckpt's prediction, and this module separates them:

* lifetimes (``MemoryScheduler._calculateLifetimes`` / ``_dealiasLifetimeMap``): a buffer lives from its first
  to its last step, extended through ``_alias`` (Reshape views cost nothing when their source is in the same
  map); graph inputs live from step 0, graph outputs to the last step. The peak of bytes alive at one step is
  a floor for any allocator. Local buffers only: the same rules as ckpt's simulator.
* packing: TetrisRandom (or MiniMalloc) places the blocks; arena minus the lifetime peak is its loss.
"""
from __future__ import annotations

from dataclasses import dataclass

from .buffers import buffer_bytes


@dataclass(frozen=True)
class LifetimePeaks:
    """Bytes alive at the worst step of the tiler's home-level memory map."""

    all_buffers: int  # locals and graph I/O homed at this level
    local: int  # activations only (comparable with ckpt's predicted peak)
    io_bytes: int  # graph inputs/outputs homed at this level


def capture_memory_map(tiler) -> dict:
    """Wrap ``tiler.computeMemoryMap`` so the map it returns is kept in the returned dict under "map", and the tiling
    solution it was given under "solution"."""
    kept: dict = {}
    original = tiler.computeMemoryMap

    def computeMemoryMap(ctxt, tiling_solution):
        kept["solution"] = tiling_solution
        kept["map"] = original(ctxt, tiling_solution)
        return kept["map"]

    tiler.computeMemoryMap = computeMemoryMap
    return kept


def lifetime_peaks(ctxt, memory_map: dict, level: str) -> LifetimePeaks:
    """Peaks over the last pattern list of ``level`` (the home level's whole-network schedule)."""
    blocks = memory_map.get(level, [[]])[-1]
    names = {b.name for b in blocks}
    spans = []  # (first step, last step, bytes, is graph I/O)
    for block in blocks:
        buf = ctxt.lookup(block.name)
        alias = getattr(buf, "_alias", None)
        if isinstance(alias, str) and (ctxt.is_global(alias) or alias in names):
            continue  # zero-cost view, as the tiler treats it
        nbytes = buffer_bytes(buf)
        spans.append((block.lifetime[0], block.lifetime[1], nbytes, bool(buf.is_input or buf.is_output)))
    steps = range(max((last for _, last, _, _ in spans), default=-1) + 1)
    alive = lambda keep: max((sum(n for a, b, n, io in spans if a <= t <= b and keep(io)) for t in steps), default=0)
    return LifetimePeaks(all_buffers=alive(lambda io: True), local=alive(lambda io: not io),
                         io_bytes=sum(n for *_, n, io in spans if io))
