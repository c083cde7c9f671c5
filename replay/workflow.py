"""`ckpt replay`: a schedule in; the graph and order Deeploy deploys, its code, and what it costs, out.

One replay plan (replay.plan) is made on the graph the schedule runs on (Deeploy's lowered graph, or the ONNX
as is for target none) and everything else is measured on it:
- ckpt's replayed peak: simulate.replay on the rewired graph (aliases carried over to the versions);
- Deeploy's figures: one Deeploy run per flow (non-tiled, then tiled with code), each with a ReplayScheduler
  doing the same rewiring on Deeploy's own graph, and checked to have run exactly the planned order;
- the host check (replay.verification) and, when a Deeploy harness is at hand, gvsoc (replay.gvsoc).
The folder holds rewired.onnx, order.json, report.json and code/; same inputs give the same bytes.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.replay.deeploy_setup import DeeploySetup
from ckpt.replay.gvsoc import NOT_SIMULATED, GvsocResult, HarnessSetup, run_harness
from ckpt.replay.matching import schedule_fingerprint
from ckpt.replay.onnx_graph import apply_to_model, rewired_aliases, rewired_scratch, view_of_model
from ckpt.replay.outputs import staged_dir, write_bytes, write_json
from ckpt.replay.plan import ReplayPlan, plan_replay
from ckpt.replay.scheduler import ReplayScheduler
from ckpt.schedule_file import read_schedule

TARGETS = ("none", "siracusa", "gap9")


@dataclass(frozen=True)
class ReplayOptions:
    target: str | None = None              # None: the target the schedule was solved for
    force: bool = False                    # replay despite another graph's fingerprint (never under 90% match)
    verify: bool = True
    deeploy_root: Path | None = None       # a Deeploy checkout with the training harness, for gvsoc
    record_time: bool = False              # put wall-clock seconds in report.json (then not reproducible)
    deeploy: DeeploySetup = field(default_factory=DeeploySetup)
    harness: HarnessSetup = field(default_factory=HarnessSetup)


@dataclass
class ReplayResult:
    outdir: Path
    plan: ReplayPlan
    report: dict
    verification: object | None            # replay.verification.VerifyReport when the host check ran
    gvsoc: GvsocResult

    @property
    def ok(self) -> bool:
        return self.report["ok"]


def default_outdir(schedule: Path) -> Path:
    return schedule.with_name(f"{schedule.stem}_replay")


def replay_schedule(schedule: str | Path, model: str | Path, outdir: str | Path | None = None,
                    options: ReplayOptions = ReplayOptions(), progress=lambda msg: None) -> ReplayResult:
    """Replay `schedule` on `model` for the target; write and return the report (see the module doc)."""
    from ckpt.solver.onnx_loader import load_graph, read_model
    from ckpt.solver.simulate import plain_sequence, replay

    schedule = Path(schedule)
    doc = read_schedule(schedule)
    target = options.target or (doc.get("graph") or {}).get("target") or "none"
    if target not in TARGETS:
        raise CkptError(f"unknown target '{target}'", f"use one of {', '.join(TARGETS)}")
    outdir = Path(outdir) if outdir is not None else default_outdir(schedule)
    original = read_model(model)
    lowered = None
    if target != "none":
        from ckpt.deeploy_bridge import lower

        progress(f"lowering {model} for {target} (cached after the first time)")
        lowered = lower(model, target)
    base = lowered.model if lowered else original
    view = view_of_model(base)
    plan = plan_replay(view, doc["seq"], fingerprint=schedule_fingerprint(doc), force=options.force)
    progress(f"plan: {plan.match.matched}/{plan.match.entries} entries matched, {plan.clones_kept} clones kept, "
             f"{plan.clones_pruned} pruned")
    rewired = apply_to_model(base, plan)
    if lowered:
        graph = load_graph(rewired, aliases=rewired_aliases(view, plan, lowered.aliases),
                           scratch=rewired_scratch(plan, getattr(lowered, "transients", {})))
    else:
        graph = load_graph(rewired)
    replayed = replay(graph, plain_sequence(graph, plan.order))
    flows = _deeploy_flows(base, doc, target, outdir, options, progress) if lowered else {}
    verification = _verify(model, original, base, lowered, plan, options, progress)
    gvsoc = _gvsoc(model, schedule, target, outdir, options, progress)
    report = _report(schedule, doc, model, target, lowered, view, plan, replayed, graph, flows, verification,
                     gvsoc, options)
    write_bytes(outdir / "rewired.onnx", rewired.SerializeToString())
    write_json(outdir / "order.json", {"order": plan.order,
                                       "clones": {e.name: e.source for e in plan.executions if e.clone}})
    write_json(outdir / "report.json", report)
    return ReplayResult(outdir, plan, report, verification.get("report"), gvsoc)


# --------------------------------------------------------------------------- the measurements


def _deeploy_flows(base, doc: dict, target: str, outdir: Path, options: ReplayOptions, progress) -> dict:
    """Deeploy's non-tiled and tiled figures for the replayed order; the tiled run writes code/."""
    from onnx_graphsurgeon.logger import G_LOGGER

    from ckpt.deeploy_bridge import deploy

    setup = options.deeploy
    flows = {}
    for tiled in (False, True):
        progress(f"Deeploy {'tiled' if tiled else 'non-tiled'} run with the replay as its scheduler")
        scheduler = ReplayScheduler.from_document(doc, force=options.force)
        with G_LOGGER.suppress(G_LOGGER.ERROR):      # clones share constants by name: gs warns, harmlessly
            if tiled:
                with staged_dir(outdir / "code") as code:
                    figures = deploy(base, scheduler, target, tiled=True, l1=setup.l1, l2=setup.l2,
                                     default_mem_level=setup.default_mem_level, n_cores=setup.n_cores,
                                     allocator=setup.allocator, code_dir=code)
            else:
                figures = deploy(base, scheduler, target, tiled=False, n_cores=setup.n_cores)
        if figures.order != scheduler.plan.order:
            raise CkptError(f"Deeploy ran {len(figures.order)} layers, not the {len(scheduler.plan.order)} "
                            "executions the replay planned", "report this: the replay and Deeploy disagree")
        flows["tiled" if tiled else "non_tiled"] = figures
    return flows


