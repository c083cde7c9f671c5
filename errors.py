"""One error type for everything a user can get wrong, so the CLI can print one line and exit."""
from __future__ import annotations


class CkptError(Exception):
    """A problem with the user's input: `str(err)` is one line naming the problem and the way out."""

    exit_code = 1

    def __init__(self, problem: str, way_out: str = "") -> None:
        self.problem = problem
        self.way_out = way_out
        super().__init__(f"{problem}: {way_out}" if way_out else problem)


class InfeasibleBudget(CkptError):
    """No schedule fits the budget; exit code 2 as `ckpt solve` documents.

    proven: True when the budget is shown impossible (below the floor, or the solver proved it); False when
    the search merely ended without a schedule (time limit, heuristic only).
    """

    exit_code = 2

    def __init__(self, problem: str, way_out: str = "", proven: bool = True) -> None:
        super().__init__(problem, way_out)
        self.proven = proven
