"""A small example taken through gvsoc as a user would: generated, calibrated on gvsoc, solved at 0.8 and replayed,
each through the console script. Shared by the gvsoc test modules that need such a step."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from cli_support import ckpt

from ckpt.coderun.sources import NoSources, find_sources
from ckpt.gvsoc.kit import NoKit, find_kit


@dataclass(frozen=True)
class GvsocExample:
    work: Path
    kit: object
    sources: object
    calibrated: subprocess.CompletedProcess
    replayed: subprocess.CompletedProcess


def gvsoc_example(work: Path, example: list[str], solve: list[str] = (), replay: list[str] = ()) -> GvsocExample:
    """`ckpt example cct EXAMPLE -o model`, calibrated to costs.json, solved for Siracusa at 0.8 to seq.json and
    replayed to replay/; skipped, saying why, without gvsoc, its compiler or Deeploy's kernels."""
    kit, sources = find_kit(), find_sources()
    if isinstance(kit, NoKit) or isinstance(sources, NoSources):
        pytest.skip((kit if isinstance(kit, NoKit) else sources).reason)
    assert ckpt("example", "cct", *example, "-o", "model", cwd=work).returncode == 0
    calibrated = ckpt("calibrate", "model", "-o", "costs.json", cwd=work)
    assert calibrated.returncode == 0, calibrated.stderr
    solved = ckpt("solve", "--costs", "estimate", "model", "--target", "siracusa", "--budget", "0.8", *solve, "-o",
                  "seq.json",
                  "--time-limit", "60", cwd=work)
    assert solved.returncode == 0, solved.stderr
    replayed = ckpt("replay", "seq.json", "--model", "model", "-o", "replay", *replay, cwd=work)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    return GvsocExample(work, kit, sources, calibrated, replayed)
