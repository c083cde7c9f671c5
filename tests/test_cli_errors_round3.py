"""Bad input, round three: each class of defect the third hostile pass found, through the console script. Every
case ends with its documented exit code and one line naming the problem and the way out, no traceback, and no
file changed that the user did not name as an output."""
from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import ckpt
from test_cli_errors import one_line, run, snapshot

from ckpt.cli_common import INTERRUPT_HOOK, INTERRUPT_SIGNAL
from ckpt.deeploy_bridge.minimalloc import main as minimalloc_main
from ckpt.examples import write_example


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mlp")
    write_example("mlp", folder, batch=256, layers=5)
    return folder


@pytest.fixture
def copy(mlp, tmp_path):
    """A copy of the MLP folder to spoil."""
    def make(name: str = "model") -> Path:
        folder = tmp_path / name
        shutil.copytree(mlp, folder)
        return folder
    return make


@pytest.fixture(scope="module")
def schedule(mlp, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("seq") / "seq.json"
    assert run("solve", str(mlp), "--budget", "0.6", "--method", "greedy", "-o", str(path))[0] == 0
    return path


# --------------------------------------------------------------------------- step data


def _respelled(folder: Path, file: str, change) -> None:
    with np.load(folder / file) as stored:
        arrays = {k: stored[k] for k in stored.files}
    np.savez(folder / file, **change(arrays))


@pytest.mark.parametrize("file, change, message", [
    ("inputs.npz", lambda a: {**a, "input": a["input"].astype(np.float64)},
     "'input' holds float64 values, the graph declares float32"),
    ("inputs.npz", lambda a: {**a, "labels": a["labels"].astype(np.int32)},
     "'labels' holds int32 values, the graph declares int64"),
    ("outputs.npz", lambda a: {k: v.astype(np.float64) for k, v in a.items()}, "holds float64 values"),
    ("inputs.npz", lambda a: {**a, "labels": np.where(np.arange(a["labels"].size) == 3, 10, a["labels"])},
     "'labels' holds the label 10 at [3], outside the 10 classes (0..9)"),
    ("inputs.npz", lambda a: {**a, "labels": np.where(np.arange(a["labels"].size) == 0, -7, a["labels"])},
     "'labels' holds the label -7 at [0], outside the 10 classes"),
])
def test_step_data_of_another_type_or_labels_out_of_range_are_refused_by_every_command(copy, tmp_path, file,
                                                                                       change, message):
    folder = copy()
    _respelled(folder, file, change)
    before = snapshot(tmp_path)
    for command in (["verify", str(folder)], ["solve", str(folder), "-o", str(tmp_path / "s.json")],
                    ["inspect", str(folder)], ["sweep", "--model", str(folder), "-o", str(tmp_path / "sw")]):
        code, _, err = run(*command)
        assert code == 1 and message in one_line(err), command
        assert "[ckpt] loading" not in err                   # refused before any work
    assert snapshot(tmp_path) == before


def test_step_data_in_another_byte_order_is_the_same_data(copy):
    folder = copy()
    _respelled(folder, "inputs.npz", lambda a: {k: v.astype(v.dtype.newbyteorder(">")) for k, v in a.items()})
    code, out, _ = run("verify", str(folder))
    assert code == 0 and "Errors: 0 out of" in out


# --------------------------------------------------------------------------- schedule files


@pytest.mark.parametrize("part, field, value, message", [
    ("graph", "weights", "sideways", '"graph.weights" is "sideways", not one of in-place, out-of-place'),
    ("graph", "target", "mars", '"graph.target" is "mars", not one of none'),
    ("graph", "home", "L9", '"graph.home" is "L9", not one of'),
    ("budget", "bytes", -5, '"budget.bytes" is -5, not a finite number >= 0'),
    ("budget", "bytes", float("nan"), '"budget.bytes" is NaN, not an integer or null'),
    ("budget", "bytes", True, '"budget.bytes" is true, a boolean'),
    ("predicted", "peak_bytes", "big", '"predicted.peak_bytes" is "big", not an integer'),
    ("predicted", "checked", "nonsense", '"predicted.checked" is "nonsense", not one of peak_bytes'),
    ("predicted", "cost_increase_pct", float("inf"), '"predicted.cost_increase_pct" is Infinity'),
    ("solver", "status", 5, '"solver.status" is 5, not a string'),
])
def test_schedule_fields_are_checked_on_load(mlp, schedule, tmp_path, part, field, value, message):
    doc = json.loads(schedule.read_text())
    doc[part][field] = value
    spoilt = tmp_path / "spoilt.json"
    spoilt.write_text(json.dumps(doc))
    for command in (["replay", str(spoilt), "--model", str(mlp), "-o", str(tmp_path / "out")],
                    ["verify", str(mlp), "--schedule", str(spoilt)],
                    ["solve", str(mlp), "--warm-start", str(spoilt), "-o", str(tmp_path / "s.json")]):
        code, _, err = run(*command)
        assert code == 1 and message in one_line(err) and "ckpt solve" in one_line(err), command
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spoilt.json"]


# --------------------------------------------------------------------------- training that trains


def _with_second_update(folder: Path, chained: bool) -> str:
    """The first SGD of the graph twice: beside itself on the same weight, or on what it wrote."""
    model = onnx.load(folder / "network.onnx")
    first = next(n for n in model.graph.node if n.op_type == "SGD")
    again = onnx.NodeProto()
    again.CopyFrom(first)
    again.name, again.output[0] = first.name + "_again", first.output[0] + "_again"
    if chained:
        again.input[0] = first.output[0]
    model.graph.node.append(again)
    output = onnx.ValueInfoProto()
    output.CopyFrom(next(o for o in model.graph.output if o.name == first.output[0]))
    output.name = again.output[0]
    model.graph.output.append(output)
    onnx.save(model, folder / "network.onnx")
    (folder / "outputs.npz").unlink()
    return first.name


@pytest.mark.parametrize("chained, message", [(False, "both update the weight 'fc0_weight'"),
                                              (True, "updates 'fc0_weight_updated', which node 'fc0_weight_sgd' "
                                                     "already updated from 'fc0_weight'")])
def test_a_weight_two_optimizer_nodes_update_is_refused_by_every_command(copy, tmp_path, chained, message):
    folder = copy()
    _with_second_update(folder, chained)
    for command in (["solve", str(folder), "-o", str(tmp_path / "s.json")], ["inspect", str(folder)],
                    ["verify", str(folder)], ["solve", str(folder), "--target", "siracusa", "-o", "-"]):
        code, _, err = run(*command)
        line = one_line(err)
        assert code == 1 and message in line and "a step updates each weight once" in line, command
        assert "cycle" not in line


@pytest.mark.parametrize("args, where", [(["--target", "none"], "--target none"),
                                         (["--target", "siracusa", "--flow", "non-tiled"], "the non-tiled flow")])
def test_weights_in_place_where_the_deployment_cannot_is_refused_not_recorded_otherwise(mlp, tmp_path, args, where):
    for command in (["solve", str(mlp), "--weights", "in-place", "-o", str(tmp_path / "s.json"), *args],
                    ["sweep", "--model", str(mlp), "--weights", "in-place", "-o", str(tmp_path / "sw"), *args]):
        code, _, err = run(*command)
        assert code == 1 and f"--weights in-place deploys the tiled flow's updates in place; {where}" in one_line(err)
    assert list(tmp_path.iterdir()) == []
    code, _, _ = run("solve", str(mlp), "--weights", "out-of-place", "-o", str(tmp_path / "s.json"), "--budget", "1.0")
    assert code == 0 and json.loads((tmp_path / "s.json").read_text())["graph"]["weights"] == "out-of-place"


# --------------------------------------------------------------------------- signals


def _terminated(args: list[str], at: str) -> subprocess.CompletedProcess:
    """`ckpt ARGS` sent a real SIGTERM once a progress line starts with `at`."""
    return subprocess.run([sys.executable, "-m", "ckpt", *args], capture_output=True, text=True,
                          env={**os.environ, INTERRUPT_HOOK: at, INTERRUPT_SIGNAL: "TERM"})


def test_sigterm_stops_solve_as_ctrl_c_does(mlp, tmp_path):
    done = _terminated(["solve", str(mlp), "--budget", "0.6", "-o", str(tmp_path / "s.json")], "greedy heuristic")
    assert done.returncode == 130 and "interrupted" in one_line(done.stderr)
    assert not list(tmp_path.iterdir())


def test_sigterm_in_replay_leaves_no_folder(mlp, schedule, tmp_path):
    done = _terminated(["replay", str(schedule), "--model", str(mlp), "-o", str(tmp_path / "out")],
                       "running the replayed order")
    assert done.returncode == 130 and "interrupted" in one_line(done.stderr)
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------- a disk that refuses the write


def _on_a_full_disk(args: list[str], limit: int = 1024) -> subprocess.CompletedProcess:
    """`args` in a process that may write no file past `limit` bytes (RLIMIT_FSIZE, its SIGXFSZ ignored): every
    larger write fails as on a full disk (EFBIG), whatever the filesystem, without privileges."""
    def limited() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run(args, capture_output=True, text=True, preexec_fn=limited)


@pytest.mark.parametrize("command, output", [
    (["solve", "{mlp}", "--budget", "0.9", "-o", "{out}/seq.json"], "seq.json"),
    (["example", "mlp", "-o", "{out}/example"], "example/network.onnx"),
    (["replay", "{schedule}", "--model", "{mlp}", "-o", "{out}/replay"], "replay/rewired.onnx"),
])
def test_a_full_disk_is_one_line_naming_the_file_and_leaves_nothing_half_made(mlp, schedule, tmp_path, command,
                                                                              output):
    out = tmp_path / "out"
    out.mkdir()
    (out / "seq.json").write_text("the user's own")
    args = [a.format(mlp=mlp, out=out, schedule=schedule) for a in command]
    done = _on_a_full_disk([sys.executable, "-m", "ckpt", *args])
    line = one_line(done.stderr)
    assert done.returncode == 1 and f"cannot write '{out / output}': File too large" in line and "free space" in line
    assert sorted(p.name for p in out.iterdir()) == ["seq.json"] and (out / "seq.json").read_text() == "the user's own"


@pytest.mark.slow  # runs whole commands in subprocesses
def test_a_sweep_on_a_full_disk_names_its_lock_and_leaves_no_folder(mlp, tmp_path):
    """Its first write is the lock's: refused, it is named, and the folder the sweep made is gone."""
    done = _on_a_full_disk([sys.executable, "-m", "ckpt", "sweep", "0.9:0.9", "--model", str(mlp), "--target",
                            "none", "-o", str(tmp_path / "S")], limit=0)
    line = one_line(done.stderr)
    assert done.returncode == 1 and f"cannot write '{tmp_path / 'S' / 'sweep.lock'}'" in line, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "S").exists()


