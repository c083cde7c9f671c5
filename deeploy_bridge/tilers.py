"""The tilers ckpt runs Deeploy's tiled flow with: single buffering (training), and the arena allocator.

Deeploy's `Tiler` lays out every memory level with the strategy in `memoryAllocStrategy`. "TetrisRandom" packs
blocks with a randomised greedy inside the tiling model. "MiniMalloc" decouples the two: the tiler first
tiles, then calls `Tiler.minimalloc(memoryMap, ctxt, nodeMemoryConstraint, capacity, level)` once per layer
and level, which in Deeploy writes a CSV and runs an external binary. `CkptLayoutTiler` answers that call in
process with ckpt's own layout (deeploy_bridge.arena), so a tiled deploy costs no subprocess per layer. Below the
home level each block list is one layer's: the tiler keeps the layers in schedule order (`setupModel`) and which
layer each block list belongs to (`computeMemoryMap`), so every block is laid out with room for what that layer's
tiling code really moves into it (deeploy_bridge.transfers).
"""
from __future__ import annotations

import math

from Deeploy.DeeployTypes import TransientBuffer
from Deeploy.TilingExtension.TilerExtension import Tiler

from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.solver.memory.layout import lay_out

from .arena import ALIGNMENT, LayoutLog, growth, place_blocks, size_blocks
from .errors import BridgeError
from .setup import Allocator
from .split_step import PersistentInputs
from .transfers import transferred_bytes

RETILINGS = 8   # solves at most, each leaving more room for what the code moves beyond the tiler's count


class SingleBufferTiler(Tiler):
    """One copy of each tile: training flows use single buffering."""

    def multiBufferStrategy(self, tilerModel, ctxt, pattern, path, hop, tensorName):
        return 1


