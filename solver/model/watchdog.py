"""Run a piece of work in a forked child and kill it if it overruns: a time limit the work cannot ignore.

Why: HiGHS checks its time limit only at certain places, and some of its loops never reach one (HiGHS 1.16's
presolve after a restart, `strengthenInequalities`, looped for minutes on a 1,600-variable bound model whose
limit was 11 s). Such a run would hang a solve, and a sweep with it. A forked child shares the built model
without copying it; its answer comes back pickled through a pipe. On the CPU clock (solver/model/clock.py) the
limit is the child's CPU seconds, which the kernel enforces (RLIMIT_CPU): the parent waits as long as that takes.
"""
from __future__ import annotations

import math
import os
import pickle
import resource
import select
import signal
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class _Failed:
    """What the child sends back when the work raised: the exception, re-raised in the parent."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


def can_fork() -> bool:
    return hasattr(os, "fork")


def in_child(work: Callable[[], T], seconds: float, cpu: bool = False) -> T | None:
    """`work()` run in a forked child: its result, or None if it had not finished after `seconds` (the child is
    killed then) or died without a word. An exception in the child is raised here. `cpu`: `seconds` of the
    child's CPU time (rounded up to a whole second), not of the wall clock."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:                                         # the child: do the work, send the result, leave
        os.close(read_end)
        try:
            if cpu:    # past it the kernel kills the child (SIGXCPU, then SIGKILL a second later)
                whole = max(1, math.ceil(seconds))
                resource.setrlimit(resource.RLIMIT_CPU, (whole, whole + 1))
            try:
                payload = pickle.dumps(work())
            except BaseException as err:                 # noqa: BLE001 - every failure goes back to the parent
                payload = pickle.dumps(_Failed(err))
            with os.fdopen(write_end, "wb") as pipe:
                pipe.write(payload)
        finally:
            os._exit(0)
    os.close(write_end)
    payload = None          # also when Ctrl-C or SIGTERM stops the wait: the child is then killed, not orphaned
    try:
        payload = _read_until(read_end, math.inf if cpu else time.monotonic() + seconds)
    finally:
        os.close(read_end)
        if payload is None:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    if not payload:
        return None
    result = pickle.loads(payload)
    if isinstance(result, _Failed):
        raise result.error
    return result


def _read_until(fd: int, deadline: float) -> bytes | None:
    """Everything written to `fd` until the writer closes it, or None if that has not happened by `deadline`."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], None if math.isinf(left) else left)[0]:
            return None
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