def test_minimalloc_on_a_full_disk_and_with_its_own_bad_input(tmp_path, capsys):
    blocks = tmp_path / "in.csv"
    blocks.write_text("id,lower,upper,size\n" + "".join(f"b{i},{i},{i + 2},64\n" for i in range(100)))
    done = _on_a_full_disk([sys.executable, "-m", "ckpt.deeploy_bridge.minimalloc", "--capacity", "100000",
                            "--input", str(blocks), "--output", str(tmp_path / "out.csv")])
    assert done.returncode == 1 and "cannot write" in done.stderr and "Traceback" not in done.stderr

    def minimalloc(*args: str) -> tuple[int, str]:
        try:
            code = minimalloc_main(list(args))
        except SystemExit as stopped:
            code = stopped.code
        return code, capsys.readouterr().err

    files = ["--input", str(blocks), "--output", str(tmp_path / "o.csv")]
    for args, message in ((["--capacity", "abc", *files], "invalid int value: 'abc'"),
                          (["--capacity", "-5", *files], "--capacity -5 is negative"),
                          (["--capacity", "100000", "--alignment", "0", *files], "--alignment 0 is no granule"),
                          (["--capacity", "100000", "--input", str(blocks), "--output", str(blocks)], "is the input"),
                          (["--capacity", "100000", "--input", str(blocks), "--output", str(tmp_path)],
                           "is a directory"), ([], "the following arguments are required")):
        code, err = minimalloc(*args)
        assert code == 1 and message in err and len(err.strip().splitlines()) == 1, args
    blocks.write_text("id,lower,upper,size\na,0,2,1e400\n")
    assert minimalloc("--capacity", "9", *files) == (
        1, f"minimalloc: {blocks}: row 2 (a): size '1e400' is above {2 ** 40}: give a whole number of bytes from 0 to "
           f"{2 ** 40}\n")
    blocks.write_text("id,lower,upper,size\na,0,2,8\na,1,3,8\n")
    code, err = minimalloc("--capacity", "99", *files)
    assert code == 1 and "row 3 names the block 'a' again (first in row 2)" in err
    assert not (tmp_path / "o.csv").exists() and not (tmp_path / "out.csv").exists()


