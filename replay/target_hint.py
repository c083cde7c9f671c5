"""A schedule refused on one target's graph, said with the target whose graph it was solved on.

Lowering renames and adds nodes, so a schedule of Deeploy's lowered graph matches the ONNX as is only in part,
and the other way round. When a schedule does not belong to the graph it is replayed on, the refusal tries the
other graphs of the same model (the ONNX as is, Deeploy's lowering for Siracusa): one the schedule belongs to
(90% of its names and of the graph's nodes, and its fingerprint where it has one) is named as the way out.
"""
from __future__ import annotations

from pathlib import Path

from ckpt import deeploy_bridge
from ckpt.errors import CkptError
from ckpt.replay.matching import MIN_MATCH, match_schedule
from ckpt.replay.onnx_graph import view_of_model
from ckpt.replay.plan import ReplayPlan, plan_replay
from ckpt.solver.graph.onnx_loader import read_model
from ckpt.targets import uses_deeploy

CANDIDATES = ("none", "siracusa")      # the graphs tried: the ONNX as is, and Deeploy's lowering


def belongs_to(seq: list[tuple[str, int]], fingerprint: str | None, model: str | Path, target: str) -> bool:
    """Whether the schedule is one of `model`'s graph for `target` (False when that graph cannot be made)."""
    try:
        base = read_model(model) if not uses_deeploy(target) else deeploy_bridge.lower(model, target).model
    except CkptError:
        return False
    view = view_of_model(base)
    match = match_schedule(seq, view)        # its names, always: a fingerprint alone may be copied over
    named = match.rate >= MIN_MATCH and match.coverage >= MIN_MATCH
    return named and (fingerprint is None or view.fingerprint() == fingerprint)


def plan_with_hint(view, seq: list[tuple[str, int]], fingerprint: str | None, force: bool, model: str | Path,
                   target: str) -> ReplayPlan:
    """plan_replay on `view` (`model`'s graph for `target`); its refusal names the target the schedule belongs to,
    when that is another."""
    try:
        return plan_replay(view, seq, fingerprint=fingerprint, force=force)
    except CkptError as err:
        other = next((t for t in CANDIDATES if t != target and belongs_to(seq, fingerprint, model, t)), None)
        if other is None:
            raise
        raise CkptError(err.problem, f"it is a schedule of {model}'s graph for --target {other}: replay it with "
                                     f"--target {other}") from None
