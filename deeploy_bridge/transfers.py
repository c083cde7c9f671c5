"""The bytes the generated tiling code really moves into each block of a layer at a memory level.

Deeploy's tiler sizes a layer's blocks below the home level by its memory constraint (tile elements x type width
x multi-buffer coefficient), but the code moves what the layer's tile constraint serialises: per tile, the
HyperRectangle of each tensor loaded into (or stored from) the level (`TileConstraint.wrapTilingSolution`, which
TilingExtension's TilingCodeGeneration calls for every level it tiles into). The two can differ: on the training
branch a ConvGradX's dY cube carries the halo the constraint leaves out, and a Transpose copies its whole input
into a tile the constraint sized for one slice. A block laid out by the constraint alone is then overrun by its
own DMA. ckpt asks the tile constraint for the same schedules before the level is laid out, and gives each block
at least the largest cube any tile moves into it (`largest_transfer_bytes`).

The schedules are the code generator's: its base addresses are not known yet (they are what is being laid out),
so every block of the level gets a placeholder address while they are computed, as `Tiler.annotateMemoryLevel`
would give it one (a tensor homed at the level keeps none: the code moves nothing into it).
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Iterable, Sequence

from Deeploy.DeeployTypes import TransientBuffer, VariableBuffer
from Deeploy.TilingExtension.CodeTransformationPasses.TilingCodeGeneration import TilingCodeGeneration


def largest_transfer_bytes(cubes: Iterable[Sequence[int]], type_width: int, coefficient: int = 1) -> int:
    """Bytes a block must hold to take the largest of `cubes` (tile dims, in elements of `type_width` bits) in each
    of its `coefficient` buffers (multi-buffering): what the code's DMA writes from the block's base."""
    largest = max((math.prod(int(d) for d in dims) for dims in cubes), default=0)
    return math.ceil(largest * type_width / 8) * int(coefficient)


def tiled_template(layer):
    """The code snippet of `layer` whose template the tiler tiles (the one with a `tileConstraint`), or None."""
    snippets = [s for s in layer.mapper.binder.executionBlock.codeSnippets if hasattr(s.template, "tileConstraint")]
    return snippets[0] if len(snippets) == 1 else None


def tiling_generators(layer, level: str) -> list[TilingCodeGeneration]:
    """The passes of `layer`'s code transformation that generate tiling code into `level` (a pass may hold them:
    PULPOpen's PULPClusterTiling holds a single- and a double-buffering one and applies both)."""
    found = []
    for step in layer.mapper.binder.codeTransformer.passes:
        for candidate in (step, *vars(step).values()):
            if isinstance(candidate, TilingCodeGeneration) and candidate.localMemory == level:
                found.append(candidate)
    return found


def transferred_bytes(layer, node_constraint, ctxt, level: str) -> dict[str, int]:
    """Bytes the tiling code of `layer` moves into each of its blocks at `level` (tensor name -> bytes, the largest
    tile times the block's multi-buffer coefficient); empty when the layer's code moves nothing there."""
    snippet = tiled_template(layer)
    generators = tiling_generators(layer, level)
    if snippet is None or not generators:
        return {}
    representation = {key: _unravelled(ctxt, value) for key, value in snippet.operatorRepresentation.items()}
    with _placeholder_addresses(ctxt, node_constraint, level):
        _, schedules = snippet.template.tileConstraint.wrapTilingSolution(node_constraint, level, ctxt,
                                                                          representation)
    if not _generates_loop(schedules, {g.bufferCount for g in generators}):
        return {}
    cubes: dict[str, list[tuple[int, ...]]] = {}
    for schedule in schedules:
        for step in (*schedule.inputLoadSchedule, *schedule.outputLoadSchedule):
            for key, rectangle in step.items():
                cubes.setdefault(representation[key], []).append(tuple(rectangle.dims))
    sizes = {}
    for name, dims in cubes.items():
        memory = node_constraint.tensorMemoryConstraints[name].memoryConstraints[level]
        width = ctxt.lookup(name)._type.referencedType.typeWidth
        sizes[name] = largest_transfer_bytes(dims, width, memory.multiBufferCoefficient)
    return sizes


def _generates_loop(schedules, buffer_counts: set[int]) -> bool:
    """Whether a tiling pass makes a loop of transfers of `schedules` (TilingCodeGeneration.generateTilingLoop: some
    tensor is moved, and every moved tensor has as many base addresses as the pass has buffers)."""
    offsets = [o for s in schedules for o in (*s.inputBaseOffsets.values(), *s.outputBaseOffsets.values())]
    return bool(offsets) and any(all(len(o) == count for o in offsets) for count in buffer_counts)


def _unravelled(ctxt, value):
    """A tensor argument as the code generator reads it: the buffer behind a reference (TilingCodeGeneration)."""
    if isinstance(value, str) and ctxt.is_buffer(value):
        buffer = ctxt.lookup(value)
        if isinstance(buffer, VariableBuffer):
            return ctxt.unravelReference(buffer).name
    return value


@contextlib.contextmanager
def _placeholder_addresses(ctxt, node_constraint, level: str):
    """Every block of the layer at `level` addressed for the while (see the module doc), then unaddressed again."""
    placed = []
    for tensor in node_constraint.tensorMemoryConstraints.values():
        memory = tensor.memoryConstraints.get(level)
        buffer = ctxt.lookup(tensor.tensorName)
        homed = buffer._memoryLevel == level and not isinstance(buffer, TransientBuffer)
        if memory is not None and memory.addrSpace is None and not homed:
            memory.addrSpace = (0, 0)
            placed.append(memory)
    try:
        yield
    finally:
        for memory in placed:
            memory.addrSpace = None
