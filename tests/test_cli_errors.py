"""Everything a user can type wrong, or interrupt: one line, the documented exit code, no traceback, and no file
changed that the user did not name. Most cases run the CLI in this process (its `main`, with ckpt's exit codes);
the ones about signals run it as a subprocess."""
from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
import pytest
from cli_support import ckpt_here, interrupted_at
from onnx import TensorProto, helper

from ckpt.cli_common import INTERRUPT_HOOK
from ckpt.examples import write_example


def run(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `ckpt ARGS` run by the console script's own entry point."""
    done = ckpt_here(*args)
    return done.returncode, done.stdout, done.stderr


def one_line(err: str) -> str:
    """stderr's error line (progress lines start with [ckpt]); the error must be a single line."""
    errors = [line for line in err.splitlines() if line.strip() and not line.startswith("[ckpt]")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert errors[0].startswith("error: "), err
    return errors[0]


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size)
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mlp")
    write_example("mlp", folder, batch=256, layers=5)
    return folder


@pytest.fixture(scope="module")
def schedule(mlp, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("seq") / "seq.json"
    assert ckpt_here("solve", str(mlp), "--budget", "0.6", "--method", "greedy", "-o", str(path)).returncode == 0
    return path


# --------------------------------------------------------------------------- output paths


@pytest.mark.parametrize("device", ["/dev/null", "/dev/full"])
def test_a_device_is_never_replaced(mlp, device):
    if not Path(device).exists():
        pytest.skip(f"{device} is not on this machine")
    before = os.stat(device)
    code, _, err = run("solve", str(mlp), "-o", device)
    assert code == 1 and "not a regular file" in one_line(err)
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


@pytest.mark.parametrize("where, message", [("dir", "is a directory"), ("below", "which is a file"),
                                            ("empty", "output path is empty")])
def test_bad_output_paths_are_refused_before_any_work(mlp, tmp_path, where, message):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("mine")
    path = {"dir": str(tmp_path / "dir"), "below": str(tmp_path / "file" / "seq.json"), "empty": ""}[where]
    before = snapshot(tmp_path)
    code, _, err = run("solve", str(mlp), "-o", path)
    assert code == 1 and message in one_line(err)
    assert "[ckpt] loading" not in err                       # refused before the model was even loaded
    assert snapshot(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere: an unwritable folder cannot be made")
def test_an_unwritable_folder_is_refused(mlp, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    code, _, err = run("solve", str(mlp), "-o", str(locked / "seq.json"))
    assert code == 1 and "not writable" in one_line(err)


def test_dash_writes_the_schedule_to_stdout(mlp, tmp_path):
    code, out, err = run("solve", str(mlp), "--budget", "0.9", "-o", "-")
    assert code == 0 and json.loads(out)["seq"] and "wrote stdout" in err
    assert not Path("-").exists()


def test_replay_into_a_folder_it_did_not_write_needs_overwrite_and_keeps_the_users_files(mlp, schedule,
                                                                                           tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    code, _, err = run("replay", str(schedule), "--model", str(mlp), "-o", str(out))
    assert code == 1 and "--overwrite" in one_line(err) and snapshot(out) == {"notes.txt": snapshot(out)["notes.txt"]}
    code, _, err = run("replay", str(schedule), "--model", str(mlp), "-o", str(out), "--overwrite")
    assert code == 0, err
    assert (out / "notes.txt").read_text() == "mine" and (out / "report.json").is_file()
    mode = stat.S_IMODE(out.stat().st_mode)
    code, _, err = run("replay", str(schedule), "--model", str(mlp), "-o", str(out))   # ckpt's folder now
    assert code == 0, err
    assert stat.S_IMODE(out.stat().st_mode) == mode and (out / "notes.txt").read_text() == "mine"


# --------------------------------------------------------------------------- inputs


def test_an_inference_graph_is_refused_and_nothing_written(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g", [x], [y])
    onnx.save(helper.make_model(graph), tmp_path / "relu.onnx")
    for command in (["solve", "-o", str(tmp_path / "s.json")], ["inspect"]):
        code, _, err = run(command[0], str(tmp_path / "relu.onnx"), *command[1:])
        assert code == 1 and "not a training graph" in one_line(err)
    assert not (tmp_path / "s.json").exists()


def test_an_undefined_element_type_is_taken_from_the_producer(mlp, tmp_path):
    model = onnx.load(mlp / "network.onnx")
    for info in model.graph.value_info[:4]:
        info.type.tensor_type.elem_type = TensorProto.UNDEFINED
    onnx.save(model, tmp_path / "undefined.onnx")
    code, _, err = run("solve", str(tmp_path / "undefined.onnx"), "--budget", "0.9", "-o",
                       str(tmp_path / "s.json"))
    assert code == 0, err
    reference = tmp_path / "r.json"
    assert run("solve", str(mlp), "--budget", "0.9", "-o", str(reference))[0] == 0
    assert json.loads((tmp_path / "s.json").read_text())["predicted"] == json.loads(reference.read_text())["predicted"]
    assert run("inspect", str(tmp_path / "undefined.onnx"))[0] == 0


@pytest.mark.parametrize("args, message", [
    (["--budget", "0.4B"], "less than one byte"),
    (["--budget", "nanKB"], "is not a fraction or a size"),
    (["--time-limit", "0"], "--time-limit"),
    (["--time-limit", "-1"], "--time-limit"),
    (["--time-limit", "nan"], "not a finite number"),
    (["--gap", "-1"], "--gap"),
    (["--threads", "0"], "--threads"),
    (["--no-such-option"], "No such option"),
    (["--target", "gap10"], "--target"),
])
def test_bad_options_are_usage_errors_with_exit_1(mlp, tmp_path, args, message):
    code, _, err = run("solve", str(mlp), "-o", str(tmp_path / "s.json"), *args)
    assert code == 1 and message in one_line(err)
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("args, message", [
    (["cct", "--train", "nonsense"], "cct example options rejected"),
    (["mlp", "--layers", "-1"], "--layers"),
    (["mlp", "--blocks", "2"], "does not apply to a mlp example"),
])
def test_bad_example_options(tmp_path, args, message):
    code, _, err = run("example", *args, "-o", str(tmp_path / "ex"))
    assert code == 1 and message in one_line(err)


def test_version_and_short_help():
    code, out, _ = run("--version")
    assert code == 0 and out.startswith("ckpt, version ")
    code, out, _ = run("solve", "-h")
    assert code == 0 and "--budget" in out


@pytest.mark.parametrize("seq, message", [
    ([], "empty sequence"),
    ([[1, 2]], "entry 0 is [1, 2], not [node_name, 0|1]"),
    ([["x", 2]], "entry 0 is [\"x\", 2]"),
    ([["x", True]], "entry 0 is [\"x\", true]"),
    ([["x", 0], ["x", 0]], "entry 1 runs 'x' for the first time again"),
    ([["x", 1], ["x", 0]], "entry 0 recomputes 'x' before its first run"),
])
def test_malformed_schedules_are_refused_naming_the_entry(mlp, tmp_path, seq, message):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"seq": seq}))
    for command in (["replay", str(path), "--model", str(mlp), "-o", str(tmp_path / "out")],
                    ["verify", str(mlp), "--schedule", str(path)]):
        code, _, err = run(*command)
        assert code == 1 and message in one_line(err)
    assert not (tmp_path / "out").exists()


def test_an_infeasible_budget_exits_2(mlp, tmp_path):
    code, _, err = run("solve", str(mlp), "--budget", "16", "-o", str(tmp_path / "s.json"))
    assert code == 2 and "no schedule fits 16 B" in one_line(err)


def test_no_schedule_within_what_the_heuristic_searched_exits_3(tmp_path):
    """The greedy heuristic alone proves nothing: when it finds no schedule (a 1-block CCT at 0.7 with views made
    once: above the single-op floor, out of the greedy's reach), the budget is not shown infeasible: exit 3."""
    write_example("cct", tmp_path / "cct1", blocks=1, conv_channels=16, golden=False)
    code, _, err = run("solve", str(tmp_path / "cct1"), "--method", "greedy", "--budget", "0.7",
                       "--views", "fixed", "-o", str(tmp_path / "s.json"))
    assert code == 3 and "not proven infeasible" in one_line(err)
    assert not (tmp_path / "s.json").exists()


# --------------------------------------------------------------------------- Ctrl-C


def _interrupted(args: list[str], at: str) -> subprocess.CompletedProcess:
    return interrupted_at([sys.executable, "-m", "ckpt", *args], INTERRUPT_HOOK, at)


def test_ctrl_c_in_solve_exits_130_and_writes_nothing(mlp, tmp_path):
    done = _interrupted(["solve", str(mlp), "--budget", "0.6", "-o", str(tmp_path / "s.json")], "greedy heuristic")
    assert done.returncode == 130 and "interrupted" in one_line(done.stderr)
    assert not list(tmp_path.iterdir())


def test_ctrl_c_in_replay_exits_130_and_leaves_no_folder(mlp, schedule, tmp_path):
    done = _interrupted(["replay", str(schedule), "--model", str(mlp), "-o", str(tmp_path / "out")],
                        "running the replayed order")
    assert done.returncode == 130 and "interrupted" in one_line(done.stderr)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- concurrent and leftover work
HOLD_LOCK = """
import fcntl, os, sys, time
handle = open(sys.argv[1], "a+")
fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
handle.truncate(0); handle.write(f"{os.getpid()}\\n"); handle.flush()
print("held", flush=True)
time.sleep(120)
"""


def test_a_second_sweep_into_a_folder_in_use_is_refused_naming_the_holder(mlp, tmp_path):
    """Another live sweep holds the folder's lock: refused before any work, its process id named, nothing written."""
    outdir = tmp_path / "sweep"
    outdir.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(outdir / "sweep.lock")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        code, _, err = run("sweep", "--model", str(mlp), "--target", "none", "-o", str(outdir))
        assert code == 1 and f"another sweep (process {holder.pid})" in one_line(err)
        assert sorted(p.name for p in outdir.iterdir()) == ["sweep.lock"]
    finally:
        holder.kill()
        holder.wait()


def test_deeploy_scratch_of_a_dead_process_is_removed_and_a_live_ones_kept(tmp_path, monkeypatch):
    """What an interrupted run left in the temp folder goes at the next run; a running process's scratch stays,
    and so does anything not named as ckpt's."""
    from ckpt.deeploy_bridge.scratch import SCRATCH_PREFIX, remove_stale_scratch
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"{SCRATCH_PREFIX}{int(gone.stdout)}_abc"
    live = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}_abc"
    other = tmp_path / "user_folder"
    for folder in (dead, live, other):
        (folder / "code").mkdir(parents=True)
        (folder / "code" / "main.c").write_text("int main;\n")
    assert remove_stale_scratch() == [dead]
    assert not dead.exists() and live.is_dir() and (other / "code" / "main.c").is_file()


def test_a_sweep_cleans_deeploys_scratch_without_importing_deeploy():
    """Every sweep removes stale scratch first (budgets.sweep), and that imported all of Deeploy (a second, more
    under load), which a sweep that never runs it (--target none) need not pay."""
    found = subprocess.run([sys.executable, "-c", "import sys; from ckpt import deeploy_bridge; "
                            "deeploy_bridge.remove_stale_scratch(); "
                            "print(sorted({m.split('.')[0] for m in sys.modules} & {'Deeploy', 'onnxruntime'}))"],
                           capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.strip() == "[]", found.stdout + found.stderr
