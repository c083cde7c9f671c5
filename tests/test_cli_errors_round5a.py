"""Bad input, round five (defects 1 to 15 of the fifth hostile pass): tracebacks and silent acceptance, each with
its class. A folder that takes no new file is refused before any work; Ctrl-C and SIGTERM while HiGHS runs exit
130 with the child gone; a split step's goldens and mini-batch data are checked as strictly as a single graph's;
options a mode ignores are refused; both ends of a budget range are run; the bench scripts refuse bad arguments
as the CLI does. Every refusal is one line with its documented exit code and touches no user file."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from bench_support import bench_module
from test_cli_errors import one_line, run, snapshot

from ckpt.budgets.ranges import parse_range
from ckpt.errors import CkptError
from ckpt.examples import write_example
from ckpt.solver.model import watchdog

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mlp")
    write_example("mlp", folder, batch=8, layers=3, width=32)
    return folder


# --------------------------------------------------------------------------- 1: a folder that takes no new file


@pytest.mark.parametrize("output", ["/sys/x.json", "/proc/x.json", "/sys/a/b/x.json"])
def test_an_output_in_a_folder_the_kernel_refuses_is_one_line_before_any_work(mlp, output):
    top = Path("/" + output.split("/")[1])
    if not top.is_dir():
        pytest.skip(f"no {top} here")
    code, _, err = run("solve", str(mlp), "--budget", "1.0", "-o", output)
    assert code == 1 and "refuses new files" in one_line(err) and "[ckpt]" not in err


def test_a_cache_folder_the_kernel_refuses_is_one_line(mlp, monkeypatch):
    if not Path("/sys").is_dir():
        pytest.skip("no /sys here")
    monkeypatch.setenv("CKPT_CACHE_DIR", "/sys/ckpt-cache")
    code, _, err = run("inspect", str(mlp))
    assert code == 1 and "refuses new files" in one_line(err)


# --------------------------------------------------------------------------- 2: Ctrl-C or SIGTERM while HiGHS runs


def test_an_interrupt_while_the_child_works_raises_it_and_leaves_no_child(tmp_path):
    """The wait for the child is where a solve spends its time: an interrupt there is KeyboardInterrupt (exit
    130), never an UnboundLocalError, and the child is killed and reaped, not orphaned."""
    pid_file = tmp_path / "pid"

    def work():
        pid_file.write_text(str(os.getpid()))
        time.sleep(60)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            watchdog.in_child(work, 30)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    child = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


# --------------------------------------------------------------------------- 14: both ends of a range run


@pytest.mark.parametrize("text, step, fractions", [("0.85:0.9", None, [0.9, 0.85]), ("0.5:0.9", 0.3, [0.9, 0.6, 0.5]),
                                                   ("0.6:0.9", None, [0.9, 0.8, 0.7, 0.6]), ("0.9:0.9", None, [0.9])])
def test_a_range_whose_step_stops_short_of_its_low_end_runs_that_end_too(text, step, fractions):
    assert parse_range(text, step) == fractions


def test_a_step_far_too_fine_is_refused_without_making_every_budget():
    with pytest.raises(CkptError, match="more than 100"):
        parse_range("0.1:0.9", 1e-12)


# --------------------------------------------------------------------------- 11, 12, 15: options a mode ignores


def test_a_level_total_with_the_non_tiled_flow_is_refused(mlp, tmp_path):
    code, _, err = run("solve", str(mlp), "--target", "siracusa", "--flow", "non-tiled", "--budget-total", "L3=8KB",
                       "-o", str(tmp_path / "s.json"))
    assert code == 1 and "--flow non-tiled" in one_line(err) and not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("option", [["--warm-start", "{seq}"], ["--method", "greedy"], ["--time-limit", "5"],
                                    ["--order", "graph"], ["--views", "fixed"], ["--gap", "0.1"],
                                    ["--threads", "1"], ["--solver", "cbc"]])
def test_top_k_refuses_the_solve_options_it_ignores(mlp, tmp_path, option):
    seq = tmp_path / "seq.json"
    assert run("solve", str(mlp), "--budget", "1.0", "-o", str(seq))[0] == 0
    given = [o.format(seq=seq) for o in option]
    code, _, err = run("solve", str(mlp), "--policy", "top-k", "--k", "1", *given, "-o", str(tmp_path / "t.json"))
    assert code == 1 and f"{option[0]}" in one_line(err) and "top-k" in err and not (tmp_path / "t.json").exists()


@pytest.mark.deeploy
def test_steps_on_a_split_step_is_refused(split, tmp_path):
    from ckpt.deeploy_identity import Flavour, deeploy_flavour

    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        pytest.skip("a split step replays only with Deeploy's training branch installed")
    seq = tmp_path / "seq.json"
    assert run("solve", "--costs", "estimate", str(split), "--target", "siracusa", "--budget", "1.0", "-o",
               str(seq))[0] == 0
    before = snapshot(split.parent)
    code, _, err = run("replay", str(seq), "--model", str(split), "--steps", "2", "-o", str(tmp_path / "r"))
    assert code == 1 and "--steps 2" in one_line(err) and not (tmp_path / "r").exists()
    assert snapshot(split.parent) == before


# --------------------------------------------------------------------------- 13: the calibration keeps the timeout


def test_a_sweeps_calibration_is_held_to_its_gvsoc_timeout(mlp, tmp_path, monkeypatch):
    """The sweep's calibration is a gvsoc run like its points': --gvsoc-timeout holds it too (it ran unbounded
    while `ckpt calibrate --gvsoc-timeout` timed out)."""
    from ckpt.budgets import sweep
    from ckpt.replay.run import ReplayOptions

    seen = []

    def costs(*args, **kwargs):
        seen.append(args[7] if len(args) > 7 else kwargs.get("timeout"))
        raise CkptError("stopped here")

    monkeypatch.setattr(sweep, "costs_and_why", costs)
    options = sweep.SweepOptions(fractions=(0.9,), target="none", replay=ReplayOptions(gvsoc_timeout=0.01))
    with pytest.raises(CkptError, match="stopped here"):
        sweep.run_sweep(str(mlp), tmp_path / "sw", options)
    assert seen == [0.01]


def test_costs_pass_the_timeout_to_the_calibration(mlp, monkeypatch):
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.pipeline import calibrate

    seen = []
    monkeypatch.setattr(calibrate, "calibrate", lambda *args, **kwargs: seen.append(args[6]) or (_ for _ in ()).throw(
        CkptError("stopped here")))
    with pytest.raises(CkptError):
        calibrate.costs_and_why("gvsoc", str(mlp), "siracusa", setup_for("siracusa", "L3"), timeout=0.01)
    assert seen == [0.01]


# ---------------------------------------------------------------- 5, 6: an optimizer graph that is not the step's


def _spoil_optimizer(split: Path, change) -> None:
    path = split.parent / "simplemlp_optimizer" / "network.onnx"
    model = onnx.load(path)
    change(model)
    onnx.save(model, path)


HOSTILE = bench_module("hostile")        # the bench's spoilt optimizer graphs, one definition for both
_update_only_the_first, _read_another_weight, _read_a_stranger = (
    HOSTILE._update_only_the_first, HOSTILE._read_another_weight, HOSTILE._read_a_stranger)


@pytest.mark.parametrize("change, says", [(_update_only_the_first, "'fc2_weight' is never updated"),
                                          (_read_another_weight, "the update of 'fc1_weight' reads"),
                                          (_read_a_stranger, "'stranger'")])
@pytest.mark.parametrize("command", [["verify"], ["inspect"], ["solve", "--budget", "1.0", "-o", "{tmp}/s.json"]])
def test_an_optimizer_graph_that_does_not_update_the_train_graphs_weights_is_refused(split, tmp_path, change, says,
                                                                                     command):
    _spoil_optimizer(split, change)
    before = snapshot(split.parent)
    code, _, err = run(command[0], str(split), *[c.format(tmp=tmp_path) for c in command[1:]])
    assert code == 1 and says in one_line(err) and "[ckpt] running" not in err
    assert snapshot(split.parent) == before and not (tmp_path / "s.json").exists()


# --------------------------------------------------------------- 7, 8, 9: a split step's goldens and mini-batch data


def _respell(split: Path, file: str, change) -> None:
    with np.load(split / file) as stored:
        arrays = {k: stored[k] for k in stored.files}
    np.savez(split / file, **change(arrays))


SPOILT_STEP_DATA = [
    ("outputs.npz", lambda a: {}, "holds no arrays"),
    ("outputs.npz", lambda a: {f"arr_{i:04d}": v for i, v in enumerate(a.values())}, "'arr_0000' is a positional"),
    ("outputs.npz", lambda a: {**a, "fc1_weight": a["fc1_weight"].astype(np.float64)}, "'fc1_weight' is float64"),
    ("outputs.npz", lambda a: {**a, "fc2_weight": a["fc2_weight"].T.copy()}, "the step writes float32[10, 8]"),
    ("outputs.npz", lambda a: {**a, "loss": a["loss"][:3]}, "one value per mini-batch"),
    ("outputs.npz", lambda a: {k: a[k] for k in ("fc1_bias", "fc2_bias")}, "holds none of what the step writes"),
    ("inputs.npz", lambda a: {**a, "meta_n_batches": np.array([10], np.int32)}, "one value per mini-batch: 10"),
    ("inputs.npz", lambda a: {**a, "meta_n_batches": np.array([0], np.int32)}, "'meta_n_batches' is 0"),
    ("inputs.npz", lambda a: {**a, "meta_n_batches": np.array([-1], np.int32)}, "'meta_n_batches' is -1"),
    ("inputs.npz", lambda a: {**a, "meta_n_batches": np.array([4.5])}, "must be one integer"),
    ("inputs.npz", lambda a: {**a, "meta_n_accum": np.array([0], np.int32)}, "'meta_n_accum' is 0"),
    ("inputs.npz", lambda a: {**a, "meta_n_accum": np.array([8], np.int32)}, "no update would run"),
    ("inputs.npz", lambda a: {k: v for k, v in a.items() if k != "mb2_arr_0000"}, "has no 'mb2_arr_0000'"),
    ("inputs.npz", lambda a: {**a, "mb9_arr_0000": a["mb1_arr_0000"]}, "'mb9_arr_0000' is no mini-batch's"),
    ("inputs.npz", lambda a: {**a, "mb2_arr_0002": a["arr_0002"]}, "which mini-batch 1 does not"),
]


@pytest.mark.parametrize("file, change, says", SPOILT_STEP_DATA)
@pytest.mark.parametrize("command", [["verify"], ["solve", "--budget", "1.0", "-o", "{tmp}/s.json"]])
def test_a_split_steps_data_is_checked_as_strictly_as_a_single_graphs(split, tmp_path, file, change, says, command):
    _respell(split, file, change)
    before = snapshot(split.parent)
    code, _, err = run(command[0], str(split), *[c.format(tmp=tmp_path) for c in command[1:]])
    assert code == 1 and says in one_line(err) and "[ckpt] running" not in err
    assert snapshot(split.parent) == before and not (tmp_path / "s.json").exists()


def test_the_shared_split_steps_data_still_verifies(split):
    code, out, err = run("verify", str(split))
    assert code == 0 and "Errors: 0 out of 596" in out, err


# --------------------------------------------------------------------------- 10: a total beyond what the level has


@pytest.mark.parametrize("target, home, total, says", [
    ("siracusa", "L2", "L2=5MB", "more than the 2,031,616 B siracusa's L2 gives data"),
    ("siracusa", "L3", "L3=9MB", "more than the 8,388,608 B siracusa's L3 gives data"),
    ("gap9", "L2", "L2=1.6MB", "more than the 1,572,864 B gap9's L2 gives data")])
def test_a_level_total_beyond_what_the_level_has_is_refused_before_any_work(mlp, tmp_path, target, home, total, says):
    code, _, err = run("solve", str(mlp), "--target", target, "--home", home, "--budget-total", total,
                       "-o", str(tmp_path / "s.json"))
    assert code == 1 and says in one_line(err) and "[ckpt]" not in err and not (tmp_path / "s.json").exists()


def test_a_smallest_total_beyond_the_level_is_not_advised(monkeypatch):
    """A refusal whose smallest total is more than the level has says no schedule fits there and the way out
    (a home off chip), instead of advising a budget the chip does not have."""
    from ckpt.errors import InfeasibleBudget
    from ckpt.pipeline import level_total
    from ckpt.pipeline.load import LoadedModel
    from ckpt.solver.budget import parse_total

    def refuse(*args, **kwargs):
        raise InfeasibleBudget("the L2 total cannot fit", "raise the budget to 2202082 B", floor=2_202_082)

    monkeypatch.setattr(level_total, "_solve_total", refuse)
    monkeypatch.setattr(level_total, "_checked", lambda *a: pytest.fail("a total beyond the level was checked"))
    loaded = LoadedModel(graph=None, target="siracusa", model_sha256="0", home="L2")
    with pytest.raises(InfeasibleBudget) as refused:
        level_total.solve_level_total(loaded, parse_total("L2=1.9MB"), 0, None, [], lambda e: None)
    assert "2,202,082 B, more than the 2,031,616 B" in str(refused.value) and "--home L3" in str(refused.value)
    assert refused.value.exit_code == 2


# --------------------------------------------------------------------------- 3, 4: the bench scripts' arguments

BAD_BENCH_ARGUMENTS = [
    ("peer_policies", ["--range", "abc"], "is not LOW:HIGH"),
    ("peer_policies", ["--range", "0.9:0.5"], "0 < LOW <= HIGH <= 1"),
    ("peer_policies", ["--model", "{tmp}/nowhere"], "no model at"),
    ("peer_policies", ["--model", "{single}"], "is no split step"),
    ("peer_policies", ["--time-limit", "-5"], "not a number of seconds above zero"),
    ("zoo", ["--range", "2:3"], "0 < LOW <= HIGH <= 1"),
    ("zoo", ["--model", "{tmp}/nowhere"], "no model at"),
    ("zoo", ["--model", "{single}"], "is no split step"),
    ("zoo", ["--jobs", "-1"], "not a count of processes"),
    ("zoo", ["--time-limit", "0"], "not a number of seconds above zero"),
    ("zoo", ["--budgets", "0.8,1.2"], "not a budget fraction"),
    ("zoo", ["--budgets", "0.8", "--range", "0.5:0.6"], "--range and --budgets both name the budgets"),
    ("zoo", ["--gvsoc-timeout", "-1"], "not a number of seconds above zero"),
    ("zoo", ["--costs", "{tmp}/nowhere.json"], "no cost file at"),
    ("zoo", ["--read-only", "--costs", "estimate"], "--read-only solves none"),
    ("sweep", ["--jobs", "-1"], "not a count of processes"),
    ("sweep", ["--range", "abc"], "is not LOW:HIGH"),
    ("gvsoc", ["--time-limit", "nan"], "not a number of seconds above zero"),
    ("level_total", ["--budgets", "1:2"], "0 < LOW <= HIGH <= 1"),
    ("solvers", ["--budgets", "abc"], "not a budget fraction"),
    ("solvers", ["--solvers", "gurobi"], "is not one of highs, cbc"),
    ("stages", ["--budgets", "0.9,x"], "not a budget fraction"),
    ("fidelity", ["--methods", "foo"], "is not one of greedy, milp"),
    ("decisive", ["--fractions", "2"], "not a budget fraction"),
    ("arena", ["--model", "{tmp}/nowhere"], "no model at"),
    ("coderun", ["--budgets", "0"], "not a budget fraction"),
    ("scale", ["--solvers", "gurobi"], "is not one of highs, cbc"),
    ("hostile", ["--jobs", "-3"], "not a count of processes"),
    ("first_command", ["--bogus"], "unrecognized arguments"),
]


@pytest.mark.slow
@pytest.mark.parametrize("script, args, says", BAD_BENCH_ARGUMENTS, ids=lambda v: v if isinstance(v, str) else
                         " ".join(v) if isinstance(v, list) else None)
def test_a_bench_refuses_bad_arguments_as_the_cli_does(mlp, tmp_path, script, args, says):
    """One line naming the problem, exit 1, before any work, and no output folder made."""
    given = [a.format(tmp=tmp_path, single=mlp) for a in args]
    done = subprocess.run([sys.executable, str(REPO / "bench" / f"{script}.py"), *given, "-o" if script ==
                           "peer_policies" else "--outdir", str(tmp_path / "out")]
                          if script in ("peer_policies", "zoo", "sweep", "gvsoc") else
                          [sys.executable, str(REPO / "bench" / f"{script}.py"), *given],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 1 and says in one_line(done.stderr), done.stderr
    assert not (tmp_path / "out").exists() and done.stdout == ""


@pytest.mark.slow
@pytest.mark.parametrize("script", ["zoo", "peer_policies"])
def test_a_bench_without_its_default_models_says_where_it_looked(tmp_path, script):
    """The zoo's models are not where the bench looks (no shared models here): one line naming that place and the
    way out, not a complaint that the model is of the wrong kind."""
    empty = tmp_path / "models"
    empty.mkdir()
    done = subprocess.run([sys.executable, str(REPO / "bench" / f"{script}.py"), "--smoke"], capture_output=True,
                          text=True, cwd=tmp_path, timeout=120, env={**os.environ, "CKPT_SHARED_MODELS": str(empty)})
    line = one_line(done.stderr)
    assert done.returncode == 1 and f"no model at '{empty}" in line and "CKPT_SHARED_MODELS" in line, done.stderr
    assert "no split step" not in line and done.stdout == ""


def test_a_sweep_of_fewer_than_no_processes_is_refused_before_its_folder_is_made(mlp, tmp_path):
    from ckpt.budgets.sweep import SweepOptions, run_sweep

    with pytest.raises(CkptError, match="processes"):
        run_sweep(str(mlp), tmp_path / "sw", SweepOptions(fractions=(0.9,), target="none", jobs=-1))
    assert not (tmp_path / "sw").exists()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_solve_interrupted_while_highs_runs_exits_130_and_leaves_no_child(shared_models, tmp_path, signum):
    import psutil

    model = shared_models / "resnet8_train"
    if not model.is_dir():
        pytest.skip("resnet8_train is not among the shared models")
    solve = subprocess.Popen([sys.executable, "-m", "ckpt", "solve", str(model), "--target", "none", "--budget", "0.5",
                              "-o", str(tmp_path / "s.json")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    children: list = []
    deadline = time.monotonic() + 120
    while not children and time.monotonic() < deadline and solve.poll() is None:     # HiGHS's forked child
        time.sleep(0.2)
        children = psutil.Process(solve.pid).children(recursive=True)
    if not children:
        solve.kill()
        pytest.skip("the solve ran no HiGHS child to interrupt")
    solve.send_signal(signum)
    _, err = solve.communicate(timeout=60)
    assert solve.returncode == 130 and "UnboundLocalError" not in err, err
    assert "interrupted" in one_line(err) and not (tmp_path / "s.json").exists()
    time.sleep(0.5)
    assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
