"""What ckpt reads in Deeploy's code to find the defects it knows a workaround for (ckpt.deeploy_defects names them,
deeploy_bridge.workarounds applies them)."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ckpt.deeploy_defects import Defect, Found

# The training branch's ConvGradW templates zero the weight gradient behind this test of the L1 loop's call counter
CONV_GRAD_W_GUARD = re.compile(r"\(uint32_t\)\s*\*\s*\$\{tileIdxPtr\}\s*==\s*0u?")

# The training branch's tiled ConvGradX kernel whose im2col path ignores the tiles' origins
IM2COL_KERNEL = "_CHW_Im2Col_tiled("


def pointwise_parser(parser) -> bool:
    """Whether `parser` is the training branch's pointwise ConvGradW parser as it ships (ckpt's refuses strides)."""
    return "PWConvGradW" in type(parser).__name__ and getattr(parser, "works_around", None) is None


@dataclass(frozen=True)
class Bound:
    """One workaround in force, as a deployment bound it: the nodes whose bound code carries it, and the nodes it
    concerns whose bound code does not (Deeploy's own binding, the defect left in)."""

    carried: tuple[str, ...] = ()
    missed: tuple[str, ...] = ()


__all__ = ["Defect", "Found", "Bound", "CONV_GRAD_W_GUARD", "IM2COL_KERNEL", "pointwise_parser"]
