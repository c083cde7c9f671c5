"""Defects of the installed Deeploy that ckpt works around, each found in the installed Deeploy itself.

Deeploy's training branch (a0e1e531) computes two of CCT's gradients and the tiled convolutions' weight gradients
wrong, and ckpt does not edit Deeploy's
files; it works around each where the installed Deeploy has it:

- ``softmax-grad-axis``: the PULPOpen tile constraint of SoftmaxGrad hands the kernel the tile's last dimension
  as the softmax length, whatever the node's `axis`: CCT's sequence pool ([1,64,1], axis 1) gets length 1 and
  loses the cross terms. ckpt hands such a SoftmaxGrad its inputs reshaped to their 2-D form, the axis (and all
  after it) last (deeploy_bridge.softmax_axis).
- ``layernorm-grad-zeroing``: the PULPOpen template of LayerNormalizationGrad zeroes the weight and bias gradients
  behind a C `static` flag, once per process; they are transients of a shared arena, so from the second mini-batch
  on they accumulate onto whatever the arena holds. ckpt binds its own template, which zeroes them at the first
  tile of every call (deeploy_bridge.layernorm_grad).
- ``conv-grad-w-zeroing``: the PULPOpen templates of ConvGradW zero the weight gradient when `*tileIdxPtr == 0`,
  which counts the calls of the L1 tile loop: right under home L3 (one tile per call), but a layer in L2 (home L2
  or split) runs all its H/W tiles in one call and is zeroed at each, keeping only the last tile's share. ckpt
  binds the installed template with that guard replaced by a per-tile flag: zeroed at the first H/W tile of the
  layer (deeploy_bridge.conv_grad_w).

A sixth, ``readfs-files-kept-open``, is in the device runtime's C (dory_mem.c never closes the data files Init
loads): gvsoc.open_files works around it where a step is built for gvsoc, under the same variable.

Each is on where the defect is found and can be turned off with $CKPT_DEEPLOY_WORKAROUNDS (`off`, or the names to
keep, comma-separated: `softmax-grad-axis`), to see what Deeploy computes without it.
"""
from __future__ import annotations

import importlib
from collections.abc import Mapping
from functools import lru_cache

from ckpt.deeploy_defects import ENV, wanted

from .defects import CONV_GRAD_W_GUARD, IM2COL_KERNEL, Bound, Defect, Found, pointwise_parser
from .softmax_axis import SUFFIX
from .template_cache import template_text

__all__ = ["ENV", "Defect", "Found", "Bound", "defects_found", "wanted", "active", "is_active", "key", "bound"]


@lru_cache(maxsize=1)
def defects_found() -> tuple[Found, ...]:
    """The defects of the installed Deeploy that ckpt knows a workaround for."""
    try:        # Deeploy is loaded on first use, as the package's names are (deeploy_bridge.__init__)
        probes = importlib.import_module(f"{__package__}.defect_probes").PROBES
    except ImportError:                  # a Deeploy without those files has none of these defects
        return ()
    found = []
    for probe in probes:
        try:
            hit = probe()
        except Exception:      # a Deeploy without that file, or whose code takes no such probe: nothing to work around
            hit = None
        if hit is not None:
            found.append(hit)
    return tuple(found)


def active() -> tuple[Found, ...]:
    """The workarounds in force: the defects found in the installed Deeploy that $CKPT_DEEPLOY_WORKAROUNDS keeps."""
    keep = wanted()
    return tuple(f for f in defects_found() if keep is None or f.defect in keep)


def is_active(defect: Defect) -> bool:
    return any(f.defect is defect for f in active())


def key() -> list[str]:
    """What cache keys of Deeploy's output record of the workarounds: their names."""
    return sorted(f.defect.value for f in active())


def _last_axis_views(node) -> bool:
    """Whether a SoftmaxGrad reads ckpt's 2-D views along its last axis (deeploy_bridge.softmax_axis)."""
    return any(SUFFIX in getattr(t, "name", "") for t in node.inputs)


def _along_a_middle_axis(node) -> bool:
    shape = getattr(node.inputs[0], "shape", None) if node.inputs else None
    if not shape or not all(isinstance(d, int) for d in shape):
        return False
    return int(node.attrs.get("axis", 1)) % len(shape) != len(shape) - 1


def _marked(defect: Defect, template) -> bool:
    """Whether `template`, or the tile constraint it carries, is ckpt's for `defect` (deeploy_bridge.layernorm_grad
    and conv_grad_w mark their templates, conv_grad_x its tile constraint)."""
    return getattr(template, "works_around", None) is defect or \
        getattr(getattr(template, "tileConstraint", None), "works_around", None) is defect


def _concerns(defect: Defect, node, template) -> bool:
    if defect is Defect.LAYERNORM_GRAD_ZEROING:
        return node.op == "LayerNormalizationGrad"
    if defect is Defect.CONV_GRAD_W_ZEROING:         # a ConvGradW binding without the guard has no such defect
        return node.op == "ConvGradW" and (_marked(defect, template) or _guarded(template))
    if defect is Defect.PW_CONV_GRAD_W_STRIDE:
        return node.op == "ConvGradW" and _strided_pointwise(node)
    if defect is Defect.CONV_GRAD_X_TILE_ORIGIN:     # only the tiled im2col kernel has it
        return node.op == "ConvGradX" and (_marked(defect, template) or IM2COL_KERNEL in _source(template))
    return node.op == "SoftmaxGrad" and (_last_axis_views(node) or _along_a_middle_axis(node))


def _strided_pointwise(node) -> bool:
    return list(node.attrs.get("kernel_shape", [])) == [1, 1] and list(node.attrs.get("strides", [1, 1])) != [1, 1]


def _source(template) -> str:
    return template_text(template)


def _guarded(template) -> bool:
    return bool(CONV_GRAD_W_GUARD.search(_source(template)))


def _carries(defect: Defect, node, template, parser) -> bool:
    if defect is Defect.PW_CONV_GRAD_W_STRIDE:          # parsed by a mapper other than the stride-blind pointwise one
        return not pointwise_parser(parser)
    if defect in (Defect.LAYERNORM_GRAD_ZEROING, Defect.CONV_GRAD_W_ZEROING, Defect.CONV_GRAD_X_TILE_ORIGIN):
        return _marked(defect, template)
    return _last_axis_views(node) and not _along_a_middle_axis(node)


def bound(layers: Mapping[str, object]) -> dict[str, Bound]:
    """Per workaround in force that concerns a node of a deployment: what its bound layers carry (`layers`: a
    deployer's layerBinding after its mid end, node name -> Deeploy's ONNXLayer, each with the binding it elected).
    Read from what was bound, not from the node types: a platform whose binding lacks ckpt's template (GAP9's
    LayerNormalizationGrad, lent from PULPOpen, once did) shows as missed."""
    found = {}
    for defect in (f.defect for f in active()):
        carried, missed = [], []
        for name, layer in layers.items():
            node = layer.node
            mapper = getattr(layer, "mapper", None)
            template = getattr(getattr(mapper, "binder", None), "template", None)
            if not _concerns(defect, node, template):
                continue
            (carried if _carries(defect, node, template, getattr(mapper, "parser", None)) else missed).append(name)
        if carried or missed:
            found[defect.value] = Bound(tuple(carried), tuple(missed))
    return found
