"""GAP9 sweep points priced by a Siracusa calibration (a prediction), beside the fork's published GAP9 figures.

GAP9's cycles cannot be measured here (its gvsoc model ships only with GreenWaves' SDK), so a gap9 sweep's cycle
columns stay empty. What can be said: the model's calibration on gvsoc's Siracusa (`ckpt calibrate MODEL`,
measured once and cached) prices each point's recomputes, node by node (GAP9's lowering names its nodes as
Siracusa's does: both come from the training branch's front end), and the predicted overhead is their cycles over
the Siracusa step's (a split step: its train network, per mini-batch). Labelled a prediction: Siracusa's cores,
memories and compiler are not GAP9's. Beside it, for the same models, the GAP9 figures a fork published (gvsoc
gap9.evk with GreenWaves' SDK, PULP LLVM: ../shared/deeploy-gap9-pr174/SOURCE.md, ../shared/ANCHORS.md), which are
reference points, not measurements here, and their baseline scaled by the predicted overhead (a prediction too).

Run: python bench/gap9_prediction.py --sweep DIR [--sweep DIR ...]   (DIR: a `ckpt sweep --target gap9` folder)
     [--smoke]   (the smallest run: a tiny MLP's schedule at 0.8, solved for siracusa, priced by its calibration)
"""
from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import BenchParser, parse_args, run_bench, tiny_model

from ckpt.deeploy_bridge.setup import setup_for
from ckpt.errors import CkptError
from ckpt.pipeline.calibrate import calibrate
from ckpt.pipeline.deployed_solve import SolveRequest, solve_and_document
from ckpt.schedule_file import Schedule, read_schedule, write_schedule
from ckpt.solver.budget import parse_budget

SMOKE = {"sweep": None}


@dataclass(frozen=True)
class Published:
    """The fork's GAP9 figures for one model: (recomputes, M cycles per step) per point, and where they are from."""

    points: tuple[tuple[int, float], ...]
    source: str


PUBLISHED = {   # read from ../shared/ANCHORS.md and ../shared/deeploy-gap9-pr174/SOURCE.md
    "resnet8_train": Published(((0, 49.31), (12, 56.03), (30, 68.93)),
                               "runwangdl/TrainDeeploy checkmate README (also 47.8 M at 0 in its tiled config)"),
    "cct_train": Published(((0, 71.17),), "runwangdl/TrainDeeploy checkmate README: attention groups 1/2/3 "
                                          "recomputed whole at 74.13/76.90/77.09 M (also 66.8 M at 0 in its tiled "
                                          "config)"),
}


@dataclass(frozen=True)
class Row:
    model: str
    point: str
    recomputes: int
    priced: int              # the recomputes' cycles on Siracusa, measured per node
    step: int                # the Siracusa step's cycles (a split step: train network per mini-batch)
    unpriced: int            # recomputed nodes the calibration has no kernel call of (views, folded ops: 0 cycles)

    @property
    def overhead_pct(self) -> float:
        return 100 * self.priced / self.step


def points_of(sweep: Path) -> tuple[str, list[tuple[str, Schedule]]]:
    """The model a gap9 sweep folder swept and its points' schedules, baseline first."""
    found = sweep / "sweep.json"
    if not found.is_file():
        raise CkptError(f"'{sweep}' is not a sweep folder (no sweep.json)", "give a `ckpt sweep --target gap9` folder")
    doc = json.loads(found.read_text())
    if doc.get("target") != "gap9":
        raise CkptError(f"'{sweep}' is a sweep for {doc.get('target')}, not gap9", "give a gap9 sweep's folder")
    schedules = [(row["label"], read_schedule(sweep / row["schedule"])) for row in doc["points"] if row["schedule"]]
    return doc["model"], schedules


def rows_of(model: str, schedules: list[tuple[str, Schedule]]) -> list[Row]:
    """Each schedule priced by the model's Siracusa calibration (measured on gvsoc unless cached)."""
    found = calibrate(model, "siracusa", setup_for("siracusa"), progress=lambda m: print(f"[{model}] {m}",
                                                                                            file=sys.stderr))
    rows = []
    for label, schedule in schedules:
        recomputed = [name for name, flag in schedule.seq if flag]
        priced = [found.node_cycles[name] for name in recomputed if name in found.node_cycles]
        rows.append(Row(Path(model).name, label, len(recomputed), sum(priced), found.step_cycles,
                        len(recomputed) - len(priced)))
    return rows


def table(rows: list[Row]) -> list[str]:
    lines = ["| model | point | recomputes | Siracusa cycles of the recomputes | Siracusa step cycles | "
             "+% predicted (Siracusa calibration) | fork's GAP9 figures (recomputes: M cycles) | "
             "fork's GAP9 baseline × (1 + predicted) |", "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        published = PUBLISHED.get(row.model)
        figures = ", ".join(f"{n}: {m:.2f} M (+{100 * (m / published.points[0][1] - 1):.1f}%)"
                            for n, m in published.points) if published else "none published"
        scaled = f"{published.points[0][1] * (1 + row.overhead_pct / 100):.2f} M (prediction)" if published else "-"
        note = f" ({row.unpriced} without a kernel call)" if row.unpriced else ""
        lines.append(f"| {row.model} | {row.point} | {row.recomputes}{note} | {row.priced:,} | {row.step:,} | "
                     f"+{row.overhead_pct:.2f}% (prediction) | {figures} | {scaled} |")
    return lines


def smoke_rows() -> list[Row]:
    """A tiny MLP's schedule at 0.8 (solved for siracusa, whose nodes its calibration names), priced."""
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-smoke-") as tmp:
        model = str(tiny_model(Path(tmp) / "tiny-mlp"))
        doc, _ = solve_and_document(SolveRequest(model, "siracusa", parse_budget("0.8")))
        write_schedule(Path(tmp) / "seq.json", doc)
        return rows_of(model, [("0.8", read_schedule(Path(tmp) / "seq.json"))])


def main() -> int:
    parser = BenchParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", action="append", help="a `ckpt sweep --target gap9` folder (repeatable)")
    args = parse_args(parser, SMOKE)
    if not args.smoke and not args.sweep:
        parser.error("give --sweep DIR (a gap9 sweep's folder), or --smoke")
    rows = smoke_rows() if args.smoke else [row for sweep in args.sweep for row in rows_of(*points_of(Path(sweep)))]
    print("\n".join(table(rows)))
    print("\nPredicted: GAP9's cycles are not measured here (its gvsoc model ships only with GreenWaves' SDK). "
          "The fork's figures are its own runs (gvsoc gap9.evk, PULP LLVM), not these schedules: " +
          "; ".join(f"{name}: {p.source}" for name, p in PUBLISHED.items()))
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
