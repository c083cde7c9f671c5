"""A replay's report as the lines `ckpt replay` prints: matching, memory per figure, checks, the code's runs."""
from __future__ import annotations

from ckpt.replay.folder import ORDER, REPORT, REWIRED
from ckpt.replay.report import CodeRunRecord, CodeStatus, SimStatus
from ckpt.replay.run import ReplayResult


def summary_lines(result: ReplayResult) -> list[str]:
    r = result.report
    sched, rep, mem = r.schedule, r.replay, r.memory
    made = f", Deeploy {r.model.deeploy_version}" if r.model.deeploy_version and r.model.target != "none" else ""
    lines = [f"replayed {sched.path} on {r.model.path} (target {r.model.target}{made}): "
             f"{sched.matched}/{sched.entries} entries matched ({100 * sched.rate:.1f}%), "
             f"fingerprint {sched.fingerprint.status}",
             f"{rep.executions} executions: {rep.recomputes} recomputes, {rep.clones_kept} clones kept, "
             f"{rep.clones_pruned} clones pruned, {rep.originals_pruned} originals pruned, "
             f"{rep.unscheduled_nodes_placed} unnamed nodes placed, {rep.stale_nodes_dropped} stale nodes dropped",
             f"activation peak: predicted {_b(mem.predicted_peak)} | ckpt replayed {_b(mem.replayed_peak)} | "
             f"first-fit heap {_b(mem.heap)}"
             + (f" | Deeploy non-tiled counter {_b(mem.deeploy_non_tiled)}" if mem.deeploy_non_tiled else ""),
             f"persistent: predicted {_b(mem.persistent_predicted)} | replayed {_b(mem.persistent_replayed)}"
             + (f" | Deeploy static {_b(mem.deeploy_non_tiled_static)}" if mem.deeploy_non_tiled_static else "")]
    lines.extend(w.line for w in r.model.deeploy_workarounds)
    if mem.arena is not None:
        lines.append(_arena_line(mem, bool(r.deeploy)))
    if mem.levels and r.deeploy:
        setup = r.deeploy["tiled"].setup
        sizes = ", ".join(f"{name} {size}" for name, size in reversed(setup.levels[1:]))   # the chip's levels
        home = setup.default_mem_level if setup.home == setup.default_mem_level else \
            f"{setup.home}: {setup.persistent_level} for what persists, {setup.default_mem_level} for the rest" \
            + (f", {len(setup.on_chip_persistent)} persistent tensors brought to {setup.default_mem_level} (split+)"
               if setup.persist_on_chip else "") \
            + (f", {len(setup.parked)} activations parked in {setup.persistent_level}" if setup.parked else "")
        lines.append(f"Deeploy tiled ({setup.allocator} allocator, {sizes}, home {home}), per level "
                     "static (Deeploy's count of its constants there, the shape "
                     "constants its code never declares included) + arena = total:")
        for level, fig in sorted(mem.levels.items()):
            extra = f" (ckpt predicted {_b(fig.predicted_arena)})" if fig.predicted_arena is not None else ""
            if fig.home_arena is not None:
                tiles = (fig.arena or 0) - fig.home_arena
                extra = f"; its whole-network blocks {_b(fig.home_arena)}{extra}" + \
                    (f", the layers' tiles above them {_b(tiles)}" if tiles > 0 else "")
            lines.append(f"  {level}: {_b(fig.static)} + {_b(fig.arena)} = {_b(fig.total)}; live max of its "
                         f"blocks {_b(fig.live_max)}{extra}")
        grown = [g for figures in (r.deeploy, r.deeploy_optimizer or {}) if "tiled" in figures
                 for g in figures["tiled"].grown]
        if grown:
            most = max(grown, key=lambda g: g.moved - g.counted)
            lines.append(f"  {len(grown)} blocks laid out larger than Deeploy's tiler counts them (the code moves "
                         f"more into them): +{sum(g.moved - g.counted for g in grown):,} B in all, the most "
                         f"{most.line}; report.json lists them")
    check = result.verification
    if check is not None:
        found = check.findings
        lines.append(found.schedule.line())
        if found.golden is not None:
            base = found.baseline_golden
            lines.append(f"golden (device harness rule): {found.golden.line}"
                         + (f" (graph order: {base.line})" if base is not None else ""))
        if found.hint:
            lines.append(found.hint)
    else:
        lines.append(f"verify: skipped ({r.verification.reason})")
    lines.extend(_code_run_line(run) for run in r.code_runs.values())
    if r.budget is not None:
        b = r.budget
        verdict = "not checked: this replay does not measure it" if b.replayed is None else \
            "fits" if b.fits else f"OVER BUDGET by {b.replayed - b.limit:,} B"
        lines.append(f"budget: {b.checked} replayed {_b(b.replayed)} against the schedule's {_b(b.limit)}: {verdict}")
    lines.extend(run.line for run in r.gvsoc.values())
    files = [REWIRED, ORDER, REPORT] + [f"{r.files[k]}/" for k in ("code", "code_non_tiled") if r.files.get(k)]
    lines.append(f"wrote {result.outdir}/: {', '.join(files)}")
    return lines


