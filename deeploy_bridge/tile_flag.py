"""A tile constraint that also hands each tile one flag of ckpt's, as Deeploy hands each tile its sizes (a per-tile
replacement): how ckpt's gradient templates (layernorm_grad, conv_grad_w) know the tile at which to zero."""
from __future__ import annotations

from collections.abc import Callable

from Deeploy.AbstractDataTypes import PointerClass
from Deeploy.CommonExtensions.DataTypes import uint8_t

FLAG = "ckpt_first_tile"     # 1 at a tile where the gradient starts afresh, 0 elsewhere; 1 where nothing is tiled


def flagged_constraint(base: type, flags: Callable[[type, object, list], list[int]]) -> type:
    """The installed tile constraint `base`, each tile also given FLAG: `flags(cls, schedule, absoluteOutputCubes)`,
    one value per tile of the solution Deeploy's own constraint serialised."""

    class Restarting(base):
        @classmethod
        def serializeTilingSolution(cls, tilingSolution, absoluteOutputCubes, targetMemLevel, ctxt,
                                    operatorRepresentation):
            replacement, schedule = super().serializeTilingSolution(tilingSolution, absoluteOutputCubes,
                                                                    targetMemLevel, ctxt, operatorRepresentation)
            replacement.perTileReplacements[FLAG] = flags(cls, schedule, absoluteOutputCubes)
            replacement.replacementTypes[FLAG] = PointerClass(uint8_t)
            return replacement, schedule

    Restarting.__name__ = f"Restarting{base.__name__}"
    return Restarting