class CkptLayoutTiler(SingleBufferTiler):
    """Single buffering, and every level laid out by ckpt instead of the MiniMalloc binary; `layout_log` keeps
    what it did (calls, and each level's last layout: the home level's is the whole network's).

    Below the home level a block gets what the layer's code moves into it where Deeploy's tiler counted less
    (deeploy_bridge.transfers). Where that no longer fits the level, the tiler solves again with that layer's
    tiles leaving the difference free (`_margins`), so the layer gets smaller tiles, until every layer fits."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.layout_log = LayoutLog()
        self.outside: dict[str, frozenset[str]] = {}     # level -> buffers another network holds there
        self._setup: tuple = ()                          # setupModel's arguments: the model is set up again with them
        self._layers: list[str] = []                     # each pattern's layer, in schedule order
        self._margins: dict[tuple[int, str], int] = {}   # (pattern, level) -> bytes its tiles leave free there
        self._patterns: dict[int, int] = {}              # id of a pattern's node constraint -> the pattern's index
        self._moved: dict[tuple[int, str], dict[str, int]] = {}   # (pattern, level) -> bytes moved per block

    def setupModel(self, ctxt, schedule, layerBinding, targetMemoryLevelMapping):
        self._setup = (ctxt, schedule, layerBinding, targetMemoryLevelMapping)
        self._layers = [(entry if isinstance(entry, list) else [entry])[0].name for entry in schedule]
        ctxt = super().setupModel(ctxt, schedule, layerBinding, targetMemoryLevelMapping)
        for (pattern, level), margin in sorted(self._margins.items()):
            self._leave_free(ctxt, pattern, level, margin)
        return ctxt

    def computeTilingSchedule(self, ctxt):
        for _ in range(RETILINGS):
            solution = self._solve(ctxt)
            overflows = self._overflows(ctxt, solution)
            if not overflows:
                break
            for key, (grown, over) in overflows.items():
                self._margins[key] = max(self._margins.get(key, 0) + over, grown)
            self.innerMemoryScheduler = self.memorySchedulerClass("_inner", tileScheduler=True)
            self.outerMemoryScheduler = self.memorySchedulerClass("_outer", tileScheduler=False)
            self.setupModel(*self._setup)
        return solution     # one still too large after RETILINGS: place_blocks refuses it, naming the layer

    def minimalloc(self, memoryMap, ctxt, nodeMemoryConstraint, capacity: int, memoryLevel: str):
        pattern = self._patterns.get(id(nodeMemoryConstraint)) if nodeMemoryConstraint is not None else None
        moved = self._moved_into(ctxt, pattern, nodeMemoryConstraint, memoryLevel) if pattern is not None else {}
        place_blocks(memoryMap, ctxt, nodeMemoryConstraint, int(capacity), memoryLevel, self.layout_log,
                     self.outside.get(memoryLevel, frozenset()), moved,
                     self._layers[pattern] if pattern is not None else None)
        return memoryMap

    def _solve(self, ctxt):
        """Deeploy's tiling solution; a model the margins made infeasible is refused naming their layers."""
        try:
            solution = super().computeTilingSchedule(ctxt)
        except RuntimeError:
            if not self._margins:
                raise
            short = ", ".join(f"{self._layers[p]} ({margin} B in {level})" for (p, level), margin in
                              sorted(self._margins.items()))
            raise BridgeError(f"no tiling leaves room for what the tiling code moves beyond Deeploy's count: {short}: "
                              "raise the level's size") from None
        self._patterns = {id(p.nodeConstraints[0]): i for i, p in enumerate(solution) if p.nodeConstraints}
        self._moved = {}
        return solution

    def _moved_into(self, ctxt, pattern: int, constraint, level: str) -> dict[str, int]:
        """Bytes the code of `pattern`'s layer moves into each of its blocks at `level` (once per solution)."""
        if (pattern, level) not in self._moved:
            layer = self._setup[2][self._layers[pattern]]
            self._moved[pattern, level] = transferred_bytes(layer, constraint, ctxt, level)
        return self._moved[pattern, level]

    def _overflows(self, ctxt, solution) -> dict[tuple[int, str], tuple[int, int]]:
        """(pattern, level) -> (bytes its code moves beyond the tiler's count, bytes by which it then overflows the
        level) for each layer that no longer fits a level below the home one; the block lists are Deeploy's
        (`Tiler.computeMemoryMap`)."""
        home = self.memoryHierarchy._defaultMemoryLevel.name
        found = {}
        for level in self.innerMemoryScheduler.memoryMap:
            reserved = self._reserved(ctxt, level)
            if level == home and not reserved:
                continue
            lists = [*self.innerMemoryScheduler.memoryMap[level],
                     *(self.outerMemoryScheduler.memoryMap.get(level, []) if level != home else [])]
            free = self.memoryHierarchy.memoryLevels[level].size - \
                self.outerMemoryScheduler.getConstantTensorOffset(ctxt, level) - reserved
            for pattern, blocks in enumerate(lists):
                if not blocks or pattern >= len(solution):
                    continue
                constraint = solution[pattern].nodeConstraints[0]
                sized = size_blocks(blocks, ctxt, constraint, level, self.outside.get(level, frozenset()),
                                    self._moved_into(ctxt, pattern, constraint, level))
                size = lay_out(sized.blocks, ALIGNMENT).size
                if size > free:
                    found[pattern, level] = (growth(sized.grown), size - free)
        return found

    def _reserved(self, ctxt, level: str) -> int:
        """Bytes of `level` its whole-network blocks hold below every layer's tiles (none: only a split home has
        both at one level)."""
        return 0

    def _leave_free(self, ctxt, pattern: int, level: str, margin: int, tiles_only: bool = False) -> None:
        """Constrain the tiles of `pattern` at `level` to leave `margin` bytes of it free: the sum Deeploy's tiler
        bounds (each tile's elements x width x buffers, plus the level's constants), plus `margin`, fits.
        `tiles_only`: count only the sizes the tiler chooses (a tensor whose home is `level` is in `margin`)."""
        counted = 0
        for tensor in self.symbolicMemoryConstraints[pattern].nodeConstraints[0].tensorMemoryConstraints.values():
            memory = tensor.memoryConstraints.get(level)
            if memory is None or (tiles_only and isinstance(memory.size, int)):
                continue
            buffer = ctxt.lookup(tensor.tensorName)
            width = 1 if isinstance(buffer, TransientBuffer) else buffer._type.referencedType.typeWidth // 8
            counted = counted + memory.size * width * memory.multiBufferCoefficient
        if isinstance(counted, int):
            return          # nothing the tiler chooses: a smaller tiling cannot help
        offset = self.outerMemoryScheduler.getConstantTensorOffset(ctxt, level)
        self.tilerModel.addConstraint(counted + offset + margin, memoryLevel=self.memoryHierarchy.memoryLevels[level])


