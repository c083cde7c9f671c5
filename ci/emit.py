"""`ckpt sweep --emit-ci DIR`: the files a Deeploy repository needs to run a sweep's best schedule in its CI.

DIR mirrors a Deeploy checkout, so adopting it is a copy:
  DeeployTest/Tests/<test>/recompute_<budget>.json    the schedule, beside the model it belongs to
  DeeployTest/test_<platform>_tiled_recompute_config.py  one training_recompute_schedule per model
  DeeployTest/test_<platform>_training_recompute.py    the pytest cases (markers: training, l3, recompute)
  .github/workflows/ci-platform-<platform>-tiled-recompute.yml  their own job, beside the singlebuffer one
  ckpt_recompute.json                                  what was emitted, per platform and model (merged
                                                       across sweeps, so several models share one config)
Only a verified point is emitted: the lowest replayed peak among points whose replay is bit-identical to the
graph order, ties to the cheaper one.
"""
from __future__ import annotations

import json
from pathlib import Path

from ckpt.budgets.store import SweepStore
from ckpt.budgets.sweep import SweepResult
from ckpt.ci.deeploy_files import cases_module, config_module, config_name, workflow
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, PLATFORM_NAMES
from ckpt.errors import CkptError
from ckpt.files import atomic_write
from ckpt.pipeline.row import BASELINE, PointRow
from ckpt.replay.folder import REPORT
from ckpt.replay.report import ReplayReport

MANIFEST = "ckpt_recompute.json"
WORKFLOW = Path(__file__).resolve().parent / "github" / "recompute.yml"


def check_emit_target(target: str) -> None:
    """Refuse before any work: only a Deeploy target's schedules name the nodes Deeploy schedules."""
    if target not in PLATFORM_NAMES:
        raise CkptError(f"--emit-ci needs a Deeploy target, not '{target}'",
                        f"use --target {' or --target '.join(PLATFORM_NAMES)}")


def _fixed_files(outdir: Path, target: str) -> list[Path]:
    """The files of DIR whose names do not depend on the model: the config, the cases and the workflow."""
    return [outdir / "DeeployTest" / f"test_{config_name(target)}.py",
            outdir / "DeeployTest" / f"test_{target}_training_recompute.py",
            outdir / ".github" / "workflows" / f"ci-platform-{target}-tiled-recompute.yml"]


ENTRY_FIELDS = {"schedule": str, "l1": list, "l2": int, "cores": int, "comment": list}   # what the config reads


def _is_entry(entry: object) -> bool:
    """One model's record as emit_ci_configs writes it."""
    return isinstance(entry, dict) and all(isinstance(entry.get(k), kind) for k, kind in ENTRY_FIELDS.items())


def _manifest(outdir: Path) -> dict:
    """DIR's ckpt_recompute.json ({} when absent); one-line CkptError when it is not what ckpt writes."""
    path = outdir / MANIFEST
    if not path.exists():
        return {}
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        doc = exc
    if not isinstance(doc, dict) or not all(isinstance(v, dict) and all(_is_entry(e) for e in v.values())
                                            for v in doc.values()):
        raise CkptError(f"'{path}' is not the record of what ckpt emitted",
                        "emit into a new folder, or remove that file")
    return doc


def check_emit_folder(outdir: Path, target: str) -> None:
    """Refuse, before any work, a --emit-ci folder whose record is not ckpt's, or that holds the files ckpt would
    write there without a record of ckpt having written them (a Deeploy checkout's own, say)."""
    if _manifest(outdir):
        return
    present = [str(p.relative_to(outdir)) for p in _fixed_files(outdir, target) if p.exists()]
    if present:
        raise CkptError(f"'{outdir}' holds {', '.join(present)} but no {MANIFEST}: ckpt did not write them",
                        "emit into a new folder and copy it over the checkout (cp -r DIR/. <Deeploy>/)")


def best_point(rows: list[PointRow]) -> PointRow:
    verified = [r for r in rows if r.verified and r.status != BASELINE and r.recomputes]
    if not verified:
        raise CkptError("no verified schedule with recomputes in this sweep to emit for CI",
                        "raise the budgets or --time-limit, and look at the reasons in the sweep table")
    return min(verified, key=lambda r: (r.replayed_peak, r.recompute_cost))


def default_test_name(model: str | Path) -> str:
    path = Path(model)
    return f"Models/Training/{(path if path.is_dir() else path.parent).name}"


def emit_ci_configs(result: SweepResult, model: str | Path, target: str, outdir: Path, test_name: str | None = None
                    ) -> list[Path]:
    """Write (or update) DIR for the sweep `result`; returns the files written."""
    check_emit_target(target)
    point = best_point(result.rows)
    test_name = test_name or default_test_name(model)
    baseline = next(r for r in result.rows if r.status == BASELINE)
    folder = SweepStore(result.outdir).point(point.label)
    schedule_name = f"recompute_{point.label}.json"
    schedule_path = outdir / "DeeployTest" / "Tests" / test_name / schedule_name
    atomic_write(schedule_path, folder.schedule.read_text())
    report = ReplayReport.read(folder.replay / REPORT)
    setup = report.deeploy["tiled"].setup if report.deeploy and "tiled" in report.deeploy else DEFAULT_SETUP
    manifest = _manifest(outdir)
    entries = manifest.setdefault(target, {})
    sizes = setup.as_dict()          # create_test_config's l1 and l2: the setup's levels by Deeploy's names
    entries[test_name] = {
        "schedule": schedule_name, "l1": [sizes["l1"]], "l2": sizes["l2"],
        "cores": setup.n_cores, "budget": point.label, "graph": report.schedule.solved_on,
        "comment": _comment(point, baseline)}
    written = [schedule_path]
    config, cases, flow = _fixed_files(outdir, target)
    files = {
        outdir / MANIFEST: json.dumps(manifest, indent=2, sort_keys=True) + "\n",
        config: config_module(target, entries, max(e["cores"] for e in entries.values())),
        cases: cases_module(target),
        flow: workflow(WORKFLOW.read_text(), target),
    }
    for path, text in files.items():
        atomic_write(path, text)
        written.append(path)
    return written


def _arena(row: PointRow) -> int | None:
    return row.home_figures.arena if row.home_figures else None


def _comment(point: PointRow, baseline: PointRow) -> list[str]:
    return [f"ckpt sweep point {point.label} (budget {point.budget_bytes} B): replayed peak {point.replayed_peak} B "
            f"vs {baseline.replayed_peak} B baseline,",
            f"first-fit heap (non-tiled) {point.heap} B vs {baseline.heap} B, tiled {point.home} arena "
            f"{_arena(point)} B vs {_arena(baseline)} B,",
            f"{point.recomputes} recomputes (+{point.cost_increase_pct:.2f}% cycles by ckpt's cost model), "
            f"host check {point.check}, Errors {point.errors} (graph order {baseline.errors}),",
            "cycles on gvsoc: " + (f"{point.cycles} vs {baseline.cycles} baseline." if point.cycles is not None
                                   else "not simulated.")]
