"""A command reads, parses and hashes its model once (solver.graph.model_file), whichever layers ask for it."""
from __future__ import annotations

import pytest
from cli_support import ckpt_here

from ckpt.errors import CkptError
from ckpt.examples import write_example
from ckpt.solver.graph import model_file
from ckpt.solver.graph.model_file import open_model


@pytest.fixture
def counted(monkeypatch):
    """A fresh per-process record and counters, as a new command starts with."""
    monkeypatch.setattr(model_file, "_OPENED", {})
    monkeypatch.setattr(model_file, "STATS", {"parsed": 0, "hashed": 0})
    return model_file


def test_ckpt_solve_parses_and_hashes_its_model_once(counted, tmp_path):
    write_example("mlp", tmp_path / "m", layers=3, width=32, batch=4)
    counted._OPENED.clear()
    counted.STATS.update(parsed=0, hashed=0)
    run = ckpt_here("solve", str(tmp_path / "m"), "--budget", "0.8", "-o", str(tmp_path / "seq.json"))
    assert run.returncode == 0, run.stderr
    assert counted.STATS == {"parsed": 1, "hashed": 1}


def test_a_changed_file_is_read_again_and_the_same_file_is_not(counted, tmp_path):
    write_example("mlp", tmp_path / "m", layers=2, width=8, batch=2)
    first = open_model(tmp_path / "m")
    assert open_model(tmp_path / "m" / "network.onnx") is first or open_model(tmp_path / "m").sha256 == first.sha256
    assert counted.STATS["parsed"] == 1
    write_example("mlp", tmp_path / "m", layers=3, width=8, batch=2, overwrite=True)
    assert open_model(tmp_path / "m").sha256 != first.sha256 and counted.STATS["parsed"] == 2


def test_a_missing_or_garbage_model_is_one_line(counted, tmp_path):
    with pytest.raises(CkptError, match="no model at"):
        open_model(tmp_path / "none.onnx")
    (tmp_path / "bad.onnx").write_bytes(b"\x00garbage\xff" * 10)
    with pytest.raises(CkptError, match="is not an ONNX model"):
        open_model(tmp_path / "bad.onnx")


@pytest.mark.deeploy
def test_ckpt_solve_for_a_deeploy_target_parses_and_hashes_its_model_once(counted, tmp_path, lowering_cache):
    write_example("cct", tmp_path / "c", blocks=1, embed_dim=16, heads=2, image_size=8, conv_channels=8)
    counted._OPENED.clear()
    counted.STATS.update(parsed=0, hashed=0)
    run = ckpt_here("solve", "--costs", "estimate", str(tmp_path / "c"), "--target", "siracusa", "--budget", "1.0",
                    "-o", str(tmp_path / "seq.json"))
    assert run.returncode == 0, run.stderr
    assert counted.STATS == {"parsed": 1, "hashed": 1}
