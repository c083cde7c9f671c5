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
from .split_step import PersistentInputs


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
        self.outside: dict[str, frozenset[str]] = {}     # level -> buffers another network holds there

    def minimalloc(self, memoryMap, ctxt, nodeMemoryConstraint, capacity: int, memoryLevel: str):
        place_blocks(memoryMap, ctxt, nodeMemoryConstraint, int(capacity), memoryLevel, self.layout_log,
                     self.outside.get(memoryLevel, frozenset()))
        return memoryMap


class PersistentInputsTiler(SingleBufferTiler):
    """SingleBufferTiler whose home level keeps every graph input to the end of the step (split_step)."""

    memorySchedulerClass = PersistentInputs


class PersistentInputsLayoutTiler(CkptLayoutTiler):
    """CkptLayoutTiler whose home level keeps every graph input to the end of the step (split_step)."""

    memorySchedulerClass = PersistentInputs


def tiler_class(allocator: Allocator, persistent_inputs: bool = False) -> type[Tiler]:
    """The tiler for `allocator`; `persistent_inputs`: the step's graph inputs outlive it (a training harness)."""
    if allocator.tiled_layout is Allocator.CKPT:
        return PersistentInputsLayoutTiler if persistent_inputs else CkptLayoutTiler
    return PersistentInputsTiler if persistent_inputs else SingleBufferTiler
