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


FORMAT = 'expected {"seq": [[node_name, 0|1], ...]} as written by ckpt solve'


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are all different (json keeps the last of two silently)."""
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        raise ValueError(f"key {json.dumps(twice[0])} appears more than once")
    return dict(pairs)


def read_schedule(path: str | Path) -> dict:
    """The schedule document at `path`, its sequence checked (see `checked_sequence`); one-line errors."""
    try:
        doc = json.loads(Path(path).read_text(), object_pairs_hook=_unique_keys)
    except RecursionError:
        raise CkptError(f"'{path}' nests too deeply to be a schedule file", FORMAT) from None
    except (OSError, ValueError) as exc:
        raise CkptError(f"'{path}' is not a schedule file ({type(exc).__name__}: {exc})", FORMAT) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("seq"), list):
        raise CkptError(f"'{path}' has no \"seq\" list", FORMAT)
    doc["seq"] = checked_sequence(doc["seq"], str(path))
    return doc


def checked_sequence(entries: list, where: str = "the schedule") -> list[tuple[str, int]]:
    """The entries as (node, flag), refusing what a schedule cannot mean: an empty sequence, an entry that is
    not [name, 0|1], a node run for the first time twice, or a recompute of a node before its first run."""
    if not entries:
        raise CkptError(f"{where} has an empty sequence", "a schedule lists every execution in run order")
    seq: list[tuple[str, int]] = []
    first_run: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and entry[0]
                and type(entry[1]) is int and entry[1] in (0, 1)):
            raise CkptError(f"{where}: entry {index} is {json.dumps(entry)}, not [node_name, 0|1]", FORMAT)
        name, flag = entry
        if flag == 0 and name in first_run:
            raise CkptError(f"{where}: entry {index} runs '{name}' for the first time again (first at entry "
                            f"{first_run[name]})", "flag every later run of a node 1 (a recompute)")
        if flag == 1 and name not in first_run:
            raise CkptError(f"{where}: entry {index} recomputes '{name}' before its first run",
                            "a node runs (flag 0) before it is recomputed (flag 1)")
        first_run.setdefault(name, index)
        seq.append((name, flag))
    return seq
