"""Turn `{"seq": [[node, is_recompute]]}` into the executions a replay runs: clones, rewiring, pruning, order.

The rules, each of which was a failure before it was handled (see the seed change):
- The first time a node runs it is the node itself; every later time (flagged 1, or a repeated name flagged
  0) it is a clone `<name>__ck<k>` writing `<tensor>__ck<k>`, same op and attributes, reading the same
  constants (a clone shares weights; it never copies them).
- Every execution reads the newest version of each input, so consumers scheduled after a recompute read the
  clone and the original's output dies at its last forward use. This is simulate.replay's rule, on purpose.
- Nodes the schedule does not name still run, right after the producers of their inputs (never at the end:
  a constant duplicated per consumer must come before that consumer), reading the newest versions there.
- An execution nothing reads (a clone whose consumers all ran before it, an original whose consumers all
  moved to a clone) is pruned, repeatedly, since dropping one can orphan its producer. Producers of graph
  outputs, and nodes nothing read in the first place, are kept.
- The result must be a valid order: every input produced before it is read.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from ckpt.errors import CkptError
from ckpt.replay.graph_view import GraphView, NodeView
from ckpt.replay.matching import MIN_MATCH, Fingerprint, Match, check_fingerprint, match_schedule, require_match
from ckpt.schedule_file import clone_name


@dataclass(frozen=True)
class Execution:
    """One run of a node: the original (clone 0) or its clone k, with the tensor versions it reads and writes."""

    name: str
    source: str
    clone: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    scheduled: bool = True      # named by the schedule; False: an unnamed node placed after its producers


@dataclass(frozen=True)
class ReplayPlan:
    """What a replay runs and drops, and why the schedule was accepted; the same on ONNX and on Deeploy's graph."""

    executions: tuple[Execution, ...]      # what runs, in run order
    pruned: tuple[Execution, ...]          # executions dropped because nothing reads them
    unscheduled: tuple[str, ...]           # nodes the schedule did not name (they run anyway)
    stale: tuple[str, ...]                 # nodes that produce nothing: never run
    match: Match
    fingerprint: Fingerprint

    @property
    def order(self) -> list[str]:
        return [e.name for e in self.executions]

    @property
    def clones_kept(self) -> int:
        return sum(1 for e in self.executions if e.clone)

    @property
    def clones_pruned(self) -> int:
        return sum(1 for e in self.pruned if e.clone)

    @property
    def originals_pruned(self) -> int:
        return sum(1 for e in self.pruned if not e.clone)

    def counts(self) -> dict[str, int]:
        made = self.clones_kept + self.clones_pruned
        return {
            "schedule_entries": self.match.entries,
            "matched_entries": self.match.matched,
            "recomputes": made,
            "clones_kept": self.clones_kept,
            "clones_pruned": self.clones_pruned,
            "originals_pruned": self.originals_pruned,
            "unscheduled_nodes_placed": len(self.unscheduled),
            "stale_nodes_dropped": len(self.stale),
            "executions": len(self.executions),
        }


def plan_replay(view: GraphView, seq: list[tuple[str, int]], *, fingerprint: str | None = None,
                force: bool = False, min_match: float = MIN_MATCH) -> ReplayPlan:
    """The executions `seq` asks for on `view`. Refuses another graph's schedule (see matching)."""
    checked = check_fingerprint(fingerprint, view, force)
    match = match_schedule(seq, view)
    require_match(match, min_match)
    scheduled = _scheduled(view, seq)
    named = {e.source for e in scheduled}
    unnamed = [i for i in view.topological() if view.nodes[i].name not in named]
    ordered = _place_unnamed(view, scheduled, unnamed)
    kept, pruned = _prune(view, ordered)
    _check_order(view, kept)
    return ReplayPlan(executions=tuple(kept), pruned=tuple(pruned),
                      unscheduled=tuple(view.nodes[i].name for i in unnamed), stale=view.stale,
                      match=match, fingerprint=checked)


