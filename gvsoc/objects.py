"""Compiled objects of a step kept by what they are compiled from, so a file that is the same at every point of a
sweep (the optimizer network, the harness, ckpt's probes) is compiled once.

An object is keyed by the compiler, the flags that shape code generation (the optimisation, architecture and
section flags; not the include paths and macro definitions, whose whole effect is in the preprocessed text) and the
preprocessed source itself (`gcc -E`, every header and forced include expanded, macros such as __FILE__ included),
less the line markers, which name the build's temporary folder and only feed debug information this build does
not emit. A hit is the object gcc would write from that text: the same code and data; only the object's own file
symbol may name the folder it was first built in. Entries are checked (ckpt.cached) and hold the object and the
stack usage gcc wrote beside it (-fstack-usage), when asked.
"""
from __future__ import annotations

import hashlib
import json
import pickle
import re
import subprocess
from pathlib import Path

from ckpt.cached import read_entry, write_entry
from ckpt.files import atomic_write
from ckpt.paths import cache_root

OBJECTS_FORMAT = 1
_PATH_FLAGS = {"-I", "-isystem", "-include", "-iquote", "-D", "-U"}     # their effect is in the preprocessed text
_LINE_MARKER = re.compile(rb"^# \d+ [^\n]*\n", re.MULTILINE)


def code_flags(flags: list[str]) -> list[str]:
    """The flags that act on code generation: `flags` without include paths, forced includes and macros."""
    kept, skip = [], False
    for flag in flags:
        if skip:
            skip = False
        elif flag in _PATH_FLAGS:
            skip = True
        elif not any(flag.startswith(prefix) and len(flag) > len(prefix) for prefix in _PATH_FLAGS):
            kept.append(flag)
    return kept


def object_key(cc: str, version: str, flags: list[str], source: Path) -> str | None:
    """The key of `source` compiled with `flags`, or None where it does not preprocess (the compile then says why)."""
    done = subprocess.run([cc, *flags, "-E", str(source)], capture_output=True)
    if done.returncode != 0:
        return None
    text = _LINE_MARKER.sub(b"", done.stdout)
    head = json.dumps({"format": OBJECTS_FORMAT, "cc": version, "flags": code_flags(flags)}, sort_keys=True)
    return hashlib.sha256(head.encode() + b"\0" + text).hexdigest()


def _entry(key: str) -> Path:
    return cache_root() / "gvsoc" / "objects" / f"{key[:40]}.entry"


def restore(key: str, obj: Path) -> bool:
    """Write the kept object for `key` (and its stack usage) at `obj`; False when none is kept."""
    payload = read_entry(_entry(key), key)
    if payload is None:
        return False
    try:
        kept = pickle.loads(payload)
        code, usage = kept["object"], kept["stack_usage"]
    except (pickle.UnpicklingError, KeyError, TypeError, EOFError):
        return False
    atomic_write(obj, code)
    if usage is not None:
        atomic_write(obj.with_suffix(".su"), usage)
    return True


def keep(key: str, obj: Path) -> None:
    """Keep the object gcc just wrote at `obj` (and the stack usage beside it, if any) under `key`."""
    usage = obj.with_suffix(".su")
    write_entry(_entry(key), key, pickle.dumps({"object": obj.read_bytes(),
                                                "stack_usage": usage.read_text() if usage.is_file() else None}))
