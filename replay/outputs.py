"""Writing a replay's folder: every file appears whole or not at all, and the same content gives the same bytes."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ckpt.schedule_file import atomic_write


def write_json(path: Path, doc: dict) -> None:
    atomic_write(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, data)


@contextmanager
def staged_dir(final: Path):
    """Yield a temp folder next to `final`; on success it replaces `final` (a previous run's copy is dropped)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
    try:
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
