"""The schedule file `{"seq": [[node, is_recompute], ...], ...}`: writing it atomically and reading it back.

`seq` is the format Deeploy's training harness reads as it is; the other keys say which graph it belongs to
(the fingerprint replay checks) and what ckpt predicted. Same content in, byte-identical file out.
"""
from __future__ import annotations

import json
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.files import atomic_write

CLONE_TAG = "__ck"   # a replay runs the k-th execution of node N as the clone N__ck<k>, writing <tensor>__ck<k>


def dumps(doc: dict) -> str:
    """JSON with one seq entry per line (readable diffs), everything else indented, keys in a fixed order."""
    rest = {k: v for k, v in doc.items() if k != "seq"}
    seq_lines = ",\n".join("    " + json.dumps([name, int(flag)]) for name, flag in doc["seq"])
    head = '{\n  "seq": [\n' + seq_lines + "\n  ]"
    if not rest:
        return head + "\n}\n"
    body = json.dumps(rest, indent=2, sort_keys=True)[1:-1].strip("\n")
    return head + ",\n" + body + "\n}\n"


def write_schedule(path: str | Path, doc: dict) -> None:
    atomic_write(path, dumps(doc))


def read_schedule(path: str | Path) -> dict:
    try:
        doc = json.loads(Path(path).read_text())
        seq = [(str(name), int(flag)) for name, flag in doc["seq"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CkptError(f"'{path}' is not a schedule file ({type(exc).__name__}: {exc})",
                        'expected {"seq": [[node_name, 0|1], ...]} as written by ckpt solve') from None
    doc["seq"] = seq
    return doc
