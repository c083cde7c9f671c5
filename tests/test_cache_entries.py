"""Caches are checked before they are used (ckpt.cached): an entry of another key, cut short or corrupted reads as
absent and is made again; nothing in $CKPT_CACHE_DIR is trusted for being where it is."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples
from test_cli_errors import one_line, run

from ckpt.cached import discard, folder_checks_out, read_entry, seal_folder, write_entry
from ckpt.examples import write_example
from ckpt.pipeline.calibrate import CALIBRATION_FORMAT, KIND


@settings(max_examples=property_examples(60), deadline=None)
@given(payload=st.binary(max_size=200), at=st.integers(min_value=0), flip=st.integers(min_value=1, max_value=255),
       cut=st.integers(min_value=0))
def test_an_entry_reads_back_only_whole_and_under_its_own_key(tmp_path_factory, payload, at, flip, cut):
    path = tmp_path_factory.mktemp("entry") / "e.entry"
    write_entry(path, "k1", payload)
    assert read_entry(path, "k1") == payload and read_entry(path, "k2") is None
    data = path.read_bytes()
    spoilt = bytearray(data)
    spoilt[at % len(data)] ^= flip                       # any one byte changed
    path.write_bytes(bytes(spoilt))
    assert read_entry(path, "k1") is None
    path.write_bytes(data[:cut % len(data)])             # cut short anywhere
    assert read_entry(path, "k1") is None
    path.write_bytes(b"")
    assert read_entry(path, "k1") is None


def test_a_folder_checks_out_only_as_it_was_sealed(tmp_path):
    folder = tmp_path / "lib"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"objects")
    (folder / "sub").mkdir()
    (folder / "sub" / "b.h").write_text("#define X 1\n")
    (folder / "link").symlink_to("a.bin")
    seal_folder(folder, "key")
    assert folder_checks_out(folder, "key") and not folder_checks_out(folder, "other key")
    spoils = (lambda f: (f / "a.bin").write_bytes(b"object"), lambda f: (f / "extra").write_text("x"),
              lambda f: (f / "sub" / "b.h").unlink(), lambda f: (f / ".ckpt-entry.json").write_text("{"),
              lambda f: (f / "link").unlink() or (f / "link").symlink_to("sub"))
    for number, spoil in enumerate(spoils):
        copy = tmp_path / f"copy{number}"
        shutil.copytree(folder, copy, symlinks=True)
        assert folder_checks_out(copy, "key")
        spoil(copy)
        assert not folder_checks_out(copy, "key")
        discard(copy)
        assert not copy.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["lib"]
    assert folder_checks_out(folder, "key")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("CKPT_CACHE_DIR", str(folder))
    return folder


def test_a_spoilt_default_example_in_the_cache_is_written_again(cache, tmp_path):
    code, first, _ = run("inspect")
    assert code == 0
    example = next((cache / "examples").iterdir())
    (example / "network.onnx").write_bytes(b"not a model")
    (example / "inputs.npz").unlink()
    code, again, err = run("inspect")
    assert code == 0 and again == first, err


def _calibration(model: Path, target: str = "siracusa") -> dict:
    """A calibration file as `ckpt calibrate -o` writes it, of `model` (made by hand: no gvsoc needed)."""
    return {"kind": KIND, "format": CALIBRATION_FORMAT, "target": target, "setup": {},
            "model_sha256": hashlib.sha256((model / "network.onnx").read_bytes()).hexdigest(),
            "step_cycles": 1000, "node_cycles": {}, "errors": 0, "total": 1, "code_bytes": 0, "key": "0" * 64}


def test_a_calibration_of_another_model_or_target_is_refused_by_solve_and_sweep(tmp_path):
    one, other = tmp_path / "one", tmp_path / "other"
    write_example("mlp", one, layers=2)
    write_example("mlp", other, layers=3)
    costs = tmp_path / "costs.json"
    costs.write_text(json.dumps(_calibration(other)))
    for command in (["solve", str(one), "--target", "siracusa", "--costs", str(costs), "-o", str(tmp_path / "s.json")],
                    ["sweep", "--model", str(one), "--costs", str(costs), "-o", str(tmp_path / "sw")]):
        code, _, err = run(*command)
        assert code == 1 and f"'{costs}' is a calibration of another model" in one_line(err), command
        assert "ckpt calibrate" in one_line(err)
    costs.write_text(json.dumps(_calibration(one)))
    code, _, err = run("solve", str(one), "--costs", str(costs), "-o", str(tmp_path / "s.json"))
    assert code == 1 and "is a calibration for target siracusa, not none" in one_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["costs.json", "one", "other"]


@pytest.mark.deeploy
@pytest.mark.slow
def test_spoilt_lowered_graphs_kernel_libraries_and_references_are_made_again(cache, tmp_path, deeploy_checkout):
    """A lowered graph of another model copied over this one's entry, a kernel library cut short and a reference
    emptied: the replay lowers, builds and runs again, and says what it said with a sound cache."""
    one, other = tmp_path / "one", tmp_path / "other"
    write_example("mlp", one, layers=2, width=16, batch=4)
    write_example("mlp", other, layers=2, width=32, batch=4)
    schedule = tmp_path / "seq.json"
    assert run("inspect", str(other), "--target", "siracusa")[0] == 0
    assert run("solve", "--costs", "estimate", str(one), "--target", "siracusa", "--budget", "1.0", "-o",
               str(schedule))[0] == 0
    code, first, err = run("replay", str(schedule), "--model", str(one), "-o", str(tmp_path / "r1"))
    assert code == 0 and first.count("Errors: 0 out of") == 4, err   # golden, graph order, both flows
    entries = sorted((cache / "lowered").glob("*.entry"), key=lambda p: p.stat().st_mtime_ns)
    assert len(entries) == 2
    shutil.copy(entries[0], entries[1])                      # the other model's lowering under this one's key
    library = next((cache / "coderun").glob("kernels-*"))
    archive = library / "libckptkernels.a"
    archive.write_bytes(archive.read_bytes()[:1000])
    for reference in (cache / "coderun" / "reference").glob("*.entry"):
        reference.write_bytes(b"")
    code, again, err = run("replay", str(schedule), "--model", str(one), "-o", str(tmp_path / "r2"))
    assert code == 0, err
    assert again.replace("r2/", "r1/") == first
    assert folder_checks_out(library, library.name.removeprefix("kernels-"))
    assert all(reference.stat().st_size > 0 for reference in (cache / "coderun" / "reference").glob("*.entry"))
