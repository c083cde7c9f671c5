"""The defects of Deeploy ckpt knows a workaround for, and where one was found (deeploy_bridge.workarounds)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Defect(StrEnum):
    SOFTMAX_GRAD_AXIS = "softmax-grad-axis"
    LAYERNORM_GRAD_ZEROING = "layernorm-grad-zeroing"
    CONV_GRAD_W_ZEROING = "conv-grad-w-zeroing"


# The training branch's ConvGradW templates zero the weight gradient behind this test of the L1 loop's call counter
CONV_GRAD_W_GUARD = re.compile(r"\(uint32_t\)\s*\*\s*\$\{tileIdxPtr\}\s*==\s*0u?")


@dataclass(frozen=True)
class Found:
    """A defect found in the installed Deeploy: where, and what ckpt does about it."""

    defect: Defect
    file: str          # relative to the folder Deeploy is installed in: Deeploy/Targets/...
    line: int
    what: str


@dataclass(frozen=True)
class Bound:
    """One workaround in force, as a deployment bound it: the nodes whose bound code carries it, and the nodes it
    concerns whose bound code does not (Deeploy's own binding, the defect left in)."""

    carried: tuple[str, ...] = ()
    missed: tuple[str, ...] = ()