# --------------------------------------------------------------------------- files overwritten


def _users_sweep_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "P"
    folder.mkdir()
    (folder / "sweep.md").write_text("my notes")
    (folder / "sweep.csv").write_text("my,numbers\n")
    return folder


def test_a_sweep_never_replaces_a_users_own_tables_unless_asked(mlp, tmp_path):
    folder = _users_sweep_folder(tmp_path)
    before = snapshot(folder)
    code, _, err = run("sweep", "0.9:0.9", "--model", str(mlp), "--target", "none", "-o", str(folder))
    assert code == 1 and "holds sweep.md, sweep.csv, which no ckpt sweep wrote" in one_line(err)
    assert "--overwrite" in one_line(err) and snapshot(folder) == before and "[ckpt] lowering" not in err


@pytest.mark.slow
def test_a_sweep_told_to_overwrite_replaces_them_and_then_resumes_its_own(mlp, tmp_path):
    folder = _users_sweep_folder(tmp_path)
    args = ["sweep", "0.9:0.9", "--model", str(mlp), "--target", "none", "--no-verify", "-o", str(folder)]
    code, _, err = run(*args, "--overwrite")
    assert code == 0, err
    assert (folder / "sweep.md").read_text() != "my notes" and (folder / "sweep.lock").is_file()
    assert run(*args)[0] == 0                              # a folder a ckpt sweep wrote is its own to resume


