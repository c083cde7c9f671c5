"""Does this schedule belong to this graph? The two refusals a replay makes before touching anything.

A schedule is keyed on node names and lowering renames nodes. Replayed against a graph it did not come from,
it would drop every recompute and quietly run the default order under a name claiming to be checkpointed.
So: a schedule whose fingerprint names another graph is refused (unless forced), and one that matches under
90% of its entries, or names under 90% of the graph's nodes (a fragment of a schedule: the replay would run the
rest in the graph's order and call that the schedule), is refused always.
"""
from __future__ import annotations

from dataclasses import dataclass

from ckpt.errors import CkptError
from ckpt.replay.graph_view import GraphView

MIN_MATCH = 0.9
SHOWN_MISSING = 5


@dataclass(frozen=True)
class Match:
    """How many schedule entries name a node of the graph; the distinct names that do not, in schedule order."""

    entries: int
    matched: int
    missing: tuple[str, ...]
    named: int = 0             # distinct nodes of the graph the schedule names
    nodes: int = 0             # the graph's nodes that will run

    @property
    def rate(self) -> float:
        return self.matched / self.entries if self.entries else 1.0

    @property
    def coverage(self) -> float:
        return self.named / self.nodes if self.nodes else 1.0

    def as_dict(self) -> dict:
        return {"entries": self.entries, "matched": self.matched, "rate": round(self.rate, 6),
                "missing": list(self.missing)}


@dataclass(frozen=True)
class Fingerprint:
    """The schedule's graph fingerprint against this graph's; status is match, absent, or forced."""

    schedule: str | None
    graph: str
    status: str

    def as_dict(self) -> dict:
        return {"schedule": self.schedule, "graph": self.graph, "status": self.status}


def match_schedule(seq: list[tuple[str, int]], view: GraphView) -> Match:
    missing = [name for name, _ in seq if name not in view.index]
    live = {view.nodes[i].name for i in view.live}
    return Match(entries=len(seq), matched=len(seq) - len(missing), missing=tuple(dict.fromkeys(missing)),
                 named=len({name for name, _ in seq} & live), nodes=len(live))


def require_match(match: Match, min_rate: float = MIN_MATCH) -> None:
    """Refuse a schedule that mostly names nodes this graph does not have, or names too few of its nodes to be
    a schedule of it (no override)."""
    if match.entries and match.rate < min_rate:
        shown = ", ".join(f"'{name}'" for name in match.missing[:SHOWN_MISSING])
        raise CkptError(f"schedule matches only {100 * match.rate:.1f}% of its {match.entries} entries against "
                        f"this graph (needs {100 * min_rate:.0f}%); missing e.g. {shown}",
                        "solve the schedule on the graph being replayed (same model and --target)")
    if match.coverage < min_rate:
        raise CkptError(f"schedule names only {match.named} of the graph's {match.nodes} nodes "
                        f"({100 * match.coverage:.1f}%, needs {100 * min_rate:.0f}%): it is a fragment of a schedule",
                        "replay the whole file ckpt solve wrote, every execution in run order")


def check_fingerprint(expected: str | None, view: GraphView, force: bool) -> Fingerprint:
    """Refuse a schedule solved on another graph unless forced; a schedule without a fingerprint passes."""
    actual = view.fingerprint()
    if expected is None:
        return Fingerprint(None, actual, "absent")
    if expected == actual:
        return Fingerprint(expected, actual, "match")
    if force:
        return Fingerprint(expected, actual, "forced")
    raise CkptError(f"schedule was solved on graph {expected} but this graph is {actual}",
                    "solve it on this graph (same model and --target), or pass --force "
                    "(the 90% name match still applies)")