def _verify(model, original, base, lowered, plan: ReplayPlan, options: ReplayOptions, progress) -> dict:
    from ckpt.replay.verification import bias_gelu_hint, host_ready, step_data, verify_loaded
    from ckpt.workflow import model_path

    if not options.verify:
        return {"status": "skipped", "reason": "--no-verify"}
    folder = model_path(model).parent
    if not (folder / "inputs.npz").is_file():
        return {"status": "skipped", "reason": f"no inputs.npz in {folder}"}
    ready = host_ready(base)
    _, _, hint = bias_gelu_hint(ready)
    data = step_data(folder, original, lowered.io_names if lowered else None)
    report = verify_loaded(ready, data, plan, label=str(folder), target=lowered.target if lowered else "none",
                           hint=hint, progress=progress)
    return {"status": "bit-identical" if report.schedule.ok else "miswired", "report": report}


def _gvsoc(model, schedule: Path, target: str, outdir: Path, options: ReplayOptions, progress) -> GvsocResult:
    from ckpt.workflow import model_path

    if target == "none":
        return GvsocResult(NOT_SIMULATED, "target none has no device to simulate")
    progress("gvsoc: checking for Deeploy's training harness")
    return run_harness(options.deeploy_root, target, model_path(model).parent, schedule, outdir / "gvsoc.log",
                       options.harness, options.deeploy)


# --------------------------------------------------------------------------- report.json


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _report(schedule: Path, doc: dict, model, target: str, lowered, view, plan: ReplayPlan, replayed, graph,
            flows: dict, verification: dict, gvsoc: GvsocResult, options: ReplayOptions) -> dict:
    from ckpt.workflow import model_path

    predicted = doc.get("predicted") or {}
    solved_on = doc.get("graph") or {}
    model_sha = _sha256(model_path(model))
    non_tiled, tiled = flows.get("non_tiled"), flows.get("tiled")
    memory = {
        "activation_peak_bytes": {
            "predicted": predicted.get("peak_bytes"),
            "replayed": replayed.peak_bytes,
            "deeploy_non_tiled": sum(non_tiled.worst_case.values()) if non_tiled else None,
            "deeploy_tiled_arenas": dict(tiled.arena) if tiled else None,
        },
        "persistent_bytes": {
            "predicted": predicted.get("persistent_bytes"),
            "replayed": graph.persistent_bytes,
            "deeploy_non_tiled_static": sum(non_tiled.static.values()) if non_tiled else None,
            "deeploy_tiled_static": dict(tiled.static) if tiled else None,
        },
        "baseline_peak_bytes": predicted.get("baseline_peak_bytes"),
        "peak_index": replayed.peak_index,
        "peak_after": plan.order[replayed.peak_index] if plan.order else None,
    }
    check = verification.get("report")
    ok = verification.get("status") != "miswired" and not (gvsoc.status == "measured" and gvsoc.errors)
    report = {
        "ok": ok,
        "schedule": {"path": str(schedule), "sha256": _sha256(schedule), **plan.match.as_dict(),
                     "fingerprint": plan.fingerprint.as_dict(), "solved_on": solved_on},
        "model": {"path": str(model), "sha256": model_sha, "target": target,
                  "same_as_solved": (solved_on.get("model_sha256") == model_sha) if solved_on else None,
                  "deeploy_version": lowered.deeploy_version if lowered else None, "nodes": len(view.live)},
        "replay": {**plan.counts(), "clones": [e.name for e in plan.executions if e.clone],
                   "pruned": [e.name for e in plan.pruned], "unscheduled": list(plan.unscheduled),
                   "stale": list(plan.stale)},
        "memory": memory,
        "deeploy": {name: _figures(f, options) for name, f in flows.items()} or None,
        "verification": ({"status": verification["status"], **check.as_dict()} if check else verification),
        "gvsoc": gvsoc.as_dict(),
        "files": {"rewired": "rewired.onnx", "order": "order.json", "code": "code" if tiled else None,
                  "gvsoc_log": gvsoc.log},
    }
    if options.record_time and check is not None:
        report["verification"]["seconds"] = round(check.seconds, 3)
    return report


