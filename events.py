"""Progress as typed events: the solver and the pipeline say what happened, a display decides how to show it.

A long solve reports three things: a step begins, a schedule that fits was found (the incumbent), the lower
bound on its cost rose. Each is a small record, so a live display reads fields instead of parsing text; each
also prints as the one line ckpt has always written, for logs and pipes.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """A step of the work begins (or a fact about it worth a line)."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Incumbent:
    """A schedule that fits was found: its cost in cycles and what found it."""

    cycles: int
    how: str

    def __str__(self) -> str:
        return f"incumbent {self.cycles} cycles ({self.how})"


@dataclass(frozen=True)
class LowerBound:
    """No schedule of the space costs less than `cycles`, proven from `points` binding points (so far, or
    `final` when the bound is done)."""

    cycles: float
    points: int
    final: bool = False

    def __str__(self) -> str:
        where = f"from {self.points} point(s)" if self.final else f"so far ({self.points} point(s))"
        return f"lower bound {self.cycles:.0f} cycles {where}"


Event = Step | Incumbent | LowerBound
Progress = Callable[[Event], None]


def ignore(event: Event) -> None:
    """The progress of a caller that does not listen."""


def as_lines(say: Callable[[str], None]) -> Progress:
    """Each event as its one line through `say`."""
    return lambda event: say(str(event))
