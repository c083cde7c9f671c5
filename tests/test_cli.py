"""The command line as a user meets it: files written, reproducible, and one-line errors."""
import json
from dataclasses import replace

import pytest
from cli_support import ckpt, ckpt_here

from ckpt.budgets.table import markdown_table
from ckpt.examples import write_example
from ckpt.pipeline.load import load_for_target
from ckpt.pipeline.solve_summary import moved_ops_note, not_proven_warning, written_line
from ckpt.schedule_file import Predicted, Schedule, read_schedule
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.model.records import SolveOptions, Status
from ckpt.solver.solve import solve


@pytest.fixture(scope="module")
def mlp_dir(tmp_path_factory):
    """An MLP whose activations dominate (batch 256): its first-fit heap is its live peak."""
    folder = tmp_path_factory.mktemp("mlp")
    write_example("mlp", folder, batch=256, layers=5, golden=False)
    return folder


@pytest.fixture(scope="module")
def small_mlp(tmp_path_factory):
    """The default MLP: small buffers, so PMSIS's 8-byte chunks and first fit make its heap larger than its peak."""
    folder = tmp_path_factory.mktemp("small")
    write_example("mlp", folder, golden=False)
    return folder


def test_solve_writes_a_schedule_deeploy_can_read(mlp_dir, tmp_path):
    out = tmp_path / "seq.json"
    run = ckpt_here("solve", str(mlp_dir), "--budget", "0.8", "-o", str(out))
    assert run.returncode == 0, run.stderr
    doc = read_schedule(out)
    assert all(isinstance(name, str) and flag in (0, 1) for name, flag in doc.seq)
    assert doc.predicted.peak_bytes <= doc.budget.bytes
    assert doc.graph.nodes == len([1 for _, flag in doc.seq if flag == 0])
    assert set(json.loads(out.read_text())["solver"]) >= {"name", "status", "gap", "variables", "constraints"}


def test_order_search_records_the_space_its_answer_is_proven_in(mlp_dir, tmp_path):
    out = tmp_path / "seq.json"
    run = ckpt_here("solve", str(mlp_dir), "--budget", "0.8", "--order", "search", "-o", str(out))
    assert run.returncode == 0, run.stderr
    doc = read_schedule(out)
    assert doc.solver.stage_order == "search" and "local search" in doc.solver.space
    assert doc.predicted.peak_bytes <= doc.budget.bytes


@pytest.fixture(scope="module")
def mlp_solved(mlp_dir):
    """The MLP solved at 0.6 of its baseline (a schedule with recomputes), for the messages about it."""
    graph = load_for_target(mlp_dir, "none").graph
    return solve(graph, SolveOptions(budget=int(0.6 * baselines(graph).graph_order_peak)))


def test_a_schedule_not_proven_optimal_says_what_is_proven_and_the_way_out(mlp_dir, mlp_solved, tmp_path):
    result = mlp_solved
    assert result.status is Status.OPTIMAL and result.recompute_cost > 0
    short = replace(result, status=Status.FEASIBLE, gap=0.25, timed_out=True)
    text = not_proven_warning(short)
    assert "status feasible, gap 25.00%" in text and f"costs less than {short.cost_lower_bound} cycles" in text
    assert "--time-limit" in text and "--time-limit" not in not_proven_warning(replace(short, timed_out=False))
    run = ckpt_here("solve", str(mlp_dir), "--budget", "0.6", "--method", "greedy", "-o", str(tmp_path / "s.json"))
    assert run.returncode == 0 and "warning: not proven optimal (status heuristic, gap unknown)" in run.stderr


def test_what_runs_cheaper_than_the_plan_is_said_with_what_the_proof_is_about(mlp_solved):
    result = mlp_solved
    assert result.recompute_cost == result.planned_cost and moved_ops_note(result) is None
    moved = replace(result, recompute_cost=result.planned_cost - 5)
    note = moved_ops_note(moved)
    assert f"costs {moved.recompute_cost} cycles, less than the {moved.planned_cost} planned" in note
    assert "planned cost" in note and moved.cost_lower_bound == result.cost_lower_bound


