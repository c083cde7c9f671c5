"""A replay's output folder: what ckpt writes there, and the promise never to touch anything else.

A folder is ckpt's to write when it is new, empty, or holds a report.json ckpt wrote before. Anything else is
refused unless the user says --overwrite; even then only the files ckpt writes are replaced, and files in
code/ or code-non-tiled/ that ckpt did not generate (a user's main.c) stay where they are.
"""
from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.files import check_output_dir, make_dirs

REPORT = "report.json"
REWIRED = "rewired.onnx"
ORDER = "order.json"
CODE = "code"                        # the tiled flow's generated code (what Deeploy's CI deploys)
CODE_NON_TILED = "code-non-tiled"    # the non-tiled flow's
CODE_DIRS = {"tiled": CODE, "non_tiled": CODE_NON_TILED}
GVSOC_LOGS = {"tiled": "gvsoc-tiled.log", "non_tiled": "gvsoc-non-tiled.log"}   # what gvsoc printed, per flow
WRITTEN = (REPORT, REWIRED, ORDER, CODE, CODE_NON_TILED, *GVSOC_LOGS.values())


def default_outdir(schedule: Path) -> Path:
    return schedule.with_name(f"{schedule.stem}_replay")


def previous_code_files(outdir: Path, flow: str) -> list[str]:
    """The code files an earlier replay into this folder generated for `flow` (from its report), to replace or
    remove."""
    try:
        report = json.loads((outdir / REPORT).read_text())
        return list(((report.get("deeploy") or {}).get(flow) or {}).get("code_files") or [])
    except (OSError, ValueError, AttributeError):
        return []


def check_replay_folder(outdir: Path, overwrite: bool) -> None:
    """Refuse, before any work, a folder ckpt may not write its replay into (see the module doc)."""
    check_output_dir(outdir)
    if not outdir.is_dir() or not any(outdir.iterdir()):
        return
    if (outdir / REPORT).is_file() and _is_ckpt_report(outdir / REPORT):
        return
    if not overwrite:
        raise CkptError(f"output folder '{outdir}' is not empty and holds no earlier ckpt replay",
                        "choose a new folder, or pass --overwrite (only ckpt's own files are replaced)")


def refuse_inputs_written(outdir: Path, inputs: list[Path]) -> None:
    """Refuse, before any work, a replay whose outputs would land on one of its inputs (a schedule saved as
    OUTDIR/order.json, a model under OUTDIR/code/)."""
    for path in inputs:
        if not path.exists():
            continue
        for name in WRITTEN:
            written = outdir / name
            if written.exists() and (os.path.samefile(path, written) if written.is_file() else
                                     path.resolve().is_relative_to(written.resolve())):
                raise CkptError(f"'{path}' is an input of this replay and lies where it writes ({written})",
                                "replay into another folder (-o), or move the input out of it")


def _is_ckpt_report(path: Path) -> bool:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and {"schedule", "model", "replay", "memory"} <= set(doc)


@contextmanager
def replay_folder(outdir: Path) -> Iterator[None]:
    """Create `outdir` for a replay; if the replay stops (Ctrl-C, an error), remove the folder when it made it
    (nothing in it is a finished replay), else its staging folders."""
    made = not outdir.exists()
    make_dirs(outdir)
    try:
        yield
    except BaseException:
        if made:                         # everything in it is this replay's, and none of it is a finished replay
            shutil.rmtree(outdir, ignore_errors=True)
        else:
            for staged in outdir.glob(".code*.*"):
                shutil.rmtree(staged, ignore_errors=True)
        raise


def install_code(staged: Path, final: Path, previous: list[str]) -> list[str]:
    """Move the files generated in `staged` into `final`, one rename each, and remove the files an earlier
    replay generated that this one did not; nothing else in `final` is touched. Returns the files installed."""
    installed = sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file())
    for name in installed:
        make_dirs((final / name).parent)
        os.replace(staged / name, final / name)
    for name in sorted(set(previous) - set(installed)):
        stale = final / name
        if stale.is_file():
            stale.unlink()
    shutil.rmtree(staged, ignore_errors=True)
    return installed
