"""The data files Deeploy keeps open on the device, and ckpt's workaround (a Deeploy defect, as those of
deeploy_bridge.workarounds).

Deeploy's dory_mem.c (TargetLibraries/PULPOpen, the checkout the kernels are built from) opens each data file Init
loads with pi_fs_open (load_file_to_ram, load_file_to_local) and never closes it, and pulp-sdk's readfs keeps each
open file's record and cache block in L2 until it is closed: a step that loads many files (a split step's
constants, one file each) runs out of L2 heap while Init loads them. Init reads each file whole, one after the
other, so ckpt links its own unit (device/ckpt_fs_close.c) with `-Wl,--wrap=pi_fs_open`: each open first closes the
file opened before it, and one file at most holds L2 (gvsoc.run.runtime_heap counts one, or all of them where the
workaround is off). On wherever the checkout's dory_mem.c opens files and never closes one; off with
$CKPT_DEEPLOY_WORKAROUNDS (`off`, or a list without `readfs-files-kept-open`).
"""
from __future__ import annotations

import re

from ckpt.coderun.sources import KernelSources
from ckpt.deeploy_defects import Defect, Found, wanted
from ckpt.gvsoc.kernels import DEVICE

DORY_MEM = "TargetLibraries/PULPOpen/src/dory_mem.c"
UNIT = DEVICE / "ckpt_fs_close.c"
LINK_FLAGS = ("-Wl,--wrap=pi_fs_open",)
_OPEN = re.compile(r"\bpi_fs_open\s*\(")
_CLOSE = re.compile(r"\bpi_fs_close\s*\(")


def files_kept_open(sources: KernelSources) -> Found | None:
    """The defect, where the checkout's dory_mem.c opens files and closes none: its first pi_fs_open's line."""
    try:
        text = (sources.root / DORY_MEM).read_text(errors="replace")
    except OSError:
        return None
    opened = _OPEN.search(text)
    if opened is None or _CLOSE.search(text):
        return None
    return Found(Defect.READFS_FILES_KEPT_OPEN, DORY_MEM, text.count("\n", 0, opened.start()) + 1,
                 "dory_mem.c opens every data file Init loads and never closes one, and pulp-sdk's readfs keeps "
                 "each open file's record and cache block in L2: ckpt's step closes each file at the next open "
                 "(pi_fs_open wrapped), so one file at most holds L2")


def closes_files(sources: KernelSources) -> bool:
    """Whether the step is linked with ckpt's workaround: the defect is there and $CKPT_DEEPLOY_WORKAROUNDS keeps it."""
    keep = wanted()
    return files_kept_open(sources) is not None and (keep is None or Defect.READFS_FILES_KEPT_OPEN in keep)