def failure_line(result: ReplayResult) -> str | None:
    """Why a replay failed its check, in one line for the end of its output (None when it passed)."""
    r = result.report
    if r.ok:
        return None
    why = []
    if r.verification is not None and r.verification.status == "miswired":
        why.append("the replayed order does not compute what the graph order computes (miswired)")
    for run in r.code_runs.values():
        flow = f"the generated {run.flow.replace('_', '-')} code"
        if run.status == "failed":
            why.append(f"{flow} failed ({run.reason})")
        elif run.status == "ran" and run.golden is not None and run.golden.errors:
            why.append(f"{flow} erred ({run.golden.line})")
        elif run.status == "ran" and run.graph_order == "differs":
            why.append(f"{flow} computed other numbers than the graph order's code ({', '.join(run.differing)})")
        elif run.status == "ran" and run.trains is False:
            why.append(f"{flow} did not train: its steps differ from the host's")
    for sim in r.gvsoc.values():
        if sim.status is SimStatus.FAILED or sim.errors:
            why.append(sim.line)
    if not r.memory.arena_fits:
        why.append(f"the non-tiled code's arena {_b(r.memory.arena_code)} is over ckpt's {_b(r.memory.arena)}")
    if r.budget is not None and not r.budget.fits:
        why.append(f"replayed {r.budget.checked} {_b(r.budget.replayed)} is over the schedule's {_b(r.budget.limit)}")
    return (f"error: the replay failed its check: {'; '.join(why) or 'see report.json'}: the lines above and "
            f"{result.outdir / REPORT} say more")


def _arena_line(mem, deployed: bool) -> str:
    """The non-tiled flow's arena: ckpt's layout (its floor and excess) and what the generated code allocates."""
    excess = mem.arena - mem.arena_live_max
    line = (f"non-tiled arena (ckpt's layout): {_b(mem.arena)}, "
            + ("the live maximum" if not excess else f"{excess:,} B over the live maximum {_b(mem.arena_live_max)}"))
    if deployed:
        line += (f" | the generated code allocates {_b(mem.arena_code)}" if mem.arena_code is not None
                 else " | the generated code mallocs each buffer on the L2 heap (--allocator heap)")
    return line


def _code_run_line(run: CodeRunRecord) -> str:
    """The generated code's run, as the device harness would print it, and what it was compared with."""
    head = f"generated {run.flow.replace('_', '-')} code on this host: "
    if run.status is not CodeStatus.RAN:
        return head + f"{run.status.value} ({run.reason})"
    parts = [run.golden.line if run.golden else "ran (no outputs.npz to compare)"]
    if run.golden and run.golden.errors_by_tensor:
        parts.append("errors in " + ", ".join(f"{k} {v}" for k, v in run.golden.errors_by_tensor.items()))
    parts.append(f"graph order's code: {run.graph_order}" + (f" ({', '.join(run.differing)})" if run.differing else ""))
    if run.closeness is not None and run.closeness.line:
        parts.append("WARNING: " + run.closeness.line)
    if run.host is not None:
        where = f" at {run.host.worst.tensor}{run.host.worst.index}" if run.host.worst and run.host.max_abs_diff else ""
        parts.append(f"vs host executor: max |diff| {run.host.max_abs_diff:.3g}{where}")
    levels = run.stats.levels if run.stats else {}
    level = max(levels, key=lambda name: levels[name].peak, default=None)
    if level:
        parts.append(f"{level} allocated {levels[level].peak:,} B")
    if run.steps:
        errors = ", ".join(str(step.errors) for step in run.steps)
        verdict = "it trains" if run.trains else "STEPS DIFFER: it does not train as the host's steps do"
        parts.append(f"{len(run.steps)} steps in a row, Errors per step against the host's step from the code's "
                     f"weights: {errors}: {verdict}")
    return head + "; ".join(parts)


def _b(n: int | None) -> str:
    return "n/a" if n is None else f"{n:,} B"
