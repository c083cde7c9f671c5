"""`ckpt replay` and `ckpt verify` as a user meets them, on a built-in MLP (target none: no Deeploy, seconds)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from cli_support import ckpt, ckpt_here

from ckpt.examples import write_example
from ckpt.replay.report import ReplayReport
from ckpt.schedule_file import read_schedule, write_schedule


@pytest.fixture(scope="module")
def mlp(tmp_path_factory):
    """An MLP whose activations dominate (batch 256), and a greedy schedule with recomputes for it."""
    folder = tmp_path_factory.mktemp("mlp")
    write_example("mlp", folder, batch=256, layers=5)
    seq = folder / "seq.json"
    run = ckpt_here("solve", str(folder), "--budget", "0.6", "--method", "greedy", "-o", str(seq))
    assert run.returncode == 0, run.stderr
    assert read_schedule(seq).predicted.recomputes > 0
    return folder, seq


def test_replay_writes_graph_order_and_report_with_the_predicted_peak(mlp, tmp_path):
    folder, seq = mlp
    run = ckpt_here("replay", str(seq), "--model", str(folder), "--target", "none", "-o", str(tmp_path / "out"))
    assert run.returncode == 0, run.stderr
    report = ReplayReport.read(tmp_path / "out" / "report.json")
    doc = read_schedule(seq)
    memory = report.memory
    assert memory.replayed_peak == memory.predicted_peak == doc.predicted.peak_bytes
    assert memory.heap == doc.predicted.heap_bytes >= memory.replayed_peak
    assert memory.deeploy_non_tiled is None and report.deeploy is None and memory.levels == {}
    assert report.replay.clones_kept == doc.predicted.recomputes and report.ok
    assert report.verification.status == "bit-identical" and report.verification.golden.errors == 0
    assert report.gvsoc == {}              # target none: no generated code, nothing to simulate
    order = json.loads((tmp_path / "out" / "order.json").read_text())["order"]
    assert len(order) == report.replay.executions and any("__ck" in name for name in order)
    assert "activation peak: predicted" in run.stdout and "gvsoc" not in run.stdout


@pytest.mark.slow  # two whole runs in subprocesses
def test_replay_is_byte_identical_run_to_run(mlp, tmp_path):
    folder, seq = mlp
    for name in ("a", "b"):
        assert ckpt("replay", str(seq), "--model", str(folder), "-o", str(tmp_path / name)).returncode == 0
    for name in ("rewired.onnx", "order.json", "report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert not list(tmp_path.glob("*/.*.tmp"))


def test_replay_refuses_another_graphs_schedule_unless_forced(mlp, tmp_path):
    folder, seq = mlp
    doc = read_schedule(seq)
    doc = replace(doc, graph=replace(doc.graph, names_sha256="f" * 64))
    foreign = tmp_path / "foreign.json"
    write_schedule(foreign, doc)
    run = ckpt_here("replay", str(foreign), "--model", str(folder), "-o", str(tmp_path / "out"))
    assert run.returncode == 1 and "f" * 64 in run.stderr and "--force" in run.stderr
    assert run.stderr.count("\n") == 1 and not (tmp_path / "out").exists()
    forced = ckpt_here("replay", str(foreign), "--model", str(folder), "-o", str(tmp_path / "out"), "--force")
    assert forced.returncode == 0, forced.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["schedule"]["fingerprint"]["status"] == "forced"


def test_replay_refuses_a_schedule_of_renamed_nodes_even_forced(mlp, tmp_path):
    folder, seq = mlp
    doc = read_schedule(seq)
    renamed = {name for i, (name, flag) in enumerate(doc.seq) if i % 5 == 0 and not flag}
    doc = replace(doc, seq=tuple((f"{name}_renamed" if name in renamed else name, flag) for name, flag in doc.seq))
    renamed = tmp_path / "renamed.json"
    write_schedule(renamed, doc)
    run = ckpt_here("replay", str(renamed), "--model", str(folder), "--force", "-o", str(tmp_path / "out"))
    assert run.returncode == 1 and "needs 90%" in run.stderr and "_renamed'" in run.stderr


def test_verify_prints_errors_line_and_checks_a_schedule(mlp):
    folder, seq = mlp
    plain = ckpt_here("verify", str(folder))
    assert plain.returncode == 0, plain.stderr
    elements = sum(a.size for a in np.load(folder / "outputs.npz").values())
    assert plain.stdout.splitlines()[1].startswith(f"Errors: 0 out of {elements} (10 output tensors")
    assert "Worst:" in plain.stdout
    scheduled = ckpt_here("verify", str(folder), "--schedule", str(seq))
    assert scheduled.returncode == 0, scheduled.stderr
    assert "vs graph order: bit-identical" in scheduled.stdout


def test_verify_without_goldens_or_inputs_is_one_line(tmp_path):
    write_example("mlp", tmp_path, golden=False)
    run = ckpt_here("verify", str(tmp_path))
    assert run.returncode == 1 and run.stderr.startswith("error: no outputs.npz") and "Traceback" not in run.stderr
    (tmp_path / "inputs.npz").unlink()
    run = ckpt_here("verify", str(tmp_path))
    assert run.returncode == 1 and run.stderr.startswith("error: no inputs.npz")
