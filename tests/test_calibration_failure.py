"""A calibration that cannot run is told apart from one that ran on gvsoc and failed there: only the first is a
missing gvsoc, whose way out is to make it available; the second names the failure and where its log is."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from cli_support import interrupted_at

from ckpt.deeploy_bridge.setup import setup_for
from ckpt.errors import CkptError
from ckpt.examples import write_example
from ckpt.gvsoc.kit import NoKit
from ckpt.gvsoc.run import failed_reason
from ckpt.pipeline import calibrate as calibration
from ckpt.targets import SPLIT_HOME

# what gvsoc prints when the step reads where the cluster may not (the wide MLP's graph order off chip did so)
PLATFORM_ERROR_LOG = """\
Loading binary
\x1b[31m/chip/cluster/pe0/lsu\x1b[0m Invalid access (offset: 0x1c2fffc0, size: 0x4, is_write: 0)
Input error: Platform returned an error
"""


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tiny")
    write_example("mlp", folder, layers=2, width=32, batch=8)
    return folder / "network.onnx"


def _platform_failure(tmp_path: Path) -> CkptError:
    log = tmp_path / "run.gvsoc.log"
    log.write_text(PLATFORM_ERROR_LOG)
    return calibration.not_calibrated(failed_reason(1, PLATFORM_ERROR_LOG, []), True, log)


def test_a_calibration_whose_step_failed_on_gvsoc_says_so_with_its_first_error_and_log(tmp_path):
    err = _platform_failure(tmp_path)
    assert isinstance(err, calibration.FailedOnGvsoc)
    assert "ran on gvsoc and failed" in str(err) and "/chip/cluster/pe0/lsu Invalid access" in str(err)
    assert str(tmp_path / "run.gvsoc.log") in str(err) and "make gvsoc available" not in str(err)


def test_a_calibration_that_never_reached_gvsoc_is_no_failure_on_it():
    err = calibration.not_calibrated("the step does not fit L2", False, None)
    assert not isinstance(err, calibration.FailedOnGvsoc) and "ran on gvsoc" not in str(err)
    built = calibration.not_calibrated("the SDK build failed: cc1: error", True, None)
    assert isinstance(built, calibration.FailedOnGvsoc) and "did not build or start on gvsoc" in str(built)


def test_a_level_totals_code_count_whose_step_failed_on_gvsoc_is_not_told_to_make_gvsoc_available(
        tiny, tmp_path, monkeypatch):
    """The wide MLP's case: `--budget-total L2=...` counts the code from a calibration whose step failed on gvsoc."""
    def failing(*args, **kwargs):
        raise _platform_failure(tmp_path)

    monkeypatch.setattr(calibration, "calibrate", failing)
    with pytest.raises(calibration.FailedOnGvsoc) as found:
        calibration.step_calibration(tiny, "siracusa", setup_for("siracusa", SPLIT_HOME))
    said = str(found.value)
    assert said.startswith("a total of L2 counts the step's own code, which ckpt measures on gvsoc, and the graph "
                           "order's step ran on gvsoc and failed (the step did not finish on gvsoc (exit code 1): "
                           "/chip/cluster/pe0/lsu Invalid access"), said
    assert str(tmp_path / "run.gvsoc.log") in said and "make gvsoc available" not in said
    assert said.endswith("report this with the log, or hold a live budget there instead (--budget)"), said


def test_a_level_totals_code_count_without_gvsoc_is_told_to_make_it_available(tiny, monkeypatch):
    monkeypatch.setattr(calibration, "find_kit", lambda gvsoc=None: NoKit("no gvsoc at /nowhere"))
    with pytest.raises(CkptError) as found:
        calibration.step_calibration(tiny, "siracusa", setup_for("siracusa", "L2"))
    assert not isinstance(found.value, calibration.FailedOnGvsoc)
    assert "no gvsoc at /nowhere" in str(found.value) and "make gvsoc available" in str(found.value)


@pytest.mark.deeploy  # the model lowered by Deeploy's front end (seconds); stopped before any step is deployed
def test_a_level_total_solved_with_estimated_costs_says_before_calibrating_that_it_will_and_why(tiny, tmp_path,
                                                                                                  monkeypatch):
    """`--costs estimate` with `--budget-total L2=...`: the code count calibrates on gvsoc (minutes), which the user
    did not ask for, so one line says so, and the way out, before it starts. gvsoc is left on (the calibration
    would run on it), but the solve is stopped at the calibration's first line, before anything is deployed."""
    from ckpt.coderun.sources import NoSources, find_sources
    from ckpt.gvsoc.kit import find_kit
    monkeypatch.delenv("GVSOC_INSTALL")
    if isinstance(find_kit(), NoKit) or isinstance(find_sources(), NoSources):
        pytest.skip("no gvsoc or kernels here: no calibration would run")
    monkeypatch.setenv("CKPT_CACHE_DIR", str(tmp_path / "cache"))
    run = interrupted_at([sys.executable, "-m", "ckpt", "solve", str(tiny), "--target", "siracusa", "--home",
                          SPLIT_HOME, "--budget-total", "L2=2031616", "--costs", "estimate", "-o",
                          str(tmp_path / "s.json")], "CKPT_TEST_INTERRUPT_AT", "calibrating")
    assert run.returncode == 130, run.stderr
    lines = run.stderr.splitlines()
    notice = next(i for i, line in enumerate(lines) if "counts the step's own code, which ckpt measures by "
                  "calibrating" in line)
    assert "--costs estimate needs no gvsoc for the op costs" in lines[notice] and "(--budget)" in lines[notice]
    assert notice < next(i for i, line in enumerate(lines) if line.startswith("[ckpt] calibrating")), run.stderr


@pytest.mark.deeploy  # as above: stopped at the calibration's first line
@pytest.mark.parametrize(("options", "why", "skip"), [
    (["--persist-on-chip", "auto"], "--persist-on-chip auto fills L2 up to the step's own code",
     "; to skip it, drop --persist-on-chip"),
    ([], "a live budget on L2 leaves room for the step's own code", None)])
def test_a_split_home_solved_with_estimated_costs_says_before_calibrating_for_its_code(tiny, tmp_path, monkeypatch,
                                                                                     options, why, skip):
    """A split home under a live budget (and split+ beside it) counts the step's code on chip too, from the same
    calibration: with `--costs estimate` one line says so before it starts, and the way to skip it if any."""
    from ckpt.coderun.sources import NoSources, find_sources
    from ckpt.gvsoc.kit import find_kit
    monkeypatch.delenv("GVSOC_INSTALL", raising=False)
    if isinstance(find_kit(), NoKit) or isinstance(find_sources(), NoSources):
        pytest.skip("no gvsoc or kernels here: no calibration would run")
    monkeypatch.setenv("CKPT_CACHE_DIR", str(tmp_path / "cache"))
    run = interrupted_at([sys.executable, "-m", "ckpt", "solve", str(tiny), "--target", "siracusa", "--home",
                          SPLIT_HOME, "--budget", "0.9", "--costs", "estimate", *options, "-o",
                          str(tmp_path / "s.json")], "CKPT_TEST_INTERRUPT_AT", "calibrating")
    assert run.returncode == 130, run.stderr
    lines = run.stderr.splitlines()
    notice = next(i for i, line in enumerate(lines) if f"{why}, which ckpt measures by calibrating" in line)
    assert "--costs estimate needs no gvsoc for the op costs" in lines[notice]
    assert (skip in lines[notice]) if skip else ("to skip it" not in lines[notice])
    assert notice < next(i for i, line in enumerate(lines) if line.startswith("[ckpt] calibrating")), run.stderr


def test_no_notice_where_the_op_costs_calibrate_anyway_or_the_calibration_cannot_run(tiny, monkeypatch):
    setup = setup_for("siracusa", SPLIT_HOME)
    assert calibration.code_count_notice("gvsoc", tiny, "siracusa", setup) is None
    monkeypatch.setattr(calibration, "find_kit", lambda gvsoc=None: NoKit("no gvsoc at /nowhere"))
    assert calibration.code_count_notice("estimate", tiny, "siracusa", setup) is None
