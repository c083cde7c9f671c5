"""The schedule file `{"seq": [[node, is_recompute], ...], ...}` as one typed record, written and read here only.

`seq` is the format Deeploy's training harness reads as it is; the other parts say which graph it belongs to
(the fingerprint replay checks), the budget, what ckpt predicted and how it was solved. Every other module uses
the record's attributes, never the document's keys, so a misspelt field fails at once. Same content in,
byte-identical file out.
"""
from __future__ import annotations

import json
import math
import types
import typing
from dataclasses import dataclass, fields
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.files import MAX_JSON_DEPTH, atomic_write, check_input_file, json_depth, unique_keys
from ckpt.targets import HOMES, TARGET_TABLE, TARGETS, Flow, WeightUpdate

CLONE_TAG = "__ck"   # a replay runs the k-th execution of node N as the clone N__ck<k>, writing <tensor>__ck<k>


def clone_name(name: str, k: int) -> str:
    """The name of the k-th clone of a node or tensor."""
    return f"{name}{CLONE_TAG}{k}"


def clone_of(name: str) -> tuple[str, int] | None:
    """(original, k) for a clone's name `<original>__ck<k>`, None for any other name."""
    head, tag, k = name.rpartition(CLONE_TAG)
    return (head, int(k)) if tag and k.isdigit() else None


@dataclass(frozen=True)
class GraphId:
    """The graph a schedule was solved on: what a replay checks before it touches anything."""

    nodes: int | None = None
    names_sha256: str | None = None        # sha256 of the sorted node names (solver.graph.graph.TrainGraph.fingerprint)
    model_sha256: str | None = None
    target: str | None = None
    weights: str | None = None             # the weight layout its order respects (in-place: readers first)
    home: str | None = None                # the tiled deployment's home level, unless Deeploy's default (L3)
    flow: str | None = None                # the flow its figures are of, unless the target's default


@dataclass(frozen=True)
class BudgetSpec:
    """The budget as given and in bytes (`level` for a level's total: static + arena)."""

    text: str | None = None
    fraction: float | None = None
    bytes: int | None = None
    level: str | None = None


@dataclass(frozen=True)
class Predicted:
    """The figures of the sequence under ckpt's replay semantics (see the README)."""

    peak_bytes: int
    heap_bytes: int | None = None
    checked: str = "peak_bytes"            # the figure the budget was held on: peak_bytes | heap_bytes | total_<L>
    checked_bytes: int | None = None
    live_budget_bytes: int | None = None
    booked_peak_bytes: int | None = None
    baseline_peak_bytes: int | None = None
    min_memory_order_peak_bytes: int | None = None
    persistent_bytes: int | None = None
    lower_bound_bytes: int | None = None
    recomputes: int = 0
    recompute_cost: int = 0                # cycles of what runs
    planned_cost: int | None = None        # cycles of the decisions over the stage order (what a proof is about)
    cost_increase_pct: float = 0.0
    levels: dict | None = None             # Deeploy target: per level static, arena, live_max, total, ...
    arena_bytes: int | None = None         # the non-tiled flow's arena ckpt lays out (live peak + layout excess)
    step_cycles: int | None = None         # measured costs: the calibrated graph-order step + recompute_cost
    optimizer: dict | None = None          # a split step: what its optimizer graph adds (solver.graph.step_pair)
    optimizer_cycles: int | None = None    # a split step, measured costs: its optimizer network per update
    split_plus: dict | None = None         # split+: what persists it brings on chip ({"tensors": Deeploy's names,
                                           # "bytes"}, "code": the step's code counted in its room); the levels
                                           # and cycles above are with them there
    parked: dict | None = None             # --park auto: the activations parked off chip for the whole step
                                           # ({"tensors": Deeploy's names, "bytes", "cycles": what parking adds,
                                           # in step_cycles}); peak_bytes leaves them out

    @property
    def held_bytes(self) -> int:
        """The figure a schedule's budget is held to (the deployed figure the solve checked)."""
        return self.checked_bytes or self.peak_bytes

    @property
    def parked_tensors(self) -> tuple[str, ...]:
        """The activations parked off chip (Deeploy's names, sorted; none without --park auto)."""
        return tuple(sorted(str(t) for t in (self.parked or {}).get("tensors") or ()))

    @property
    def park_cycles(self) -> int:
        """The cycles parking adds to the step (0 where nothing is parked)."""
        return int((self.parked or {}).get("cycles") or 0)


@dataclass(frozen=True)
class SolverRecord:
    """How the schedule was found and what is proven of it."""

    status: str
    name: str | None = None
    method: str | None = None
    gap: float | None = None
    cost_lower_bound: float | None = None
    variables: int | None = None
    variables_unpruned: int | None = None
    constraints: int | None = None
    time_limit: float | None = None
    stage_order: str | None = None
    objective: str | None = None
    space: str | None = None
    seconds: float | None = None           # only with --record-time
    carried_from: str | None = None        # a sweep point given a tighter point's schedule
    costs: str | None = None               # where the op costs came from, unless the built-in estimate


# Fields written only when set: the file has them for some schedules and not others.
_OPTIONAL = {"levels", "level", "seconds", "carried_from", "weights", "step_cycles", "costs", "home", "optimizer",
             "optimizer_cycles", "arena_bytes", "flow", "split_plus", "parked"}


def part_dict(part: GraphId | BudgetSpec | Predicted | SolverRecord) -> dict:
    """A part of the file as it is written: its fields, the optional ones only when set."""
    return {f.name: getattr(part, f.name) for f in fields(part)
            if not (f.name in _OPTIONAL and getattr(part, f.name) is None)}


