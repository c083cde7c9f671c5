"""Bad input, round five (defects 16 to 33 of issue 54, but 27): user files never touched, nothing half-made left,
the exit code a failure deserves, and messages that name what the user gave and the way out."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from bench_support import bench_module
from test_cli_errors import one_line, run, snapshot

from ckpt.deeploy_identity import Flavour, deeploy_flavour
from ckpt.examples import write_example
from ckpt.pipeline.row import empty_row


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
def test_a_split_step_for_gap9_under_the_release_is_told_to_install_the_branch_which_runs_it(
        split, seq, tmp_path, command):
    """The training branch, with the kernels ckpt's bridge lends GAP9, runs a split step for gap9 (tests/test_gap9.py
    replays one): so the release's advice to install it is the way out, not another target."""
    if deeploy_flavour() is Flavour.TRAINING_BRANCH:
        pytest.skip("the training branch is installed: tests/test_gap9.py replays a split step for gap9 under it")
    args = [a.format(seq=seq, model=split, tmp=tmp_path) for a in command]
    code, _, err = run(*args)
    line = one_line(err)
    assert code == 1 and "install the training branch" in line and "not gap9" not in line
    assert not (tmp_path / "r").exists() and not (tmp_path / "sw").exists()


# --------------------------------------------------------------------------- 17, 25: interrupted sweeps


def test_a_stopped_workers_half_made_replay_is_removed_and_a_finished_one_kept(tmp_path):
    from ckpt.budgets.store import SweepStore

    store = SweepStore(tmp_path)
    half, whole = tmp_path / "points" / "baseline" / "replay", tmp_path / "points" / "0.9" / "replay"
    for folder, names in ((half, ("Network.c", "Network.h", "io.json")), (whole, ("report.json", "order.json"))):
        folder.mkdir(parents=True)
        for name in names:
            (folder / name).write_text("x")
    assert store.clean_partial() == [] and half.is_dir()          # workers that may still write: left alone
    assert store.clean_partial(replays=True) == [half]
    assert not half.exists() and (whole / "report.json").is_file()


@pytest.mark.slow
def test_a_sweep_interrupted_again_removes_a_half_made_replay_left_by_a_killed_one(tmp_path):
    import sys

    from cli_support import interrupted_at

    from ckpt.cli_common import INTERRUPT_HOOK

    mlp, outdir = tmp_path / "mlp", tmp_path / "sw"
    write_example("mlp", mlp, layers=2, width=8)
    args = [sys.executable, "-m", "ckpt", "sweep", "0.9:0.9", "--model", str(mlp), "--target", "none", "-o",
            str(outdir), "--jobs", "1"]
    assert run(*args[3:])[0] == 0
    replay = outdir / "points" / "baseline" / "replay"
    (replay / "report.json").unlink()                    # as a worker killed mid-replay leaves it
    (outdir / "points" / "baseline" / "point.json").unlink()
    (replay / "Network.c").write_text("half")
    done = interrupted_at(args, INTERRUPT_HOOK, "running tasks")
    assert done.returncode == 130 and "finished points are kept" in done.stderr.splitlines()[-1], done.stderr
    assert not replay.exists()


@pytest.mark.slow  # runs whole commands in subprocesses
def test_a_sweep_interrupted_before_its_first_point_says_nothing_is_kept(tmp_path):
    import sys

    from cli_support import interrupted_at

    from ckpt.cli_common import INTERRUPT_HOOK

    mlp, outdir = tmp_path / "mlp", tmp_path / "sw"
    write_example("mlp", mlp, layers=2, width=8)
    done = interrupted_at([sys.executable, "-m", "ckpt", "sweep", "0.9:0.9", "--model", str(mlp), "--target", "none",
                           "-o", str(outdir)], INTERRUPT_HOOK, "lowering")
    last = done.stderr.strip().splitlines()[-1]
    assert done.returncode == 130 and not outdir.exists(), done.stderr
    assert "before its first point" in last and "its folder is removed" in last and "are kept" not in last


# --------------------------------------------------------------------------- 19: an Inf in the inputs


