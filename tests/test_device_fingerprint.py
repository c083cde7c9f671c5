"""The device fingerprint keys every cached kernel, run and calibration: it must move with what a run computes or
measures and stay put otherwise (a GAP9 launcher edit used to invalidate every Siracusa calibration)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ckpt.gvsoc import kernels
from ckpt.gvsoc.kernels import MEASURING_MODULES, NON_MEASURING_MODULES, device_fingerprint

HERE = Path(kernels.__file__).resolve().parent


def test_every_gvsoc_module_is_classed_once():
    modules = {p.name for p in HERE.glob("*.py")}
    assert set(MEASURING_MODULES) | set(NON_MEASURING_MODULES) == modules
    assert not set(MEASURING_MODULES) & set(NON_MEASURING_MODULES)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    copy = tmp_path / "gvsoc"
    shutil.copytree(HERE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_shipped_folder_fingerprints_as_the_default():
    assert device_fingerprint(HERE) == device_fingerprint()


@pytest.mark.parametrize("name", NON_MEASURING_MODULES)
def test_a_module_that_measures_nothing_keeps_the_fingerprint(folder: Path, name: str):
    before = device_fingerprint(folder)
    with (folder / name).open("a") as f:
        f.write("\n# an edit\n")
    assert device_fingerprint(folder) == before


@pytest.mark.parametrize("name", [*MEASURING_MODULES, "device/ckpt_probes.c"])
def test_a_module_or_device_file_that_measures_moves_the_fingerprint(folder: Path, name: str):
    before = device_fingerprint(folder)
    with (folder / name).open("a") as f:
        f.write("\n/* an edit */\n" if name.endswith(".c") else "\n# an edit\n")
    assert device_fingerprint(folder) != before
