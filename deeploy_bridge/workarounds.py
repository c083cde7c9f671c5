"""Defects of the installed Deeploy that ckpt works around, each found in the installed Deeploy itself.

Deeploy's training branch (a0e1e531) computes two of CCT's gradients wrong, and ckpt does not edit Deeploy's
files; it works around each where the installed Deeploy has it:

- ``softmax-grad-axis``: the PULPOpen tile constraint of SoftmaxGrad hands the kernel the tile's last dimension
  as the softmax length, whatever the node's `axis`: CCT's sequence pool ([1,64,1], axis 1) gets length 1 and
  loses the cross terms. ckpt hands such a SoftmaxGrad its inputs reshaped to their 2-D form, the axis (and all
  after it) last (deeploy_bridge.softmax_axis).
- ``layernorm-grad-zeroing``: the PULPOpen template of LayerNormalizationGrad zeroes the weight and bias gradients
  behind a C `static` flag, once per process; they are transients of a shared arena, so from the second mini-batch
  on they accumulate onto whatever the arena holds. ckpt binds its own template, which zeroes them at the first
  tile of every call (deeploy_bridge.layernorm_grad).

Each is on where the defect is found and can be turned off with $CKPT_DEEPLOY_WORKAROUNDS (`off`, or the names to
keep, comma-separated: `softmax-grad-axis`), to see what Deeploy computes without it.
"""
from __future__ import annotations

import inspect
import os
import re
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.errors import CkptError

ENV = "CKPT_DEEPLOY_WORKAROUNDS"


class Defect(StrEnum):
    SOFTMAX_GRAD_AXIS = "softmax-grad-axis"
    LAYERNORM_GRAD_ZEROING = "layernorm-grad-zeroing"


@dataclass(frozen=True)
class Found:
    """A defect found in the installed Deeploy: where, and what ckpt does about it."""

    defect: Defect
    file: str          # relative to the folder Deeploy is installed in: Deeploy/Targets/...
    line: int
    what: str


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
    from Deeploy.Targets.PULPOpen.TileConstraints.iSoftmaxTileConstraint import SoftmaxGradTileConstraint
    from Deeploy.TilingExtension.TilingCodegen import AbsoluteHyperRectangle, HyperRectangle

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


def _softmax_grad_axis() -> Found | None:
    """The release has the same line, but its tiled code of the reshaped form frees a view's L3 block with another
    block's size (ckpt's runtime faults on a [1, 16, 1] SoftmaxGrad), and no graph of the release's has such a
    SoftmaxGrad: the workaround is the training branch's."""
    from Deeploy.Targets.PULPOpen.TileConstraints.iSoftmaxTileConstraint import SoftmaxGradTileConstraint

    if deeploy_flavour() is not Flavour.TRAINING_BRANCH or _softmax_grad_length(4) == 4:
        return None
    file, line = _source_line(SoftmaxGradTileConstraint.serializeTilingSolution, r"lastDimLength\s*=")
    return Found(Defect.SOFTMAX_GRAD_AXIS, file, line,
                 "SoftmaxGrad's tile constraint takes the softmax length from the tile's last dimension, not the "
                 "node's axis: each SoftmaxGrad along another axis is handed its inputs reshaped to their 2-D form, "
                 "the axis and all after it last")


def layernorm_grad_binding():
    """The binding the installed Deeploy's PULPOpen platform gives LayerNormalizationGrad (None: no such op)."""
    from Deeploy.Targets.PULPOpen.Platform import PULPMapping

    layer = PULPMapping.get("LayerNormalizationGrad")
    maps = getattr(layer, "maps", None) or []
    bindings = getattr(maps[0], "bindings", None) if maps else None
    return bindings[0] if bindings else None


STATIC = re.compile(r"^\s*static\b", re.MULTILINE)


def _layernorm_grad_zeroing() -> Found | None:
    binding = layernorm_grad_binding()
    source = getattr(getattr(getattr(binding, "template", None), "template", None), "source", "") or ""
    if not STATIC.search(source):     # a template with no C `static` state starts every call afresh
        return None
    from Deeploy.Targets.PULPOpen.Templates import FloatLayernormTemplate

    file, line = _source_line(FloatLayernormTemplate, r"^\s*static\b")
    return Found(Defect.LAYERNORM_GRAD_ZEROING, file, line,
                 "LayerNormalizationGrad's template zeroes the weight and bias gradients behind a C static flag, "
                 "once per process: ckpt binds its own template, which zeroes them at the first tile of every call")


@lru_cache(maxsize=1)
def defects_found() -> tuple[Found, ...]:
    """The defects of the installed Deeploy that ckpt knows a workaround for."""
    found = []
    for probe in (_softmax_grad_axis, _layernorm_grad_zeroing):
        try:
            hit = probe()
        except Exception:      # a Deeploy without that file, or whose code takes no such probe: nothing to work around
            hit = None
        if hit is not None:
            found.append(hit)
    return tuple(found)


def wanted() -> frozenset[Defect] | None:
    """The workarounds $CKPT_DEEPLOY_WORKAROUNDS keeps (None: every one, its default)."""
    value = os.environ.get(ENV, "").strip()
    if value in ("", "on", "all"):
        return None
    if value in ("off", "none"):
        return frozenset()
    names = {v.strip() for v in value.split(",") if v.strip()}
    unknown = sorted(names - {d.value for d in Defect})
    if unknown:
        raise CkptError(f"${ENV} names no workaround {', '.join(map(repr, unknown))}",
                        f"set it to off, on, or a comma-separated list of {', '.join(d.value for d in Defect)}")
    return frozenset(Defect(n) for n in names)


def active() -> tuple[Found, ...]:
    """The workarounds in force: the defects found in the installed Deeploy that $CKPT_DEEPLOY_WORKAROUNDS keeps."""
    keep = wanted()
    return tuple(f for f in defects_found() if keep is None or f.defect in keep)


def is_active(defect: Defect) -> bool:
    return any(f.defect is defect for f in active())


def key() -> list[str]:
    """What cache keys of Deeploy's output record of the workarounds: their names."""
    return sorted(f.defect.value for f in active())


def applied(model) -> list[tuple[Found, list[str]]]:
    """The workarounds in force that touch `model` (a lowered graph, onnx), each with the nodes it touches."""
    from .softmax_axis import SUFFIX

    nodes = list(getattr(getattr(model, "graph", None), "node", []))
    touched = {Defect.SOFTMAX_GRAD_AXIS: [n.name for n in nodes
                                          if n.op_type == "SoftmaxGrad" and any(SUFFIX in i for i in n.input)],
               Defect.LAYERNORM_GRAD_ZEROING: [n.name for n in nodes if n.op_type == "LayerNormalizationGrad"]}
    return [(found, touched[found.defect]) for found in active() if touched[found.defect]]
