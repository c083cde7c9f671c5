"""Writing what ckpt produces: every file appears whole or not at all, never over something the user did not ask
for, and the same content gives the same bytes.

- `atomic_write` writes through a temp file in the same folder and renames it into place.
- `check_output_file` / `check_output_dir` refuse, before any work starts, a path ckpt must not write: a
  device, a directory where a file is wanted (or the reverse), a path below a regular file, an empty name, a
  folder that cannot be written.
- `staged_dir` builds a folder beside its final place and moves it in; files ckpt did not write are never
  deleted.
- `read_json_input` reads a JSON file a user hands ckpt strictly: no key twice in an object (json keeps the
  last silently), no nesting deeper than any file ckpt reads has, one line for anything else.
"""
from __future__ import annotations

import errno
import json
import os
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ckpt.errors import DISK_FULL, CkptError, unwritable
from ckpt.paths import cache_root, model_files, optimizer_graph

STDOUT = "-"
REFUSED = frozenset({errno.EACCES, errno.EPERM, errno.ENOENT})   # a folder that takes no new file (/sys, /proc)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | Path, content: str | bytes) -> None:
    """Write through a temp file in the same folder and rename, so no reader ever sees half a file."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        if exc.errno in DISK_FULL:
            raise unwritable(path, exc) from None
        if exc.errno in REFUSED:
            raise CkptError(f"cannot write '{path}': {exc.strerror}", "choose a folder you can write to") from None
        raise
    try:
        # text keeps a path's bytes that are no UTF-8 as they are (the filesystem's name, not a traceback)
        with (os.fdopen(fd, "wb") if isinstance(content, bytes) else
              os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape")) as handle:
            handle.write(content)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the mode a plain open would
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            raise unwritable(path, exc) from None
        raise


def printable(text: str) -> str:
    """`text` with the bytes of a path that are no UTF-8 (kept by Python as surrogates) shown as U+FFFD, for what
    cannot hold them (a plot's title)."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def write_json(path: Path, doc: dict) -> None:
    atomic_write(path, json.dumps(doc, indent=2, sort_keys=True) + "\n")


def write_bytes(path: Path, data: bytes) -> None:
    atomic_write(path, data)


def write_output(path: str, text: str) -> None:
    """`-` writes to stdout; any other path is written atomically (checked with check_output_file first)."""
    if path == STDOUT:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        atomic_write(path, text)


def _writable_folder(folder: Path, what: str) -> None:
    """The nearest existing ancestor of `folder` must be a directory ckpt may create entries in."""
    probe = folder
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise CkptError(f"{what} '{folder}' lies below '{probe}', which is a file", "choose a path in a folder")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise CkptError(f"{what} '{folder}' cannot be created: '{probe}' is not writable",
                        "choose a folder you can write to")
    if probe.is_dir():
        refused = _creation_refused(probe)
        if refused:
            raise CkptError(f"{what} '{folder}' cannot be written: '{probe}' refuses new files ({refused})",
                            "choose a folder you can write to")


def _creation_refused(folder: Path) -> str | None:
    """Why `folder` refuses a new file, or None: tried with a temp file, removed at once (as root, os.access says
    yes to /sys and /proc, whose kernels say no)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".ckpt-probe.", suffix=".tmp")
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    os.close(fd)
    os.unlink(tmp)
    return None


def check_output_file(path: str, allow_stdout: bool = True, example: str = "seq.json") -> None:
    """Refuse, before any work, an output path that is not a regular file or a new path in a writable folder."""
    if path == STDOUT and allow_stdout:
        return
    if not path or not path.strip():
        raise CkptError("the output path is empty", f"name a file, e.g. -o {example}")
    if path.endswith(os.sep) and not Path(path).is_dir():
        raise CkptError(f"output '{path}' names a folder (it ends with {os.sep})", f"name a file, e.g. {path}{example}")
    target = Path(path)
    if target.is_symlink() and not target.exists():
        raise CkptError(f"output '{path}' is a symlink to '{os.readlink(target)}', which does not exist",
                        "name a regular file, or make the link's target first")
    if target.exists() or target.is_symlink():
        mode = os.stat(target).st_mode if target.exists() else 0
        if stat.S_ISDIR(mode):
            raise CkptError(f"output '{path}' is a directory", f"name a file inside it, e.g. DIR/{example}")
        if target.exists() and not stat.S_ISREG(mode):
            raise CkptError(f"output '{path}' is not a regular file (a device, pipe or socket)",
                            "name a regular file" + (", or - for stdout" if allow_stdout else ""))
        if not os.access(target, os.W_OK):
            raise CkptError(f"output '{path}' is not writable", "choose another file")
    _writable_folder(target.parent if str(target.parent) else Path("."), "the folder of output")


def check_input_file(path: str | Path, what: str) -> None:
    """Refuse, before reading it, an input that is not there (named as missing, not as a file of the wrong kind),
    or that exists but is no regular file: a pipe would block the read, a device never end it."""
    found = Path(path)
    if not found.exists():
        dangling = " (a symlink to nothing)" if found.is_symlink() else ""
        raise CkptError(f"no {what} at '{path}'{dangling}", "check the path: there is no such file")
    if not found.is_file():
        raise CkptError(f"{what} '{path}' is not a regular file (a folder, device, pipe or socket)",
                        "name the file itself")


MAX_JSON_DEPTH = 32      # far deeper than any file ckpt reads (a schedule, cost file or calibration is 3 deep)


def unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are all different (json keeps the last of two silently)."""
    keys = [key for key, _ in pairs]
    if len(set(keys)) < len(keys):
        twice = sorted({key for key in keys if keys.count(key) > 1})
        raise ValueError(f"key {json.dumps(twice[0])} appears more than once")
    return dict(pairs)


def json_depth(doc: object) -> int:
    """How deeply `doc` nests objects and arrays (a scalar is 0), counted without recursion."""
    deepest, stack = 0, [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            deepest = max(deepest, depth)
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return deepest


def read_json_input(path: str | Path, what: str, way_out: str) -> object:
    """The JSON document of a file the user gave (`what` names it in messages): a regular file, UTF-8, every
    object's keys different, nested at most MAX_JSON_DEPTH deep; anything else is one line with `way_out`."""
    check_input_file(path, what)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"), object_pairs_hook=unique_keys)
    except RecursionError:
        raise CkptError(f"{what} '{path}' nests too deeply", way_out) from None
    except (OSError, ValueError) as exc:
        raise CkptError(f"{what} '{path}' is not readable JSON ({type(exc).__name__}: {exc})", way_out) from None
    if json_depth(doc) > MAX_JSON_DEPTH:
        raise CkptError(f"{what} '{path}' nests too deeply (more than {MAX_JSON_DEPTH} levels)", way_out)
    return doc


def check_output_dir(path: str | Path) -> None:
    """Refuse an output folder that is a file or cannot be created."""
    if not str(path).strip():
        raise CkptError("the output folder is empty", "name a folder, e.g. -o out")
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise CkptError(f"output folder '{folder}' is a file", "name a folder")
    _writable_folder(folder, "output folder")


def check_cache_root() -> None:
    """Refuse, before any work, a cache folder ckpt cannot use (a file, or a place it cannot write)."""
    root = cache_root()
    probe = root
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    where = "$CKPT_CACHE_DIR" if os.environ.get("CKPT_CACHE_DIR") else "the cache folder"
    if not probe.is_dir():
        raise CkptError(f"{where} '{root}' lies at or below '{probe}', which is not a folder",
                        "point CKPT_CACHE_DIR at a folder")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise CkptError(f"{where} '{root}' cannot be written ('{probe}' is read-only)",
                        "point CKPT_CACHE_DIR at a folder you can write")
    refused = _creation_refused(probe)
    if refused:
        raise CkptError(f"{where} '{root}' cannot be written ('{probe}' refuses new files: {refused})",
                        "point CKPT_CACHE_DIR at a folder you can write")


def make_dirs(folder: Path) -> None:
    """mkdir -p with the umask's mode (what a plain mkdir gives), never narrower."""
    folder.mkdir(parents=True, exist_ok=True)


@contextmanager
def staged_dir(final: Path) -> Iterator[Path]:
    """Yield a temp folder next to `final`; on success it replaces `final`, which must hold nothing but what a
    previous stage of ckpt wrote there (the caller checks ownership before asking for a replacement)."""
    make_dirs(final.parent)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}."))
    try:
        os.chmod(tmp, 0o777 & ~_umask())   # mkdtemp makes 0700; the folder gets a plain mkdir's mode
        yield tmp
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def refuse_input_folder(outdir: str | Path, model: str | Path, optimizer: str | Path | None = None) -> None:
    """Refuse, before any work and whatever --overwrite says, an output folder that is the folder of an input:
    the model's (directly or through a symlink) or its optimizer graph's; its files would land among the user's."""
    folder = Path(outdir)
    if not folder.is_dir():
        return
    found = optimizer_graph(model, optimizer)
    for what, path in (("the model", model_files(model)[0]), ("its optimizer graph", found)):
        if path is not None and path.is_file() and os.path.samefile(path.parent, folder):
            raise CkptError(f"output folder '{outdir}' is the folder of {what} ({path.parent}), an input of this "
                            "command", "write into a folder of its own, e.g. -o out")
