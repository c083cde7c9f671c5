"""A step whose relaxed link truncates a compressed jump links again without relaxation, says so, and names the
truncated relocation (gcc's driver only says that ld failed)."""
from __future__ import annotations

import sys

import pytest

from ckpt.gvsoc.step import StepBuildError, _first_error, _link
from ckpt.replay.report import GvsocRecord, SimStatus

TRUNCATED = ("OptimizerNetwork.o: in function `RunOptimizerNetwork':\n"
             "(.ckpt_generated_text+0x7fe): relocation truncated to fit: R_RISCV_RVC_JUMP against "
             "`mchan_channel_wait'\ncollect2: error: ld returned 1 exit status\n")


def _ld(fails_relaxed: str, fails_always: bool = False) -> list[str]:
    """A stand-in for the compiler driver: prints `fails_relaxed` and fails unless given --no-relax."""
    script = ("import sys\n"
              f"if {fails_always!r} or '-Wl,--no-relax' not in sys.argv:\n"
              f"    sys.stderr.write({fails_relaxed!r}); sys.exit(1)\n")
    return [sys.executable, "-c", script]


def test_the_first_error_is_the_truncated_relocation_not_the_driver_line():
    assert "relocation truncated to fit: R_RISCV_RVC_JUMP" in _first_error(TRUNCATED)
    assert _first_error("a.c:3: error: x undeclared\ncollect2: error: ld returned 1\n") == "a.c:3: error: x undeclared"


def test_a_truncated_relocation_links_again_without_relaxation_and_says_so():
    assert _link(_ld(TRUNCATED), relax=True) is False
    assert _link([sys.executable, "-c", "pass"], relax=True) is True


def test_another_link_error_is_not_retried():
    with pytest.raises(StepBuildError, match="undefined reference"):
        _link(_ld("x.o: undefined reference to `f'\ncollect2: error: ld returned 1 exit status\n"), relax=True)
    with pytest.raises(StepBuildError, match="relocation truncated"):
        _link(_ld(TRUNCATED, fails_always=True), relax=True)


def test_a_step_linked_without_relaxation_says_so_in_its_line():
    record = GvsocRecord("tiled", SimStatus.MEASURED, None, 0, 1, 100, {}, "outputs.npz", relaxed=False)
    assert "without ld's relaxation" in record.line
    assert "relaxation" not in GvsocRecord("tiled", SimStatus.MEASURED, None, 0, 1, 100, {}, "outputs.npz").line