def _scheduled(view: GraphView, seq: list[tuple[str, int]]) -> list[Execution]:
    """The named executions in run order, each reading the newest version of its inputs."""
    taken = {n.name for n in view.nodes} | {t for n in view.nodes for t in n.inputs + n.outputs if t}
    newest: dict[str, str] = {}
    runs: Counter = Counter()
    executions = []
    for name, _ in seq:
        if name not in view.index:
            continue
        node = view.nodes[view.index[name]]
        inputs = tuple(newest.get(t, t) if t else t for t in node.inputs)
        if runs[name] == 0:
            clone, outputs = 0, node.outputs
        else:
            clone = _free_suffix(node, runs[name], taken)
            outputs = tuple(clone_name(t, clone) if t else t for t in node.outputs)
            taken.update(t for t in outputs if t)
            taken.add(clone_name(name, clone))
        runs[name] += 1
        for old, new in zip(node.outputs, outputs):
            if old:
                newest[old] = new
        label = clone_name(name, clone) if clone else name
        executions.append(Execution(label, name, clone, inputs, outputs))
    return executions


def _free_suffix(node: NodeView, k: int, taken: set[str]) -> int:
    """k, or the next k whose clone name and output names are all unused (a graph may hold clones already)."""
    while clone_name(node.name, k) in taken or any(clone_name(t, k) in taken for t in node.outputs if t):
        k += 1
    return k


def _place_unnamed(view: GraphView, scheduled: list[Execution], unnamed: list[int]) -> list[Execution]:
    """Insert each unnamed node right after the last producer of its inputs (before everything if none)."""
    position = {t: k for k, e in enumerate(scheduled) if not e.clone for t in e.outputs if t}
    after: dict[int, list[Execution]] = {}
    for i in unnamed:                                  # topological: an unnamed producer is placed first
        node = view.nodes[i]
        anchor = max((position[t] for t in node.inputs if t in position), default=-1)
        after.setdefault(anchor, []).append(Execution(node.name, node.name, 0, node.inputs, node.outputs, False))
        position.update({t: anchor for t in node.outputs if t})
    ordered = list(after.get(-1, []))
    for k, execution in enumerate(scheduled):
        ordered.append(execution)
        ordered.extend(after.get(k, []))
    return _read_newest(view, ordered)


def _read_newest(view: GraphView, executions: list[Execution]) -> list[Execution]:
    """Unnamed nodes, like all others, read the newest version of each input where they were placed."""
    newest: dict[str, str] = {}
    found = []
    for e in executions:
        if not e.scheduled:
            e = replace(e, inputs=tuple(newest.get(t, t) if t else t for t in e.inputs))
        found.append(e)
        newest.update({old: new for old, new in zip(view.nodes[view.index[e.source]].outputs, e.outputs) if old})
    return found


def _prune(view: GraphView, executions: list[Execution]) -> tuple[list[Execution], list[Execution]]:
    """Drop executions nothing reads, to a fixpoint; keep graph-output producers and originally unread nodes."""
    originally_read = {view.nodes[i].name for i in view.live if any(t in view.read for t in view.nodes[i].outputs)}
    alive = list(executions)
    pruned: list[Execution] = []
    while True:
        reads = Counter(t for e in alive for t in set(e.inputs) if t)
        drop = [e for e in alive if _unread(e, reads, view) and (e.clone or e.source in originally_read)]
        if not drop:
            break
        dropped = {id(e) for e in drop}
        alive = [e for e in alive if id(e) not in dropped]
        pruned.extend(drop)
    order = {id(e): k for k, e in enumerate(executions)}
    return alive, sorted(pruned, key=lambda e: order[id(e)])


def _unread(execution: Execution, reads: Counter, view: GraphView) -> bool:
    outputs = [t for t in execution.outputs if t]
    return not any(t in view.graph_outputs for t in outputs) and all(reads[t] == 0 for t in outputs)


def _check_order(view: GraphView, executions: list[Execution]) -> None:
    produced = set(view.available)
    for e in executions:
        for t in e.inputs:
            if t and t not in produced:
                raise CkptError(f"the replayed order runs '{e.name}' before its input '{t}' is produced",
                                "the schedule is not a valid order for this graph; solve it on this graph")
        produced.update(t for t in e.outputs if t)
