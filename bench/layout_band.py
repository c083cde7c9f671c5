"""The layout band: how far the graph order's own step moves on gvsoc when only where its code sits, or the state it
starts from, changes. Not a bench itself: bench/gvsoc.py and bench/zoo.py take it (`--noise N`).

The graph order's step is built once as ckpt builds it ("unmoved"), N times with its own network moved by a few
bytes (gvsoc.step's pad: everything else stays where it is) and N times with a few no-ops run once at its init,
before the harness starts its timer (no layer's code, data or place changes: only the state the step starts from,
its instruction caches, their replacement LFSRs and the clocks' phases). Its width is the largest change of the
step's cycles over the unmoved build, in %: a point's overhead is one build over another, so a prediction outside
the rule but within it is "in band" (common.within).
"""
from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ckpt import deeploy_bridge
from ckpt.coderun.run import run_code
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.gvsoc.draws import NOPS, history_moved
from ckpt.gvsoc.run import GvsocRun, simulate_step
from ckpt.replay.report import SimStatus
from ckpt.replay.split_run import deploy_split, run_split_code, simulate_split, split_step
from ckpt.replay.verification import step_data
from ckpt.solver.graph.onnx_loader import read_model
from ckpt.targets import TARGET_TABLE

PADS = (4, 8, 12, 68, 260, 1028)   # bytes put before the schedule's network (gvsoc.step's pad; not multiples of 16)
NOISE_TIMEOUT = 3600.0             # seconds a layout-band run may go silent before it is taken as hung


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class LayoutBand:
    """The graph order's step built unmoved and perturbed (its own code moved by a few bytes, or a few no-ops run at
    its init): its cycles per build, and the largest change over the unmoved build, in % of it."""

    cycles: dict[str, int]                    # build ("unmoved", "moved by 4 B", "3 no-ops at init") -> step cycles
    layers: dict[str, dict[str, int]]         # build -> each probed layer's cycles (a split step: its train network)

    @property
    def width_pct(self) -> float:
        base = self.cycles.get(UNMOVED)
        return max((100.0 * abs(c - base) / base for c in self.cycles.values()), default=0.0) if base else 0.0


UNMOVED = "unmoved"


def _history_code(code: Path, network: str, nops: int, out: Path) -> Path:
    """A copy of the code folder `code` whose `network` runs `nops` no-ops at its init (history_moved)."""
    shutil.copytree(code, out)
    (out / network).write_text(history_moved((code / network).read_text(), nops))
    return out


def layout_band(model: str, target: str, home: str, count: int, kit, sources) -> LayoutBand:
    """The graph order's step on gvsoc, unmoved, moved by the first `count` PADS and started after the first `count`
    NOPS (a split step: the train network moved; both networks run by the branch's harness)."""
    lowered = deeploy_bridge.lower(model, target)
    folder = Path(model) if Path(model).is_dir() else Path(model).parent
    order = [n.name for n in lowered.model.graph.node]
    setup = setup_for(target, home)
    split = split_step(folder, read_model(model), lowered.io_names, None, lowered.model)
    cycles, layers = {}, {}
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-gvsoc-") as tmp:
        code = Path(tmp) / "code"
        if split is not None:
            deploy_split(lowered.model, order, split, target, True, setup, code)
            host = run_split_code("tiled", code, lowered.model, split, target, setup, sources, False)
        else:
            data = step_data(folder, read_model(model), lowered.io_names)
            deeploy_bridge.deploy(lowered.model, order, target, tiled=True, setup=setup, code_dir=code)
            host = run_code(code, data.feeds, sources)
        network = "TrainingNetwork.c" if split is not None else "Network.c"
        builds = [(UNMOVED, 0, 0), *((f"moved by {pad} B", pad, 0) for pad in PADS[:count]),
                  *((f"{nops} no-ops at init", 0, nops) for nops in NOPS[:count])]
        for label, pad, nops in builds:
            progress(f"layout band: the graph order's step, {label}")
            where = _history_code(code, network, nops, Path(tmp) / f"nops-{nops}") if nops else code
            if split is not None:
                found = simulate_split("tiled", where, host, split, order, sources, kit, Path(tmp) / f"{label}.log",
                                       False, NOISE_TIMEOUT, pad=pad)
                if found.status is SimStatus.MEASURED:
                    cycles[label], layers[label] = found.cycles, dict(found.layer_cycles or {})
                else:
                    progress(f"layout band: {label} not measured: {found.reason}")
                continue
            run = simulate_step(where, data.feeds, data.golden or host.outputs, sources, kit,
                                host.stats.levels[TARGET_TABLE[target].on_chip].peak, pad=pad, timeout=NOISE_TIMEOUT)
            if isinstance(run, GvsocRun):
                cycles[label], layers[label] = run.cycles, dict(run.layers or {})
            else:
                progress(f"layout band: {label} not measured: {run.reason}")
    return LayoutBand(cycles, layers)


def band_table(band: LayoutBand) -> None:
    """The layout band: each build's step cycles and the layer it changed most."""
    print("\n| graph order's step | step cycles | vs unmoved % | largest layer change (cycles) | that layer |")
    print("|---|---|---|---|---|")
    base, base_layers = band.cycles.get(UNMOVED), band.layers.get(UNMOVED, {})
    for label, cycles in band.cycles.items():
        change = max(((abs(c - base_layers.get(name, c)), name) for name, c in band.layers[label].items()),
                     default=(0, "-"))
        moved = 100.0 * (cycles - base) / base if base else 0.0
        print(f"| {label} | {cycles} | {moved:+.3f} | {change[0]} | {change[1][:60]} |")
    print(f"\nlayout band: +-{band.width_pct:.3f}% of the graph order's step (the largest change over the unmoved "
          "build); a prediction outside the rule but inside it is marked \"in band\"")
