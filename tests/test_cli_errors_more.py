"""Bad input, round two: each class of defect a hostile pass found, through the console script. Every case ends
with its documented exit code and one line naming the problem and the way out, no traceback, and no file changed
that the user did not name as an output."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_support import ckpt
from test_cli_errors import one_line, run, snapshot

from ckpt.budgets.executors import checked_address
from ckpt.budgets.ranges import parse_range
from ckpt.errors import CkptError
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


# --------------------------------------------------------------------------- silent success that is wrong


def test_a_fragment_of_a_schedule_is_refused(mlp, schedule, tmp_path):
    doc = json.loads(schedule.read_text())
    doc["seq"] = doc["seq"][:10]
    fragment = tmp_path / "fragment.json"
    fragment.write_text(json.dumps(doc))
    code, _, err = run("replay", str(fragment), "--model", str(mlp), "-o", str(tmp_path / "out"))
    assert code == 1 and "names only 10 of the graph's" in one_line(err) and "fragment" in one_line(err)
    assert not (tmp_path / "out").exists()


def test_a_schedule_with_a_key_twice_is_refused(mlp, tmp_path):
    path = tmp_path / "twice.json"
    path.write_text('{"seq": [["fc0_Gemm", 0]], "seq": [["fc1_Gemm", 0]]}')
    code, _, err = run("replay", str(path), "--model", str(mlp), "-o", str(tmp_path / "out"))
    assert code == 1 and 'key "seq" appears more than once' in one_line(err)


def test_a_replayed_figure_over_the_schedules_budget_fails_the_replay(mlp, schedule, tmp_path):
    doc = json.loads(schedule.read_text())
    doc["budget"]["bytes"] = doc["predicted"]["checked_bytes"] - 1
    tight = tmp_path / "tight.json"
    tight.write_text(json.dumps(doc))
    code, out, _ = run("replay", str(tight), "--model", str(mlp), "-o", str(tmp_path / "out"), "--target", "none")
    assert code == 1 and "OVER BUDGET by 1 B" in out
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["ok"] is False and report["budget"]["checked"] == doc["predicted"]["checked"]


def test_value_info_that_contradicts_the_graph_is_refused(copy, tmp_path):
    folder = copy()
    model = onnx.load(folder / "network.onnx")
    info = next(v for v in model.graph.value_info if v.type.tensor_type.shape.dim)
    info.type.tensor_type.shape.dim[0].dim_value *= 100
    onnx.save(model, folder / "network.onnx")
    for command in (["solve", str(folder), "-o", str(tmp_path / "s.json")], ["inspect", str(folder)],
                    ["verify", str(folder)]):
        code, _, err = run(*command)
        assert code == 1 and f"value_info declares '{info.name}'" in one_line(err), command
    assert not (tmp_path / "s.json").exists()


def test_budgets_that_would_share_a_name_are_refused():
    with pytest.raises(CkptError, match="would share a name"):
        parse_range("0.7:0.70004", points=3)
    assert parse_range("0.7:0.7003", points=4) == [0.7003, 0.7002, 0.7001, 0.7]


# --------------------------------------------------------------------------- inputs overwritten


def test_the_schedule_is_never_written_over_the_model(copy):
    folder = copy()
    before = snapshot(folder)
    for target in ("network.onnx", "inputs.npz", "outputs.npz"):
        code, _, err = run("solve", str(folder), "--budget", "0.9", "-o", str(folder / target))
        assert code == 1 and "an input of this command" in one_line(err)
    assert snapshot(folder) == before


def test_an_example_never_replaces_another_models_files_unless_asked(copy):
    folder = copy()
    before = snapshot(folder)
    code, _, err = run("example", "cct", "--blocks", "1", "-o", str(folder))
    assert code == 1 and "already holds another model's network.onnx" in one_line(err)
    assert snapshot(folder) == before
    assert run("example", "mlp", "--batch", "256", "--layers", "5", "-o", str(folder))[0] == 0   # the same: fine
    assert snapshot(folder) == before
    assert run("example", "cct", "--blocks", "1", "-o", str(folder), "--overwrite")[0] == 0


# --------------------------------------------------------------------------- exit codes and messages


@pytest.mark.parametrize("spoil, message", [
    (lambda p: p.write_bytes(b""), "is not an npz file of arrays (EOFError"),
    (lambda p: np.savez(p, input=np.zeros((2, 3), np.float32), labels=np.zeros(256, np.int64)),
     "'input' has shape [2, 3], the graph declares"),
    (lambda p: np.savez(p, input=np.zeros((256, 32), np.float32), labels=np.zeros(256, np.float32)),
     "'labels' holds float32 values, the graph declares int64"),
])
def test_bad_step_inputs_are_one_line_exit_1_never_an_interrupt(copy, spoil, message):
    folder = copy()
    spoil(folder / "inputs.npz")
    code, _, err = run("verify", str(folder))
    assert code == 1 and message in one_line(err)


@pytest.mark.parametrize("allocator", ["ckpt", "heap"])
def test_a_stated_floor_then_succeeds(mlp, tmp_path, allocator):
    """The refusal names the smallest budget a schedule fits (the live floor of ckpt's arena; with --allocator
    heap, the first-fit heap a schedule needs), and that budget is then accepted."""
    heap = ("--allocator", allocator)
    code, _, err = run("solve", str(mlp), "--budget", "0.3", *heap, "-o", str(tmp_path / "s.json"))
    floor = int(one_line(err).rsplit("raise the budget to ", 1)[1].split()[0])
    assert code == 2
    code, _, err = run("solve", str(mlp), "--budget", str(floor), *heap, "-o", str(tmp_path / "s.json"))
    assert code == 0, err
    code, _, err = run("solve", str(mlp), "--budget", str(floor - 8), *heap, "-o", str(tmp_path / "t.json"))
    assert code == 2 and "raise the budget to" in one_line(err)           # the same failure, the same code


def test_budget_with_budget_total_is_refused(mlp, tmp_path):
    code, _, err = run("solve", str(mlp), "--budget", "0.7", "--budget-total", "L3=1MB", "-o", str(tmp_path / "s"))
    assert code == 1 and "--budget and --budget-total both given" in one_line(err)


def test_verify_takes_the_onnx_file_too(mlp):
    code, out, err = run("verify", str(mlp / "network.onnx"))
    assert code == 0 and "Errors: 0 out of" in out, err


def test_verify_of_a_missing_model_names_it(tmp_path):
    code, _, err = run("verify", str(tmp_path / "nothere"))
    assert code == 1 and f"no model at '{tmp_path / 'nothere'}'" in one_line(err)


def test_ci_check_with_shared_models_that_do_not_exist_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("CKPT_SHARED_MODELS", str(tmp_path / "nowhere"))
    code, _, err = run("ci", "check")
    assert code == 1 and "does not exist" in one_line(err)


# --------------------------------------------------------------------------- no tracebacks


def _broken_graph(folder: Path, how: str) -> None:
    model = onnx.load(folder / "network.onnx")
    nodes = model.graph.node
    if how == "duplicate":
        nodes[1].name = nodes[0].name
    elif how == "unnamed":
        nodes[2].name = ""
    elif how == "dangling":
        nodes[1].input[0] = "nobody_writes_this"
    elif how == "cycle":
        nodes[0].input.append(nodes[3].output[0])
    elif how == "huge":
        model.graph.value_info[0].type.tensor_type.shape.dim[0].dim_value = 1 << 40
    onnx.save(model, folder / "network.onnx")


@pytest.mark.parametrize("how, message", [("duplicate", "two nodes are named"), ("unnamed", "has no name"),
                                          ("dangling", "which no node writes"), ("cycle", "has a cycle"),
                                          ("huge", "would take")])
def test_broken_graphs_are_refused_by_every_command(copy, tmp_path, how, message):
    folder = copy()
    _broken_graph(folder, how)
    for command in (["solve", str(folder), "-o", str(tmp_path / "s.json")], ["inspect", str(folder)],
                    ["verify", str(folder)]):
        code, _, err = run(*command)
        assert code == 1 and message in one_line(err), (command, err)


def test_external_data_is_read_beside_the_model_not_in_the_working_folder(copy, tmp_path, monkeypatch):
    folder = copy()
    model = onnx.load(folder / "network.onnx")
    onnx.save_model(model, folder / "network.onnx", save_as_external_data=True, location="weights.bin",
                    size_threshold=0)
    monkeypatch.chdir(tmp_path)                       # elsewhere: the data must still be found beside the model
    assert run("solve", str(folder), "--budget", "0.9", "-o", str(tmp_path / "s.json"))[0] == 0
    (folder / "weights.bin").unlink()
    code, _, err = run("solve", str(folder), "--budget", "0.9", "-o", str(tmp_path / "t.json"))
    assert code == 1 and "which is not a file beside it" in one_line(err)


def test_deeply_nested_json_is_one_line(mlp, tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"seq": ' + "[" * 100_000 + "]" * 100_000 + "}")
    code, _, err = run("replay", str(path), "--model", str(mlp), "-o", str(tmp_path / "out"))
    assert code == 1 and "nests too deeply" in one_line(err)


def test_output_through_a_dangling_symlink_is_refused_before_the_solve(mlp, tmp_path):
    link = tmp_path / "seq.json"
    link.symlink_to(tmp_path / "missing" / "target.json")
    code, _, err = run("solve", str(mlp), "--budget", "0.9", "-o", str(link))
    assert code == 1 and "[ckpt] loading" not in err and "symlink" in one_line(err)
    assert link.is_symlink()


@pytest.mark.parametrize("where", ["file", "readonly"])
def test_a_cache_folder_ckpt_cannot_use_is_refused(mlp, tmp_path, monkeypatch, where):
    if where == "readonly" and os.geteuid() == 0:
        pytest.skip("root writes anywhere: a read-only folder cannot be made")
    place = tmp_path / "cache"
    if where == "file":
        place.write_text("not a folder")
    else:
        place.mkdir(mode=0o500)
    monkeypatch.setenv("CKPT_CACHE_DIR", str(place))
    code, _, err = run("solve", str(mlp), "--target", "siracusa", "-o", str(tmp_path / "s.json"))
    assert code == 1 and "CKPT_CACHE_DIR" in one_line(err)


@pytest.mark.parametrize("address", ["tcp://", "tcp://HOST:abc", "HOST:8786", "tcp://HOST:99999"])
def test_a_scheduler_address_that_is_not_one_is_refused_before_any_work(mlp, tmp_path, address):
    with pytest.raises(CkptError, match="is not a Dask scheduler address"):
        checked_address(address)
    code, _, err = run("sweep", "--model", str(mlp), "--target", "none", "-o", str(tmp_path / "sw"),
                       "--scheduler", address)
    assert code == 1 and "tcp://HOST:PORT" in one_line(err) and not (tmp_path / "sw").exists()


@pytest.mark.parametrize("value", ["NaN", "1e308", "-5.0", '"many"'])
def test_cost_files_with_numbers_that_are_not_costs_are_refused(mlp, tmp_path, value):
    costs = tmp_path / "costs.json"
    costs.write_text(f'{{"Gemm": {{"per_mac": {value}}}}}')
    code, _, err = run("solve", str(mlp), "--costs", str(costs), "-o", str(tmp_path / "s.json"))
    assert code == 1 and "cost file" in one_line(err)


# --------------------------------------------------------------------------- resources


def test_more_threads_than_cores_are_capped_with_a_note(mlp, tmp_path):
    code, _, err = run("solve", str(mlp), "--budget", "0.9", "--threads", "100000", "-o", str(tmp_path / "s.json"))
    assert code == 0 and f"--threads 100000 is more than this machine's {os.cpu_count()} core(s)" in err


@pytest.mark.parametrize("args, message", [(["--step", "1e-9"], "more than 100"),
                                           (["--points", "1000000"], "more than 100 budgets")])
def test_absurd_point_counts_are_refused(mlp, tmp_path, args, message):
    code, _, err = run("sweep", "0.6:0.9", *args, "--model", str(mlp), "--target", "none", "-o", str(tmp_path / "s"))
    assert code == 1 and message in one_line(err) and not (tmp_path / "s").exists()


# --------------------------------------------------------------------------- sweeps (processes: slow)


@pytest.mark.slow
def test_a_sweep_without_verification_or_without_inputs_runs_every_point(copy, tmp_path):
    for folder, extra in ((copy("a"), ["--no-verify"]), (copy("b"), [])):
        if not extra:
            (folder / "inputs.npz").unlink()
        out = tmp_path / f"out-{folder.name}"          # a folder of its own: never the model's (round five)
        done = ckpt("sweep", "0.8:0.9", "--model", str(folder), "--target", "none", "-o", str(out), *extra)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
        rows = json.loads((out / "sweep.json").read_text())["points"]
        assert [r["label"] for r in rows] == ["baseline", "0.9", "0.8"]
        assert all(r["replayed_peak"] is not None and r["check"] == "not verified" for r in rows)


@pytest.mark.slow
def test_a_resumed_sweep_runs_again_what_new_step_data_changes(copy, tmp_path):
    folder, out = copy(), tmp_path / "sw"
    assert ckpt("sweep", "0.9:0.9", "--model", str(folder), "--target", "none", "-o", str(out)).returncode == 0
    assert ckpt("sweep", "0.9:0.9", "--model", str(folder), "--target", "none", "-o", str(out)).returncode == 0
    assert (out / "sweep.log").read_text().count("skipped") == 2
    np.savez(folder / "outputs", **{k: v + 1 for k, v in np.load(folder / "outputs.npz").items()})
    done = ckpt("sweep", "0.9:0.9", "--model", str(folder), "--target", "none", "-o", str(out))
    assert done.returncode == 0 and (out / "sweep.log").read_text().count("skipped") == 2    # none skipped now
    rows = json.loads((out / "sweep.json").read_text())["points"]
    assert all(r["errors"] != "0/" + r["errors"].split("/")[-1] for r in rows)   # the new goldens are judged


@pytest.mark.slow
def test_a_relative_model_and_folder_reach_workers_started_elsewhere(copy, tmp_path):
    folder = copy()
    work = tmp_path / "work"
    work.mkdir()
    done = subprocess.run([sys.executable, "-m", "ckpt", "sweep", "0.9:0.9", "--model", os.path.relpath(folder, work),
                           "--target", "none", "-o", "rel"], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads((work / "rel" / "sweep.json").read_text())
    assert Path(report["model"]).is_absolute()