class SplitHomeTiler(CkptLayoutTiler):
    """CkptLayoutTiler for a split home (deeploy_bridge.home_split): Deeploy's default level (on chip) holds both the
    whole network's blocks of the tensors homed there and, per layer, the tiles of the tensors homed off chip that
    the layer moves through it. Deeploy's MiniMalloc path lays out only the first at its default level; here each
    level is laid out as its home blocks from address 0, then each layer's tiles above them, and the tiler keeps
    each layer's tiles within what the home blocks leave free."""

    def setupModel(self, ctxt, schedule, layerBinding, targetMemoryLevelMapping):
        ctxt = super().setupModel(ctxt, schedule, layerBinding, targetMemoryLevelMapping)
        home = self.memoryHierarchy._defaultMemoryLevel.name
        reserved = self._reserved(ctxt, home)
        if reserved:
            for pattern in range(len(self.symbolicMemoryConstraints)):
                self._leave_free(ctxt, pattern, home, reserved, tiles_only=True)
        return ctxt

    def computeTilingSchedule(self, ctxt):
        solution = super().computeTilingSchedule(ctxt)
        if deeploy_flavour() is Flavour.TRAINING_BRANCH:
            return solution        # its tiles nest one per call; split_codegen starts each call at its tile
        mixed = self._mixed_tiled_layers(ctxt, solution)
        if mixed:
            named = ", ".join(mixed[:3]) + (f" and {len(mixed) - 3} more" if len(mixed) > 3 else "")
            raise BridgeError(f"the split home cannot deploy {named}: each reads or writes tensors homed in both "
                              "levels and takes more than one tile, and Deeploy's tiling code then runs the layer's "
                              "on-chip loop once per tile of the off-chip one from its start (its results would be "
                              "wrong): "
                              "use --home L3 or --home L2")
        return solution

    def _mixed_tiled_layers(self, ctxt, solution) -> list[str]:
        """The layers Deeploy's two-level tiling code computes wrong under a split home: a layer whose (non-transient)
        tensors live at both levels has a tiling loop from the off-chip level (a step per tile) around its on-chip
        loop, and the on-chip loop's pointers into a tensor homed on chip restart at the tensor's start at each step
        (the training branch), or its tile counts do not nest (the release). One tile is right in both."""
        found = []
        for pattern, step in enumerate(solution):
            if not step.nodeConstraints:
                continue
            constraint = step.nodeConstraints[0]
            homes = {ctxt.lookup(name)._memoryLevel for name in constraint.tensorMemoryConstraints
                     if not isinstance(ctxt.lookup(name), TransientBuffer)}
            if len(homes) > 1 and any(_tiles_more_than_once(ctxt.lookup(name), tensor)
                                      for name, tensor in constraint.outputTensorMemoryConstraints.items()):
                found.append(self._layers[pattern])
        return found

    def _home_blocks(self, level: str) -> list:
        lists = self.outerMemoryScheduler.memoryMap.get(level, [])
        return lists[-1] if lists else []

    def _reserved(self, ctxt, level: str) -> int:
        blocks = self._home_blocks(level)
        if not blocks:
            return 0
        sized = size_blocks(blocks, ctxt, None, level, self.outside.get(level, frozenset()))
        return lay_out(sized.blocks, ALIGNMENT).size

    parked: frozenset[str] = frozenset()     # activations parked off chip (DeeploySetup.parked): locals homed there

    def assertUniformMemoryLevelAllocation(self, ctxt, defaultMemoryLevel: str) -> bool:
        """Every local in the default level, but a view of a buffer homed elsewhere, which lives with its bytes, and
        a parked activation (with its views), homed off chip for the whole step."""
        return all(buffer._memoryLevel == defaultMemoryLevel or ctxt.is_global(ctxt.dealiasBuffer(name))
                   or ctxt.dealiasBuffer(name) in self.parked for name, buffer in ctxt.localObjects.items())

    def computeMemoryMap(self, ctxt, tilingSolution):
        memoryMap = {}
        for level, inner in self.innerMemoryScheduler.memoryMap.items():
            outer = self.outerMemoryScheduler.memoryMap.get(level, [])
            free = self.memoryHierarchy.memoryLevels[level].size - \
                self.outerMemoryScheduler.getConstantTensorOffset(ctxt, level)
            outside = self.outside.get(level, frozenset())
            reserved = 0
            for blocks in outer:
                if blocks:
                    reserved = place_blocks(blocks, ctxt, None, free, level, self.layout_log, outside).size
                    self.layout_log.home[level] = reserved
            for pattern, blocks in enumerate(inner):
                if blocks:
                    constraint = tilingSolution[pattern].nodeConstraints[0]
                    place_blocks(blocks, ctxt, constraint, free - reserved, level, self.layout_log, outside,
                                 self._moved_into(ctxt, pattern, constraint, level), self._layers[pattern], reserved)
            memoryMap[level] = [*inner, *outer]
        return memoryMap


def _tiles_more_than_once(buffer, tensor) -> bool:
    """Whether the tiling cuts `buffer` (an output) into more than one tile at its innermost level."""
    inner = list(tensor.memoryConstraints.values())[-1]
    return isinstance(inner.size, int) and inner.size < math.prod(buffer.shape)


class PersistentInputsSplitHomeTiler(SplitHomeTiler):
    """SplitHomeTiler whose graph inputs live to the end of the step (split_step)."""

    memorySchedulerClass = PersistentInputs


class PersistentInputsTiler(SingleBufferTiler):
    """SingleBufferTiler whose home level keeps every graph input to the end of the step (split_step)."""

    memorySchedulerClass = PersistentInputs


class PersistentInputsLayoutTiler(CkptLayoutTiler):
    """CkptLayoutTiler whose home level keeps every graph input to the end of the step (split_step)."""

    memorySchedulerClass = PersistentInputs


def tiler_class(allocator: Allocator, persistent_inputs: bool = False, split: bool = False) -> type[Tiler]:
    """The tiler for `allocator`; `persistent_inputs`: the step's graph inputs outlive it (a training harness);
    `split`: a split home (deeploy_bridge.home_split), which only ckpt's layout lays out."""
    if split:
        if allocator.tiled_layout is not Allocator.CKPT:
            raise BridgeError(f"the split home is laid out by ckpt's allocator, not {allocator.value}: drop "
                              "--allocator, or use --home L2 or L3")
        return PersistentInputsSplitHomeTiler if persistent_inputs else SplitHomeTiler
    if allocator.tiled_layout is Allocator.CKPT:
        return PersistentInputsLayoutTiler if persistent_inputs else CkptLayoutTiler
    return PersistentInputsTiler if persistent_inputs else SingleBufferTiler
