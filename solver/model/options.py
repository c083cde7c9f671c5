"""The solver's choices (backend, method, objective, stage order, views, focus): one definition each, light to
import, so the CLI builds its options from them without loading the solver."""
from __future__ import annotations

from enum import StrEnum


class Backend(StrEnum):
    HIGHS = "highs"
    CBC = "cbc"


class Method(StrEnum):
    MILP = "milp"
    GREEDY = "greedy"


class Objective(StrEnum):
    COST = "cost"              # the cheapest schedule under the budget
    PEAK = "peak"              # the lowest peak under the cost cap


class StageOrder(StrEnum):
    MINMEM = "minmem"          # a memory-minimising list order
    GRAPH = "graph"            # the graph's own order
    SEARCH = "search"          # a local search over orders from the min-memory one, each step solved exactly


class Views(StrEnum):
    REMADE = "remade"          # re-made (free) where they are read: solver.views
    FIXED = "fixed"            # made once, where the stage order makes them


class Focus(StrEnum):
    SEED = "seed"              # a model restricted to stages where a reader may run seeds the exact one
    ONLY = "only"              # the restricted model alone (it can cut off the optimum)
    OFF = "off"


def values(kind: type[StrEnum]) -> list[str]:
    """A choice's values, for click.Choice."""
    return [member.value for member in kind]


class Policy(StrEnum):
    """How a schedule is made: ckpt's solve, or a baseline of Deeploy's training branch (solver.policies)."""

    SOLVE = "solve"                  # ckpt's own: the cheapest schedule under the budget
    BRANCH_RULE = "branch-rule"      # ckpt's recompute set for the budget, ordered by the branch's rule
    TOP_K = "top-k"                  # K forward nodes by bytes freed per cycle, ordered by the branch's rule


class Clock(StrEnum):
    """What a time limit counts (solver/model/clock.py)."""

    WALL = "wall"              # seconds of the wall clock: what a user waits
    CPU = "cpu"                # CPU seconds of the solve: the same work whatever else the machine runs
