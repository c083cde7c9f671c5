"""Each defect of deeploy_bridge.defects looked for in the installed Deeploy's own code: asked (its SoftmaxGrad tile
constraint given one tile of an axis-1 softmax) or read (the LayerNormalizationGrad and ConvGradW templates it
binds)."""
from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import SimpleNamespace

from Deeploy.Targets.PULPOpen.Platform import PULPMapping
from Deeploy.Targets.PULPOpen.Templates import FloatLayernormTemplate
from Deeploy.Targets.PULPOpen.TileConstraints.iSoftmaxTileConstraint import SoftmaxGradTileConstraint
from Deeploy.TilingExtension.TilingCodegen import AbsoluteHyperRectangle, HyperRectangle

from ckpt.deeploy_identity import Flavour, deeploy_flavour

from .conv_grad_w import GUARD, OP, guarded
from .defects import Defect, Found


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
    source = getattr(getattr(getattr(binding, "template", None), "template", None), "source", "") or ""
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


PROBES = (softmax_grad_axis, layernorm_grad_zeroing, conv_grad_w_zeroing)
