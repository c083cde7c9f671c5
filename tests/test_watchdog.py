"""A HiGHS run that ignores its time limit is stopped from outside (solver/model/watchdog.py), and a run in the
watchdog's child answers exactly as one in this process."""
import os
import time

import pulp
import pytest

from ckpt.solver.model import backends, watchdog
from ckpt.solver.model.backends import BackendOptions, RunStatus, run
from ckpt.solver.model.watchdog import in_child


def test_the_child_s_result_comes_back():
    assert in_child(lambda: {"answer": [1, 2.5, None]}, 30) == {"answer": [1, 2.5, None]}


def test_work_past_its_time_is_killed():
    began = time.monotonic()
    assert in_child(lambda: time.sleep(60), 0.3) is None
    assert time.monotonic() - began < 5


def test_an_exception_in_the_child_is_raised_here():
    def fails():
        raise ValueError("from the child")

    with pytest.raises(ValueError, match="from the child"):
        in_child(fails, 30)


def test_a_child_that_dies_without_a_word_gives_nothing():
    assert in_child(lambda: os._exit(3), 30) is None


def _knapsack() -> pulp.LpProblem:
    lp = pulp.LpProblem("knapsack", pulp.LpMaximize)
    x = [pulp.LpVariable(f"x{i}", cat="Binary") for i in range(12)]
    lp += pulp.lpSum((3 * i % 7 + 1) * v for i, v in enumerate(x))
    lp += pulp.lpSum((5 * i % 11 + 2) * v for i, v in enumerate(x)) <= 23
    return lp


def test_a_run_in_the_child_answers_as_one_in_this_process(monkeypatch):
    monkeypatch.setattr(backends, "WATCHED_VARIABLES", 0)     # (so small a model would run here otherwise)
    children = []
    monkeypatch.setattr(watchdog, "in_child",
                        lambda work, seconds, cpu=False: children.append(seconds) or in_child(work, seconds))
    here, there = _knapsack(), _knapsack()
    at_home = run(here, BackendOptions(time_limit=None, gap=0.0))     # no limit: no child
    assert children == []
    watched = run(there, BackendOptions(time_limit=30, gap=0.0))
    assert children == [backends.kill_after(BackendOptions(time_limit=30))]
    assert at_home.status is watched.status is RunStatus.OPTIMAL
    assert (at_home.gap, at_home.dual_bound, at_home.has_answer) == \
        (watched.gap, watched.dual_bound, watched.has_answer)
    assert [v.varValue for v in here.variables()] == [v.varValue for v in there.variables()]
    assert pulp.value(here.objective) == pulp.value(there.objective) > 0


def test_a_run_is_killed_when_the_whole_solve_ends_before_its_own_limit():
    """A run with time left on its own limit is still stopped at the solve's end (`ends_by`)."""
    ends_by = time.perf_counter() + 5
    assert backends.kill_after(BackendOptions(time_limit=30, ends_by=ends_by)) <= 5
    assert 30 < backends.kill_after(BackendOptions(time_limit=30)) < 60
    assert backends.kill_after(BackendOptions(time_limit=30, ends_by=ends_by - 10)) == 0.0


def test_a_run_that_overruns_far_ends_timed_out_without_an_answer(monkeypatch):
    """Stand-in for HiGHS stuck where it never looks at the clock: the run sleeps past its kill time."""
    monkeypatch.setattr(backends, "WATCHED_VARIABLES", 0)
    monkeypatch.setattr(backends, "_solved", lambda lp, solver: time.sleep(60))
    monkeypatch.setattr(backends, "KILL_SHARE", 1.0)
    monkeypatch.setattr(backends, "KILL_SECONDS", 0.2)
    began = time.monotonic()
    outcome = run(_knapsack(), BackendOptions(time_limit=0.1))
    assert time.monotonic() - began < 5
    assert outcome.status is RunStatus.NO_SOLUTION and outcome.timed_out and not outcome.has_answer
    assert outcome.dual_bound == 0.0