def test_the_summary_line_counts_what_is_parked_and_its_cycles(mlp_solved):
    """With --park auto the step's predicted cycles include parking's transfers: so does the summary's +%."""
    result = mlp_solved
    predicted = Predicted(peak_bytes=result.peak_bytes, baseline_peak_bytes=result.baselines.graph_order_peak)
    plain = written_line(Schedule((), predicted=predicted), result, "seq.json")
    over = "over the sum of the graph order's op costs"        # not a measured step: the sweep's legend says so
    assert f"{result.recomputes} recomputes, +{result.cost_increase_pct:.2f}% cycles {over}, status" in plain
    assert "parked" not in plain
    parked = replace(result, parked=frozenset({"a", "b"}), park_cost=result.base_cost // 10)
    record = {"tensors": ["a", "b"], "bytes": 4096, "cycles": parked.park_cost}
    line = written_line(Schedule((), predicted=replace(predicted, parked=record)), parked, "seq.json")
    total = result.cost_increase_pct + 100 * parked.park_cost / result.base_cost
    assert "2 activations parked off chip (4096 B)" in line and f"+{total:.2f}% cycles {over} (recomputes" in line
    assert f"that cost {over} (%)" in markdown_table([], "none")
    assert f"recomputes +{result.cost_increase_pct:.2f}%" in line


@pytest.mark.slow  # two whole runs in subprocesses
def test_same_inputs_give_byte_identical_files(mlp_dir, tmp_path):
    for name in ("a.json", "b.json"):
        assert ckpt("solve", str(mlp_dir), "--budget", "0.75", "-o", str(tmp_path / name)).returncode == 0
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


@pytest.mark.parametrize("budget", ["0", "7OOKB", "1.5", "-3"])
def test_bad_budget_is_one_line_and_writes_nothing(mlp_dir, tmp_path, budget):
    out = tmp_path / "seq.json"
    run = ckpt_here("solve", str(mlp_dir), "--budget", budget, "-o", str(out))
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert run.stderr.strip().count("\n") == 0 and run.stderr.startswith("error: budget")
    assert not out.exists()


def test_not_onnx_is_one_line(tmp_path):
    junk = tmp_path / "junk.onnx"
    junk.write_text("this is not a model")
    run = ckpt_here("solve", str(junk), "-o", str(tmp_path / "s.json"))
    assert run.returncode == 1 and "is not an ONNX model" in run.stderr and "Traceback" not in run.stderr
    assert not (tmp_path / "s.json").exists()


def test_impossible_budget_exits_2_and_names_the_floor(mlp_dir, tmp_path):
    run = ckpt_here("solve", str(mlp_dir), "--budget", "16", "-o", str(tmp_path / "s.json"))
    assert run.returncode == 2, run.stderr
    assert "no schedule fits 16 B" in run.stderr and "lower bound" in run.stderr
    assert not (tmp_path / "s.json").exists()


def test_the_budget_holds_on_the_first_fit_heap_with_allocator_heap(small_mlp, tmp_path):
    """The min-memory order's live peak (18,432 B) fits 20,000 B but its first-fit heap (23,008 B) does not,
    and no schedule's does: with --allocator heap refused with exit 2 naming the heap, nothing written. 24 KiB fits
    both."""
    out = tmp_path / "s.json"
    run = ckpt_here("solve", str(small_mlp), "--budget", "20000", "--allocator", "heap", "-o", str(out))
    assert run.returncode == 2 and "first-fit heap cannot fit 20000 B" in run.stderr and "needs 23008 B" in run.stderr
    assert not out.exists()
    assert ckpt_here("solve", str(small_mlp), "--budget", "24KB", "--allocator", "heap", "-o", str(out)).returncode == 0
    doc = read_schedule(out)
    assert doc.predicted.checked == "heap_bytes" and doc.predicted.checked_bytes <= 24 * 1024
    assert doc.predicted.heap_bytes > doc.predicted.peak_bytes and doc.predicted.arena_bytes is None


def test_the_non_tiled_budget_is_a_live_byte_budget_on_ckpts_arena(small_mlp, tmp_path):
    """The same 20,000 B by default: the live peak fits, and the arena ckpt lays the code's buffers out in is that
    peak, where the first-fit heap would need 23,008 B."""
    out = tmp_path / "s.json"
    run = ckpt_here("solve", str(small_mlp), "--budget", "20000", "-o", str(out))
    assert run.returncode == 0, run.stderr
    doc = read_schedule(out)
    assert doc.predicted.checked == "peak_bytes" and doc.predicted.peak_bytes <= 20000
    assert doc.predicted.arena_bytes == doc.predicted.peak_bytes == 18432 < doc.predicted.heap_bytes == 23008


def test_inspect_prints_the_floor(mlp_dir):
    run = ckpt_here("inspect", str(mlp_dir))
    assert run.returncode == 0, run.stderr
    assert "single-op lower bound" in run.stdout and "peak, min-memory order" in run.stdout


def test_the_time_limit_counts_cpu_seconds_with_clock_cpu(mlp_dir, tmp_path, monkeypatch):
    """--clock cpu reaches every deadline of the solve: the solver's own and the pipeline's across its attempts."""
    from ckpt.pipeline import deployed_solve
    from ckpt.solver.model import clock
    from ckpt.solver.model.options import Clock

    seen, real = [], deployed_solve.solve

    def spied(graph, options, *args, **kwargs):
        seen.append((options.backend.clock, clock.current()))
        return real(graph, options, *args, **kwargs)

    monkeypatch.setattr(deployed_solve, "solve", spied)
    run = ckpt_here("solve", str(mlp_dir), "--budget", "0.8", "--clock", "cpu", "-o", str(tmp_path / "seq.json"))
    assert run.returncode == 0, run.stderr
    assert seen and all(s == (Clock.CPU, Clock.CPU) for s in seen)
    refused = ckpt_here("solve", str(mlp_dir), "--policy", "top-k", "--k", "1", "--clock", "cpu",
                        "-o", str(tmp_path / "top.json"))
    assert refused.returncode != 0 and "--clock cpu" in refused.stderr


def test_solve_takes_the_same_op_costs_as_a_sweep_by_default(mlp_dir, tmp_path, monkeypatch):
    """A hand solve and a sweep of the same budget solve with the same op costs (`auto`) unless told otherwise, so
    they choose the same schedule; `--costs estimate` still asks for the estimate."""
    from ckpt.cli import sweep_command
    from ckpt.pipeline import calibrate

    asked, real = [], calibrate.resolve_costs

    def spied(costs, *args, **kwargs):
        asked.append(costs)
        return real(costs, *args, **kwargs)

    monkeypatch.setattr(calibrate, "resolve_costs", spied)
    assert ckpt_here("solve", str(mlp_dir), "--budget", "0.8", "-o", str(tmp_path / "a.json")).returncode == 0
    assert ckpt_here("solve", str(mlp_dir), "--budget", "0.8", "--costs", "estimate",
                     "-o", str(tmp_path / "e.json")).returncode == 0
    swept = next(p.default for p in sweep_command.params if p.name == "costs")
    assert asked == [swept, "estimate"] and swept == "auto"
