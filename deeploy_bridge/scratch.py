"""The scratch folders Deeploy runs in (deeploy_run), named after their process, and their removal once that
process is gone. Apart from deeploy_run, so a sweep cleans up without importing Deeploy (a second), which a
sweep that never runs it (--target none) need not pay."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

SCRATCH_PREFIX = "ckpt_deeploy_"   # + the process id: scratch of a process that died is recognised and removed


def remove_stale_scratch() -> list[Path]:
    """Remove Deeploy scratch folders of ckpt processes that are gone (killed by Ctrl-C or a crash)."""
    removed = []
    for path in sorted(Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*")):
        pid = path.name[len(SCRATCH_PREFIX):].split("_", 1)[0]
        if path.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
