"""Bad input, round five (defects 16 to 33 of issue 54, but 27): user files never touched, nothing half-made left,
the exit code a failure deserves, and messages that name what the user gave and the way out."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_cli_errors import one_line, run, snapshot

from ckpt.examples import write_example


@pytest.fixture
def split(shared_models: Path, tmp_path) -> Path:
    """Deeploy's training branch's SimpleMLP step, copied: <tmp>/simplemlp_train with its sibling optimizer."""
    for name in ("simplemlp_train", "simplemlp_optimizer"):
        if not (shared_models / name).is_dir():
            pytest.skip(f"{name} is not among the shared models")
        shutil.copytree(shared_models / name, tmp_path / name)
    return tmp_path / "simplemlp_train"


@pytest.fixture
def seq(split, tmp_path) -> Path:
    path = tmp_path / "seq.json"
    assert run("solve", str(split), "--target", "none", "--budget", "1.0", "-o", str(path))[0] == 0
    return path


# --------------------------------------------------------------------------- 16: never into an input's folder


@pytest.mark.parametrize("where", ["model", "symlink", "optimizer"])
def test_a_replay_never_writes_into_the_folder_of_its_inputs(split, seq, tmp_path, where):
    folder = {"model": split, "optimizer": split.parent / "simplemlp_optimizer",
              "symlink": tmp_path / "link"}[where]
    if where == "symlink":
        folder.symlink_to(split)
    before = snapshot(split.parent)
    code, _, err = run("replay", str(seq), "--model", str(split), "--target", "none", "-o", str(folder),
                       "--overwrite")
    assert code == 1 and "an input of this command" in one_line(err) and "a folder of its own" in err
    assert snapshot(split.parent) == before


@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_a_sweep_never_writes_into_the_model_folder(split, overwrite):
    before = snapshot(split.parent)
    code, _, err = run("sweep", "0.9:0.9", "--model", str(split), "--target", "none", "-o", str(split), *overwrite)
    assert code == 1 and "is the folder of the model" in one_line(err)
    assert snapshot(split.parent) == before


def test_a_sweep_of_several_models_never_writes_into_one_of_their_folders(split, tmp_path):
    write_example("mlp", tmp_path / "other", layers=2, width=8)
    before = snapshot(tmp_path)
    code, _, err = run("sweep", "0.9:0.9", "--model", str(split), "--model", str(tmp_path / "other"), "--target",
                       "none", "-o", str(tmp_path), "--overwrite")
    assert code == 1 and "is the folder of the model" in one_line(err)
    assert snapshot(tmp_path) == before


# --------------------------------------------------------------------------- 29: '.' is a folder with a name


def test_the_current_folder_finds_its_sibling_optimizer(split, monkeypatch, tmp_path):
    monkeypatch.chdir(split)
    code, out, err = run("verify", ".")
    assert code == 0, err
    code, _, err = run("solve", ".", "--target", "none", "--budget", "1.0", "-o", str(tmp_path / "s.json"))
    assert code == 0 and '"optimizer"' in (tmp_path / "s.json").read_text(), err


def test_a_split_step_whose_optimizer_is_not_found_is_said_by_solve_and_inspect(split, tmp_path):
    other = tmp_path / "mlpstep"
    shutil.copytree(split, other)
    code, _, err = run("solve", str(other), "--target", "none", "--budget", "1.0", "-o", str(tmp_path / "s.json"))
    assert code == 0 and "is a split step whose optimizer graph is absent" in err and "optimizer.onnx" in err
    code, _, err = run("inspect", str(other), "--target", "none")
    assert code == 0 and "is a split step whose optimizer graph is absent" in err


# --------------------------------------------------------------------------- 30, 31: messages name what exists


@pytest.mark.parametrize("kind, option", [("mlp", "--blocks"), ("cct", "--layers"), ("resnet", "--width")])
def test_an_example_option_that_does_not_apply_lists_only_options_that_exist(tmp_path, kind, option):
    code, _, err = run("example", kind, "-o", str(tmp_path / "x"), option, "2")
    line = one_line(err)
    assert code == 1 and f"{kind} takes: --" in line
    listed = line.split("takes: ")[1].split(", ")
    help_text = run("example", "--help")[1]
    assert all(f"{flag} " in help_text for flag in listed), listed
    assert "in-dim" not in line and "lr" not in listed and not (tmp_path / "x").exists()


@pytest.mark.parametrize("command", [["replay", "{missing}", "--target", "none"],
                                     ["verify", "{mlp}", "--schedule", "{missing}"],
                                     ["solve", "{mlp}", "--warm-start", "{missing}", "-o", "{tmp}/s.json"],
                                     ["solve", "{mlp}", "--costs", "{missing}", "-o", "{tmp}/s.json"]])
def test_a_missing_input_file_is_said_missing(tmp_path, command):
    mlp = tmp_path / "mlp"
    write_example("mlp", mlp, layers=2, width=8)
    args = [a.format(missing=tmp_path / "nope.json", mlp=mlp, tmp=tmp_path) for a in command]
    code, _, err = run(*args)
    line = one_line(err)
    assert code == 1 and f"at '{tmp_path / 'nope.json'}'" in line and "no such file" in line
    assert "FileNotFoundError" not in line and "is not a" not in line and not (tmp_path / "s.json").exists()


# --------------------------------------------------------------------------- 33: the advice fits the target


@pytest.mark.parametrize("command", [["replay", "{seq}", "--model", "{model}", "--target", "gap9", "-o", "{tmp}/r"],
                                     ["sweep", "--model", "{model}", "--target", "gap9", "-o", "{tmp}/sw"]])
def test_a_split_step_for_a_target_no_deeploy_runs_it_on_is_refused_as_such(split, seq, tmp_path, command):
    args = [a.format(seq=seq, model=split, tmp=tmp_path) for a in command]
    code, _, err = run(*args)
    line = one_line(err)
    assert code == 1 and "not gap9" in line and "--target siracusa" in line and "install" not in line
    assert not (tmp_path / "r").exists() and not (tmp_path / "sw").exists()
