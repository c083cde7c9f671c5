"""A sweep's folder on disk: one sub-folder per point (pipeline.point.PointFolder), the sweep's log, its lock.

A point counts as finished only when its records carry the key of what decides them (graph fingerprint, model,
budget, solver and replay options, the schedule replayed): a crash or Ctrl-C before that leaves the point to be
redone, and every file is written through a temp file and a rename, so no reader ever sees half of one.
OUTDIR/sweep.log is the sweep's own log, one line per point solved, run or skipped. OUTDIR/sweep.lock is held
(flock) by the one sweep writing into the folder; a second one refuses, naming the holder's process id.
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ckpt.errors import CkptError, unwritable
from ckpt.files import make_dirs
from ckpt.pipeline.point import PointFolder

LOG = "sweep.log"
LOCK = "sweep.lock"
STAGED_PREFIXES = (".code.", ".replay.")
TABLES = ("sweep.md", "sweep.csv", "sweep.json", "pareto.png", "pareto.svg")    # beside points/, per model


def _is_ckpt_sweep(folder: Path) -> bool:
    """A folder a ckpt sweep wrote: it holds the sweep's lock or its points, or a table ckpt wrote."""
    if (folder / LOCK).is_file() or (folder / "points").is_dir():
        return True
    try:
        doc = json.loads((folder / "sweep.json").read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("points"), list) and "target" in doc


def check_sweep_folder(root: Path, models: list[str], overwrite: bool) -> None:
    """Refuse, before any work, a sweep folder (or a model's folder in it, `models`) holding files of the names a
    sweep writes that no ckpt sweep wrote (a user's own sweep.md): never replaced unless `overwrite`."""
    for folder in [root, *(root / name for name in models)]:
        if overwrite or not folder.is_dir() or _is_ckpt_sweep(folder):
            continue
        clash = [name for name in (*TABLES, LOG) if (folder / name).exists()]
        if clash:
            raise CkptError(f"'{folder}' holds {', '.join(clash)}, which no ckpt sweep wrote",
                            "sweep into a new folder, or pass --overwrite to replace them")


@dataclass(frozen=True)
class SweepStore:
    root: Path

    @property
    def points(self) -> Path:
        return self.root / "points"

    def point(self, label: str) -> PointFolder:
        return PointFolder(self.points / label)

    def log(self, line: str) -> None:
        """Append one line to sweep.log (a short append is one write: lines never interleave)."""
        make_dirs(self.root)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with open(self.root / LOG, "a", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(f"{stamp} {line}\n")

    def clean_partial(self) -> list[Path]:
        """Remove temp files and staged folders an interrupted write left behind (dot-named, never final)."""
        removed = []
        if not self.points.is_dir():
            return removed
        for path in sorted(self.points.rglob(".*")):
            if path.name.endswith(".tmp") and path.is_file():
                path.unlink(missing_ok=True)
                removed.append(path)
            elif path.is_dir() and path.name.startswith(STAGED_PREFIXES):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        return removed

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the folder's lock for the sweep's duration; refuse if another live sweep holds it."""
        made = not self.root.exists()
        make_dirs(self.root)
        path = self.root / LOCK
        existed = path.exists()
        handle = open(path, "a+b", buffering=0)      # unbuffered: a failed write leaves nothing for close to flush
        try:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.seek(0)
                holder = handle.read().decode(errors="replace").strip() or "unknown"
                raise CkptError(f"another sweep (process {holder}) is writing into '{self.root}'",
                                "wait for it to finish, or sweep into another folder with -o") from None
            try:
                handle.seek(0)
                handle.truncate()
                handle.write(f"{os.getpid()}\n".encode())
            except OSError as exc:
                if not existed:                        # nothing of this sweep is left behind
                    path.unlink(missing_ok=True)
                    if made:
                        self.root.rmdir()
                raise unwritable(path, exc) from None
            yield
        finally:
            handle.close()   # closing releases the lock; the file stays (removing it would race a waiter)
