"""The defects of Deeploy that ckpt knows a workaround for, where one was found, and which $CKPT_DEEPLOY_WORKAROUNDS
keeps: read by deeploy_bridge.workarounds (those in the Python Deeploy generates code with) and gvsoc.open_files
(the one in the device runtime's C, dory_mem.c), which are of the same rank and import neither the other."""
from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum

from ckpt.errors import CkptError

ENV = "CKPT_DEEPLOY_WORKAROUNDS"


class Defect(StrEnum):
    SOFTMAX_GRAD_AXIS = "softmax-grad-axis"
    LAYERNORM_GRAD_ZEROING = "layernorm-grad-zeroing"
    CONV_GRAD_W_ZEROING = "conv-grad-w-zeroing"
    CONV_GRAD_X_TILE_ORIGIN = "conv-grad-x-tile-origin"
    PW_CONV_GRAD_W_STRIDE = "pw-conv-grad-w-stride"
    READFS_FILES_KEPT_OPEN = "readfs-files-kept-open"     # a C file of the device runtime (gvsoc.open_files)


@dataclass(frozen=True)
class Found:
    """A defect found in the installed Deeploy: where, and what ckpt does about it."""

    defect: Defect
    file: str          # relative to the folder Deeploy is installed in (Deeploy/Targets/...), or for a C kernel to
                       # the checkout the kernels are built from (TargetLibraries/...)
    line: int
    what: str


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