@pytest.mark.parametrize("spoil, message", [
    (lambda d: (d / "ckpt_recompute.json").write_text("garbage"), "is not the record of what ckpt emitted"),
    (lambda d: (d / "ckpt_recompute.json").write_text('{"siracusa": {"t": {"schedule": 1}}}'),
     "is not the record of what ckpt emitted"),
    (lambda d: (d / "DeeployTest").mkdir() or (d / "DeeployTest" / "test_siracusa_training_recompute.py").write_text(
        "mine"), "holds DeeployTest/test_siracusa_training_recompute.py but no ckpt_recompute.json"),
])
def test_an_emit_ci_folder_ckpt_did_not_write_is_refused_before_any_work(mlp, tmp_path, spoil, message):
    emit = tmp_path / "emit"
    emit.mkdir()
    spoil(emit)
    before = snapshot(emit)
    code, _, err = run("sweep", "--model", str(mlp), "-o", str(tmp_path / "sw"), "--emit-ci", str(emit))
    assert code == 1 and message in one_line(err) and "[ckpt] lowering" not in err
    assert snapshot(emit) == before and not (tmp_path / "sw").exists()


def test_a_replay_never_writes_over_its_own_inputs(mlp, schedule, tmp_path):
    folder = tmp_path / "out"
    folder.mkdir()
    shutil.copy(schedule, folder / "order.json")
    before = snapshot(folder)
    code, _, err = run("replay", str(folder / "order.json"), "--model", str(mlp), "-o", str(folder), "--overwrite")
    assert code == 1 and "is an input of this replay and lies where it writes" in one_line(err)
    assert snapshot(folder) == before