@dataclass(frozen=True)
class Schedule:
    """A schedule file: `seq` (what Deeploy's training harness reads as it is) and what ckpt says about it.
    A bare {"seq": ...} file has the other parts None."""

    seq: tuple[tuple[str, int], ...]
    graph: GraphId | None = None
    budget: BudgetSpec | None = None
    predicted: Predicted | None = None
    solver: SolverRecord | None = None

    @property
    def fingerprint(self) -> str | None:
        """The names_sha256 of the graph it was solved on; None for a bare file."""
        return self.graph.names_sha256 if self.graph else None

    def to_dict(self) -> dict:
        doc: dict = {"seq": [[name, int(flag)] for name, flag in self.seq]}
        for part in ("graph", "budget", "predicted", "solver"):
            value = getattr(self, part)
            if value is not None:
                doc[part] = part_dict(value)
        return doc

    @classmethod
    def from_dict(cls, doc: dict, where: str = "the schedule") -> Schedule:
        """The record of a schedule document, its sequence checked (see `checked_sequence`); one-line errors."""
        if not isinstance(doc, dict) or not isinstance(doc.get("seq"), list):
            raise CkptError(f"{where} has no \"seq\" list", FORMAT)
        parts = {}
        for part, kind in (("graph", GraphId), ("budget", BudgetSpec), ("predicted", Predicted),
                           ("solver", SolverRecord)):
            value = doc.get(part)
            if value is None:
                continue
            known = {f.name for f in fields(kind)}
            try:
                parts[part] = kind(**{k: v for k, v in value.items() if k in known})
            except (AttributeError, TypeError) as exc:
                raise CkptError(f"{where}: its \"{part}\" is not what ckpt writes ({exc})", FORMAT) from None
            _check_fields(part, parts[part], where)
        return cls(tuple(checked_sequence(doc["seq"], where)), **parts)


LEVELS = tuple(dict.fromkeys(level for t in TARGET_TABLE.values() for level in t.level_names))
CHOICES = {("graph", "target"): TARGETS, ("graph", "weights"): tuple(w.value for w in WeightUpdate),
           ("graph", "home"): HOMES, ("graph", "flow"): tuple(f.value for f in Flow), ("budget", "level"): LEVELS,
           ("predicted", "checked"): ("peak_bytes", "heap_bytes", *(f"total_{level}" for level in LEVELS))}


_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", dict: "an object"}


def _kind_problem(value: object, hint: object) -> str | None:
    """Why `value` is not of the annotated type `hint` (int, float, str, dict, or one of them or None); numbers
    must be finite and not negative (every number the file holds is a count, a size, a time or a ratio)."""
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None:
        return None if type(None) in allowed else "not a value"
    if isinstance(value, bool):
        return "a boolean"
    if int in allowed and isinstance(value, int) or float in allowed and isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            return "not a finite number >= 0"
        return None
    for kind in (str, dict):
        if kind in allowed and isinstance(value, kind):
            return None
    return "not " + " or ".join(_KIND_NAMES.get(a, "null") for a in allowed)


def _check_fields(part: str, record: object, where: str) -> None:
    """Each field of a part of the file is of its type and, where it names one, one of the things it can name."""
    for name, hint in typing.get_type_hints(type(record)).items():
        value = getattr(record, name)
        problem = _kind_problem(value, hint)
        choices = CHOICES.get((part, name))
        if problem is None and choices is not None and value is not None and value not in choices:
            problem = f"not one of {', '.join(choices)}"
        if problem:
            raise CkptError(f"{where}: \"{part}.{name}\" is {json.dumps(value)[:60]}, {problem}",
                            "write the schedule again with `ckpt solve`, or give only its \"seq\"")


def dumps(schedule: Schedule) -> str:
    """JSON with one seq entry per line (readable diffs), everything else indented, keys in a fixed order."""
    doc = schedule.to_dict()
    rest = {k: v for k, v in doc.items() if k != "seq"}
    seq_lines = ",\n".join("    " + json.dumps([name, int(flag)]) for name, flag in doc["seq"])
    head = '{\n  "seq": [\n' + seq_lines + "\n  ]"
    if not rest:
        return head + "\n}\n"
    body = json.dumps(rest, indent=2, sort_keys=True)[1:-1].strip("\n")
    return head + ",\n" + body + "\n}\n"


def write_schedule(path: str | Path, schedule: Schedule) -> None:
    atomic_write(path, dumps(schedule))


FORMAT = 'expected {"seq": [[node_name, 0|1], ...]} as written by ckpt solve'


def read_schedule(path: str | Path) -> Schedule:
    """The schedule at `path`, checked (see `Schedule.from_dict`); one-line errors."""
    check_input_file(path, "schedule")
    try:
        doc = json.loads(Path(path).read_text(), object_pairs_hook=unique_keys)
    except RecursionError:
        raise CkptError(f"'{path}' nests too deeply to be a schedule file", FORMAT) from None
    except (OSError, ValueError) as exc:
        raise CkptError(f"'{path}' is not a schedule file ({type(exc).__name__}: {exc})", FORMAT) from None
    if json_depth(doc) > MAX_JSON_DEPTH:
        raise CkptError(f"'{path}' nests too deeply to be a schedule file", FORMAT)
    if not isinstance(doc, dict) or not isinstance(doc.get("seq"), list):
        raise CkptError(f"'{path}' has no \"seq\" list", FORMAT)
    return Schedule.from_dict(doc, str(path))


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
