"""ckpt's workaround of the data files Deeploy's dory_mem.c keeps open on the device (gvsoc.open_files)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from ckpt.coderun.sources import KernelSources
from ckpt.deeploy_defects import ENV
from ckpt.gvsoc.open_files import DORY_MEM, closes_files, files_kept_open
from ckpt.gvsoc.run import L2_CAPACITY, OnChipNeed, _does_not_fit, runtime_heap
from ckpt.gvsoc.step import L2_BASE
from ckpt.replay.report import GvsocRecord, SimStatus

MOBILENET_FILES = [f"{i}.hex" for i in range(420)]      # what MobileNetV1's split step's Init loads


def test_the_runtime_heap_counts_one_open_file_with_the_workaround_and_every_file_without():
    """MobileNetV1's split step at budget 0.2 (ELF up to 0x1C0BD400, a 1,251,940-B arena, 420 files) stopped on
    gvsoc at the 229th file without the workaround, 49,620 B over; closing each file at the next open, it ran."""
    kept, closed = runtime_heap(MOBILENET_FILES), runtime_heap(MOBILENET_FILES, closes_files=True)
    assert kept == 480 + 8_304 + 264 * 420 and closed == 480 + 8_304 + 264
    assert runtime_heap([], closes_files=True) == runtime_heap([]) == 480 + 16
    step = OnChipNeed(0x1C0BD400 - L2_BASE, 1_251_940, L2_CAPACITY)
    assert not replace(step, runtime=kept).fits
    fitted = replace(step, runtime=closed, closes_files=True)
    assert fitted.fits and fitted.capacity - fitted.total == 110_616 - 49_620
    assert "closed each data file at the next open" in _does_not_fit(replace(fitted, capacity=0))


def _checkout(tmp_path: Path, text: str) -> KernelSources:
    (tmp_path / DORY_MEM).parent.mkdir(parents=True)
    (tmp_path / DORY_MEM).write_text(text)
    return KernelSources(tmp_path, "test", "test")


LEAKS = "void open_fs() {}\n\nsize_t load(const char *f) {\n  pi_fs_file_t *fd = pi_fs_open(&fs, f, 0);\n}\n"


def test_the_defect_is_found_where_dory_mem_opens_files_and_closes_none(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    found = files_kept_open(_checkout(tmp_path / "a", LEAKS))
    assert found is not None and (found.file, found.line) == (DORY_MEM, 4)
    assert closes_files(_checkout(tmp_path / "b", LEAKS))
    closing = LEAKS.replace("}\n", "  pi_fs_close(fd);\n}\n")
    assert files_kept_open(_checkout(tmp_path / "c", closing)) is None
    assert files_kept_open(KernelSources(tmp_path / "none", "test", "test")) is None


@pytest.mark.parametrize("setting, on", [("off", False), ("softmax-grad-axis", False), ("on", True),
                                         ("readfs-files-kept-open,softmax-grad-axis", True)])
def test_the_workaround_follows_ckpt_deeploy_workarounds(tmp_path, monkeypatch, setting, on):
    monkeypatch.setenv(ENV, setting)
    assert closes_files(_checkout(tmp_path, LEAKS)) is on


def test_the_gvsoc_line_says_the_files_were_closed():
    need = OnChipNeed(1_000, 0, L2_CAPACITY, runtime=runtime_heap(["0.hex"], True), closes_files=True)
    record = GvsocRecord("non_tiled", SimStatus.MEASURED, errors=0, total=1, cycles=10, expected="x",
                         on_chip=need)
    assert f"worked around Deeploy's readfs-files-kept-open ({DORY_MEM})" in record.line
    assert "readfs-files-kept-open" not in replace(record, on_chip=replace(need, closes_files=False)).line


def test_a_run_with_the_workaround_is_cached_apart_from_one_without(tmp_path, monkeypatch):
    from ckpt.gvsoc import train_run

    code = tmp_path / "code"
    code.mkdir()
    (code / "TrainingNetwork.c").write_text("/* a step */\n")
    run = SimpleNamespace(n_steps=1, n_accum=1, grad_start=0, n_grads=0, losses=[], tolerance=1e-3,
                          learning_rate=0.1, batches=[])
    sources, kit = _checkout(tmp_path / "checkout", LEAKS), SimpleNamespace(identity="kit")
    monkeypatch.setenv(ENV, "off")
    off = train_run._run_key(code, run, {}, sources, kit, 10, 0)
    monkeypatch.setenv(ENV, "on")
    assert train_run._run_key(code, run, {}, sources, kit, 10, 0) != off
