"""Where a sweep's tasks run: fresh local processes, or a Dask cluster. Both take `submit(fn, task)`.

Locally every task gets a process of its own (a `ProcessPoolExecutor`, spawn, one task per child), so nothing a
Deeploy run leaves in its process meets the next one. On a cluster, Dask's distributed scheduler runs each task
on a worker and reruns it elsewhere when that worker dies; a worker runs one task at a time (the Deeploy bridge
builds every Deeploy object afresh per run, which is what lets a worker process run point after point). Workers
ignore Ctrl-C; the sweep handles it and stops them.

A Dask worker needs ckpt installed (the same version) and the sweep folder on a filesystem it shares with the
sweep: `check` asks every worker before any task is sent, and refuses with one line naming the worker.
"""
from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from distributed import Client, KilledWorker
from distributed import Future as DaskFuture
from distributed import wait as dask_wait
from distributed.comm.core import CommClosedError

from ckpt.errors import CkptError
from ckpt.files import atomic_write

CONNECT_SECONDS = 10


def _ignore_interrupts() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@dataclass
class LocalExecutor:
    """Tasks in fresh spawned processes, at most `jobs` at a time."""

    jobs: int
    _pool: ProcessPoolExecutor | None = field(default=None, init=False)
    left: list[str] = field(default_factory=list, init=False)   # (a dead local worker is a BrokenProcessPool)

    @property
    def name(self) -> str:
        return f"{self.jobs} local worker process(es)"

    def check(self, folder: Path) -> None:
        """Local processes share this machine's files and ckpt: nothing to check."""

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
    """The local processes `jobs` asks for: 0 is the core count; fewer than 0 is refused (no pool of -1 workers,
    which would wait forever)."""
    if jobs < 0:
        raise CkptError(f"{jobs} processes cannot run a sweep's points", "give 0 (the core count) or more")
    return jobs or os.cpu_count() or 1


def _worker_view(probe: str) -> tuple[str, bool]:
    """On a worker: (its ckpt version, whether it reads the sweep's probe file)."""
    try:
        seen = Path(probe).read_text() == "ckpt"
    except OSError:
        seen = False
    return version("ckpt"), seen


def _quiet_distributed() -> None:
    """distributed logs its connection troubles with tracebacks (its loggers each have their own level); ckpt
    says what they mean, in one line."""
    for name in [n for n in logging.root.manager.loggerDict if n.startswith("distributed")] + ["distributed"]:
        logging.getLogger(name).setLevel(logging.CRITICAL)


def checked_address(address: str) -> str:
    """A scheduler address as `tcp://HOST:PORT`, refused in one line when it is not one."""
    scheme, _, rest = address.partition("://")
    host, _, port = rest.rpartition(":")
    if scheme != "tcp" or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise CkptError(f"--scheduler '{address}' is not a Dask scheduler address",
                        "give tcp://HOST:PORT, as `dask scheduler` prints it (e.g. tcp://10.0.0.5:8786)")
    return address


class LostCluster(CkptError):
    """The Dask scheduler went away in the middle of a sweep (finished points are kept)."""


@dataclass
class DaskExecutor:
    """Tasks on a Dask cluster's workers, through its scheduler at `address` (tcp://HOST:PORT). Workers that
    leave while it runs are remembered (`left`), so the sweep can say so; losing the scheduler is a
    `LostCluster`."""

    address: str
    _client: Client | None = field(default=None, init=False)
    _workers: set[str] = field(default_factory=set, init=False)
    left: list[str] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        checked_address(self.address)

    @property
    def name(self) -> str:
        return f"the Dask cluster at {self.address} ({self.slots} worker slot(s))"

    @property
    def client(self) -> Client:
        if self._client is None:
            _quiet_distributed()
            try:
                self._client = Client(self.address, timeout=CONNECT_SECONDS)
            except (OSError, TimeoutError) as err:
                raise CkptError(f"no Dask scheduler answers at {self.address} ({type(err).__name__})",
                                "start one (dask scheduler) with workers (dask worker ADDRESS --nthreads 1), or "
                                "drop --scheduler to run on this machine") from None
        return self._client

    @property
    def slots(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def check(self, folder: Path) -> None:
        """Refuse a cluster whose workers run another ckpt, run tasks in threads, or cannot see `folder`."""
        workers = self.client.nthreads()
        self._workers = set(workers)
        if not workers:
            raise CkptError(f"the Dask cluster at {self.address} has no workers", "start workers (dask worker)")
        threaded = sorted(w for w, n in workers.items() if n != 1)
        if threaded:
            raise CkptError(f"Dask worker {threaded[0]} runs {workers[threaded[0]]} tasks at once",
                            "start workers with --nthreads 1 (Deeploy is not thread-safe)")
        probe = folder / f".ckpt-probe-{uuid.uuid4().hex}"
        atomic_write(probe, "ckpt")
        try:
            views = self.client.run(_worker_view, str(probe))
        finally:
            probe.unlink(missing_ok=True)
        mine = version("ckpt")
        for worker, (theirs, seen) in sorted(views.items()):
            if theirs != mine:
                raise CkptError(f"Dask worker {worker} runs ckpt {theirs}, this sweep ckpt {mine}",
                                "install the same ckpt on every worker")
            if not seen:
                raise CkptError(f"Dask worker {worker} cannot see the sweep folder {folder}",
                                "put the sweep folder on a filesystem every worker mounts at the same path")

    def submit(self, fn: Callable, task) -> DaskFuture:
        with self._scheduler_needed():
            return self.client.submit(fn, task, pure=False)

    def wait_first(self, futures: Iterable[DaskFuture]) -> set[DaskFuture]:
        with self._scheduler_needed():
            done = set(dask_wait(list(futures), return_when="FIRST_COMPLETED").done)
            workers = set(self.client.nthreads())
        self.left += sorted(self._workers - workers)
        self._workers = workers
        return done

    @contextmanager
    def _scheduler_needed(self) -> Iterator[None]:
        """Turn the errors of a scheduler that stopped answering into one LostCluster."""
        try:
            yield
        except (OSError, TimeoutError, CommClosedError, CancelledError) as err:
            raise LostCluster(f"lost the Dask scheduler at {self.address} ({type(err).__name__})",
                              "finished points are kept: restart the scheduler and workers, then rerun the same "
                              "command to resume") from None

    @staticmethod
    def lost_worker(error: BaseException) -> bool:
        """Dask reruns a task whose worker died by itself; a task that kept killing workers ends here."""
        return isinstance(error, KilledWorker)

    def renew(self) -> None:
        """Nothing to rebuild: the scheduler still serves the workers left."""

    def stop(self) -> None:
        """Forget the running tasks (their worker processes finish them; every file lands whole or not at all)."""
        if self._client is not None:
            self._client.cancel(list(self._client.futures.values()), force=True)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
