"""The CI check's rules and committed files (the replay itself runs in .ci/run as `ckpt ci check`)."""
from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import replace

import pytest
from cli_support import ckpt_here
from conftest import SHARED_MODELS
from replay_support import needs_models

from ckpt.ci.check import CiCase, baseline_deeploy, check, read_baseline
from ckpt.ci.figures import CiFigures, compare
from ckpt.errors import CkptError
from ckpt.replay.report import LevelMemory
from ckpt.schedule_file import read_schedule, write_schedule

LEVELS = {"L1": LevelMemory(127_000, None, 127_000, 1_819), "L2": LevelMemory(127_000, None, 127_000, 1_459),
          "L3": LevelMemory(900_000, 900_000, 900_000, 1_427_676)}
BASE = CiFigures(entries=200, matched=200, fingerprint="a" * 64, predicted_peak=600_000, replayed_peak=600_000,
                 deeploy_nontiled=600_300, levels=LEVELS, recomputes=20, clones_kept=20, replay_errors=0,
                 golden_errors=0, golden_compared=198_027, heap=640_000,
                 code={"tiled": "0/198027 = graph order", "non_tiled": "0/198027 = graph order"},
                 code_home_allocated=3_700_000)


def failing(now: CiFigures) -> list[str]:
    return [row.figure for row in compare(BASE, now) if row.failed]


def test_the_same_figures_pass_and_each_rule_fails_on_its_own():
    assert failing(BASE) == []
    assert failing(replace(BASE, replayed_peak=606_000)) == []                       # +1% is allowed
    assert failing(replace(BASE, replayed_peak=606_001)) == ["replayed peak B"]
    assert failing(replace(BASE, heap=646_401)) == ["first-fit heap B"]
    l3 = lambda arena, predicted: replace(BASE, levels={**LEVELS, "L3": LevelMemory(arena, predicted, arena, 1)})  # noqa
    assert failing(l3(909_001, 909_001)) == ["Deeploy tiled L3 B"]
    assert failing(l3(899_996, 900_000)) == ["ckpt's predicted L3 arena B"]       # must be the code's
    assert failing(replace(BASE, levels={**LEVELS, "L2": LevelMemory(130_000, None, 130_000, 1)})) == [
        "Deeploy tiled L2 B"]
    assert failing(replace(BASE, matched=179)) == ["entries matched"]                # 89.5% < 90%
    assert failing(replace(BASE, fingerprint="b" * 64)) == ["graph fingerprint"]
    assert failing(replace(BASE, replay_errors=1)) == ["Errors (replay vs graph order)"]
    assert failing(replace(BASE, replay_errors=-1)) == ["Errors (replay vs graph order)"]   # not verified
    assert failing(replace(BASE, golden_errors=1)) == ["golden Errors"]
    assert failing(replace(BASE, replayed_peak=500_000)) == []                        # better is fine
    code = lambda **flows: replace(BASE, code={**BASE.code, **flows})  # noqa: E731
    assert failing(code(tiled="11/198027 = graph order")) == ["generated tiled code: Errors"]
    assert failing(code(non_tiled="0/198027 != graph order")) == ["generated non-tiled code: Errors"]
    assert failing(code(tiled="failed: the code faulted: mchan: ...")) == ["generated tiled code: Errors"]
    assert failing(code(tiled="not run: no Deeploy v0.2.1 checkout")) == ["generated tiled code: Errors"]
    assert failing(replace(BASE, code={"tiled": BASE.code["tiled"]})) == ["generated non-tiled code: Errors"]
    assert failing(replace(BASE, code_home_allocated=3_800_000)) == []                  # shown, not a rule


def test_changed_counts_are_shown_but_do_not_fail():
    rows = {row.figure: row for row in compare(BASE, replace(BASE, recomputes=21, clones_kept=19))}
    assert rows["recomputes"].verdict == rows["clones kept"].verdict == "changed"
    assert not any(row.failed for row in rows.values())


def test_committed_baseline_belongs_to_the_committed_schedule():
    case = CiCase()
    doc, baseline = read_schedule(case.schedule), read_baseline(case)
    assert doc.graph.target == "siracusa" and doc.graph.names_sha256 == baseline.fingerprint
    assert baseline.recomputes == doc.predicted.recomputes > 0
    assert baseline.predicted_peak == doc.predicted.peak_bytes and baseline.replay_errors == 0
    # the device harness's count: the known bias-GELU miss (about 1.2e-5) is inside its 1e-4 tolerance
    assert baseline.golden_errors == 0 and baseline.golden_compared == 198_027
    home, figures = baseline.home
    assert home == "L3" and figures.predicted_arena == figures.arena and baseline.heap >= baseline.replayed_peak
    written = json.loads(case.baseline.read_text())
    assert written["written_by"] == "ckpt ci update-baseline"


def test_ci_check_without_shared_models_says_so_and_passes(tmp_path):
    run = ckpt_here("ci", "check", "--models", str(tmp_path))
    assert run.returncode == 0, run.stderr
    assert f"ci: skipped: no shared models at {tmp_path / 'cct2_ft2'}" in run.stdout


@pytest.mark.deeploy
@needs_models
def test_a_schedule_naming_other_nodes_fails_as_name_drift(lowering_cache, tmp_path):
    """A copy of the committed case whose schedule names a fifth of its nodes differently (lowering renamed)."""
    shutil.copytree(CiCase().schedule.parent, tmp_path / "cct2_ft2")
    case = CiCase(root=tmp_path)
    doc = read_schedule(case.schedule)
    renamed = {name for i, (name, flag) in enumerate(doc.seq) if i % 5 == 0 and not flag}
    doc = replace(doc, seq=tuple((f"{name}_renamed" if name in renamed else name, flag) for name, flag in doc.seq))
    write_schedule(case.schedule, doc)
    result = check(case, SHARED_MODELS)
    assert result.status == "fail" and not result.ok and result.rows is None
    matched = re.match(r"name drift or replay failure: schedule matches only ([0-9.]+)% of", result.reason)
    assert matched and 75 < float(matched.group(1)) < 90 and "needs 90%" in result.reason


@needs_models
def test_a_baseline_of_another_deeploy_is_refused_before_any_replay(tmp_path):
    """The committed figures are one Deeploy's: under another (the training branch installed in place of the
    release) every figure differs and the check failed after minutes with no way out; it is one line, at once."""
    shutil.copytree(CiCase().schedule.parent, tmp_path / "cct2_ft2")
    case = CiCase(root=tmp_path)
    doc = json.loads(case.baseline.read_text())
    case.baseline.write_text(json.dumps({**doc, "deeploy": "0.0.1 (a fork)"}))
    start = time.perf_counter()
    with pytest.raises(CkptError) as refused:
        check(case, SHARED_MODELS)
    assert time.perf_counter() - start < 5 and "holds the figures of Deeploy 0.0.1 (a fork)" in refused.value.problem
    assert "ckpt ci update-baseline" in refused.value.way_out and "\n" not in str(refused.value)


def test_the_committed_baseline_is_the_releases():
    assert baseline_deeploy(CiCase()) == "0.2.1 (release)"
