"""A sweep's folder on disk: one sub-folder per point, finished points recorded so a rerun can skip them.

OUTDIR/points/<label>/ holds the point's seq.json, its replay/ folder and, written last, point.json. A point
counts as finished only when point.json exists and carries the same key (graph fingerprint, model, budget,
solver and replay options): a crash or Ctrl-C before that leaves the point to be redone, and every file is
written through a temp file and a rename, so no reader ever sees half of one. OUTDIR/sweep.log is the sweep's
own log, one line per point run or skipped: it is how a rerun shows what it did.
"""
from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ckpt.budgets.table import PointRow
from ckpt.schedule_file import atomic_write

KEY_FORMAT = 1  # bump when the meaning of a stored point changes
RECORD = "point.json"
LOG = "sweep.log"


def point_key(parts: dict) -> str:
    """sha256 over the sorted JSON of everything that decides a point's result."""
    blob = json.dumps({"format": KEY_FORMAT, **parts}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


@dataclass(frozen=True)
class SweepStore:
    root: Path

    @property
    def points(self) -> Path:
        return self.root / "points"

    def point_dir(self, label: str) -> Path:
        return self.points / label

    def finished(self, label: str, key: str) -> dict | None:
        """The stored record of a point finished with this key, or None (absent, unreadable or other key)."""
        path = self.point_dir(label) / RECORD
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("key") != key:
            return None
        try:
            PointRow(**record["row"])
        except (KeyError, TypeError):             # written by another version of ckpt: run the point again
            return None
        return record

    def save(self, label: str, record: dict) -> None:
        atomic_write(self.point_dir(label) / RECORD, json.dumps(record, indent=2, sort_keys=True) + "\n")

    def clear(self, label: str) -> None:
        """Forget a point before running it again: its record first, so a crash midway leaves it unfinished."""
        folder = self.point_dir(label)
        (folder / RECORD).unlink(missing_ok=True)
        for child in sorted(folder.iterdir()) if folder.is_dir() else []:
            shutil.rmtree(child) if child.is_dir() else child.unlink()

    def log(self, line: str) -> None:
        """Append one line to sweep.log (a short append is one write: lines never interleave)."""
        self.root.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
        with open(self.root / LOG, "a") as handle:
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
            elif path.is_dir() and path.name.startswith((".code.", ".replay.")):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
        return removed
