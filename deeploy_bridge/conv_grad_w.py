"""ConvGradW with its weight gradient zeroed at the first H/W tile of the layer (the workaround of
workarounds.Defect.CONV_GRAD_W_ZEROING).

When the tiler cuts a ConvGradW over the gradient's height and width, each tile adds its share to the whole weight
gradient in L1, so the gradient must be zeroed at the first tile, and only there. The training branch's templates
zero it when `*tileIdxPtr == 0`; but tileIdxPtr counts the calls of the L1 tile loop, not its tiles: with home L3 each
L1 tile is a call of its own (numTiles {0, 1, 2, ...}) and the guard holds at the first tile only, while a layer
that lives in L2 (--home L2 or split) runs all its tiles in one call (numTiles {0, n}), tileIdxPtr stays 0, and
the gradient is zeroed at every tile: only the last tile's share is left.

ckpt binds the installed template with that guard replaced by the tile flag `ckpt_first_tile`: 1 where the layer
runs in one piece (the non-tiled flow, or a single tile) and, tiled, 1 for each tile of the gradient's height and
width origin (the first tile of each output-channel slab, whose weight rows start afresh), 0 for every other (the
tile constraint gives each tile its value, as Deeploy gives each tile its size). Everything else in the template
is the installed one's, so the code of a layer the guard computed right (home L3) is unchanged in what it computes.
"""
from __future__ import annotations

from Deeploy.DeeployTypes import NodeMapper, NodeTemplate
from Deeploy.TilingExtension.TilerExtension import TilingReadyNodeBindings

from .defects import CONV_GRAD_W_GUARD, Defect
from .template_cache import template_text
from .tile_flag import FLAG, flagged_constraint

OP = "ConvGradW"
GUARD = CONV_GRAD_W_GUARD


def guarded(binding) -> bool:
    """Whether `binding`'s template zeroes the weight gradient behind the tileIdxPtr guard."""
    source = template_text(getattr(binding, "template", None))
    return bool(GUARD.search(source))


def _restarting_template(template: NodeTemplate) -> NodeTemplate:
    """The installed template `template`, its guard on the weight gradient's zeroing replaced by ckpt's tile flag."""
    base = type(template)

    class Restarting(base):
        works_around = Defect.CONV_GRAD_W_ZEROING    # how a deployment's report knows it was bound (workarounds.bound)

        def alignToContext(self, ctxt, operatorRepresentation):
            ctxt, operatorRepresentation, names = super().alignToContext(ctxt, operatorRepresentation)
            operatorRepresentation.setdefault(FLAG, 1)
            return ctxt, operatorRepresentation, names

    Restarting.__name__ = f"Restarting{base.__name__}"
    return Restarting(GUARD.sub(f"${{{FLAG}}}", template_text(template)))


def _first_tiles(loads: list[dict], key: str) -> list[int]:
    """Per tile, 1 where its gradient tile (`key` of its input loads) starts at height and width 0."""
    flags = []
    for i, load in enumerate(loads):
        cube = load.get(key)
        flags.append(int(not any(cube.offset[2:4])) if cube is not None and len(cube.offset) == 4 else int(i == 0))
    return flags


def _slab_starts(cls, schedule, cubes) -> list[int]:
    """Per tile, 1 where it is the first of its output-channel slab (its gradient tile starts at height and width 0)."""
    return _first_tiles(schedule.inputLoadSchedule, getattr(cls, "gradOutKey", "grad_out"))


def restarting_conv_grad_w(mapping: dict) -> None:
    """Give `mapping` (a fresh copy of a platform's Mapping) a ConvGradW layer whose guarded bindings are ckpt's:
    the same parsers, type checkers, code transformers and tile constraints as the mapping's own, the installed
    template with its guard replaced by the tile flag."""
    layer = mapping.get(OP)
    if layer is None or not any(guarded(b) for m in layer.maps for b in m.bindings):
        return
    mappers = []
    for mapper in layer.maps:
        bindings = list(mapper.bindings)
        if any(guarded(b) for b in bindings):
            fresh = []
            for binding in bindings:
                if not guarded(binding):
                    fresh.append(binding)
                    continue
                constraint = flagged_constraint(type(binding.template.tileConstraint), _slab_starts)()
                fresh += TilingReadyNodeBindings(
                    [type(binding)(binding.typeChecker, _restarting_template(binding.template),
                                   binding.codeTransformer)], constraint)
            bindings = fresh
        mappers.append(NodeMapper(type(mapper.parser)(), bindings))
    mapping[OP] = type(layer)(mappers)