def test_the_schedule_is_never_written_over_the_optimizer_graph(copy, tmp_path):
    folder = copy()
    shutil.copy(folder / "network.onnx", tmp_path / "optimizer.onnx")
    before = snapshot(tmp_path)
    code, _, err = run("solve", str(folder), "--optimizer", str(tmp_path / "optimizer.onnx"), "-o",
                       str(tmp_path / "optimizer.onnx"))
    assert code == 1 and "an input of this command" in one_line(err)
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- messages and codes


@pytest.mark.parametrize("rename, message", [
    (lambda name: "1" + name, "is '1fc0_Gemm', which starts with a digit, in Deeploy's C code"),
    (lambda name: "é-" if name == "fc0_Gemm" else name, "keeps no letter, digit or '_' in Deeploy's C code"),
])
def test_node_names_deeploys_code_cannot_use_are_refused_before_deeploy_runs(copy, tmp_path, rename, message):
    folder = copy()
    model = onnx.load(folder / "network.onnx")
    first = model.graph.node[0]
    assert first.name == "fc0_Gemm"
    first.name = rename(first.name)
    onnx.save(model, folder / "network.onnx")
    for command in (["solve", str(folder), "--target", "siracusa", "-o", str(tmp_path / "s.json")],
                    ["inspect", str(folder), "--target", "siracusa"]):
        code, _, err = run(*command)
        assert code == 1 and message in one_line(err) and "rename it to start with a letter" in one_line(err)
    assert run("solve", str(folder), "-o", str(tmp_path / "s.json"), "--budget", "1.0")[0] == 0   # no C: fine


@pytest.mark.deeploy
def test_a_schedule_replayed_on_the_other_targets_graph_names_the_target(tmp_path):
    """Lowering a CCT adds and renames nodes: its schedule matches the ONNX as is only in part (and the other way
    round); the refusal names the target whose graph it belongs to."""
    mlp = tmp_path / "cct"
    write_example("cct", mlp, blocks=1, image_size=8, embed_dim=16, heads=2)
    lowered = tmp_path / "lowered.json"
    assert run("solve", "--costs", "estimate", str(mlp), "--target", "siracusa", "--budget", "1.0", "-o",
               str(lowered))[0] == 0
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"seq": json.loads(lowered.read_text())["seq"]}))
    plain = tmp_path / "plain.json"
    assert run("solve", str(mlp), "--budget", "1.0", "-o", str(plain))[0] == 0
    for command, target in ((["replay", str(bare), "--model", str(mlp)], "siracusa"),
                            (["replay", str(lowered), "--model", str(mlp), "--target", "none"], "siracusa"),
                            (["verify", str(mlp), "--schedule", str(bare)], "siracusa"),
                            (["replay", str(plain), "--model", str(mlp), "--target", "siracusa"], "none")):
        code, _, err = run(*command, *(["-o", str(tmp_path / "out")] if command[0] == "replay" else []))
        assert code == 1 and f"replay it with --target {target}" in one_line(err), command
    assert not (tmp_path / "out").exists()


def _not_utf8(tmp_path: Path, mlp: Path) -> Path:
    try:
        folder = Path(os.fsdecode(bytes(tmp_path) + b"/m\xff"))
        shutil.copytree(mlp, folder)
    except (OSError, UnicodeError):
        pytest.skip("this filesystem takes no file name that is not UTF-8")
    return folder


def test_paths_that_are_no_utf8_are_read_written_and_shown(mlp, tmp_path):
    folder = _not_utf8(tmp_path, mlp)
    for command in (["solve", str(folder), "--budget", "1.0", "-o", str(folder / "s.json")], ["verify", str(folder)],
                    ["replay", str(folder / "s.json"), "--model", str(folder), "-o", str(folder / "r")],
                    ["example", "mlp", "--layers", "2", "-o", str(folder / "e")]):
        code, out, err = run(*command)
        assert code == 0 and "Traceback" not in err, (command, err)
    assert b"m\xff" in (folder / "r" / "report.json").read_bytes() or b"m\\udcff" in (folder / "r" /
                                                                                      "report.json").read_bytes()


