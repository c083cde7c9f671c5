"""`ckpt ci check` and `ckpt ci update-baseline`: the committed CCT2_FT2 schedule, replayed as CI replays it.

The schedule (ci/cct2_ft2/seq.json, from `ckpt solve --target siracusa`) is replayed through Deeploy's
non-tiled and tiled flows (code generation included) and checked on the host, and its figures are compared
with ci/cct2_ft2/baseline.json (rules in ci.figures). The baseline changes only through update-baseline.

Which Errors apply: golden Errors are counted as Deeploy's device harness counts them (per output element,
|diff| > 1e-4 or NaN): CCT2_FT2 shows `Errors: 0 out of 198027`. The graph as written still carries a known
export defect (hostexec/graph_fixes.py): its two linear1 weights miss the golden by about 1.2e-5, far
inside the harness's tolerance, so it passes as Deeploy would pass it. CI also requires what a recompute
schedule can actually get wrong: every tensor the replayed order writes bit-identical to the graph order's.
"""
from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ckpt.ci.figures import CiFigures, Comparison, compare
from ckpt.coderun.sources import checkout_name
from ckpt.deeploy_identity import Flavour, deeploy_label
from ckpt.errors import CkptError
from ckpt.files import atomic_write, check_output_file
from ckpt.paths import NETWORK, shared_models
from ckpt.replay.run import ReplayOptions, replay_schedule
from ckpt.schedule_file import read_schedule

CI_DIR = Path(__file__).resolve().parent
MODEL = "cct2_ft2"
TARGET = "siracusa"


@dataclass(frozen=True)
class CiCase:
    """One committed schedule: its model folder under the shared models, its schedule and its baseline."""

    model: str = MODEL
    target: str = TARGET
    root: Path = CI_DIR                  # where <model>/seq.json and <model>/baseline.json live

    @property
    def schedule(self) -> Path:
        return self.root / self.model / "seq.json"

    @property
    def baseline(self) -> Path:
        return self.root / self.model / "baseline.json"


@dataclass
class CheckResult:
    case: CiCase
    model_dir: Path
    status: str                          # "pass", "fail", "skipped"
    reason: str = ""
    rows: list[Comparison] | None = None
    figures: CiFigures | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status != "fail"


def measure(case: CiCase, model_dir: Path, outdir: Path, progress=lambda msg: None) -> CiFigures:
    """Replay the committed schedule (Deeploy non-tiled + tiled with code, host check) and read its figures.

    Replayed with force so that a changed fingerprint is reported beside the other figures rather than
    stopping the replay; under 90% of entries matching still stops it (a CkptError naming the missing nodes). The
    code is built with the Deeploy checkout beside the models folder ($CKPT_DEEPLOY_ROOT first, as everywhere).
    """
    beside = model_dir.parent.parent / checkout_name()     # the checkout beside the models
    options = ReplayOptions(target=case.target, force=True, verify=True,
                            deeploy_root=beside if beside.is_dir() else None)
    result = replay_schedule(case.schedule, model_dir, outdir, options, progress)
    return CiFigures.from_report(result.report)


