"""The tilers ckpt runs Deeploy's tiled flow with: single buffering (training), and the arena allocator.

Deeploy's `Tiler` lays out every memory level with the strategy in `memoryAllocStrategy`. "TetrisRandom" packs
blocks with a randomised greedy inside the tiling model. "MiniMalloc" decouples the two: the tiler first
tiles, then calls `Tiler.minimalloc(memoryMap, ctxt, nodeMemoryConstraint, capacity, level)` once per layer
and level, which in Deeploy writes a CSV and runs an external binary. `CkptLayoutTiler` answers that call in
process with ckpt's own layout (deeploy_bridge.arena), so a tiled deploy costs no subprocess per layer.
"""
from __future__ import annotations

from Deeploy.TilingExtension.TilerExtension import Tiler

from .arena import LayoutLog, place_blocks
from .setup import Allocator


class SingleBufferTiler(Tiler):
    """One copy of each tile: training flows use single buffering."""

    def multiBufferStrategy(self, tilerModel, ctxt, pattern, path, hop, tensorName):
        return 1


class CkptLayoutTiler(SingleBufferTiler):
    """Single buffering, and every level laid out by ckpt instead of the MiniMalloc binary; `layout_log` keeps
    what it did (calls, and each level's last layout: the home level's is the whole network's)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.layout_log = LayoutLog()

    def minimalloc(self, memoryMap, ctxt, nodeMemoryConstraint, capacity: int, memoryLevel: str):
        place_blocks(memoryMap, ctxt, nodeMemoryConstraint, int(capacity), memoryLevel, self.layout_log)
        return memoryMap


def tiler_class(allocator: Allocator) -> type[Tiler]:
    return CkptLayoutTiler if allocator is Allocator.CKPT else SingleBufferTiler
