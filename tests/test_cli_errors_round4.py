"""Bad input, round four: each defect the fourth hostile pass found, and its class, through the console script.
A check that says it passed has checked (or names what it left out); the train and optimizer graphs of a split
step are one step; a folder is ckpt's only by the record it wrote; gvsoc and every file a user hands ckpt are
checked. Every refusal is one line with its documented exit code, before any work, and touches no user file."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from test_cli_errors import one_line, run, snapshot

from ckpt.budgets.store import RECORD, SweepStore, is_ckpt_sweep
from ckpt.budgets.table import column_notes
from ckpt.errors import CkptError
from ckpt.examples import write_example
from ckpt.gvsoc import run as gvsoc_run
from ckpt.gvsoc.kit import find_kit
from ckpt.gvsoc.run import simulation_timeout
from ckpt.pipeline.calibrate import CALIBRATION_FORMAT
from ckpt.pipeline.row import empty_row
from ckpt.solver.graph.model_file import open_model
from ckpt.solver.graph.step_pair import pair_mismatch


@pytest.fixture(scope="module")
def mlp(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("mlp")
    write_example("mlp", folder, batch=8, layers=3, width=32)
    return folder


@pytest.fixture(scope="module")
def schedule(mlp, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("seq") / "seq.json"
    assert run("solve", str(mlp), "--budget", "1MB", "-o", str(path))[0] == 0
    return path


# --------------------------------------------------------------------------- a check that says it passed has checked


@pytest.mark.parametrize("command, way_out", [
    (["verify"], "or pass --optimizer GRAPH"),
    (["replay", "{seq}", "--model"], ", or replay with --no-verify"),
    (["sweep", "--target", "none", "-o", "{tmp}/sw", "--model"], ", or sweep with --no-verify"),
])
def test_a_split_step_without_its_optimizer_graph_is_not_checked_against_updated_goldens(split, tmp_path, command,
                                                                                           way_out):
    """Its goldens are the weights after the update, which the train graph alone never computes."""
    seq = tmp_path / "seq.json"
    assert run("solve", str(split), "--budget", "1MB", "-o", str(seq))[0] == 0
    shutil.rmtree(tmp_path / "simplemlp_optimizer")
    before = snapshot(tmp_path)
    args = [a.format(seq=seq, tmp=tmp_path) for a in command] + [str(split)]
    code, out, err = run(*args, *(["-o", str(tmp_path / "r")] if command[0] == "replay" else []))
    line = one_line(err)
    assert code == 1 and "is a split step whose optimizer graph is absent" in line, line
    assert f"put it at {tmp_path / 'simplemlp_optimizer' / 'network.onnx'}" in line and line.endswith(way_out)
    assert "Errors:" not in out and snapshot(tmp_path) == before
    assert run("replay", str(seq), "--model", str(split), "--no-verify", "-o", str(tmp_path / "r"))[0] == 0


def test_the_losses_outputs_npz_lacks_are_named_as_not_compared(split):
    with np.load(split / "outputs.npz") as stored:
        kept = {k: stored[k] for k in stored.files if k != "loss"}
    np.savez(split / "outputs.npz", **kept)
    code, out, _ = run("verify", str(split))
    assert code == 0
    assert "not compared: 1 tensor(s) the step writes that outputs.npz does not hold (loss)" in out


def test_objective_peak_refuses_a_budget_it_would_ignore(mlp, tmp_path):
    for budget in (["--budget", "0.5"], ["--budget-total", "L3=15KB", "--target", "siracusa"]):
        code, _, err = run("solve", str(mlp), "--objective", "peak", "--cost-cap", "0", *budget, "-o",
                           str(tmp_path / "s.json"))
        line = one_line(err)
        assert code == 1 and f"{budget[0]} " in line and "does nothing here: --objective peak finds" in line
        assert f"drop {budget[0]}, or --objective peak" in line
    assert list(tmp_path.iterdir()) == []


def test_a_level_total_is_compared_with_that_levels_total_or_said_unchecked(mlp, schedule, tmp_path):
    """A schedule held to L3's total is never compared with a live peak: replayed where no level is measured, the
    budget line says it did not check."""
    doc = json.loads(schedule.read_text())
    doc["budget"] = {"text": "L3=15KB", "fraction": None, "bytes": 15360, "level": "L3"}
    level = tmp_path / "level.json"
    level.write_text(json.dumps(doc))
    code, out, _ = run("replay", str(level), "--model", str(mlp), "-o", str(tmp_path / "r"))
    assert code == 0
    assert "budget: total_L3 replayed n/a against the schedule's 15,360 B: not checked" in out
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["budget"]["checked"] == "total_L3" and report["budget"]["replayed"] is None


@pytest.mark.parametrize("command, option", [
    (["solve", "{mlp}", "--method", "greedy", "--solver", "cbc"], "--solver cbc"),
    (["solve", "{mlp}", "--method", "greedy", "--gap", "0.1"], "--gap 0.1"),
    (["solve", "{mlp}", "--method", "greedy", "--threads", "1"], "--threads 1"),
    (["replay", "{seq}", "--model", "{mlp}", "--steps", "2"], "--steps 2"),
    (["replay", "{seq}", "--model", "{mlp}", "--gvsoc", "{tmp}"], "--gvsoc"),
    (["replay", "{seq}", "--model", "{mlp}", "--gvsoc-timeout", "5"], "--gvsoc-timeout"),
    (["replay", "{seq}", "--model", "{mlp}", "--deeploy-root", "{tmp}"], "--deeploy-root"),
    (["replay", "{seq}", "--model", "{mlp}", "--no-verify", "--optimizer", "{mlp}"], "--optimizer"),
    (["verify", "{mlp}", "--force"], "--force"),
    (["sweep", "--model", "{mlp}", "--scheduler", "tcp://127.0.0.1:1", "--jobs", "2"], "--jobs 2"),
    (["sweep", "--model", "{mlp}", "--ci-test-name", "Models/X"], "--ci-test-name"),
    (["sweep", "--model", "{mlp}", "--model", "{mlp}", "--emit-ci", "{tmp}/e", "--ci-test-name", "X"],
     "--ci-test-name"),
    (["sweep", "--model", "{mlp}", "--gvsoc", "{tmp}", "--no-simulate"], "--gvsoc"),
    (["sweep", "--model", "{mlp}", "--target", "none", "--gvsoc-timeout", "9"], "--gvsoc-timeout"),
    (["sweep", "--model", "{mlp}", "--deeploy-root", "{tmp}", "--no-verify"], "--deeploy-root"),
    (["sweep", "--model", "{mlp}", "--method", "greedy", "--solver", "cbc"], "--solver cbc"),
])
def test_an_option_the_mode_ignores_is_refused_not_dropped(mlp, schedule, tmp_path, command, option):
    args = [a.format(mlp=mlp, seq=schedule, tmp=tmp_path) for a in command]
    out = {"solve": ["-o", str(tmp_path / "s.json")], "replay": ["-o", str(tmp_path / "r")],
           "sweep": ["-o", str(tmp_path / "sw")]}.get(command[0], [])
    code, _, err = run(*args, *out)
    line = one_line(err)
    assert code == 1 and line.startswith(f"error: {option} does nothing here: ") and "drop " in line, line
    assert "[ckpt] loading" not in err and "[ckpt] lowering" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- the pair is one step


def _pair(split: Path, change) -> None:
    path = split.parent / "simplemlp_optimizer" / "network.onnx"
    model = onnx.load(path)
    change(model)
    onnx.save(model, path)


def _another_shape(model):
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value += 1


def _another_type(model):
    model.graph.input[1].type.tensor_type.elem_type = onnx.TensorProto.DOUBLE


def _update_of_another_shape(model):
    model.graph.output[0].type.tensor_type.shape.dim[0].dim_value += 1


def _update_of_nothing(model):
    model.graph.output[0].name = "nothing_at_all"
    for node in model.graph.node:
        node.output[:] = ["nothing_at_all" if o == "fc1_weight_updated" else o for o in node.output]


@pytest.mark.parametrize("change, mismatch", [
    (_another_shape, "it reads 'fc1_weight' as float[9, 64], the train graph holds it as float[8, 64]"),
    (_another_type, "it reads 'fc1_weight_grad.accumulation.buffer' as double[8, 64], the train graph holds it as "
                    "float[8, 64]"),
    (_update_of_another_shape, "it writes 'fc1_weight_updated' as float[9, 64], the train graph's 'fc1_weight' is "
                               "float[8, 64]"),
    (_update_of_nothing, "it writes 'nothing_at_all', which updates no tensor of either graph"),
])
def test_an_optimizer_graph_that_is_not_the_train_graphs_is_refused_by_every_command(split, tmp_path, change,
                                                                                       mismatch):
    seq = tmp_path / "seq.json"
    assert run("solve", str(split), "--budget", "1MB", "-o", str(seq))[0] == 0
    _pair(split, change)
    before = snapshot(tmp_path)
    for command in (["solve", str(split), "-o", str(tmp_path / "s.json")], ["inspect", str(split)],
                    ["verify", str(split)], ["replay", str(seq), "--model", str(split), "-o", str(tmp_path / "r")],
                    ["sweep", "--model", str(split), "--target", "none", "-o", str(tmp_path / "sw")]):
        code, _, err = run(*command)
        line = one_line(err)
        assert code == 1 and "is not the one of train graph" in line and mismatch in line, (command, line)
        assert "[ckpt] loading" not in err and "[ckpt] lowering" not in err and "[ckpt] running" not in err
        assert "put the optimizer graph exported with this train graph there" in line
    assert snapshot(tmp_path) == before


def test_another_models_optimizer_graph_is_refused(shared_models: Path, tmp_path):
    if not (shared_models / "autoencoder_optimizer").is_dir() or not (shared_models / "simplemlp_train").is_dir():
        pytest.skip("the training branch's models are not among the shared models")
    for command in (["solve", str(shared_models / "simplemlp_train"), "-o", str(tmp_path / "s.json")],
                    ["inspect", str(shared_models / "simplemlp_train")],
                    ["verify", str(shared_models / "simplemlp_train")]):
        code, _, err = run(*command, "--optimizer", str(shared_models / "autoencoder_optimizer"))
        line = one_line(err)
        assert code == 1 and "it reads the weight 'encoder_0_weight', which the train graph does not take" in line
        assert line.endswith("pass the optimizer graph exported with this train graph (--optimizer GRAPH)")
    assert list(tmp_path.iterdir()) == []


def test_a_pair_of_the_training_branch_pairs(shared_models: Path):
    for name in ("simplemlp", "resnet8", "dscnn", "autoencoder", "cct_lora"):
        if not (shared_models / f"{name}_train").is_dir():
            continue
        train = onnx.load(shared_models / f"{name}_train" / "network.onnx", load_external_data=False)
        optimizer = onnx.load(shared_models / f"{name}_optimizer" / "network.onnx", load_external_data=False)
        assert pair_mismatch(train, optimizer) is None, name


# --------------------------------------------------------------------------- folders


@pytest.mark.parametrize("names", [["points/"], ["sweep.lock"], ["sweep.log"], ["sweep.json"],
                                   ["sweep.md", "points/", "sweep.lock"]])
def test_a_folder_is_a_sweeps_only_by_its_record_not_by_common_names(mlp, tmp_path, names):
    folder = tmp_path / "P"
    folder.mkdir()
    for name in names:
        if name.endswith("/"):
            (folder / name).mkdir()
            (folder / name / "mine.txt").write_text("mine")
        else:
            (folder / name).write_text("mine\n")
    before = snapshot(folder)
    code, _, err = run("sweep", "0.9:0.9", "--model", str(mlp), "--target", "none", "-o", str(folder))
    line = one_line(err)
    assert code == 1 and "which no ckpt sweep wrote (it has no ckpt_sweep.json)" in line and "--overwrite" in line
    assert snapshot(folder) == before and not is_ckpt_sweep(folder)


def test_a_sweep_refused_after_taking_its_folder_leaves_nothing_behind(mlp, tmp_path, monkeypatch):
    """--costs gvsoc with gvsoc off fails while the sweep holds its folder: the folder, lock and record go."""
    monkeypatch.setenv("GVSOC_INSTALL", "none")
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    for folder in (tmp_path / "new", kept):
        code, _, err = run("sweep", "0.9:0.9", "--model", str(mlp), "--target", "none", "--costs", "gvsoc", "-o",
                           str(folder))
        assert code == 1 and "--costs gvsoc measures op costs on gvsoc's model of siracusa, not none" in one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept"] and os.listdir(kept) == ["notes.txt"]


def test_a_sweep_stopped_before_its_first_task_removes_what_it_made(tmp_path):
    store = SweepStore(tmp_path / "S")
    with pytest.raises(CkptError), store.locked():
        assert is_ckpt_sweep(store.root) and (store.root / "sweep.lock").is_file()
        raise CkptError("stopped")
    assert not store.root.exists()
    store.root.mkdir()
    (store.root / "mine.txt").write_text("mine")
    with pytest.raises(KeyboardInterrupt), store.locked():
        raise KeyboardInterrupt
    assert os.listdir(store.root) == ["mine.txt"]
    with pytest.raises(CkptError), store.locked():
        (store.root / "points").mkdir()               # a task began: its work is kept, to resume
        raise CkptError("stopped")
    assert sorted(os.listdir(store.root)) == sorted(["mine.txt", "points", "sweep.lock", RECORD])


# --------------------------------------------------------------------------- gvsoc and files


def test_a_gvsoc_that_is_not_executable_is_one_line(mlp, schedule, tmp_path):
    launcher = tmp_path / "gv" / "bin" / "gvsoc"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o644)
    with pytest.raises(CkptError, match="bin/gvsoc is not executable: make it so"):
        find_kit(tmp_path / "gv")
    code, _, err = run("calibrate", str(mlp), "--gvsoc", str(tmp_path / "gv"))
    assert code == 1 and f"--gvsoc '{tmp_path / 'gv'}': bin/gvsoc is not executable" in one_line(err)
    assert "[ckpt] lowering" not in err


def test_a_simulations_timeout_scales_with_its_cycles():
    small, large = simulation_timeout(1_000_000, load=1), simulation_timeout(1_000_000_000, load=1)
    assert simulation_timeout(None, load=1) <= small < 600 < large
    assert large - small == pytest.approx(999_000_000 / 300_000)


def test_a_simulations_timeout_scales_with_the_hosts_load(monkeypatch):
    """On a host where each core is shared by six processes, gvsoc gets a sixth of one: MobileNetV1's step (245 M
    cycles) gets six times the silent stretch an idle host gives it (937 s was too short on a busy host)."""
    cycles = 245_000_000
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (11.0, 9.0, 4.0))
    assert gvsoc_run.host_load() == 6.0
    assert simulation_timeout(cycles) - simulation_timeout(0) == pytest.approx(6 * cycles / 300_000)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.2, 0.5, 0.1))     # idle: never below one core's rate
    assert simulation_timeout(cycles) == simulation_timeout(cycles, load=1) == pytest.approx(120 + cycles / 300_000)

    def no_load():
        raise OSError("no load average")
    monkeypatch.setattr(os, "getloadavg", no_load)
    assert gvsoc_run.host_load() == 1.0


@pytest.mark.parametrize("body, message", [
    ('{"Gemm": ' + "[" * 100000 + "]" * 100000 + "}", "nests too deeply"),
    ('{"Gemm": ' + "[" * 40 + "]" * 40 + "}", "nests too deeply (more than 32 levels)"),
    ('{"Gemm": {"per_mac": 1}, "Gemm": {"per_mac": 2}}', 'key "Gemm" appears more than once'),
    ('{"Gemm": {"per_mac": 1, "per_mac": 2}}', 'key "per_mac" appears more than once'),
    ('{"Gemm": {"per_mac": "1"}}', 'Gemm.per_mac is "1"'),
    ('{"Gemm": {"per_mac": true}}', "Gemm.per_mac is true"),
    ('{"Gemm": {"per_mac": NaN}}', "Gemm.per_mac is NaN"),
    ('{"Gemm": {"per_mc": 1}}', "Gemm has the key 'per_mc', which ckpt does not read"),
    ('{"Gemm": [1]}', "Gemm is [1], not an object"),
    ('{"kind": "ckpt calibration", "kind": "ckpt calibration"}', 'key "kind" appears more than once'),
])
def test_cost_files_are_checked_field_by_field(mlp, tmp_path, body, message):
    costs = tmp_path / "c.json"
    costs.write_text(body)
    for command in (["solve", str(mlp), "--costs", str(costs), "-o", str(tmp_path / "s.json")],
                    ["sweep", "--model", str(mlp), "--costs", str(costs), "-o", str(tmp_path / "sw")]):
        code, _, err = run(*command)
        assert code == 1 and message in one_line(err), (command, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.json"]


@pytest.mark.parametrize("change, message", [
    ({"step_cycles": "x"}, '"step_cycles" is "x", not an integer >= 0'),
    ({"node_cycles": [1]}, '"node_cycles" is [1], not an object'),
    ({"node_cycles": {"a": -1}}, "has cycles that are not counts"),
    ({"code_bytes": 1.5}, '"code_bytes" is 1.5, not an integer >= 0'),
    ({"errors": True}, '"errors" is true, not an integer >= 0'),
    ({"target": ["siracusa"]}, '"target" is ["siracusa"], not a string'),
    ({"target": "gap9"}, '"target" is "gap9", not one of siracusa'),
    ({"key": None}, 'it lacks "key"'),
    ({"extra": 1}, 'it has the field "extra", which ckpt never writes'),
    ({"node_tiles": {"fc0_Gemm": 0}}, '"node_tiles" is not an object of tile counts >= 1'),
])
def test_a_calibration_is_checked_field_by_field(mlp, tmp_path, change, message):
    doc = {"kind": "ckpt calibration", "format": CALIBRATION_FORMAT, "model_sha256": open_model(mlp).sha256,
           "target": "siracusa", "setup": {}, "step_cycles": 1000, "node_cycles": {"fc0_Gemm": 10}, "errors": 0,
           "total": 10, "code_bytes": 100, "key": "k"}
    for key, value in change.items():
        doc.pop(key) if value is None else doc.__setitem__(key, value)
    (tmp_path / "cal.json").write_text(json.dumps(doc))
    code, _, err = run("solve", str(mlp), "--target", "siracusa", "--costs", str(tmp_path / "cal.json"), "-o",
                       str(tmp_path / "s.json"))
    assert code == 1 and message in one_line(err) and "make it again with `ckpt calibrate`" in one_line(err)
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("args, message, way_out", [
    (["--budget-total", "L3=abc"], "--budget-total size 'abc' is not a size", "write e.g. L3=2MB or L3=1000000"),
    (["--budget-total", "L3=0KB"], "'0KB' must be above zero", "write e.g. L3=2MB"),
    (["--budget-total", "L1=1MB"], "--budget-total L1=... holds the tiled flow's home level, which is L3",
     "give --budget-total L3=SIZE (a home is one of L3, L2)"),
    (["--budget-total", "L2=1MB"], "which is L3", "give --budget-total L3=SIZE, or add --home L2"),
    (["--target", "gap9", "--home", "L2", "--budget-total", "L2=1MB"],
     "a total of L2 counts the step's own code, which ckpt measures on gvsoc's model of siracusa, not gap9",
     "hold a live budget there instead (--budget), or a total of L3"),
    (["--target", "gap9", "--costs", "gvsoc"], "--costs gvsoc measures op costs on gvsoc's model of siracusa, not gap9",
     "solve with --costs estimate or a cost file"),
])
def test_ways_out_that_work(mlp, tmp_path, args, message, way_out):
    full = ["solve", str(mlp), *args, "-o", str(tmp_path / "s.json")]
    if "--target" not in args:
        full += ["--target", "siracusa"]
    code, _, err = run(*full)
    line = one_line(err)
    assert code == 1 and message in line and way_out in line, line
    assert "write e.g. 0.7" not in line and "--home L1" not in line and "calibrate with --target" not in line
    assert "[ckpt] lowering" not in err and "[ckpt] loading" not in err


def test_a_table_whose_cycle_columns_are_empty_says_why():
    rows = [empty_row("0.9", 0.9, 100, "optimal", "")]
    said = column_notes(rows, "the op costs are ckpt's estimate (--costs estimate)", "--no-simulate")
    assert said == ["cycles pred: - for every point: the op costs are ckpt's estimate (--costs estimate)",
                    "train cycles: - for every point: not simulated (--no-simulate)"]
    assert column_notes(rows, "", "")[1] == "train cycles: - for every point: no step ran on gvsoc (each point's " \
                                            "reason says why)"


@pytest.mark.deeploy
def test_a_home_on_chip_no_schedule_fits_is_refused_with_the_bytes(tmp_path):
    """An MLP whose constants alone exceed Siracusa's L2: no budget can hold it there (exit 2, before any solve)."""
    big = tmp_path / "big"
    write_example("mlp", big, layers=2, width=768, in_dim=768, batch=1)
    code, _, err = run("solve", str(big), "--target", "siracusa", "--home", "L2", "--budget", "0.9", "-o",
                       str(tmp_path / "s.json"))
    line = one_line(err)
    if "parsing failed" in line:
        pytest.skip(f"the installed Deeploy lowers no MLP example: {line}")
    assert code == 2 and "the step cannot run with its tensors in L2" in line and "its constants (" in line
    assert "more than the 2,031,616 B L2 gives: keep them off chip (--home L3)" in line
    assert "[ckpt] greedy heuristic" not in err and not (tmp_path / "s.json").exists()
    assert "calibrating" not in err          # refused before the step's code is measured on gvsoc
