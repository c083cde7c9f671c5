"""ConvGradX with each H/W tile's origin folded into its padding (the workaround of
workarounds.Defect.CONV_GRAD_X_TILE_ORIGIN).

The tiler cuts a ConvGradX over dX's height and width and hands each tile a dY tile with its halo, the op's own
padding and the two tiles' origins (offset_grad_in_h/w of dX, offset_grad_out_h/w of dY). The training branch's
kernel (PULP_ConvGradX2d_..._CHW_Im2Col_tiled) has two paths: its direct loop (any stride) places each dY pixel by
the origins, but its im2col path (stride 1, the one taken whenever its buffers fit) reads dY at the dX tile's own
coordinates plus the padding, ignoring both origins. For every tile but the first of a row or column, the dY tile
starts `pad` rows or columns before the dX tile instead of at it, so each dX pixel is given the dY of its neighbour:
a gradient shifted by one pixel, flowing on into every gradient before the layer.

Both paths read the origins and the padding only as `origin_out * stride - pad - origin_in` (direct loop) and
`pad` (im2col, whose origins are implicitly 0). With stride 1, handing each tile the padding
`pad + origin_in - origin_out` and both origins 0 gives the direct loop the same indices as before and the im2col
path the ones it lacked. ckpt wraps the installed tile constraint so it hands the tiles exactly that; the template,
the kernel and the tiling stay Deeploy's. The first tile (origins 0) is handed what it was before, and so is the
non-tiled flow (no tiles) and any stride but 1 (only the direct loop runs).
"""
from __future__ import annotations

from Deeploy.DeeployTypes import NodeMapper
from Deeploy.TilingExtension.TilerExtension import TilingReadyNodeBindings

from .defects import IM2COL_KERNEL, Defect
from .template_cache import template_text

OP = "ConvGradX"
AXES = (("padding_y_top", "offset_grad_in_h", "offset_grad_out_h"),
        ("padding_x_left", "offset_grad_in_w", "offset_grad_out_w"))


def im2col_tiled(binding) -> bool:
    """Whether `binding`'s template calls the tiled im2col ConvGradX kernel."""
    source = template_text(getattr(binding, "template", None))
    return IM2COL_KERNEL in source and "ConvGradX" in source


def folded(replacements: dict[str, list], strides) -> bool:
    """Fold each tile's origins into its padding in `replacements` (per-tile lists, Deeploy's), where the stride is 1
    on both axes; False where nothing was folded (another stride, no tiles or a fold that would need a negative
    padding, which a stride-1 halo never does)."""
    if tuple(strides) != (1, 1) or not all(k in replacements for axis in AXES for k in axis):
        return False
    new = {}
    for pad, into, out in AXES:
        pads = [p + i - o for p, i, o in zip(replacements[pad], replacements[into], replacements[out])]
        if any(p < 0 or p > 255 for p in pads):
            return False
        new[pad], new[into], new[out] = pads, [0] * len(pads), [0] * len(pads)
    replacements.update(new)
    return True


def origin_folded_constraint(base: type) -> type:
    """The installed ConvGradX tile constraint `base`, each stride-1 tile's origins folded into its padding."""

    class OriginFolded(base):
        works_around = Defect.CONV_GRAD_X_TILE_ORIGIN    # how a deployment's report knows it was bound

        @classmethod
        def serializeTilingSolution(cls, tilingSolution, absoluteOutputCubes, targetMemLevel, ctxt,
                                    operatorRepresentation):
            replacement, schedule = super().serializeTilingSolution(tilingSolution, absoluteOutputCubes,
                                                                    targetMemLevel, ctxt, operatorRepresentation)
            folded(replacement.perTileReplacements, operatorRepresentation.get("strides", [1, 1]))
            return replacement, schedule

    OriginFolded.__name__ = f"OriginFolded{base.__name__}"
    return OriginFolded


def origin_folded_conv_grad_x(mapping: dict) -> None:
    """Give `mapping` (a fresh copy of a platform's Mapping) a ConvGradX layer whose im2col-tiled bindings carry
    ckpt's tile constraint: the same parsers, type checkers, templates and code transformers as the mapping's own."""
    layer = mapping.get(OP)
    if layer is None or not any(im2col_tiled(b) for m in layer.maps for b in m.bindings):
        return
    mappers = []
    for mapper in layer.maps:
        bindings = []
        for binding in mapper.bindings:
            if im2col_tiled(binding):
                constraint = origin_folded_constraint(type(binding.template.tileConstraint))()
                binding = TilingReadyNodeBindings([binding], constraint)[0]
            bindings.append(binding)
        mappers.append(NodeMapper(type(mapper.parser)(), bindings))
    mapping[OP] = type(layer)(mappers)
