"""The tiling code of a split home's layers whose tensors live in both levels (the training branch).

Such a layer (a weight homed in L3 read into an output homed in L2, or an accumulator homed in L3 written from a
gradient homed in L2) gets two tiling loops: the one from L3 (through a tile buffer in L2) calls the one from L2
(into L1) once per tile, and the training branch numbers the inner loop's tiles one per call (TilingHoistingMixIn's
"outer driver" layout) so each call runs the tile the outer loop just brought in. A tensor homed in L3 is right
there: its L1 copy comes from the tile buffer, which holds only that tile. A tensor homed in L2 is not: Deeploy
points the inner loop at the tensor's start at every call and only moves the pointer from tile to tile within a
call, so every call reads (or writes) the first tile's bytes.

`tile_start_offsets()` makes each call start where its tile lies: the pointer into a tensor homed in L2 starts at
a table of each tile's byte offset, indexed by the call's tile (the inner loop's tile index). The offsets are the
tile's rectangle in the whole tensor: where the layer's output is homed in L2 the rectangles already are (the
outer tile is the whole tensor); where it is homed in L3 they are relative to the outer tile, whose place in the
output gives the tile's place in a tensor of the output's shape (an element-wise layer: the accumulators); any
other such layer is refused naming it. Nothing of Deeploy is changed outside a split deployment.
"""
from __future__ import annotations

import contextlib
import copy
import math

from Deeploy.Targets.PULPOpen.CodeTransformationPasses.PULPClusterTiling import PULPClusterTilingGenerationSB
from Deeploy.TilingExtension.MemoryConstraints import MemoryConstraint
from Deeploy.TilingExtension.TilingCodegen import (
    MemoryTransfer,
    calculateFlatOffset,
    computeTileHyperRectangles,
    stridesFromShape,
)

from .errors import BridgeError


@contextlib.contextmanager
def tile_start_offsets(enabled: bool = True):
    """While open, the L2-to-L1 tiling code of a layer homed in both levels starts each call at its tile."""
    if not enabled:
        yield
        return
    cls = PULPClusterTilingGenerationSB
    own = cls.__dict__.get("generateTilingLoop")
    inherited = cls.generateTilingLoop

    def generateTilingLoop(self, ctxt, executionBlock, nodeMemoryConstraint, tilingSchedules, variableReplacement,
                           operatorRepresentation):
        found = inherited(self, ctxt, executionBlock, nodeMemoryConstraint, tilingSchedules, variableReplacement,
                          operatorRepresentation)
        if found[2]:
            start_each_call_at_its_tile(self, found[0], nodeMemoryConstraint, tilingSchedules, operatorRepresentation)
        return found

    cls.generateTilingLoop = generateTilingLoop
    try:
        yield
    finally:
        if own is None:
            del cls.generateTilingLoop
        else:
            cls.generateTilingLoop = own


def start_each_call_at_its_tile(codegen, ctxt, constraint, schedules, op) -> None:
    """Point each tensor homed at the loop's outer level at its call's tile (see the module doc)."""
    outer_level = codegen.externalMemory
    io = {**constraint.inputTensorMemoryConstraints, **constraint.outputTensorMemoryConstraints}
    homes = {name: next(iter(tensor.memoryConstraints)) for name, tensor in io.items()}
    if outer_level not in homes.values() or all(home == outer_level for home in homes.values()):
        return                                    # one level feeds the loop: Deeploy's code is right
    tiles = [{**schedule.inputLoadSchedule[i], **schedule.outputLoadSchedule[i]}
             for schedule in schedules for i in range(len(schedule.outputLoadSchedule))]
    counts = list(ctxt.lookup(op["numTiles"]).values)
    if counts != list(range(len(tiles) + 1)):
        return                                    # one call walks every tile (no outer driver)
    name, output = next(iter(constraint.outputTensorMemoryConstraints.items()))
    shape = tuple(ctxt.lookup(name).shape)
    outer = None
    if homes[name] != outer_level:                # the output lives above: each call is one of its outer tiles
        whole = MemoryConstraint(homes[name], math.prod(shape))
        whole.shape = shape
        outer = [rect.offset for rect in computeTileHyperRectangles(
            MemoryTransfer(whole, copy.copy(output.memoryConstraints[outer_level])))]
        if len(outer) != len(tiles):
            raise BridgeError(f"the split home cannot deploy {op.get('nodeName', name)}: its {len(tiles)} tiles are "
                              f"not one per outer tile ({len(outer)}): use --home L3 or --home L2")
    for key in tiles[0]:
        buffer = ctxt.lookup(ctxt.lookup(op[key])._referenceName)
        if homes.get(buffer.name) != outer_level:
            continue                              # brought through a tile buffer that holds only this tile
        if all(math.prod(tile[key].dims) == math.prod(buffer.shape) for tile in tiles):
            continue                              # read whole at every tile (a flag, a scale): nothing moves
        if outer is not None and _squeezed(buffer.shape) != _squeezed(shape):
            raise BridgeError(f"the split home cannot deploy {op.get('nodeName', name)}: it writes a tensor homed in "
                              f"the level behind the chip from {buffer.name}, of another shape, in several tiles: "
                              "use --home L3 or --home L2")
        width = buffer._type.referencedType.typeWidth // 8
        whole_shape = tuple(io[buffer.name].memoryConstraints[outer_level].shape)
        offsets = []
        for index, tile in enumerate(tiles):
            place = tuple(tile[key].offset)
            rank = max(len(place), len(whole_shape))     # as Deeploy pads a transfer: leading zeros, leading ones
            strides = stridesFromShape((1,) * (rank - len(whole_shape)) + whole_shape)
            flat = calculateFlatOffset(_padded(place, rank), strides)
            if outer is not None:                       # the outer tile's place in the output, the same elements here
                flat += calculateFlatOffset(outer[index], stridesFromShape(shape))
            offsets.append(flat * width)
        if not any(offsets):
            continue
        table = codegen._hoistValues(ctxt, f"{key}_tile_start", offsets)
        reference = ctxt.lookup(codegen.prefix + buffer.name + "_ref")
        reference._offset = f"{ctxt._mangle(table.name)}[*{ctxt._mangle(op['tileIdxPtr'])}]"   # C names


def _padded(offset, rank: int) -> tuple[int, ...]:
    """`offset` with leading zeros up to `rank` (an outer tile's offset cut to a rank-`rank` tile's)."""
    offset = tuple(offset)
    return (0,) * (rank - len(offset)) + offset if len(offset) <= rank else offset[len(offset) - rank:]


def _squeezed(shape) -> tuple[int, ...]:
    return tuple(d for d in (shape if isinstance(shape, (tuple, list)) else (shape,)) if d != 1)