def test_an_inf_in_the_inputs_is_said_as_a_nan_is_and_no_numpy_warning_leaks(tmp_path):
    import numpy as np

    mlp = tmp_path / "mlp"
    write_example("mlp", mlp, layers=2, width=8)
    with np.load(mlp / "inputs.npz") as stored:
        arrays = {k: stored[k].copy() for k in stored.files}
    first = next(iter(arrays))
    arrays[first].flat[0] = np.inf
    np.savez(mlp / "inputs.npz", **arrays)
    code, out, err = run("verify", str(mlp))
    assert code == 1 and f"Inf in inputs: {first}" in out
    assert "RuntimeWarning" not in err and "Warning" not in out + err


# --------------------------------------------------------------------------- 22: conflicts name what was given


@pytest.mark.parametrize("args, says, unsaid", [
    (["--target", "none", "--flow", "tiled"], "--flow tiled holds a tiled Deeploy deployment", "--budget-total"),
    (["--target", "none", "--budget-total", "L3=1MB"], "--budget-total L3=1MB holds", "--flow"),
    (["--policy", "branch-rule", "--objective", "peak"], "--objective peak would be ignored", "--budget-total"),
    (["--target", "siracusa", "--policy", "branch-rule", "--budget-total", "L3=1MB"], "drop --budget-total",
     "--objective"),
    (["--policy", "top-k", "--objective", "peak"], "--policy top-k needs --k", "--k is"),
    (["--policy", "top-k", "--k", "2", "--objective", "peak"], "drop --objective peak", "--budget"),
    (["--k", "3"], "--k 3 does nothing without --policy top-k", "--budget"),
])
def test_a_conflict_names_only_the_options_given(tmp_path, args, says, unsaid):
    mlp = tmp_path / "mlp"
    write_example("mlp", mlp, layers=2, width=8)
    code, _, err = run("solve", str(mlp), *args, "-o", str(tmp_path / "s.json"))
    line = one_line(err)
    assert code == 1 and says in line and unsaid not in line, line
    assert not (tmp_path / "s.json").exists()


# --------------------------------------------------------------------------- 24: a refused write names its file


def test_no_module_writes_a_file_but_through_the_one_writer_that_names_it():
    """A full disk during a replay said "cannot write 'a file'": a file written with Path.write_text (or numpy's
    tofile) fails without its name. Every write goes through files.atomic_write, which names it."""
    import re

    root = Path(__file__).resolve().parents[1]
    folders = [d for d in root.iterdir() if d.is_dir() and d.name not in ("tests", "bench")
               and not d.name.startswith(".")]
    modules = [*root.glob("*.py"), *(p for d in folders for p in d.rglob("*.py"))]
    found = [f"{p.relative_to(root)}:{n}" for p in modules
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"\.(write_text|write_bytes|tofile)\(", line)]
    assert found == []


def test_a_full_disk_names_the_file_it_refused(tmp_path, monkeypatch):
    import errno

    from ckpt.errors import CkptError
    from ckpt.files import atomic_write

    class Full:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

        def write(self, _):
            raise OSError(errno.ENOSPC, "No space left on device")      # no filename, as a handle's write

    monkeypatch.setattr("ckpt.files.os.fdopen", Full)
    with pytest.raises(CkptError, match=r"cannot write '.*Network\.c': No space left"):
        atomic_write(tmp_path / "Network.c", "x")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------- 26: gvsoc's timeout as given


def test_a_timeout_below_a_second_is_said_as_given():
    from ckpt.gvsoc.run import seconds_text

    assert [seconds_text(s) for s in (0.01, 0.05, 0.3, 3, 120)] == ["0.01 s", "0.05 s", "0.3 s", "3 s", "120 s"]


@pytest.mark.deeploy
@pytest.mark.slow
def test_a_gvsoc_that_prints_nothing_and_hangs_keeps_its_empty_log(deeploy_checkout, tmp_path):
    cct, seq = tmp_path / "cct", tmp_path / "seq.json"
    write_example("cct", cct, blocks=1, image_size=8, embed_dim=16, heads=2)
    assert run("solve", "--costs", "estimate", str(cct), "--target", "siracusa", "--budget", "1.0", "-o",
               str(seq))[0] == 0
    launcher = tmp_path / "gv" / "bin" / "gvsoc"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/bin/sh\nsleep 600\n")
    launcher.chmod(0o755)
    code, out, err = run("replay", str(seq), "--model", str(cct), "-o", str(tmp_path / "r"), "--gvsoc",
                         str(tmp_path / "gv"), "--gvsoc-timeout", "0.3")
    assert code == 1 and "printed nothing for 0.3 s" in out + err and "in 0 s" not in out + err
    assert (tmp_path / "r" / "gvsoc-tiled.log").is_file()


