"""One error type for everything a user can get wrong, so the CLI can print one line and exit with its code."""
from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """What `ckpt` exits with (documented in the README)."""

    OK = 0
    BAD_INPUT = 1          # one line on stderr naming the problem and the way out (usage errors too)
    INFEASIBLE = 2         # no schedule fits the budget; the message states the smallest feasible budget
    NO_SCHEDULE = 3        # the time limit ran out before any schedule was found (not proven infeasible)
    INTERRUPTED = 130      # Ctrl-C or SIGTERM: what was finished is kept, nothing is half-written


class CkptError(Exception):
    """A problem with the user's input: `str(err)` is one line naming the problem and the way out."""

    exit_code: ExitCode = ExitCode.BAD_INPUT

    def __init__(self, problem: str, way_out: str = "") -> None:
        self.problem = problem
        self.way_out = way_out
        text = f"{problem}: {way_out}" if way_out else problem
        super().__init__(" ".join(text.split()))


class InfeasibleBudget(CkptError):
    """No schedule fits the budget (exit 2), or none was found in the time limit (exit 3).

    proven: True when the budget is shown impossible (below the floor, or the solver proved it); False when
    the search merely ended without a schedule (time limit, heuristic only).
    """

    def __init__(self, problem: str, way_out: str = "", proven: bool = True, floor: int | None = None,
                 floor_exact: bool = False) -> None:
        super().__init__(problem, way_out)
        self.proven = proven
        self.floor = floor            # the smallest budget a schedule is known to fit, when the message states one
        self.floor_exact = floor_exact    # ... proven the smallest: no schedule fits below it
        self.exit_code = ExitCode.INFEASIBLE if proven else ExitCode.NO_SCHEDULE


# errno values that mean the disk, not the input, refused a write (no space, quota, file size limit, read-only)
DISK_FULL = frozenset({28, 122, 27, 30})    # ENOSPC, EDQUOT, EFBIG, EROFS


def unwritable(path: object, exc: OSError) -> CkptError:
    """A write the filesystem refused, as one line naming the path and the way out."""
    return CkptError(f"cannot write '{path}': {exc.strerror or exc}",
                     "free space there (or write elsewhere: -o, $CKPT_CACHE_DIR) and run the command again")