def _figures(figures, options: ReplayOptions) -> dict:
    found = {"worst_case": figures.worst_case, "dynamic_peak": figures.dynamic_peak, "arena": figures.arena,
             "static": figures.static, "allocator": figures.allocator, "l1": figures.l1, "l2": figures.l2,
             "default_mem_level": figures.default_mem_level, "n_cores": figures.n_cores,
             "layers": len(figures.order), "code_files": sorted(figures.code_files),
             "home_live": dict(getattr(figures, "home_live", {}) or {})}
    if options.record_time:
        found["seconds"] = {k: round(v, 3) for k, v in figures.timings.as_dict().items()}
    return found


# --------------------------------------------------------------------------- the human summary


def summary_lines(result: ReplayResult) -> list[str]:
    r = result.report
    sched, rep, mem = r["schedule"], r["replay"], r["memory"]
    peak, persistent = mem["activation_peak_bytes"], mem["persistent_bytes"]
    lines = [f"replayed {sched['path']} on {r['model']['path']} (target {r['model']['target']}): "
             f"{sched['matched']}/{sched['entries']} entries matched ({100 * sched['rate']:.1f}%), "
             f"fingerprint {sched['fingerprint']['status']}",
             f"{rep['executions']} executions: {rep['recomputes']} recomputes, {rep['clones_kept']} clones kept, "
             f"{rep['clones_pruned']} clones pruned, {rep['originals_pruned']} originals pruned, "
             f"{rep['unscheduled_nodes_placed']} unnamed nodes placed",
             f"activation peak: predicted {_b(peak['predicted'])} | ckpt replayed {_b(peak['replayed'])}"
             + (f" | Deeploy non-tiled {_b(peak['deeploy_non_tiled'])}" if peak["deeploy_non_tiled"] else ""),
             f"persistent: predicted {_b(persistent['predicted'])} | replayed {_b(persistent['replayed'])}"
             + (f" | Deeploy static {_b(persistent['deeploy_non_tiled_static'])}"
                if persistent["deeploy_non_tiled_static"] else "")]
    if peak["deeploy_tiled_arenas"]:
        tiled = r["deeploy"]["tiled"]
        arenas = ", ".join(f"{k} {_b(v)}" for k, v in sorted(peak["deeploy_tiled_arenas"].items()))
        lines.append(f"Deeploy tiled ({tiled['allocator']}, L1 {tiled['l1']}, L2 {tiled['l2']}): arenas {arenas}")
    if result.verification is not None:
        check = result.verification
        lines.append(check.schedule.line())
        if check.golden is not None:
            base = check.baseline_golden
            lines.append(f"golden: Errors: {check.golden.errors} out of {check.golden.compared}"
                         f" (graph order: {base.errors} out of {base.compared})")
        if check.hint:
            lines.append(check.hint)
    else:
        lines.append(f"verify: skipped ({r['verification']['reason']})")
    lines.append(result.gvsoc.line())
    files = ["rewired.onnx", "order.json", "report.json"] + (["code/"] if r["files"]["code"] else [])
    lines.append(f"wrote {result.outdir}/: {', '.join(files)}")
    return lines


def _b(n) -> str:
    return "n/a" if n is None else f"{n:,} B"
