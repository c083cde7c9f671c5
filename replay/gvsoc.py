"""A replay's generated steps on gvsoc's Siracusa model: the device's Errors and cycles (ckpt.gvsoc).

Each flow's code that ran on this host is built for Siracusa with Deeploy's own harness and run on gvsoc: the
tiled flow (what is deployed), and, asked for (replay.run: `simulate_non_tiled`), the non-tiled flow where its L2
heap fits the chip. The harness compares the
step's outputs with outputs.npz, or, without one, with the host executor's step. The host run comes first for a
reason: it tells how much L2 the code allocates, so a step that cannot fit is said so before anything is built.
Per-layer cycles come back keyed by the deployed graph's node names. When gvsoc, its compiler or the kernel
checkout is missing, nothing runs and the record says why: a cycle count is only ever one gvsoc printed.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np

from ckpt.coderun.sources import KernelSources, NoSources
from ckpt.files import atomic_write
from ckpt.gvsoc.kit import GvsocKit, NoKit
from ckpt.gvsoc.probes import c_name
from ckpt.gvsoc.run import GvsocRun, NotSimulated, simulate_step
from ckpt.replay.report import CodeRunRecord, CodeStatus, GvsocRecord, SimStatus
from ckpt.targets import TARGET_TABLE, simulation_gap


def not_simulated(flow: str, reason: str) -> GvsocRecord:
    return GvsocRecord(flow, SimStatus.NOT_SIMULATED, reason)


def node_cycles(layers: Mapping[str, int], nodes: list[str]) -> dict[str, int]:
    """Per-layer cycles keyed by the deployed graph's node names (in `nodes` order); a layer no node spells is
    kept under Deeploy's name."""
    by_c_name = {c_name(node): node for node in nodes}
    found = {by_c_name[layer]: cycles for layer, cycles in layers.items() if layer in by_c_name}
    ordered = {node: found[node] for node in nodes if node in found}
    ordered.update({layer: cycles for layer, cycles in layers.items() if layer not in by_c_name})
    return ordered


def simulate_flow(flow: str, code_dir: Path, code_run: CodeRunRecord | None, target: str,
                  feeds: Mapping[str, np.ndarray], golden: Mapping[str, np.ndarray] | None,
                  host_outputs: Mapping[str, np.ndarray], nodes: list[str], sources: KernelSources | NoSources,
                  kit: GvsocKit | NoKit, log: Path, record_time: bool, progress: Callable[[str], None],
                  timeout: float | None = None, draws: int = 1) -> GvsocRecord:
    """One flow's step on gvsoc, or why not (see the module doc); gvsoc's output is kept at `log`, whether the run
    succeeded or failed (it says why). `timeout`: seconds before a run is taken as hung; `draws`: runs from as many
    starting states, their median kept (gvsoc.draws)."""
    if simulation_gap(target):
        return not_simulated(flow, simulation_gap(target))
    if isinstance(kit, NoKit):
        return not_simulated(flow, kit.reason)
    if isinstance(sources, NoSources):
        return not_simulated(flow, sources.reason)
    if code_run is None or code_run.status is not CodeStatus.RAN:
        why = code_run.reason if code_run is not None else "no generated code"
        return not_simulated(flow, f"the code did not run on this host ({why})")
    expected, against = (golden, "outputs.npz") if golden else (host_outputs, "the host executor's step")
    progress(f"gvsoc: building the {flow.replace('_', '-')} step for Siracusa and running it on the model")
    log.parent.mkdir(parents=True, exist_ok=True)
    heap_peak = _on_chip_peak(code_run, TARGET_TABLE[target].on_chip)
    outcome = simulate_step(code_dir, feeds, expected, sources, kit, heap_peak, timeout=timeout, draws=draws)
    if isinstance(outcome, NotSimulated):
        status = SimStatus.FAILED if outcome.failed else SimStatus.NOT_SIMULATED
        ran = outcome.log is not None                # gvsoc ran: its output is kept, even when it printed nothing
        if ran:
            atomic_write(log, outcome.log)
        return GvsocRecord(flow, status, outcome.reason + (f"; gvsoc's output is in {log.name}" if ran else ""),
                           on_chip=outcome.on_chip, log=log.name if ran else None)
    return _measured(flow, outcome, against, nodes, log, record_time)


def _on_chip_peak(code_run: CodeRunRecord, level: str) -> int:
    """The most the code kept allocated at once in the chip's on-chip `level` when it ran on this host."""
    use = code_run.stats.levels.get(level) if code_run.stats else None
    return use.peak if use is not None else 0


def _measured(flow: str, run: GvsocRun, against: str, nodes: list[str], log: Path, record_time: bool
              ) -> GvsocRecord:
    atomic_write(log, run.log)
    return GvsocRecord(flow, SimStatus.MEASURED, None, run.errors, run.total, run.cycles,
                       node_cycles(run.layers or {}, nodes), against, run.on_chip, log.name,
                       {k: round(v, 3) for k, v in run.seconds.items()} if record_time else None,
                       relaxed=run.relaxed, draws=list(run.draws))
