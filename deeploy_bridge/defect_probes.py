"""Each defect of deeploy_bridge.defects looked for in the installed Deeploy's own code: asked (its SoftmaxGrad tile
constraint given one tile of an axis-1 softmax) or read (the LayerNormalizationGrad and ConvGradW templates it
binds)."""
from __future__ import annotations

import importlib
import inspect
import os
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx_graphsurgeon as gs
from Deeploy.Targets.PULPOpen.Platform import PULPMapping
from Deeploy.Targets.PULPOpen.Templates import FloatLayernormTemplate
from Deeploy.Targets.PULPOpen.TileConstraints.iSoftmaxTileConstraint import SoftmaxGradTileConstraint
from Deeploy.TilingExtension.TilingCodegen import AbsoluteHyperRectangle, HyperRectangle

from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.paths import shared_folder

from .conv_grad_w import GUARD, OP, guarded
from .conv_grad_x import OP as GRAD_X
from .conv_grad_x import im2col_tiled
from .defects import Defect, Found
from .pw_conv_grad_w import OP as PW_OP
from .pw_conv_grad_w import pointwise
from .template_cache import template_text


def _source_line(obj, pattern: str) -> tuple[str, int]:
    """The installed file of `obj` (relative to the folder holding the Deeploy package) and the first line in it
    matching `pattern`, searched from the start of `obj`'s own source."""
    path = Path(inspect.getsourcefile(obj)).resolve()
    lines, start = inspect.getsourcelines(obj)
    offset = next((i for i, text in enumerate(lines) if re.search(pattern, text)), 0)
    parts = path.parts
    root = len(parts) - 1 - parts[::-1].index("Deeploy")
    return "/".join(parts[root:]), max(start, 1) + offset


def _softmax_grad_length(axis_length: int = 4) -> int:
    """The softmax length the installed SoftmaxGrad tile constraint hands the kernel for one whole tile of a
    [1, n, 1] tensor whose softmax runs along axis 1."""
    names = {"upstream_grad": "dy", "softmax_output": "y", "softmax_grad": "dx"}
    level = SimpleNamespace(addrSpace=None, multiBufferCoefficient=1)
    tensors = {name: SimpleNamespace(memoryConstraints={"L1": level}) for name in names.values()}
    solution = SimpleNamespace(tensorMemoryConstraints=tensors,
                               inputTensorMemoryConstraints={k: tensors[k] for k in ("dy", "y")},
                               outputTensorMemoryConstraints={"dx": tensors["dx"]})
    cube = AbsoluteHyperRectangle(HyperRectangle((0, 0, 0), (1, axis_length, 1)), (0, 0, 0))
    replacement, _ = SoftmaxGradTileConstraint.serializeTilingSolution(
        solution, [cube], "L1", None, {**names, "axis": 1, "lastDimLength": axis_length, "size": axis_length})
    return int(replacement.perTileReplacements["lastDimLength"][0])


def softmax_grad_axis() -> Found | None:
    """The release has the same line, but its tiled code of the reshaped form frees a view's L3 block with another
    block's size (ckpt's runtime faults on a [1, 16, 1] SoftmaxGrad), and no graph of the release's has such a
    SoftmaxGrad: the workaround is the training branch's."""
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH or _softmax_grad_length(4) == 4:
        return None
    file, line = _source_line(SoftmaxGradTileConstraint.serializeTilingSolution, r"lastDimLength\s*=")
    return Found(Defect.SOFTMAX_GRAD_AXIS, file, line,
                 "SoftmaxGrad's tile constraint takes the softmax length from the tile's last dimension, not the "
                 "node's axis: each SoftmaxGrad along another axis is handed its inputs reshaped to their 2-D form, "
                 "the axis and all after it last")


def layernorm_grad_binding():
    """The binding the installed Deeploy's PULPOpen platform gives LayerNormalizationGrad (None: no such op)."""
    layer = PULPMapping.get("LayerNormalizationGrad")
    maps = getattr(layer, "maps", None) or []
    bindings = getattr(maps[0], "bindings", None) if maps else None
    return bindings[0] if bindings else None


STATIC = re.compile(r"^\s*static\b", re.MULTILINE)


def layernorm_grad_zeroing() -> Found | None:
    binding = layernorm_grad_binding()
    source = template_text(getattr(binding, "template", None))
    if not STATIC.search(source):     # a template with no C `static` state starts every call afresh
        return None
    file, line = _source_line(FloatLayernormTemplate, r"^\s*static\b")
    return Found(Defect.LAYERNORM_GRAD_ZEROING, file, line,
                 "LayerNormalizationGrad's template zeroes the weight and bias gradients behind a C static flag, "
                 "once per process: ckpt binds its own template, which zeroes them at the first tile of every call")


def conv_grad_w_zeroing() -> Found | None:
    layer = PULPMapping.get(OP)
    if layer is None or not any(guarded(b) for m in layer.maps for b in m.bindings):
        return None
    template = importlib.import_module("Deeploy.Targets.PULPOpen.Templates.FloatConvGradTemplate")  # not in the release
    file, line = _source_line(template, GUARD.pattern)
    return Found(Defect.CONV_GRAD_W_ZEROING, file, line,
                 "ConvGradW's templates zero the weight gradient when *tileIdxPtr == 0, which counts the calls of the "
                 "L1 tile loop, not its tiles: a layer in L2 runs all its H/W tiles in one call and keeps only the "
                 "last one's share; ckpt binds the template with the zeroing at the first H/W tile of the layer")


