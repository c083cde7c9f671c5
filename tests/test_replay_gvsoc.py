"""gvsoc through Deeploy's training harness: the output parser on captured text, and every reason not to run."""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from ckpt.replay.gvsoc import HarnessSetup, gvsoc_line, parse_harness_output, run_harness, why_not
from ckpt.replay.report import NOT_SIMULATED

# Tail of a Siracusa training run as the harness prints it (loss check on the cluster, then the bench line).
CAPTURED = """\
[loss 0] computed=2.318844 ref=2.318845 diff=0.000001
Errors: 0 out of 1
BENCH train_cycles=68630412 opt_cycles=140177 trainable_bytes=2114304
\x1b[92m✓ Test CCT2_FT2 PASSED - No errors found\x1b[0m
"""

# A harness that prints the cycle count as a uint64 split, and a failing run.
CAPTURED_SPLIT = ("Errors: 3 out of 8\r\n"
                  "BENCH train_cycles_hi=20 train_cycles_lo=3612894973 opt_cycles=56427 weight_sram=91136\r\n")


def test_parser_reads_errors_and_bench_fields():
    counts, bench = parse_harness_output(CAPTURED)
    assert counts == (0, 1)
    assert bench == {"train_cycles": 68630412, "opt_cycles": 140177, "trainable_bytes": 2114304}


def test_parser_joins_a_split_uint64_and_keeps_other_names():
    counts, bench = parse_harness_output(CAPTURED_SPLIT)
    assert counts == (3, 8)
    assert bench["train_cycles"] == (20 << 32) + 3612894973 and bench["weight_sram"] == 91136
    assert "train_cycles_hi" not in bench and "train_cycles_lo" not in bench


def test_parser_on_text_without_results():
    assert parse_harness_output("make: *** [all] Error 2\n") == (None, {})


# --------------------------------------------------------------------------- reasons not to run


def _root(tmp_path: Path, runner: bool = True, recompute: bool = True) -> Path:
    tests = tmp_path / "Deeploy" / "DeeployTest"
    tests.mkdir(parents=True)
    (tests / "testMVPTraining.py").write_text("--recomputeSchedule\n" if recompute else "# no such option\n")
    if runner:
        (tests / "deeployTrainingRunner_tiled_siracusa.py").write_text(FAKE_RUNNER)
    return tests.parent


@pytest.fixture
def toolchain(tmp_path, monkeypatch):
    """A PATH with a `gvsoc` on it and LLVM_INSTALL_DIR set, standing in for an installed PULP toolchain."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gvsoc = bin_dir / "gvsoc"
    gvsoc.write_text("#!/bin/sh\nexit 0\n")
    gvsoc.chmod(gvsoc.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("LLVM_INSTALL_DIR", str(tmp_path))
    monkeypatch.delenv("GVSOC_INSTALL_DIR", raising=False)


def test_reasons_not_to_simulate(tmp_path, monkeypatch, toolchain):
    assert why_not(None, "siracusa") == "no --deeploy-root given"
    assert "has no Deeploy harness" in why_not(tmp_path, "none")
    assert "not a Deeploy checkout" in why_not(tmp_path, "siracusa")
    assert "no training runner" in why_not(_root(tmp_path / "a", runner=False), "siracusa")
    assert "no --recomputeSchedule option" in why_not(_root(tmp_path / "b", recompute=False), "siracusa")
    root = _root(tmp_path / "c")
    assert why_not(root, "siracusa") is None
    monkeypatch.delenv("LLVM_INSTALL_DIR")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert why_not(root, "siracusa") == "no PULP toolchain: set LLVM_INSTALL_DIR"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert why_not(root, "siracusa") == "gvsoc not found on PATH or in $GVSOC_INSTALL_DIR/bin"


def test_skip_path_records_why_and_no_figures(tmp_path):
    result = run_harness(None, "siracusa", tmp_path, tmp_path / "seq.json", tmp_path / "gvsoc.log")
    assert result.status == NOT_SIMULATED and gvsoc_line(result) == "gvsoc: not simulated (no --deeploy-root given)"
    assert result.reason == "no --deeploy-root given" and result.errors is None and result.train_cycles is None
    assert not (tmp_path / "gvsoc.log").exists()


# --------------------------------------------------------------------------- the plumbing, with a stand-in harness

FAKE_RUNNER = """\
import sys
print("args:", " ".join(sys.argv[1:]))
print("Errors: 0 out of 1")
print("BENCH train_cycles=123 opt_cycles=45 trainable_bytes=678")
"""


def test_runs_the_harness_with_the_schedule_and_parses_what_it_printed(tmp_path, toolchain):
    root = _root(tmp_path)
    setup = HarnessSetup(python=sys.executable)
    result = run_harness(root, "siracusa", tmp_path / "model", tmp_path / "seq.json", tmp_path / "gvsoc.log", setup)
    assert result.status == "measured" and (result.errors, result.total) == (0, 1)
    assert result.train_cycles == 123 and result.trainable_bytes == 678
    log = (tmp_path / "gvsoc.log").read_text()
    assert f"--recomputeSchedule={tmp_path / 'seq.json'}" in log
    assert "-p Siracusa -s gvsoc" in log and "--l1 128000" in log and "--defaultMemLevel L3" in log
