"""The clock a solve's deadlines are read on: the wall clock, or the CPU seconds the solve itself used.

Why: on a machine that other work shares, a wall-clock limit buys a solve less work the busier the machine is,
so the same inputs end elsewhere (a solve given 60 s at a load of 12 does what 10 s does on an idle machine). A
CPU-seconds limit buys the same work under any load: a sweep's parallel points each get what one alone would,
and a test of what a solve reaches in its limit holds on a busy machine too. The CPU clock counts this process
(all its threads) and the children it waited for (the watched HiGHS runs fork: solver/model/watchdog.py).

The clock is chosen per solve (`BackendOptions.clock`) and read by every deadline under it through `now()`; it
is a context variable, so the deep parts of the solver need no extra argument.
"""
from __future__ import annotations

import contextlib
import contextvars
import resource
import time
from collections.abc import Iterator

from ckpt.solver.model.options import Clock

_current: contextvars.ContextVar[Clock] = contextvars.ContextVar("ckpt_solver_clock", default=Clock.WALL)


def current() -> Clock:
    return _current.get()


def now() -> float:
    """Seconds on the current clock (only differences mean anything)."""
    return cpu_seconds() if _current.get() is Clock.CPU else time.perf_counter()


def cpu_seconds() -> float:
    """CPU seconds of this process and of the children it waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def own_cpu_seconds() -> float:
    """CPU seconds of this process alone (a forked child starts again from zero)."""
    return time.process_time()


@contextlib.contextmanager
def reading(clock: Clock) -> Iterator[None]:
    """Deadlines under this block are read on `clock`."""
    token = _current.set(clock)
    try:
        yield
    finally:
        _current.reset(token)
