"""A solve's time limit on the CPU clock (solver/model/clock.py): what a solve reaches in it does not depend on
what else the machine runs. Waiting is not counted, a HiGHS run stops at its CPU limit (in this process and in
the watchdog's child) and says it ran out of time, and a child spinning past its CPU limit is killed."""
import random
import time

import pulp

from ckpt.solver.model import backends, clock
from ckpt.solver.model.backends import BackendOptions, RunStatus, run
from ckpt.solver.model.options import Clock
from ckpt.solver.model.watchdog import in_child


def test_the_cpu_clock_does_not_count_waiting():
    with clock.reading(Clock.CPU):
        began = clock.now()
        time.sleep(0.3)
        assert clock.now() - began < 0.1
    with clock.reading(Clock.WALL):
        began = clock.now()
        time.sleep(0.3)
        assert clock.now() - began >= 0.3
    assert clock.current() is Clock.WALL


def _spin():
    while True:
        pass


def test_a_child_on_the_cpu_clock_may_wait_past_its_limit_but_not_spin_past_it():
    assert in_child(lambda: time.sleep(1.5) or "done", 1, cpu=True) == "done"
    assert in_child(_spin, 1, cpu=True) is None


def _market_split(rows: int = 4, columns: int = 30) -> pulp.LpProblem:
    """Cornuéjols and Dawande's market split: binaries that split each row's weight in half. Hard for branch and
    bound at this size: no solution and no proof within seconds."""
    rng = random.Random(1)
    lp = pulp.LpProblem("market_split", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x{j}", cat="Binary") for j in range(columns)]
    lp += pulp.lpSum(x)
    for _ in range(rows):
        weights = [rng.randrange(100) for _ in range(columns)]
        lp += pulp.lpSum(w * v for w, v in zip(weights, x)) == sum(weights) // 2
    return lp


def _run_on_cpu_clock(limit: float) -> tuple[backends.Outcome, float]:
    with clock.reading(Clock.CPU):
        began = clock.now()
        outcome = run(_market_split(), BackendOptions(time_limit=limit, gap=0.0))
        return outcome, clock.now() - began


def test_a_highs_run_on_the_cpu_clock_stops_at_its_cpu_limit():
    outcome, used = _run_on_cpu_clock(0.5)
    assert 0.5 <= used < 2.0
    assert outcome.timed_out
    # no solution held: PuLP alone would report the interrupted run as holding one
    assert outcome.status is RunStatus.NO_SOLUTION and not outcome.has_answer


def test_a_watched_run_on_the_cpu_clock_stops_at_its_cpu_limit_in_the_child(monkeypatch):
    monkeypatch.setattr(backends, "WATCHED_VARIABLES", 0)
    children = []
    real = backends.watchdog.in_child
    monkeypatch.setattr(backends.watchdog, "in_child",
                        lambda work, seconds, cpu=False: children.append(cpu) or real(work, seconds, cpu))
    outcome, used = _run_on_cpu_clock(0.5)
    assert children == [True]
    assert 0.5 <= used < 2.0          # the child's CPU seconds count once it is waited for
    assert outcome.timed_out and outcome.status is RunStatus.NO_SOLUTION
