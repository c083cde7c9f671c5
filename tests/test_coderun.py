"""ckpt's host runtime for Deeploy's generated code, on a toy step (tests/toy_code) with the real kernels' build.

The toy uses every part of the runtime the generated code uses (L3 allocation and file loads, 2-D RAM copies,
the cluster DMA, forks with a barrier) and each test breaks one of them the way a wrong layout or transfer
would: the run must fail with a fault naming it, never compute quietly.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from ckpt.coderun.build import Sanitizer
from ckpt.coderun.run import CodeRun, NotRun, run_code
from ckpt.coderun.sources import NoSources, find_sources, kernel_fingerprint
from ckpt.errors import CkptError

TOY = Path(__file__).parent / "toy_code"
pytestmark = pytest.mark.slow      # the first test of a session builds the kernel library (seconds)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    found = find_sources()
    if isinstance(found, NoSources):
        pytest.skip(found.reason)
    with pytest.MonkeyPatch.context() as patch:   # the kernel library is built once for the module
        patch.setenv("CKPT_CACHE_DIR", str(tmp_path_factory.mktemp("coderun-cache")))
        yield found


@pytest.fixture
def toy(tmp_path):
    def make(fault: str = "") -> Path:
        folder = tmp_path / "code"
        shutil.copytree(TOY, folder)
        source = folder / "Network.c"
        source.write_text(source.read_text().replace("/* FAULT */", fault))
        return folder
    return make


FEEDS = {"input_0": np.arange(64, dtype=np.float32).reshape(8, 8) - 20.5}


def test_the_toy_step_runs_and_doubles_its_input(sources, toy):
    found = run_code(toy(), FEEDS, sources, steps=3)
    assert isinstance(found, CodeRun), found
    assert len(found.steps) == 3
    for step in found.steps:
        assert np.array_equal(step["output_0"], 2 * FEEDS["input_0"].reshape(-1))
    levels = found.stats.levels
    assert (levels["L1"].peak, levels["L2"].peak, levels["L3"].peak) == (128, 128, 512)
    assert found.stats.forks == 6 and found.stats.dma_transfers == 12 and found.stats.ram_copies == 12
    assert any("gemv.c" in skipped for skipped in found.skipped_kernels)   # needs PULP-NN, never called


@pytest.mark.parametrize(("fault", "says"), [
    ("volatile float x = l3_in[0]; (void)x;", "killed by SIGSEGV"),              # a core reads L3 directly
    ("mchan_transfer_1d(TILE_BYTES + 4, l1_tile, l2_tile);", "leave every L1/L2 allocation"),
    ("pi_cl_ram_copy_2d(get_ram_ptr(), l3_out + 64, l2_tile, 4, 4, 4, 0, &req);", "leave every L3 allocation"),
    ("for (int i = 0; i < 17; i++) mchan_channel_alloc();", "all 16 DMA channels are allocated"),
    ("pi_l2_free(l2_tile, 8);", "pi_l2_free of a 128-byte L2 block with size 8"),
    ("mchan_channel_wait(9);", "wait on channel 9, which is not allocated"),
    # GAP9's DMA: a transfer of 2^17 B carries into the direction bit of its command
    ("{ mchan_transfer_t t = { .cmd = (1 << 17) | MCHAN_CMD_FLAG_INCREMENTAL, .size = 1 << 17, .loc = l1_tile, "
     ".ext = l2_tile }; mchan_transfer_push_1d(t); }", "a transfer of 131072 B between"),
    ("{ int id = mchan_transfer_get_id(); mchan_transfer_t t = { .cmd = (TILE_BYTES + 4) | MCHAN_CMD_FLAG_INCREMENTAL,"
     " .size = TILE_BYTES + 4, .loc = l1_tile, .ext = l2_tile }; mchan_transfer_push_1d(t); mchan_transfer_free(id); }",
     "leave every L1/L2 allocation"),
])
def test_a_fault_of_the_code_is_a_failed_run_naming_it(sources, toy, fault, says):
    found = run_code(toy(fault), FEEDS, sources)
    assert isinstance(found, NotRun) and found.failed, found
    assert says in found.reason


def test_gaps9s_dma_moves_what_its_command_says(sources, toy):
    back = ("{ int id = mchan_transfer_get_id(); mchan_transfer_t t = { .cmd = TILE_BYTES | MCHAN_CMD_FLAG_INCREMENTAL"
            " | MCHAN_CMD_FLAG_DIRECTION_EXT2LOC, .size = TILE_BYTES, .loc = l1_tile, .ext = l2_tile }; "
            "mchan_transfer_push_1d(t); mchan_transfer_wait(id); mchan_transfer_free(id); }")
    found = run_code(toy(back), FEEDS, sources)
    assert isinstance(found, CodeRun), found
    assert found.stats.dma_transfers == 4 + 2         # one step: two halves, each in and out, and GAP9's back in
    assert np.array_equal(found.steps[0]["output_0"], 2 * FEEDS["input_0"].reshape(-1))


def test_a_step_that_never_ends_is_stopped(sources, toy):
    found = run_code(toy("for (;;) {}"), FEEDS, sources, timeout=3)
    assert isinstance(found, NotRun) and found.failed and "did not finish in 3 s" in found.reason


def test_code_that_does_not_compile_is_a_failed_build(sources, toy):
    found = run_code(toy("undeclared_kernel(l1_tile);"), FEEDS, sources)
    assert isinstance(found, NotRun) and found.failed
    assert "does not build" in found.reason and "undeclared_kernel" in found.reason


@pytest.mark.parametrize("sanitizer", [Sanitizer.ADDRESS, Sanitizer.THREAD])
def test_sanitizer_builds_of_the_runtime_are_clean_and_compute_the_same(sources, toy, sanitizer):
    found = run_code(toy(), FEEDS, sources, sanitizer=sanitizer, steps=2)
    assert isinstance(found, CodeRun), found
    assert np.array_equal(found.outputs["output_0"], 2 * FEEDS["input_0"].reshape(-1))


def test_an_address_sanitizer_build_reports_a_write_past_an_l2_block(sources, toy):
    found = run_code(toy("l2_tile[32] = 1.0f;"), FEEDS, sources, sanitizer=Sanitizer.ADDRESS)
    assert isinstance(found, NotRun) and found.failed and "AddressSanitizer" in found.reason


def test_no_sources_is_not_run_with_the_reason():
    found = run_code(TOY, FEEDS, NoSources("no Deeploy v0.2.1 checkout"))
    assert isinstance(found, NotRun) and not found.failed and found.reason == "no Deeploy v0.2.1 checkout"


def test_a_checkout_of_other_kernels_is_refused_in_one_line(sources, tmp_path, monkeypatch):
    copy = tmp_path / "deeploy"
    shutil.copytree(sources.root / "TargetLibraries", copy / "TargetLibraries")
    assert kernel_fingerprint(copy) == sources.fingerprint
    relu = copy / "TargetLibraries" / "PULPOpen" / "src" / "Relu.c"
    relu.write_text(relu.read_text() + "\n/* edited */\n")
    monkeypatch.setenv("CKPT_DEEPLOY_ROOT", str(copy))
    with pytest.raises(CkptError, match=r"\$CKPT_DEEPLOY_ROOT .* are not those of Deeploy 0\.2\.1 \(release\) .*"
                                        r"a Deeploy checkout at tag v0\.2\.1") as refused:
        find_sources()
    assert "\n" not in str(refused.value)
    monkeypatch.setenv("CKPT_DEEPLOY_ROOT", str(tmp_path / "nothing"))
    with pytest.raises(CkptError, match=r"holds no TargetLibraries/PULPOpen/inc: not the kernels of Deeploy"):
        find_sources()
