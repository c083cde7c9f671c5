"""The defects of Deeploy ckpt knows a workaround for, and where one was found (deeploy_bridge.workarounds)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Defect(StrEnum):
    SOFTMAX_GRAD_AXIS = "softmax-grad-axis"
    LAYERNORM_GRAD_ZEROING = "layernorm-grad-zeroing"
    CONV_GRAD_W_ZEROING = "conv-grad-w-zeroing"
    CONV_GRAD_X_TILE_ORIGIN = "conv-grad-x-tile-origin"
    PW_CONV_GRAD_W_STRIDE = "pw-conv-grad-w-stride"


# The training branch's ConvGradW templates zero the weight gradient behind this test of the L1 loop's call counter
CONV_GRAD_W_GUARD = re.compile(r"\(uint32_t\)\s*\*\s*\$\{tileIdxPtr\}\s*==\s*0u?")

# The training branch's tiled ConvGradX kernel whose im2col path ignores the tiles' origins
IM2COL_KERNEL = "_CHW_Im2Col_tiled("


def pointwise_parser(parser) -> bool:
    """Whether `parser` is the training branch's pointwise ConvGradW parser as it ships (ckpt's refuses strides)."""
    return "PWConvGradW" in type(parser).__name__ and getattr(parser, "works_around", None) is None


@dataclass(frozen=True)
class Found:
    """A defect found in the installed Deeploy: where, and what ckpt does about it."""

    defect: Defect
    file: str          # relative to the folder Deeploy is installed in (Deeploy/Targets/...), or for a C kernel to
                       # the checkout the kernels are built from (TargetLibraries/...)
    line: int
    what: str


@dataclass(frozen=True)
class Bound:
    """One workaround in force, as a deployment bound it: the nodes whose bound code carries it, and the nodes it
    concerns whose bound code does not (Deeploy's own binding, the defect left in)."""

    carried: tuple[str, ...] = ()
    missed: tuple[str, ...] = ()