@pytest.mark.slow
def test_a_sweep_of_a_model_whose_path_is_no_utf8_writes_its_tables_and_plot(mlp, tmp_path):
    folder = _not_utf8(tmp_path, mlp)
    code, _, err = run("sweep", "0.9:0.9", "--model", str(folder), "--target", "none", "--no-verify", "-o",
                       str(folder / "sw"))
    assert code == 0 and "Traceback" not in err, err
    assert (folder / "sw" / "pareto.svg").is_file() and b"m\xff" in (folder / "sw" / "sweep.md").read_bytes()


def test_a_gvsoc_folder_that_is_none_is_refused_before_any_work(mlp, schedule, tmp_path, monkeypatch):
    empty = tmp_path / "gvsoc"
    empty.mkdir()
    for command in (["replay", str(schedule), "--model", str(mlp), "-o", str(tmp_path / "out"), "--gvsoc", str(empty),
                     "--target", "siracusa"],
                    ["sweep", "--model", str(mlp), "-o", str(tmp_path / "sw"), "--gvsoc", str(empty)],
                    ["calibrate", str(mlp), "--gvsoc", str(empty)]):
        code, _, err = run(*command)
        assert code == 1 and f"--gvsoc '{empty}' is not a gvsoc install (no bin/gvsoc)" in one_line(err), command
        assert "[ckpt] lowering" not in err
    monkeypatch.setenv("GVSOC_INSTALL", str(tmp_path / "nowhere"))
    code, _, err = run("sweep", "--model", str(mlp), "-o", str(tmp_path / "sw"))
    assert code == 1 and "$GVSOC_INSTALL" in one_line(err) and "is not a gvsoc install" in one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gvsoc"]


def test_home_without_a_deeploy_target_is_refused(mlp, schedule, tmp_path):
    for command in (["solve", str(mlp), "--home", "L2", "-o", str(tmp_path / "s.json")],
                    ["inspect", str(mlp), "--home", "L2"],
                    ["replay", str(schedule), "--model", str(mlp), "--home", "L2", "-o", str(tmp_path / "out")],
                    ["sweep", "--model", str(mlp), "--target", "none", "--home", "L2", "-o", str(tmp_path / "sw")]):
        code, _, err = run(*command)
        assert code == 1 and "--home L2 places a Deeploy target's tiled deployment; --target none" in one_line(err)
    assert list(tmp_path.iterdir()) == []


def test_a_failed_replay_says_why_last(mlp, schedule, tmp_path):
    doc = json.loads(schedule.read_text())
    doc["budget"]["bytes"] = doc["predicted"]["checked_bytes"] - 1
    tight = tmp_path / "tight.json"
    tight.write_text(json.dumps(doc))
    code, out, err = run("replay", str(tight), "--model", str(mlp), "-o", str(tmp_path / "out"))
    assert code == 1 and out.strip().splitlines()[-1].startswith("wrote ")
    assert err.strip().splitlines()[-1] == one_line(err)
    assert "the replay failed its check: replayed peak_bytes" in one_line(err) and "is over the schedule's" in err


