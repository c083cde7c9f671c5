"""The split home (`--home split`): what persists across steps in the level behind the chip, the rest on chip.

Deeploy's tiled flow gives each buffer a home level (`_memoryLevel`) before it tiles, with annotation passes run at
binding (MemoryLevelExtension: AnnotateIOMemoryLevel for graph I/O, then AnnotateDefaultMemoryLevel for every buffer
still without one; the Neureka target's weight pass moves chosen weights to another level the same way). The tiler
then moves each tensor's tiles from its own home. `AnnotatePersistentMemoryLevel` is one more such pass, run between
the two: it moves what persists to the persistent level, and everything else keeps the default level (on chip):
- constants (in a one-graph step its weights, updated in place);
- graph I/O, where the network's role says it persists: a split step's train network keeps its weights and
  gradient accumulators (every graph I/O but the buffers the harness touches at each mini-batch: the data, the
  reset flag, the loss), and its optimizer network's I/O are the train network's weights and accumulators;
- every buffer whose bytes are such a buffer's (a view, an update written in place: Deeploy's `_alias`).
Activations and transients are locals: they stay in the default level. The split is a fact of the buffer kinds, so
ckpt predicts it from the graph alone (`persistent_names`), and a test reads it back from Deeploy's context.
`split+` names what persists that ckpt brought on chip (the train network's names): those keep the default level,
in both networks (the optimizer's I/O that is such a buffer's bytes with it). Activations parked off chip
(`ckpt solve --park auto`) take the persistent level with their views, for the whole step.
"""
from __future__ import annotations

from Deeploy.CommonExtensions.OptimizationPasses.PassClasses import SequentialPass
from Deeploy.DeeployTypes import ConstantBuffer

from .split_step import OptimizerRole, Role, TrainRole


class AnnotatePersistentMemoryLevel(SequentialPass):
    """Moves what persists (see the module doc) to `level`; `on_chip`: graph I/O kept in the default level."""

    def __init__(self, level: str, io_persists: bool, on_chip: frozenset[str] = frozenset(),
                 parked: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.level, self.io_persists, self.on_chip, self.parked = level, io_persists, on_chip, parked

    def apply(self, ctxt, graph):
        buffers = {**ctxt.localObjects, **ctxt.globalObjects}
        roots = {name for name, buffer in ctxt.globalObjects.items()
                 if self._persists(buffer) and _bytes_of(ctxt, name) not in self.on_chip}
        roots |= {name for name in ctxt.localObjects if name in self.parked}
        for name, buffer in buffers.items():
            if name in roots or (hasattr(buffer, "_alias") and ctxt.dealiasBuffer(name) in roots):
                buffer._memoryLevel = self.level
        return ctxt, graph

    def _persists(self, buffer) -> bool:
        if buffer.name in self.on_chip:
            return False
        if isinstance(buffer, ConstantBuffer):
            return True
        io = getattr(buffer, "is_input", False) or getattr(buffer, "is_output", False)
        return bool(io) and self.io_persists


def _bytes_of(ctxt, name: str) -> str:
    """The buffer whose bytes `name` is (an accumulator's output is its input's), else `name`."""
    return ctxt.dealiasBuffer(name) if hasattr(ctxt.lookup(name), "_alias") else name


def persistent_pass(level: str, role: Role | None, brought: tuple[str, ...] = (), parked: tuple[str, ...] = ()
                    ) -> AnnotatePersistentMemoryLevel:
    """The pass for a network of `role` (None: a one-graph step, whose graph I/O is the harness's); `brought`: what
    persists kept on chip (split+), named as the train network (or a one-graph step) names it; `parked`: the train
    network's activations parked off chip with it (`ckpt solve --park auto`; the optimizer network has none)."""
    if isinstance(role, TrainRole):
        return AnnotatePersistentMemoryLevel(level, True, frozenset(role.on_chip) | frozenset(brought),
                                             frozenset(parked))
    if isinstance(role, OptimizerRole):
        return AnnotatePersistentMemoryLevel(level, True, role.brought(brought))
    return AnnotatePersistentMemoryLevel(level, False, frozenset(brought), frozenset(parked))


def buffer_levels(ctxt) -> dict[str, str]:
    """Each buffer's home level as Deeploy's context holds it (what the generated code allocates it in)."""
    return {name: buffer._memoryLevel for name, buffer in {**ctxt.localObjects, **ctxt.globalObjects}.items()
            if getattr(buffer, "_memoryLevel", None) is not None}
