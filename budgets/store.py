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
from ckpt.files import atomic_write, make_dirs
from ckpt.pipeline.point import REPLAY, PointFolder
from ckpt.replay.folder import REPORT

LOG = "sweep.log"
LOCK = "sweep.lock"
RECORD = "ckpt_sweep.json"          # what makes a folder a ckpt sweep's: written first, naming what the sweep writes
RECORD_KIND = "ckpt sweep"
STAGED_PREFIXES = (".code.", ".replay.")
TABLES = ("sweep.md", "sweep.csv", "sweep.json", "pareto.png", "pareto.svg")    # beside points/, per model
POINTS = "points"
WRITES = (LOCK, LOG, f"{POINTS}/", *TABLES)     # what a sweep writes in a folder it owns (and model folders)


def is_ckpt_sweep(folder: Path) -> bool:
    """A folder a ckpt sweep wrote: it holds the record a sweep writes first (never judged by common names such
    as sweep.md or points/, which a user's folder may hold too)."""
    try:
        doc = json.loads((folder / RECORD).read_text())
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and doc.get("kind") == RECORD_KIND


def write_record(folder: Path) -> None:
    """Mark `folder` as a ckpt sweep's, naming what the sweep writes there (its files are then its own)."""
    if not is_ckpt_sweep(folder):
        atomic_write(folder / RECORD, json.dumps({"kind": RECORD_KIND, "writes": list(WRITES)}, indent=1) + "\n")


def check_sweep_folder(root: Path, models: list[str], overwrite: bool) -> None:
    """Refuse, before any work, a sweep folder (or a model's folder in it, `models`) that another live sweep is
    writing, or that holds files of the names a sweep writes without the record of a ckpt sweep (a user's own
    sweep.md or sweep.lock): never replaced unless `overwrite`."""
    refuse_held_lock(root)
    for folder in [root, *(root / name for name in models)]:
        if overwrite or not folder.is_dir() or is_ckpt_sweep(folder):
            continue
        clash = [name for name in (*TABLES, LOG, LOCK, POINTS, *(models if folder == root else ()))
                 if (folder / name).exists()]
        if clash:
            raise CkptError(f"'{folder}' holds {', '.join(clash)}, which no ckpt sweep wrote (it has no {RECORD})",
                            "sweep into a new folder, or pass --overwrite to replace them")


def refuse_held_lock(root: Path) -> None:
    """Refuse a folder whose lock another live process holds, without creating or changing anything."""
    path = root / LOCK
    if not path.is_file():
        return
    try:
        handle = open(path, "rb")
    except OSError:
        return
    with handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            holder = handle.read(64).decode(errors="replace").strip() or "unknown"
            raise CkptError(f"another sweep (process {holder}) is writing into '{root}'",
                            "wait for it to finish, or sweep into another folder with -o") from None


@dataclass(frozen=True)
class SweepStore:
    root: Path

    @property
    def points(self) -> Path:
        return self.root / POINTS

    def point(self, label: str) -> PointFolder:
        return PointFolder(self.points / label)

    def claim(self) -> None:
        """Make the folder and mark it as this sweep's (a model's folder in a sweep of several)."""
        make_dirs(self.root)
        write_record(self.root)

    def log(self, line: str) -> None:
        """Append one line to sweep.log (a short append is one write: lines never interleave)."""
        make_dirs(self.root)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with open(self.root / LOG, "a", encoding="utf-8", errors="surrogateescape") as handle:
            handle.write(f"{stamp} {line}\n")

    def clean_partial(self, replays: bool = False) -> list[Path]:
        """Remove temp files and staged folders an interrupted write left behind (dot-named, never final); with
        `replays` (the workers are stopped: nothing writes there any more), also a point's replay folder a stopped
        worker left half-made (no report.json, which a replay writes last)."""
        removed = []
        if not self.points.is_dir():
            return removed
        for replay in sorted(self.points.glob(f"*/{REPLAY}")) if replays else ():
            if replay.is_dir() and not (replay / REPORT).is_file():
                shutil.rmtree(replay, ignore_errors=True)
                removed.append(replay)
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
        """Hold the folder's lock for the sweep's duration (refusing if another live sweep holds it) and mark the
        folder as a ckpt sweep's. If the sweep stops before its first task (an error, Ctrl-C), what this run
        created is removed again: the record, the lock, the log and the folder itself when it made it."""
        made = not self.root.exists()
        make_dirs(self.root)
        before = {p.name for p in self.root.iterdir()}
        path = self.root / LOCK
        handle = None
        try:
            handle = open(path, "a+b", buffering=0)  # unbuffered: a failed write leaves nothing for close to flush
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
                write_record(self.root)
            except OSError as exc:
                raise unwritable(exc.filename or path, exc) from None
            yield
        except BaseException:
            self._undo(before, made)
            raise
        finally:
            if handle is not None:
                handle.close()   # releases the lock; a lock of a sweep that ran stays (removing it would race)

    def _undo(self, before: set[str], made: bool) -> None:
        """Remove what this run created in the folder, unless its work began (anything beyond its own files)."""
        if not self.root.is_dir():
            return
        created = {p.name for p in self.root.iterdir()} - before
        own = {n for n in created if n in (LOCK, LOG, RECORD) or n.startswith(f".{RECORD}.")}
        if created - own:
            return                               # its work began: kept, for the same command to resume
        for name in created:
            (self.root / name).unlink(missing_ok=True)
        if made and not any(self.root.iterdir()):
            self.root.rmdir()