def check(case: CiCase = CiCase(), models: Path | None = None, outdir: Path | None = None,
          progress=lambda msg: None) -> CheckResult:
    """Replay and compare with the committed baseline; skipped (not failed) when the models are absent. A models
    folder named on purpose (`models`, or $CKPT_SHARED_MODELS) that does not exist is a mistake: refused."""
    start = time.perf_counter()
    named = models if models is not None else (Path(os.environ["CKPT_SHARED_MODELS"])
                                               if os.environ.get("CKPT_SHARED_MODELS") else None)
    if named is not None and not named.is_dir():
        raise CkptError(f"the shared models folder '{named}' does not exist",
                        "point CKPT_SHARED_MODELS (or --models) at the folder holding cct2_ft2, or unset it")
    model_dir = (models or shared_models()) / case.model
    if not (model_dir / NETWORK).is_file():
        return CheckResult(case, model_dir, "skipped", f"no shared models at {model_dir}")
    baseline = read_baseline(case)
    measured_with = baseline_deeploy(case)
    if measured_with != deeploy_label():
        raise CkptError(f"the CI baseline {case.baseline} holds the figures of Deeploy {measured_with}, and Deeploy "
                        f"{deeploy_label()} is installed, whose code and figures differ",
                        f"run `ckpt ci check` with Deeploy {measured_with} installed (a venv of its own), or measure "
                        "the installed one's baseline with `ckpt ci update-baseline`")
    try:
        figures = _measure_in(case, model_dir, outdir, progress)
    except CkptError as err:
        return CheckResult(case, model_dir, "fail", f"name drift or replay failure: {err}",
                           seconds=time.perf_counter() - start)
    rows = compare(baseline, figures)
    failed = [r.figure for r in rows if r.failed]
    return CheckResult(case, model_dir, "fail" if failed else "pass", ", ".join(failed), rows, figures,
                       time.perf_counter() - start)


def update_baseline(case: CiCase = CiCase(), models: Path | None = None, outdir: Path | None = None,
                    progress=lambda msg: None) -> CiFigures:
    """Replay and write the figures as the new baseline: the one way the baseline changes."""
    model_dir = (models or shared_models()) / case.model
    if not (model_dir / NETWORK).is_file():
        raise CkptError(f"no model at {model_dir}", "set CKPT_SHARED_MODELS or pass --models")
    check_output_file(str(case.baseline))          # a baseline ckpt cannot write is refused before the replay
    figures = _measure_in(case, model_dir, outdir, progress)
    if figures.replay_errors != 0:
        raise CkptError(f"the replay of {case.schedule} is not bit-identical to the graph order",
                        "a miswired schedule cannot be a baseline: fix the replay or the schedule first")
    unclean = {flow: text for flow, text in (figures.code or {}).items() if not text.startswith("0/") or "!=" in text}
    if unclean or not figures.code:
        raise CkptError(f"the generated code of {case.schedule} did not run clean ({unclean or 'no code run'})",
                        "a baseline needs its generated code run with 0 errors: set CKPT_DEEPLOY_ROOT to a "
                        "Deeploy checkout at the installed release's tag, or fix what failed")
    graph = read_schedule(case.schedule).graph
    doc = {"model": case.model, "target": case.target, "schedule": case.schedule.name,
           "solved_on": None if graph is None else asdict(graph), "figures": figures.as_dict(),
           "written_by": "ckpt ci update-baseline", "deeploy": deeploy_label()}
    atomic_write(case.baseline, json.dumps(doc, indent=2, sort_keys=True) + "\n")
    return figures


def read_baseline(case: CiCase) -> CiFigures:
    try:
        doc = json.loads(case.baseline.read_text())
        return CiFigures.from_dict(doc["figures"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CkptError(f"cannot read the CI baseline {case.baseline} ({type(exc).__name__}: {exc})",
                        "write it with `ckpt ci update-baseline`") from None


RELEASE_BASELINE = f"0.2.1 ({Flavour.RELEASE.value})"   # a baseline that names no Deeploy was the release's


def baseline_deeploy(case: CiCase) -> str:
    """The Deeploy the baseline's figures were measured with, as deeploy_label() names it."""
    try:
        return str(json.loads(case.baseline.read_text()).get("deeploy", RELEASE_BASELINE))
    except (OSError, ValueError, AttributeError):
        return RELEASE_BASELINE


def _measure_in(case: CiCase, model_dir: Path, outdir: Path | None, progress) -> CiFigures:
    if outdir is not None:
        return measure(case, model_dir, outdir, progress)
    with tempfile.TemporaryDirectory(prefix="ckpt-ci-") as tmp:
        return measure(case, model_dir, Path(tmp) / "replay", progress)
