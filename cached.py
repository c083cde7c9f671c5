"""Entries of ckpt's caches ($CKPT_CACHE_DIR), checked every time before they are used.

An entry names the key it was stored under and the sha256 of what it holds, so an entry of another key (a copy,
a rename, another model's), one cut short or corrupted, or one an older ckpt wrote, reads as absent: the caller
makes it again and stores it over the bad one. Nothing in a cache is trusted for being where it is.

- a file entry (`write_entry` / `read_entry`): one line of JSON (key, sha256, size) after a magic line, then the
  payload's bytes; written through a temp file and a rename, so it is whole or absent;
- a folder entry (`seal_folder` / `folder_checks_out`): built in a staging folder, then sealed with a manifest of
  its key and every file's sha256 (a link's target), then moved into place; a folder whose files differ from its
  manifest in any way (one added, missing, changed) does not check out, and `discard` moves it out of the way.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from ckpt.files import atomic_write

MAGIC = b"ckpt cache entry 1\n"
SEAL = ".ckpt-entry.json"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_entry(path: Path, key: str, payload: bytes) -> None:
    """Store `payload` as the entry for `key` at `path`."""
    head = json.dumps({"key": key, "sha256": _sha256(payload), "bytes": len(payload)}, sort_keys=True)
    atomic_write(path, MAGIC + head.encode() + b"\n" + payload)


def read_entry(path: Path, key: str) -> bytes | None:
    """The payload stored at `path` for `key`, or None when there is none that checks out."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if not data.startswith(MAGIC):
        return None
    head, newline, payload = data[len(MAGIC):].partition(b"\n")
    try:
        doc = json.loads(head) if newline else None
    except ValueError:
        return None
    if not isinstance(doc, dict) or doc.get("key") != key or doc.get("bytes") != len(payload) \
            or doc.get("sha256") != _sha256(payload):
        return None
    return payload


def _files(folder: Path) -> dict[str, str]:
    """Every file of `folder` but the seal -> its sha256 (a link: its target)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            found[str(path.relative_to(folder))] = "link:" + os.readlink(path)
        elif path.is_file() and path.name != SEAL:
            found[str(path.relative_to(folder))] = _sha256(path.read_bytes())
    return found


def seal_folder(folder: Path, key: str) -> None:
    """Record `folder`'s key and files: call it last, on the staged folder, before moving it into place."""
    atomic_write(folder / SEAL, json.dumps({"key": key, "files": _files(folder)}, indent=1, sort_keys=True))


def folder_checks_out(folder: Path, key: str) -> bool:
    """Whether `folder` holds, for `key`, exactly the files it was sealed with."""
    try:
        doc = json.loads((folder / SEAL).read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("key") == key and doc.get("files") == _files(folder)


def discard(folder: Path) -> None:
    """Move a folder entry that does not check out aside, then remove it (a reader mid-way keeps its files)."""
    if not folder.exists() and not folder.is_symlink():
        return
    aside = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}.discarded."))
    try:
        os.replace(folder, aside / folder.name)
    except OSError:
        pass
    shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def stored_folder(folder: Path, key: str, prefix: str) -> Iterator[Path]:
    """A staging folder beside `folder` to build its entry in: sealed and moved into place when the block ends
    (left as it is where another process stored the same entry first), removed when the block fails, so a
    cache folder is whole or absent."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=prefix))
    try:
        yield staging
        seal_folder(staging, key)
        try:
            os.replace(staging, folder)
        except OSError:                           # another process stored the same entry first
            shutil.rmtree(staging, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
