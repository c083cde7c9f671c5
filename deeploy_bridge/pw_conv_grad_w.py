"""A strided 1x1 ConvGradW left to the general ConvGradW kernel (the workaround of
workarounds.Defect.PW_CONV_GRAD_W_STRIDE).

The training branch's PULPOpen platform tries its pointwise ConvGradW mapper first, and that parser takes every
1x1 kernel. Its kernel (PULP_PWConvGradW2d, pulp-trainlib's pointwise weight gradient) takes no stride: it pairs
dY's pixels with X's as if both had the same extent, so a strided 1x1 (ResNet's downsampling shortcuts) gets a
wrong weight gradient in both flows. The branch's pointwise ConvGradX parser refuses strides other than 1 for the
same reason; its ConvGradW parser does not. ckpt's mapping gives the pointwise mapper a parser that refuses them
too, so the general mapper (im2col, which takes the stride) binds them; everything else is the platform's own.
"""
from __future__ import annotations

from Deeploy.DeeployTypes import NodeMapper

from .defects import Defect, pointwise_parser

OP = "ConvGradW"


def pointwise(mapper) -> bool:
    """Whether `mapper` is the installed pointwise ConvGradW mapper (its parser as it ships)."""
    return pointwise_parser(mapper.parser)


def _strided_refused(base: type) -> type:
    """The installed pointwise ConvGradW parser `base`, refusing a node whose stride is not 1."""

    class StrideOne(base):
        works_around = Defect.PW_CONV_GRAD_W_STRIDE

        def parseNode(self, node) -> bool:
            return list(node.attrs.get("strides", [1, 1])) == [1, 1] and super().parseNode(node)

    StrideOne.__name__ = f"StrideOne{base.__name__}"
    return StrideOne


def stride_one_pw_conv_grad_w(mapping: dict) -> None:
    """Give `mapping` (a fresh copy of a platform's Mapping) a ConvGradW layer whose pointwise mapper refuses
    strided nodes: the same bindings, the other mappers unchanged."""
    layer = mapping.get(OP)
    if layer is None or not any(pointwise(m) for m in layer.maps):
        return
    mappers = [NodeMapper((_strided_refused(type(m.parser)) if pointwise(m) else type(m.parser))(), m.bindings)
               for m in layer.maps]
    mapping[OP] = type(layer)(mappers)
