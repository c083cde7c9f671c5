"""The defects of Deeploy ckpt knows a workaround for, and where one was found (deeploy_bridge.workarounds)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Defect(StrEnum):
    SOFTMAX_GRAD_AXIS = "softmax-grad-axis"
    LAYERNORM_GRAD_ZEROING = "layernorm-grad-zeroing"
    CONV_GRAD_W_ZEROING = "conv-grad-w-zeroing"


@dataclass(frozen=True)
class Found:
    """A defect found in the installed Deeploy: where, and what ckpt does about it."""

    defect: Defect
    file: str          # relative to the folder Deeploy is installed in: Deeploy/Targets/...
    line: int
    what: str