def test_inputs_that_are_no_regular_file_are_refused_not_read_forever(mlp, tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    for command, what in ((["replay", str(fifo), "--model", str(mlp), "-o", str(tmp_path / "out")], "schedule"),
                          (["solve", str(mlp), "--warm-start", str(fifo), "-o", str(tmp_path / "s.json")], "schedule"),
                          (["solve", str(mlp), "--costs", str(fifo), "-o", str(tmp_path / "s.json")], "cost file"),
                          (["replay", str(tmp_path), "--model", str(mlp), "-o", str(tmp_path / "out")], "schedule")):
        code, _, err = run(*command)
        assert code == 1 and f"{what} '" in one_line(err) and "is not a regular file" in one_line(err), command
    assert minimalloc_main(["--capacity", "9", "--input", str(fifo), "--output", str(tmp_path / "o.csv")]) == 1
    code, _, err = run("solve", str(mlp), "-o", str(tmp_path / "new") + os.sep)
    assert code == 1 and "names a folder" in one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


def test_ci_check_into_a_folder_it_may_not_write_is_bad_input_not_a_failed_check(tmp_path):
    (tmp_path / "notes").write_text("mine")
    code, out, err = run("ci", "check", "--outdir", str(tmp_path))
    assert code == 1 and "is not empty and holds no earlier ckpt replay" in one_line(err) and "FAIL" not in out
    assert "--overwrite" not in one_line(err) and sorted(p.name for p in tmp_path.iterdir()) == ["notes"]


@pytest.mark.deeploy
@pytest.mark.slow
def test_a_replay_with_relative_paths_and_a_colon_gives_the_verdict_of_absolute_ones(tmp_path, lowering_cache,
                                                                                     deeploy_checkout):
    """The plain path: the schedule, model and output folder given relative to the working folder (the output's
    name holding a ':'), and the same replay with absolute paths from elsewhere: the same code runs, verdicts and
    Errors."""
    work = tmp_path / "work"
    work.mkdir()
    write_example("mlp", work / "b1", layers=2, width=16, batch=4)
    assert ckpt("solve", "--costs", "estimate", "b1", "--target", "siracusa", "--budget", "1.0", "-o", "b1_seq.json",
                cwd=work).returncode == 0
    relative = ckpt("replay", "b1_seq.json", "--model", "b1", "-o", "out:1", cwd=work)
    absolute = ckpt("replay", str(work / "b1_seq.json"), "--model", str(work / "b1"), "-o", str(tmp_path / "abs"),
                    cwd=tmp_path)
    assert relative.returncode == absolute.returncode == 0, relative.stderr + absolute.stderr
    runs = [json.loads(p.read_text())["code_runs"] for p in (work / "out:1" / "report.json",
                                                              tmp_path / "abs" / "report.json")]
    verdicts = [{flow: (run["status"], run["golden"]["errors"], run["graph_order"]) for flow, run in r.items()}
                for r in runs]
    clean = ("ran", 0, "bit-identical")
    assert verdicts[0] == verdicts[1] == {"tiled": clean, "non_tiled": clean}


# --------------------------------------------------------------------------- the hostile pass's last findings


def test_a_model_that_is_a_pipe_or_a_device_is_called_so_not_missing(tmp_path):
    pipe = tmp_path / "pipe.onnx"
    os.mkfifo(pipe)
    for model in (pipe, Path("/dev/null")):
        code, _, err = run("inspect", str(model), "--target", "none")
        assert code == 1 and f"model '{model}' is not a regular file" in one_line(err)


def test_an_allocator_where_no_arena_is_laid_out_is_refused(mlp, schedule, tmp_path):
    code, _, err = run("replay", str(schedule), "--model", str(mlp), "--target", "none", "--allocator", "tetris",
                       "-o", str(tmp_path / "r"))
    assert code == 1 and "--allocator tetris" in one_line(err) and not (tmp_path / "r").exists()
    code, _, err = run("sweep", "0.9:0.9", "--model", str(mlp), "--target", "none", "--allocator", "minimalloc",
                       "-o", str(tmp_path / "s"))
    assert code == 1 and "--target none has none" in one_line(err) and not (tmp_path / "s").exists()


@pytest.mark.deeploy
def test_a_schedule_of_no_graph_of_the_model_names_no_other_target(mlp, schedule, tmp_path):
    """Names of neither graph, the fingerprint kept: no target is named as the way out (each named the other)."""
    doc = json.loads(schedule.read_text())
    doc["seq"] = [[f"nope_{k}", 0] for k in range(len(doc["seq"]))]
    spoilt = tmp_path / "t.json"
    spoilt.write_text(json.dumps(doc))
    for target in ("none", "siracusa"):
        code, _, err = run("replay", str(spoilt), "--model", str(mlp), "--target", target, "-o", str(tmp_path / target))
        assert code == 1 and "solve the schedule on the graph being replayed" in one_line(err)
        assert "replay it with --target" not in one_line(err)