# --------------------------------------------------------------------------- 20: top-k does what K says


def test_top_k_beyond_the_graphs_candidates_is_refused_not_the_k1_schedule(split, tmp_path):
    out = tmp_path / "s.json"
    code, _, err = run("solve", str(split), "--target", "none", "--policy", "top-k", "--k", "2", "-o", str(out))
    line = one_line(err)
    assert code == 1 and "--k 2: 1 forward node(s) of this graph free bytes" in line and "give --k 1" in line
    assert not out.exists()
    assert run("solve", str(split), "--target", "none", "--policy", "top-k", "--k", "1", "-o", str(out))[0] == 0


def test_top_k_says_when_the_rule_recomputes_fewer_than_k(shared_models, tmp_path):
    import json

    ds = shared_models / "dscnn_train"
    if not ds.is_dir():
        pytest.skip("dscnn_train is not among the shared models")
    out = tmp_path / "s.json"
    assert run("solve", str(ds), "--target", "none", "--policy", "top-k", "--k", "27", "-o", str(out))[0] == 0
    doc = json.loads(out.read_text())
    recomputed = sum(flag for _, flag in doc["seq"])
    assert f"; {recomputed} of them recomputed" in doc["solver"]["space"]


def test_peer_policies_calls_a_tie_a_tie():
    peer = bench_module("peer_policies")
    row = replace(empty_row("x", None, None, "heuristic", ""), cycles=100, on_chip=1000)
    points = [peer.Point("m", "ckpt", "0.8", row), peer.Point("m", "top-k", "2", row)]
    assert peer.dominated(points) == ["m top-k 2: ties with ckpt 0.8 (1,000 B, 100 cycles)"]


# ------------------------------------------------------------------------- 28: an update reading its inputs swapped


@pytest.mark.parametrize("command", [["inspect", "{model}", "--target", "none"],
                                     ["solve", "{model}", "--target", "none", "--budget", "1.0", "-o", "{tmp}/s.json"],
                                     ["verify", "{model}"]])
def test_an_optimizer_graph_whose_update_reads_its_inputs_swapped_is_refused(split, tmp_path, command):
    import onnx

    path = split.parent / "simplemlp_optimizer" / "network.onnx"
    model = onnx.load(path)
    node = model.graph.node[0]
    first, second = node.input[0], node.input[1]
    node.input[0], node.input[1] = second, first
    onnx.save(model, path)
    before = snapshot(split.parent)
    code, _, err = run(*[a.format(model=split, tmp=tmp_path) for a in command])
    line = one_line(err)
    assert code == 1 and f"the update of '{first}' reads ({first}, {second}), in that order" in line
    assert snapshot(split.parent) == before and not (tmp_path / "s.json").exists()


# --------------------------------------------------------------------------- 18: a gvsoc that fails every point


@pytest.mark.deeploy
@pytest.mark.slow
def test_a_sweep_whose_gvsoc_crashes_at_every_point_fails_in_one_line(deeploy_checkout, tmp_path):
    cct = tmp_path / "cct"
    write_example("cct", cct, blocks=1, image_size=8, embed_dim=16, heads=2)
    launcher = tmp_path / "gv" / "bin" / "gvsoc"
    launcher.parent.mkdir(parents=True)
    launcher.write_text("#!/bin/sh\necho 'Segmentation fault'\nexit 139\n")
    launcher.chmod(0o755)
    code, out, err = run("sweep", "0.9:0.9", "--model", str(cct), "-o", str(tmp_path / "sw"), "--gvsoc",
                         str(tmp_path / "gv"), "--costs", "estimate")
    line = one_line(err)
    assert code == 1 and "point(s) failed their check (baseline" in line, err
    assert "FAILED (gvsoc failed)" in out and ", failed" in out          # gvsoc's verdict, not the host's 0/N
    assert "FAILED (gvsoc failed)" in (tmp_path / "sw" / "sweep.md").read_text()
