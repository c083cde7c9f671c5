"""Progress as people expect it: live in a terminal, the same plain lines as ever when piped.

A sweep, in a terminal (stderr is a tty): a rich Live table of every point with its stage and status, under a
line with the points done, running and left, the time elapsed and an estimate of the time left. A long solve:
one live line with the time elapsed, the stage, the incumbent's cost, the proven bound and the gap, as MILP
users are used to, read off the solver's events (ckpt.events). Anywhere else each event is one line through
the callback, as before. Here, beside the commands' parts rather than in one of them, since `ckpt solve` and
`ckpt sweep` both draw with it.
"""
from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console
from rich.live import Live
from rich.table import Table

from ckpt.events import Event, Incumbent, LowerBound

STAGES = ("waiting", "solving", "solved", "replaying", "done")


@dataclass
class _LiveDisplay:
    """Drawn live on stderr while entered, when `live`; what is drawn is the subclass's `_render()`."""

    say: Callable[[str], None]
    live: bool = False
    _display: Live | None = field(default=None, init=False, repr=False)
    _transient = False                # cleared from the terminal on exit (a solve's line) or left (a sweep's table)

    @classmethod
    def for_terminal(cls, say: Callable[[str], None]):
        return cls(say, live=sys.stderr.isatty())

    def _render(self):
        raise NotImplementedError

    def _refresh(self) -> None:
        if self._display is not None:
            self._display.update(self._render())

    def __enter__(self):
        if self.live:
            self._display = Live(self._render(), console=Console(file=sys.stderr), refresh_per_second=4,
                                 transient=self._transient)
            self._display.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._display is not None:
            self._refresh()
            self._display.__exit__(*exc)
            self._display = None


@dataclass
class _Point:
    model: str
    label: str
    stage: str = "waiting"
    status: str = ""
    started: float | None = None
    seconds: float = 0.0


@dataclass
class SweepProgress(_LiveDisplay):
    """Where each point of a sweep is; `live` when drawn in a terminal."""

    points: dict[tuple[str, str], _Point] = field(default_factory=dict)
    started: float = field(default_factory=time.perf_counter)

    def note(self, message: str) -> None:
        """A line about the sweep as a whole (lowering, resuming): printed above the table, or as a line."""
        if self._display is not None:
            self._display.console.print(f"[ckpt] {message}", highlight=False)
        else:
            self.say(message)

    def add(self, model: str, label: str) -> None:
        self.points.setdefault((model, label), _Point(model, label))

    def stage(self, model: str, label: str, stage: str, status: str = "") -> None:
        point = self.points.setdefault((model, label), _Point(model, label))
        now = time.perf_counter()
        if stage in ("solving", "replaying"):
            point.started = now
        elif point.started is not None:
            point.seconds += now - point.started
            point.started = None
        point.stage, point.status = stage, status or point.status
        self._refresh()

    def counts(self) -> tuple[int, int, int]:
        """(done, running, left)."""
        done = sum(1 for p in self.points.values() if p.stage == "done")
        running = sum(1 for p in self.points.values() if p.stage in ("solving", "replaying"))
        return done, running, len(self.points) - done - running

    def summary(self) -> str:
        done, running, left = self.counts()
        elapsed = time.perf_counter() - self.started
        finished = [p.seconds for p in self.points.values() if p.stage == "done" and p.seconds]
        estimate = ""
        if finished and (running or left):
            per_point = sum(finished) / len(finished)
            estimate = f", about {per_point * (left + running / 2) / max(running, 1):.0f} s left"
        return f"{done} done, {running} running, {left} left; {elapsed:.0f} s{estimate}"

    def _render(self) -> Table:
        table = Table(title=f"ckpt sweep: {self.summary()}", title_justify="left", expand=False)
        several = len({p.model for p in self.points.values()}) > 1
        if several:
            table.add_column("model")
        for column in ("point", "stage", "status", "s"):
            table.add_column(column)
        now = time.perf_counter()
        for point in self.points.values():
            seconds = point.seconds + (now - point.started if point.started is not None else 0.0)
            cells = [point.label, point.stage, point.status, f"{seconds:.0f}" if seconds else ""]
            table.add_row(*([point.model] if several else []), *cells)
        return table


@dataclass
class SolveProgress(_LiveDisplay):
    """A solve's live line (elapsed, stage, incumbent, bound, gap), from the solver's events."""

    _transient = True
    stage: str = "starting"
    incumbent: int | None = None
    bound: float | None = None
    started: float = field(default_factory=time.perf_counter)

    def __call__(self, event: Event) -> None:
        match event:
            case Incumbent(cycles=cycles):
                self.incumbent = cycles if self.incumbent is None else min(self.incumbent, cycles)
            case LowerBound(cycles=cycles) if math.isfinite(cycles):
                self.bound = cycles
            case _:
                self.stage = str(event)
        if self._display is not None:
            self._refresh()
        else:
            self.say(str(event))

    def _render(self) -> str:
        return self.line()

    def line(self) -> str:
        gap = ""
        if self.incumbent and self.bound is not None:
            gap = f" | gap {100 * max(0, self.incumbent - self.bound) / self.incumbent:.2f}%"
        incumbent = "-" if self.incumbent is None else f"{self.incumbent:,}"
        bound = "-" if self.bound is None else f"{self.bound:,.0f}"
        return (f"[ckpt] {time.perf_counter() - self.started:6.1f} s | {self.stage[:60]} | incumbent {incumbent} "
                f"| bound {bound}{gap}")
