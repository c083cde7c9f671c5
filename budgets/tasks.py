"""A sweep phase's tasks run on an executor (local processes or Dask), a few at a time, each result handed back
in the sweep process as it ends; a task whose worker died is tried once more, then recorded as lost."""
from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ckpt.files import atomic_write
from ckpt.live import SweepProgress

KILL_HOOK = "CKPT_TEST_KILL_WORKER_AT"   # tests: "<phase>:<label>" kills the worker running it, once (marker file)


def run_task(fn: Callable, phase: str, task):
    """What a worker runs: `fn(task)`. (Tests can make the worker running a given point die first, once.)"""
    hook = os.environ.get(KILL_HOOK, "")
    if hook == f"{phase}:{task.spec.label}":
        marker = Path(task.folder) / f".killed-{phase}"
        if not marker.exists():
            marker.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(marker, str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
    return fn(task)


def run_tasks(executor, fn: Callable, items: list, began: Callable, done: Callable, lost: Callable,
               board: SweepProgress, phase: str, log: Callable[[str], None] = lambda msg: None) -> None:
    """Run `fn` over the tasks of `items` ((model, task) pairs) on the executor, at most `executor.slots` at a
    time, calling `done(item, result)` in the sweep process as each ends. A task whose worker process died is
    tried once more (on a fresh pool, locally; Dask reruns it by itself), then recorded by `lost`."""
    queue, tries = list(items), {id(item): 0 for item in items}
    running: dict = {}
    while queue or running:
        while queue and len(running) < executor.slots:
            item = queue.pop(0)
            running[executor.submit(_PhaseTask(fn, phase), item[1])] = item
            began(item)
        broken = False
        for future in sorted(executor.wait_first(running), key=lambda f: items.index(running[f])):
            item = running.pop(future)
            error = future.exception()
            if error is None:
                done(item, future.result())
            elif executor.lost_worker(error):
                broken = True
                tries[id(item)] += 1
                if tries[id(item)] < 2:
                    queue.insert(0, item)
                else:
                    done(item, lost(item, f"worker process died twice ({type(error).__name__})"))
            else:
                done(item, lost(item, f"{type(error).__name__}: {error}"))
        while executor.left:
            _say_and_log(board, log, f"Dask worker {executor.left.pop(0)} left the cluster: Dask runs its task "
                                     "again elsewhere")
        if broken:
            queue = [running.pop(f) for f in list(running)] + queue    # a broken pool took them down too
            _say_and_log(board, log, f"a worker process died: running {len(queue)} task(s) again")
            executor.renew()


def _say_and_log(board: SweepProgress, log: Callable[[str], None], message: str) -> None:
    board.note(message)
    log(message)


@dataclass(frozen=True)
class _PhaseTask:
    """`run_task(fn, phase, task)` as a picklable one-argument callable."""

    fn: Callable
    phase: str

    def __call__(self, task):
        return run_task(self.fn, self.phase, task)
