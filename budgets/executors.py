"""Where a sweep's tasks run: fresh local processes, or a Dask cluster. Both take `submit(fn, task)`.

Deeploy keeps global state, so every task gets a process of its own: locally a `ProcessPoolExecutor` (spawn,
one task per child); on a cluster, Dask's distributed scheduler runs each task on a worker and reruns it
elsewhere when that worker dies. Workers ignore Ctrl-C; the sweep handles it and stops them.
"""
from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass
class LocalExecutor:
    """Tasks in fresh spawned processes, at most `jobs` at a time."""

    jobs: int
    _pool: ProcessPoolExecutor | None = field(default=None, init=False)

    @property
    def name(self) -> str:
        return f"{self.jobs} local worker process(es)"

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.jobs, mp_context=multiprocessing.get_context("spawn"),
                                             max_tasks_per_child=1, initializer=_ignore_interrupts)
        return self._pool

    def submit(self, fn: Callable, task) -> Future:
        return self._executor().submit(fn, task)

    @property
    def slots(self) -> int:
        """Tasks to keep in flight: no more than the workers, so none waits in a queue Ctrl-C cannot empty."""
        return self.jobs

    def wait_first(self, futures: Iterable[Future]) -> set[Future]:
        """Block until at least one of `futures` is done; return those done."""
        return wait(list(futures), return_when=FIRST_COMPLETED).done

    @staticmethod
    def lost_worker(error: BaseException) -> bool:
        """Whether a task failed because its process died (the pool is then rebuilt for the rest)."""
        return isinstance(error, BrokenProcessPool)

    def renew(self) -> None:
        """Drop a broken pool; the next submit starts a new one."""
        self.stop()

    def stop(self) -> None:
        """Terminate running workers (Ctrl-C or a broken pool) and let the pool go."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        # The executor has no public way to stop a running task: terminate its worker processes, which hold
        # nothing half-written (every file is renamed into place whole).
        for process in list(getattr(pool, "_processes", {}).values()):
            if process.is_alive():
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)


def default_jobs(jobs: int) -> int:
    return jobs or os.cpu_count() or 1