def _conv_grad_x_origins(constraint: type) -> dict[str, list[int]]:
    """What the installed ConvGradX tile constraint `constraint` hands two tiles side by side of a stride-1 3x3
    ConvGradX padded by 1 (dX [1, 1, 4, 4] cut in two along its width): Deeploy's per-tile replacements."""
    replacement, _ = conv_grad_x_tiling(constraint, ((1, 2, 4, 4), (2, 1, 3, 3), (1, 1, 4, 4)),
                                        [(0, 4, w, 2) for w in (0, 2)], 1)
    return replacement.perTileReplacements


def conv_grad_x_tiling(constraint: type, shapes: tuple[tuple[int, ...], ...], cuts: list[tuple[int, int, int, int]],
                       pad: int) -> tuple:
    """(per-tile replacements, load schedule) that the ConvGradX tile constraint `constraint` serialises for a
    stride-1 ConvGradX of (dY, W, dX) `shapes`, padded by `pad` on every side, with dX cut at `cuts` ((h0, hsize,
    w0, wsize) each): a solution of the tiler's shape without running the tiler."""
    dims = dict(zip(("dy", "w", "dx"), shapes))
    level = SimpleNamespace(addrSpace=None, multiBufferCoefficient=1)
    tensors = {name: SimpleNamespace(memoryConstraints={"L1": level}) for name in dims}
    solution = SimpleNamespace(tensorMemoryConstraints=tensors,
                               inputTensorMemoryConstraints={k: tensors[k] for k in ("dy", "w")},
                               outputTensorMemoryConstraints={"dx": tensors["dx"]})
    ctxt = SimpleNamespace(lookup=lambda name: SimpleNamespace(shape=dims[name]))
    channels = dims["dx"][1]
    cubes = [AbsoluteHyperRectangle(HyperRectangle((0, 0, h, w), (1, channels, hs, ws)), (0, 0, h, w))
             for h, hs, w, ws in cuts]
    return constraint.serializeTilingSolution(solution, cubes, "L1", ctxt,
                                              {"grad_out": "dy", "weight": "w", "grad_in": "dx",
                                               "pads": [pad] * 4, "strides": [1, 1]})


IM2COL_ROW = re.compile(r"h_off\s*=\s*\(int32_t\)\s*h\s*\+\s*pad_t\b")
KERNEL_FILE = "TargetLibraries/PULPOpen/src/ConvGrad.c"


def _kernel_line(pattern: re.Pattern) -> int | None:
    """The line of the training branch's ConvGrad.c (in the checkout beside the shared models, or
    $CKPT_DEEPLOY_ROOT) matching `pattern`, or None where no such checkout is readable."""
    for root in filter(None, (os.environ.get("CKPT_DEEPLOY_ROOT"), shared_folder() / "deeploy-train")):
        try:
            text = (Path(root) / KERNEL_FILE).read_text(errors="replace")
        except OSError:
            continue
        match = pattern.search(text)
        if match:
            return text.count("\n", 0, match.start()) + 1
    return None


def conv_grad_x_tile_origin() -> Found | None:
    layer = PULPMapping.get(GRAD_X)
    binding = next((b for m in getattr(layer, "maps", ()) for b in m.bindings if im2col_tiled(b)), None)
    if binding is None:
        return None
    handed = _conv_grad_x_origins(type(binding.template.tileConstraint))
    if handed["offset_grad_in_w"][1] == 0 or handed["padding_x_left"][1] != 1:
        return None        # the origins are not handed apart from the padding: nothing for the im2col path to miss
    line = _kernel_line(IM2COL_ROW)
    if line is None:       # no kernel source here: name the template that calls the kernel
        file, line = _source_line(importlib.import_module(binding.template.__module__), r"_CHW_Im2Col_tiled\(")
    else:
        file = KERNEL_FILE
    return Found(Defect.CONV_GRAD_X_TILE_ORIGIN, file, line,
                 "ConvGradX's tiled im2col kernel (stride 1) reads dY at the dX tile's own coordinates plus the "
                 "op's padding, ignoring the tiles' origins the tile constraint hands it: every H/W tile but the first "
                 "gets its neighbour pixel's gradient; ckpt's tile constraint folds each tile's origins into its "
                 "padding")


def _pointwise_takes(strides: list[int]) -> bool:
    """Whether the installed pointwise ConvGradW parser takes a 1x1 ConvGradW of stride `strides`."""
    mapper = next(m for m in PULPMapping[PW_OP].maps if pointwise(m))
    x, dy = gs.Variable("x", np.float32, (1, 2, 4, 4)), gs.Variable("dy", np.float32, (1, 4, 2, 2))
    node = gs.Node(op=PW_OP, name="probe", inputs=[dy, x], outputs=[gs.Variable("dw", np.float32, (4, 2, 1, 1))],
                   attrs={"kernel_shape": [1, 1], "strides": strides, "pads": [0, 0, 0, 0], "group": 1,
                          "dilations": [1, 1]})
    return bool(type(mapper.parser)().parseNode(node))


def pw_conv_grad_w_stride() -> Found | None:
    layer = PULPMapping.get(PW_OP)
    if layer is None or not any(pointwise(m) for m in layer.maps) or not _pointwise_takes([2, 2]):
        return None
    parser = type(next(m for m in layer.maps if pointwise(m)).parser)
    file, line = _source_line(parser.parseNode, r"kernel_shape\s*!=")
    return Found(Defect.PW_CONV_GRAD_W_STRIDE, file, line,
                 "the pointwise ConvGradW parser takes every 1x1 kernel, strided or not, and its kernel "
                 "(PULP_PWConvGradW2d) takes no stride: a strided 1x1's weight gradient pairs the wrong pixels in "
                 "both flows; ckpt's pointwise parser refuses strides other than 1, so the general (im2col) ConvGradW "
                 "binds them")


PROBES = (softmax_grad_axis, layernorm_grad_zeroing, conv_grad_w_zeroing, conv_grad_x_tile_origin,
          pw_conv_grad_w_stride)
