"""`ckpt sweep` as a user runs it, on a built-in MLP with target none (no Deeploy; seconds per point).

The sweep runs in a subprocess, its points in worker processes of their own; what it did is read back from
its files: the tables, the stored points, the schedules (replayed again with `ckpt replay`) and sweep.log.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from concurrent.futures import Future
from dataclasses import replace

import numpy as np
import pytest
from cli_support import ckpt, ckpt_here, interrupted_at

from ckpt.budgets.executors import LocalExecutor
from ckpt.budgets.ranges import parse_range
from ckpt.cli_common import INTERRUPT_HOOK
from ckpt.examples import write_example
from ckpt.replay.report import ReplayReport

SWEEP = ["--target", "none", "--jobs", "2", "--time-limit", "30"]



def log_lines(outdir, word):
    return [line.split(" ", 1)[1] for line in (outdir / "sweep.log").read_text().splitlines()
            if line.split(" ")[1] == word]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mlp")
    write_example("mlp", folder, batch=256, layers=5)
    return folder


@pytest.fixture(scope="module")
def swept(mlp, tmp_path_factory):
    """Two budgets: 0.9 (a schedule with recomputes) and 0.2 (below the single-op lower bound)."""
    outdir = tmp_path_factory.mktemp("sweep") / "out"
    run = ckpt("sweep", "0.2:0.9", "--points", "2", "--model", str(mlp), "-o", str(outdir), *SWEEP)
    assert run.returncode == 0, run.stderr
    return outdir, run


@pytest.mark.slow   # a sweep in a subprocess
def test_sweep_writes_every_output_with_the_baseline_first(swept, mlp):
    outdir, run = swept
    for name in ("sweep.md", "sweep.csv", "sweep.json", "pareto.png", "pareto.svg", "sweep.log"):
        assert (outdir / name).stat().st_size > 0, name
    points = json.loads((outdir / "sweep.json").read_text())["points"]
    assert [p["label"] for p in points] == ["baseline", "0.9", "0.2"]
    assert [r["label"] for r in csv.DictReader((outdir / "sweep.csv").open())] == ["baseline", "0.9", "0.2"]
    base, point = points[0], points[1]
    assert base["status"] == "baseline" and base["recomputes"] == 0 and base["check"] == "bit-identical"
    elements = sum(a.size for a in np.load(mlp / "outputs.npz").values())
    assert base["replayed_peak"] == base["predicted_peak"] and base["errors"] == f"0/{elements}"
    assert base["heap"] >= base["replayed_peak"] and base["levels"] == {}      # no tiled flow for target none
    assert point["recomputes"] > 0 and point["replayed_peak"] == point["predicted_peak"] <= point["budget_bytes"]
    assert point["check"] == "bit-identical" and point["cost_increase_pct"] > 0 and point["cycles"] is None
    table = run.stdout.splitlines()
    assert table[0].split()[:3] == ["point", "budget", "B"] and table[1].lstrip().startswith("baseline")
    assert "[ckpt] [0.9] solve" in run.stderr and "point 0.9 finished" in run.stderr
    assert not list(outdir.rglob("*.tmp"))


@pytest.mark.slow   # a sweep in a subprocess
def test_an_infeasible_point_stays_in_the_table_with_its_reason(swept):
    outdir, run = swept
    row = json.loads((outdir / "sweep.json").read_text())["points"][2]
    assert row["status"] == "infeasible" and row["replayed_peak"] is None and row["schedule"] is None
    assert "below the single-op lower bound" in row["reason"]
    assert "0.2: budget" in run.stdout and "| 0.2 |" in (outdir / "sweep.md").read_text()
    assert "no schedule: 0.2: infeasible" in (outdir / "pareto.svg").read_text()


@pytest.mark.slow   # a sweep in a subprocess
def test_every_point_schedule_replays_with_ckpt_replay(swept, mlp, tmp_path):
    outdir, _ = swept
    for label in ("baseline", "0.9"):
        seq = outdir / "points" / label / "seq.json"
        run = ckpt("replay", str(seq), "--model", str(mlp), "-o", str(tmp_path / label))
        assert run.returncode == 0, run.stderr
        again = ReplayReport.read(tmp_path / label / "report.json")
        kept = ReplayReport.read(outdir / "points" / label / "replay" / "report.json")
        assert again.memory == kept.memory and again.verification.status == "bit-identical"


@pytest.mark.slow
def test_rerun_skips_finished_points_and_resumes_new_ones(swept, mlp):
    outdir, _ = swept
    stored = {p: (outdir / "points" / p / "solved.json").stat().st_mtime_ns for p in ("baseline", "0.9", "0.2")}
    stored |= {p + "/": (outdir / "points" / p / "point.json").stat().st_mtime_ns for p in ("baseline", "0.9")}
    svg = (outdir / "pareto.svg").read_bytes()
    ran_before = len(log_lines(outdir, "ran"))
    again = ckpt("sweep", "0.2:0.9", "--points", "2", "--model", str(mlp), "-o", str(outdir), *SWEEP)
    assert again.returncode == 0, again.stderr
    assert "0 point(s) run, 3 skipped" in again.stdout
    assert len(log_lines(outdir, "ran")) == ran_before and len(log_lines(outdir, "skipped")) == 2
    assert {p: (outdir / "points" / p.rstrip("/") / ("point.json" if p.endswith("/") else "solved.json"))
            .stat().st_mtime_ns for p in stored} == stored
    assert (outdir / "pareto.svg").read_bytes() == svg                  # same rows, same bytes
    wider = ckpt("sweep", "0.7:0.9", "--step", "0.2", "--model", str(mlp), "-o", str(outdir), *SWEEP)
    assert wider.returncode == 0, wider.stderr
    assert "1 point(s) run, 2 skipped" in wider.stdout and log_lines(outdir, "ran")[-1].startswith("ran 0.7:")
    other_method = ckpt("sweep", "0.9:0.9", "--model", str(mlp), "-o", str(outdir), "--target", "none",
                        "--time-limit", "31", "--method", "greedy")
    assert "1 point(s) run, 1 skipped" in other_method.stdout          # solver options are part of the key


@pytest.mark.slow
def test_a_longer_time_limit_solves_again_only_the_points_left_unproven(mlp, tmp_path):
    """A point without a proof says "raise --time-limit": run so into the same folder, the sweep solves that
    point again and keeps every proven one (optimal, or infeasible), whatever time limit proved it."""
    outdir, sweep = tmp_path / "out", ["sweep", "0.2:0.9", "--points", "2", "--model", str(mlp), "-o",
                                          str(tmp_path / "out")]
    first = ckpt(*sweep, *SWEEP)
    assert first.returncode == 0, first.stderr
    points = outdir / "points"
    solved = json.loads((points / "0.9" / "solved.json").read_text())
    assert solved["schedule"]["solver"]["status"] == "optimal"
    stamps = {label: (points / label / "solved.json").stat().st_mtime_ns for label in ("baseline", "0.9", "0.2")}
    longer = [*SWEEP[:-1], "45"]
    kept = ckpt(*sweep, *longer)
    assert kept.returncode == 0, kept.stderr
    assert "0 point(s) run, 3 skipped" in kept.stdout
    assert {label: (points / label / "solved.json").stat().st_mtime_ns for label in stamps} == stamps
    assert sorted(line.split(":")[0] for line in log_lines(outdir, "kept")) == ["kept 0.2", "kept 0.9"]
    solved["schedule"]["solver"]["status"] = "feasible"        # as a run its time limit stopped leaves it
    (points / "0.9" / "solved.json").write_text(json.dumps(solved))
    again = ckpt(*sweep, *longer)
    assert again.returncode == 0, again.stderr
    resolved = json.loads((points / "0.9" / "solved.json").read_text())
    assert resolved["schedule"]["solver"]["status"] == "optimal"
    assert resolved["schedule"]["solver"]["time_limit"] == 45
    assert (points / "0.2" / "solved.json").stat().st_mtime_ns == stamps["0.2"]


@pytest.mark.slow
def test_ctrl_c_keeps_finished_points_and_leaves_no_partial_file(mlp, tmp_path):
    """A real SIGINT, sent by the sweep to itself once its first replay (the baseline's, with one job) has
    finished: a test hook, so the interrupt lands at a known stage and the test cannot race the work."""
    outdir = tmp_path / "out"
    args = [sys.executable, "-m", "ckpt", "sweep", "0.7:0.9", "--step", "0.2", "--model", str(mlp), "-o",
            str(outdir), "--target", "none", "--jobs", "1", "--time-limit", "30"]
    run = interrupted_at(args, INTERRUPT_HOOK, "point baseline finished")
    assert run.returncode == 130 and "Traceback" not in run.stderr, run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("error: interrupted: finished points are kept")
    assert not list(outdir.rglob(".*.tmp")) and not list(outdir.rglob(".code.*"))
    finished = [p.parent.name for p in (outdir / "points").glob("*/point.json")]
    assert len(finished) == 1
    resumed = subprocess.run(args, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert "2 point(s) run, 1 skipped" in resumed.stdout


def test_bad_range_and_emit_without_a_deeploy_target_are_one_line_errors(mlp, tmp_path):
    for extra, message in ((["0.9:0.6"], "must satisfy 0 < LOW <= HIGH"),
                           (["0.6:0.9", "--emit-ci", str(tmp_path / "ci")], "--emit-ci needs a Deeploy target")):
        run = ckpt_here("sweep", *extra, "--model", str(mlp), "--target", "none", "-o", str(tmp_path / "out"))
        assert run.returncode == 1 and run.stderr.count("\n") == 1 and message in run.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path / "ci").exists()


def test_ranges_run_from_the_high_end():
    assert parse_range("0.6:0.9") == [0.9, 0.8, 0.7, 0.6]
    assert parse_range("0.6:0.9", points=2) == [0.9, 0.6]


def test_an_optimum_with_recomputes_says_it_is_proven_over_its_stage_order():
    """The table's status of an optimal schedule that recomputes says its proof is relative to the stage order,
    and a note says what that means; a schedule without recompute (nothing cheaper exists) does not."""
    from ckpt.budgets.table import markdown_table, terminal_table
    from ckpt.pipeline.row import empty_row
    relative = replace(empty_row("0.7", 0.7, 700, "optimal", ""), recompute_cost=120)
    free = replace(empty_row("0.9", 0.9, 900, "optimal", ""), recompute_cost=0)
    text = terminal_table([free, relative])
    assert "optimal (order)" in text and text.count("optimal (order)") == 2          # the cell and the note
    assert "over the schedule's stage order" in markdown_table([free, relative])
    assert "(order)" not in terminal_table([free]) and "(order)" not in markdown_table([free])


class _HereExecutor(LocalExecutor):
    """The sweep's tasks run in this process, one at a time (so a test's spy sees them)."""

    def submit(self, fn, task):
        future = Future()
        future.set_result(fn(task))
        return future

    def wait_first(self, futures):
        return set(futures)

    def stop(self):
        pass

    close = stop


def test_clock_cpu_reaches_every_point_solve_of_a_sweep(mlp, tmp_path, monkeypatch):
    """`ckpt sweep --clock cpu`: each point's solve reads its deadlines on the CPU clock, as `ckpt solve --clock
    cpu` does (the points run here, in this process, for the spy to see them)."""
    from ckpt.budgets import sweep
    from ckpt.pipeline import deployed_solve
    from ckpt.solver.model import clock
    from ckpt.solver.model.options import Clock

    seen, real = [], deployed_solve.solve

    def spied(graph, options, *args, **kwargs):
        seen.append((options.backend.clock, clock.current()))
        return real(graph, options, *args, **kwargs)

    monkeypatch.setattr(deployed_solve, "solve", spied)
    monkeypatch.setattr(sweep, "LocalExecutor", _HereExecutor)
    run = ckpt_here("sweep", "0.8:0.9", "--model", str(mlp), "--target", "none", "--no-verify", "--clock", "cpu",
                    "--time-limit", "30", "-o", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    assert len(seen) >= 2 and all(s == (Clock.CPU, Clock.CPU) for s in seen)


def test_a_proof_is_kept_whatever_clock_or_limit_gave_it():
    """A proven point is not solved again for another --clock, as for another --time-limit: the key its proof is
    kept under leaves out how long, on which clock, the solver ran."""
    from dataclasses import asdict

    from ckpt.budgets.sweep import _proof_solver
    from ckpt.solver.model.backends import BackendOptions
    from ckpt.solver.model.options import Clock
    from ckpt.solver.model.records import SolveOptions

    def key(**backend):
        return _proof_solver(asdict(SolveOptions(backend=BackendOptions(**backend))))

    assert key(time_limit=20, clock=Clock.CPU) == key(time_limit=60, clock=Clock.WALL)
    assert key(gap=0.01) != key(gap=0.02)


def test_a_sweep_run_again_under_other_stage_order_rules_solves_its_points_again(mlp, tmp_path, monkeypatch):
    """A point's answer, proof included, holds for the stage order it was solved over: a sweep folder solved
    before the order's rules changed is solved again, the graph order's point is not."""
    from ckpt.budgets import sweep
    from ckpt.pipeline import deployed_solve

    seen, real = [], deployed_solve.solve

    def spied(graph, options, *args, **kwargs):
        seen.append(options.budget)
        return real(graph, options, *args, **kwargs)

    monkeypatch.setattr(deployed_solve, "solve", spied)
    monkeypatch.setattr(sweep, "LocalExecutor", _HereExecutor)
    args = ("sweep", "0.9:0.9", "--model", str(mlp), "--target", "none", "--no-verify", "--time-limit", "30",
            "-o", str(tmp_path / "out"))
    assert ckpt_here(*args).returncode == 0
    solved = len(seen)
    assert solved >= 1 and ckpt_here(*args).returncode == 0 and len(seen) == solved      # kept: same rules
    monkeypatch.setattr(sweep, "STAGE_ORDER_RULES", sweep.STAGE_ORDER_RULES + 1)
    assert ckpt_here(*args).returncode == 0 and len(seen) == 2 * solved


@pytest.mark.deeploy     # the split home lowers the MLP with Deeploy (cached); nothing is generated or replayed
def test_park_auto_reaches_every_point_solve_of_a_sweep_and_its_replay(tmp_path, monkeypatch, lowering_cache):
    """`ckpt sweep --home split --park auto`: each point's solve may park (the solver is given the parking's prices, as
    under `ckpt solve --park auto`), a budget below the single-op floor is solved rather than refused, and each
    point's replay is asked to home what its schedule parks off chip (the points run here, for the spies to see)."""
    from ckpt.budgets import sweep
    from ckpt.pipeline import deployed_solve
    from ckpt.pipeline.point import PointRecord

    seen, replayed, real = [], {}, deployed_solve.solve

    def spied(graph, options, *args, **kwargs):
        seen.append(kwargs.get("park"))
        return real(graph, options, *args, **kwargs)

    def replay_spy(task):
        replayed[task.spec.label] = (task.replay.deeploy.parked, task.schedule.predicted.parked_tensors)
        return PointRecord(task.key, task.spec.label, sweep.solved_row(
            task.spec.label, task.spec.fraction, task.spec.budget_bytes, task.schedule, 0.0, "not verified", "",
            ""), stored=False)

    def no_reference(*args, **kwargs):
        raise sweep.CkptError("not replayed here", "-")

    monkeypatch.setattr(deployed_solve, "solve", spied)
    monkeypatch.setattr(sweep, "LocalExecutor", _HereExecutor)
    monkeypatch.setattr(sweep, "replay_point", replay_spy)
    monkeypatch.setattr(sweep, "replay_schedule", no_reference)
    model = tmp_path / "mlp"
    write_example("mlp", model, layers=2, width=32)
    run = ckpt_here("sweep", "0.6:0.9", "--points", "2", "--model", str(model), "--target", "siracusa", "--home",
                    "split", "--park", "auto", "--costs", "estimate", "--no-verify", "--time-limit", "30",
                    "-o", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    assert len(seen) >= 2 and all(prices is not None for prices in seen)
    assert set(replayed) == {"baseline", "0.9", "0.6"}
    assert all(asked == parked for asked, parked in replayed.values())
    assert replayed["0.6"][0] and not replayed["baseline"][0]       # below the floor: it parks to fit


def test_park_auto_is_refused_by_a_sweep_before_any_work_where_solve_refuses_it(mlp, tmp_path):
    """--park auto without the split home, or beside split+, is refused in one line before anything is lowered."""
    outdir = tmp_path / "out"
    for extra, said in ((("--target", "siracusa"), "--home split"),
                        (("--target", "siracusa", "--home", "split", "--persist-on-chip", "auto"),
                         "--persist-on-chip auto")):
        run = ckpt_here("sweep", "0.8:0.9", "--model", str(mlp), "--park", "auto", *extra, "-o", str(outdir))
        assert run.returncode == 1 and said in run.stderr and "Traceback" not in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1 and not outdir.exists()


def test_a_tighter_points_parked_schedule_is_carried_by_its_recompute_and_parking_cycles_together():
    """A sweep gives a looser point a tighter point's schedule only where it costs less in all: a schedule that
    parks pays its parking's cycles too (they are in its step, and in the solve's bound), so fewer recompute cycles
    bought with more parking cycles are not cheaper."""
    from ckpt.pipeline.point import carried
    from ckpt.schedule_file import BudgetSpec, Predicted, Schedule, SolverRecord

    def schedule(recompute: int, park: int) -> Schedule:
        parked = {"tensors": ["t"], "bytes": 64, "cycles": park} if park else None
        return Schedule((("n", 0),), budget=BudgetSpec("0.8", 0.8, 1000),
                        predicted=Predicted(peak_bytes=900, recompute_cost=recompute, planned_cost=recompute,
                                            parked=parked),
                        solver=SolverRecord(status="optimal", cost_lower_bound=recompute + park))

    own = schedule(500, 0)
    kept, note = carried(own, [("0.7", schedule(100, 1000))], 1000, 1e-4)
    assert kept is own and note == ""
    cheaper = schedule(100, 200)
    kept, note = carried(own, [("0.7", cheaper)], 1000, 1e-4)
    assert kept.predicted == cheaper.predicted and "0.7" in note
