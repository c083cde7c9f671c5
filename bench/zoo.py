"""The training zoo of Deeploy's training branch swept end to end, and the fork's published points beside ckpt's.

For each model (a split step: `<name>_train` beside `<name>_optimizer`), `ckpt sweep` over the budgets for
Siracusa: lowering, the calibration on gvsoc, a solve per budget, each point's two networks generated, built with
the branch's harness and run on this host and on gvsoc (one mini-batch and one update there). Three tables:
- one line per model: the lowered graph's nodes, the points run (and how many passed every check), the solve
  seconds, the gvsoc seconds per point, the train network's cycles per mini-batch and the optimizer's per update at
  the graph order and at the cheapest point whose whole step fits the chip's L2 (or "none fits");
- every point: its budget, live peak replayed (and predicted), recomputes, train and optimizer cycles, the
  measured overhead (and the predicted one, and whether it lies within max(10% of the measured, 0.1 points), or,
  outside it, within the draws' band where the sweep ran several draws or, with --noise N, the model's layout band
  (bench/layout_band.py: its graph order's step with its network moved or its start state changed): "in band"),
  Errors on the host (ckpt's executor; each flow's generated code), whether it computes the graph order's numbers
  bit for bit, Errors on gvsoc, gvsoc seconds; under it, for each point whose prediction misses the rule, its step's
  change over the graph order's split into its recomputes, the layers it runs as the graph order does (and the one
  that moved most: the device's own spread, whose traced causes the line after names, common.DEVICE_SPREAD) and
  the rest;
- beside the fork (bench/fork_figures.py: how each figure is counted on ckpt's graphs): the fork's row, then ckpt's
  point at the same reduction of the same figure, run on gvsoc, with its measured overhead; where ckpt cannot
  reach a reduction, the single-op floor says why.
A model's sweep can be read from a `ckpt sweep` folder instead of being run (`--sweep NAME=DIR`; given several
times for one model, over different ranges, their points are merged into one table), and the
fork's points from a folder holding `<label>/seq.json` and `<label>/replay/report.json` (`--fork-dir DIR`, as
`--fork` writes them). Needs the training branch installed (pip install ../shared/deeploy-train); under the
release each model's line says so.

Run: python bench/zoo.py [--model DIR ...] [--sweep NAME=DIR ...] [--read-only] [--fork | --fork-dir DIR]
     [--range 0.5:0.9 | --budgets 0.8,0.2] [--home L3] [--jobs N] [--costs auto|estimate|gvsoc|FILE]
     [--gvsoc-timeout S] [--outdir DIR] [--noise N] [--smoke]
(default models: the seven of ../shared/models; --smoke: SimpleMLP, one budget.)
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field, fields
from pathlib import Path

from common import (
    DEVICE_SPREAD,
    BenchParser,
    budget_range,
    draws_band,
    existing,
    fractions,
    jobs,
    miss_split,
    print_needs_branch,
    removed_on_error,
    replayed_order,
    run_bench,
    seconds,
    split_step,
    within,
)
from fork_figures import FORK_POINTS, PEAK, ForkPoint, ckpt_figure, live_budget
from layout_band import PADS, layout_band

from ckpt import deeploy_bridge
from ckpt.budgets.ranges import parse_range
from ckpt.budgets.sweep import SweepOptions, run_sweep
from ckpt.coderun.sources import NoSources, find_sources
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label
from ckpt.errors import CkptError
from ckpt.files import check_output_dir
from ckpt.gvsoc.kit import NoKit, find_kit
from ckpt.memory_levels import LevelMemory
from ckpt.paths import shared_models
from ckpt.pipeline.calibrate import COSTS_CHOICES, read_cost_file
from ckpt.pipeline.load import load_for_target
from ckpt.pipeline.point import SCHEDULE, SOLVED
from ckpt.pipeline.row import BASELINE, INFEASIBLE, PointRow, replayed_row, row_from_json, solved_row, with_overheads
from ckpt.replay.folder import REPORT
from ckpt.replay.report import ReplayReport
from ckpt.replay.run import ReplayOptions
from ckpt.schedule_file import read_schedule
from ckpt.solver.graph.baselines import graph_order_peak, single_op_lower_bound
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

ZOO = ("simplemlp_train", "autoencoder_train", "dscnn_train", "resnet8_train", "cct_lora_train", "cct_train",
       "mobilenetv1_train")
HEAD = ("| model | nodes | points run (all checks pass) | solve s | gvsoc s per point | train cycles graph order | "
        "opt cycles graph order | cheapest fitting point | its train cycles | its opt cycles |")
POINTS_HEAD = ("| model | point | budget B | peak B replayed (predicted) | recomp | train cycles | opt cycles | "
               "overhead % measured (pred) | within | Errors host: ckpt; code non-tiled, tiled | bit-identical | "
               "gvsoc | gvsoc s | status |")
FORK_HEAD = ("| model | who | figure | graph order | point | reduction | recomputes | overhead % (pred) | "
             "Errors host, gvsoc | gvsoc s |")


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def cell(value) -> str:
    return "-" if value is None else str(value)


@dataclass(frozen=True)
class SweepRead:
    """A sweep as its folder(s) hold it: the rows, each point's stage seconds and the folder of its replay.

    One folder is a finished `ckpt sweep` (its sweep.json), or an interrupted one (the points that finished, their
    points/<label>/point.json). Several folders of one model (sweeps over different ranges) are merged into one
    sweep: a label two of them hold is taken from the first that replayed it; the points run from the graph
    order down to the smallest budget."""

    rows: list[PointRow]
    seconds: dict[str, dict[str, float]]     # point label -> its stages (solve, replay, verify, code, gvsoc)
    replays: dict[str, Path] = field(default_factory=dict)   # point label -> its replay folder (report.json)

    @classmethod
    def of(cls, folder: Path) -> SweepRead:
        folder = Path(folder)
        doc = folder / "sweep.json"
        found = {}
        stored_rows = []
        for point in sorted((folder / "points").glob("*/point.json")):
            stored = json.loads(point.read_text())
            found[stored["label"]] = stored.get("stage_seconds", {})
            if "row" in stored:
                stored_rows.append(stored["row"])
        if doc.is_file():
            stored_rows = json.loads(doc.read_text())["points"]
        elif not stored_rows and not _unsolvable(folder, set()):
            raise CkptError(f"{folder} holds no sweep (no sweep.json, no finished point)",
                            "give the folder `ckpt sweep` wrote")
        rows = [row_from_json(_stored(p)) for p in stored_rows]
        if not doc.is_file():        # interrupted: the points replayed whole, the overheads over the baseline
            rows = rows + _replayed_unrecorded(folder, {r.label for r in rows})
            rows = with_overheads(rows + _unsolvable(folder, {r.label for r in rows}))
        replays = {r.label: folder / "points" / r.label / "replay" for r in rows
                   if (folder / "points" / r.label / "replay" / "report.json").is_file()}
        return cls(_in_order(rows), found, replays)

    @classmethod
    def merged(cls, reads: list[SweepRead]) -> SweepRead:
        """One sweep of the points of `reads`: a label is given by the first that replayed it, else by the first
        that proved it infeasible (a longer solve's proof beats another sweep's "no schedule"), else the first."""
        bases = {(r.cycles, r.optimizer_cycles) for read in reads for r in read.rows if r.status == BASELINE}
        if len(bases) > 1:      # each point's overhead is over its own sweep's graph order: say they differ
            progress(f"the merged sweeps measured different graph orders (train, optimizer cycles): {sorted(bases)}")
        chosen: dict[str, tuple[PointRow, SweepRead]] = {}
        for read in reads:
            for row in read.rows:
                held = chosen.get(row.label)
                if held is None or _decided(row) > _decided(held[0]):
                    chosen[row.label] = (row, read)
        return cls(_in_order([row for row, _ in chosen.values()]),
                   {label: read.seconds[label] for label, (_, read) in chosen.items() if label in read.seconds},
                   {label: read.replays[label] for label, (_, read) in chosen.items() if label in read.replays})

    @property
    def run(self) -> list[PointRow]:
        return [r for r in self.rows if r.replayed_peak is not None]

    def gvsoc_seconds(self, label: str) -> float | None:
        return self.seconds.get(label, {}).get("gvsoc")

    def gvsoc_run(self, label: str) -> dict | None:
        """A point's deployed step as gvsoc measured it (its replay report's tiled `gvsoc` record, with `cycles` and
        `layer_cycles`), None where it was not measured layer by layer."""
        report = self.replays.get(label)
        run = (json.loads((report / "report.json").read_text()).get("gvsoc") or {}).get("tiled") if report else None
        return run if run and run.get("status") == "measured" and run.get("layer_cycles") else None

    def code_runs(self, label: str) -> dict[str, dict]:
        """A point's generated code run on this host per flow (its replay report's `code_runs`), {} if none."""
        report = self.replays.get(label)
        if report is None:
            return {}
        return json.loads((report / "report.json").read_text()).get("code_runs") or {}


def _replayed_unrecorded(folder: Path, recorded: set[str]) -> list[PointRow]:
    """The rows of an interrupted sweep's points whose replay finished (its report.json, written last) but whose
    point.json is not there (the sweep stopped before writing it, or a rerun removed it as it began the point
    again): made from the schedule and the report as the sweep makes them."""
    rows = []
    for report in sorted((folder / "points").glob(f"*/replay/{REPORT}")):
        point = report.parent.parent
        if point.name in recorded or not (point / SCHEDULE).is_file():
            continue
        found = read_schedule(point / SCHEDULE)
        solved = json.loads((point / SOLVED).read_text()) if (point / SOLVED).is_file() else {}
        row = solved_row(point.name, found.budget.fraction, found.budget.bytes, found, solved.get("seconds"),
                         "not verified", "", f"points/{point.name}/{SCHEDULE}")
        rows.append(replayed_row(row, ReplayReport.read(report), gvsoc_asked=True))
    return rows


def _unsolvable(folder: Path, recorded: set[str]) -> list[PointRow]:
    """The rows of an interrupted sweep's points whose solve found no schedule (proven infeasible, or not found in
    its time): their solved.json holds the row, and nothing follows it (a long solve's proof, the sweep stopped
    during another point's replay)."""
    rows = []
    for solved in sorted((folder / "points").glob(f"*/{SOLVED}")):
        stored = json.loads(solved.read_text())
        if stored.get("label") not in recorded and stored.get("schedule") is None and stored.get("row"):
            rows.append(row_from_json(stored["row"]))
    return rows


def _decided(row: PointRow) -> int:
    """How far a point was taken: 2 replayed, 1 proven infeasible (no schedule exists), 0 neither."""
    return 2 if row.replayed_peak is not None else 1 if row.status == INFEASIBLE else 0


def _in_order(rows: list[PointRow]) -> list[PointRow]:
    """The graph order first, then the budgets from the largest down."""
    return sorted(rows, key=lambda r: (r.status != BASELINE, -(r.budget_fraction or 0.0), r.label))


def _stored(point: dict) -> dict:
    """A point of sweep.json as a row is stored: its levels without the totals sweep.json adds to them."""
    kept = {f.name for f in fields(LevelMemory)}
    return {**point, "levels": {level: {k: v for k, v in figures.items() if k in kept}
                                for level, figures in point.get("levels", {}).items()}}


def model_line(model: Path, sweep: SweepRead) -> str:
    run = sweep.run
    base = next((r for r in sweep.rows if r.status == BASELINE), None)
    passed = [r for r in run if r.verified]
    fitting = [r for r in passed if r.fits_on_chip and r.cycles is not None]
    best = min(fitting, key=lambda r: (r.cycles + (r.optimizer_cycles or 0), r.label), default=None)
    solve = sum(r.seconds or 0.0 for r in sweep.rows)
    gvsoc = [s for s in (sweep.gvsoc_seconds(r.label) for r in run) if s]    # 0: the calibration ran it
    per_point = sum(gvsoc) / len(gvsoc) if gvsoc else None
    nodes = len(deeploy_bridge.lower(model, "siracusa").model.graph.node)
    return (f"| {model.name} | {nodes} | {len(run)} ({len(passed)}) | {solve:.1f} | "
            f"{'-' if per_point is None else f'{per_point:.1f}'} | {cell(base and base.cycles)} | "
            f"{cell(base and base.optimizer_cycles)} | {best.label if best else 'none fits'} | "
            f"{cell(best and best.cycles)} | {cell(best and best.optimizer_cycles)} |")


def _status(row: PointRow) -> str:
    """The solver's status, and for a point without a replay why (its first clause)."""
    why = row.reason.split(":")[0] if row.replayed_peak is None and row.reason else ""
    return f"{row.status}: {why}" if why else row.status


def point_lines(model: Path, sweep: SweepRead, layout_pct: float | None = None) -> list[str]:
    lines = []
    base = next((r for r in sweep.rows if r.status == BASELINE), None)
    for r in sweep.rows:
        overhead = "-" if r.overhead_pct is None else f"{r.overhead_pct:+.2f}"
        if r.overhead_pct_predicted is not None:
            overhead += f" ({r.overhead_pct_predicted:+.2f})"
        fits = verdict(r, base, layout_pct)
        peak = cell(r.peak) if r.replayed_peak is None or r.predicted_peak is None \
            else f"{r.replayed_peak} ({r.predicted_peak})"
        runs = sweep.code_runs(r.label)
        gvsoc = sweep.gvsoc_seconds(r.label)
        lines.append(f"| {model.name} | {r.label} | {cell(r.budget_bytes)} | {peak} | {cell(r.recomputes)} | "
                     f"{cell(r.cycles)} | {cell(r.optimizer_cycles)} | {overhead} | {fits} | "
                     f"{r.host_errors}; {_golden(runs.get('non_tiled'))}, {_golden(runs.get('tiled'))} | "
                     f"{identity(r, runs)} | {r.gvsoc_errors} | {'-' if gvsoc is None else f'{gvsoc:.0f}'} | "
                     f"{_status(r)} |")
    return lines


def verdict(row: PointRow, base: PointRow | None, layout_pct: float | None = None) -> str:
    """Whether a point's prediction holds (common.within; the band, the wider of the draws' where it ran several
    draws and the model's layout band `layout_pct` where measured); "-" for the graph order itself."""
    if row.status == BASELINE:
        return "-"
    drawn = draws_band(row.cycles_draws, base.cycles_draws, row.overhead_pct) if base is not None else None
    band = max((b for b in (drawn, layout_pct) if b is not None), default=None)
    return within(row.overhead_pct_predicted, row.overhead_pct, band)


def miss_lines(model: Path, sweep: SweepRead, layout_pct: float | None = None) -> list[str]:
    """For each point whose prediction misses the rule ("no" or "in band"), where its step parts from the graph
    order's, layer by layer (common.miss_split of both replays' gvsoc layer cycles)."""
    base = next((r for r in sweep.rows if r.status == BASELINE), None)
    base_run = sweep.gvsoc_run(base.label) if base is not None else None
    lines = []
    for r in sweep.rows:
        fits = verdict(r, base, layout_pct)
        run = sweep.gvsoc_run(r.label) if fits in ("no", "in band") else None
        if base_run is None or run is None:
            continue
        split = miss_split(base_run["layer_cycles"], base_run["cycles"], run["layer_cycles"], run["cycles"],
                           replayed_order(sweep.replays[r.label]))
        name, by = split.largest or ("-", 0)
        lines.append(f"- {model.name} {r.label} ({fits}: {r.overhead_pct:+.2f}% measured, "
                     f"{r.overhead_pct_predicted:+.2f}% predicted): {run['cycles'] - base_run['cycles']:+,} cycles "
                     f"over the graph order's step = its recomputes {split.recomputes:,} ({split.clones:+,} over "
                     f"their originals there) + the layers it runs as the graph order does {split.unchanged:+,} "
                     f"(most: {name} {by:+,}) + outside the probed layers {split.outside:+,}")
    return lines


def _golden(run: dict | None) -> str:
    """A flow's generated code on this host against the goldens, "N/M" ("-": not run)."""
    golden = (run or {}).get("golden") or {}
    return f"{golden['errors']}/{golden['compared']}" if "compared" in golden else "-"


def identity(row: PointRow, runs: dict[str, dict]) -> str:
    """Whether the point computes the graph order's numbers bit for bit: the replayed order on ckpt's host executor
    and each flow's generated code against the graph order's code. "yes" where every one that was compared is;
    else what differs ("-": nothing compared)."""
    if row.status == BASELINE:
        return "(the graph order)"
    checks = {"host": row.check} if row.check != "-" else {}
    checks.update({flow.replace("_", "-"): run.get("graph_order") or "-" for flow, run in sorted(runs.items())})
    compared = {what: verdict for what, verdict in checks.items() if verdict in ("bit-identical", "differs",
                                                                                    "MISWIRED")}
    if not compared:
        return "-"
    wrong = [f"{what} {verdict}" for what, verdict in compared.items() if verdict != "bit-identical"]
    return "; ".join(wrong) if wrong else "yes (" + ", ".join(compared) + ")"


# --------------------------------------------------------------------------- the fork's points


@dataclass(frozen=True)
class ForkBasis:
    """What a fork point's budget is computed from on ckpt's graph: the graph order's live peak, what persists,
    and the single-op floor."""

    peak: int
    persistent: int
    floor: int
    floor_op: str

    @classmethod
    def of(cls, model: Path) -> ForkBasis:
        graph = load_for_target(model, "siracusa").graph
        floor, op = single_op_lower_bound(graph)
        return cls(graph_order_peak(graph), graph.persistent_bytes, floor, op)


def run_fork_point(point: ForkPoint, model: Path, basis: ForkBasis, folder: Path, time_limit: float,
                   costs: str = "auto") -> None:
    """Solve ckpt's point at the fork's reduction with the op costs `costs` names (auto: measured on gvsoc,
    calibrated once) and replay it, as `ckpt solve` and `ckpt replay` do from the command line."""
    budget = live_budget(point, basis.peak, basis.persistent)
    if budget < basis.floor:
        return
    folder.mkdir(parents=True, exist_ok=True)
    ckpt = [sys.executable, "-m", "ckpt"]
    progress(f"{point.label}: solving at {budget} B")
    subprocess.run([*ckpt, "solve", str(model), "--target", "siracusa", "--budget", f"{budget}B",
                    "--costs", "gvsoc" if costs == "auto" else costs,
                    "--time-limit", str(time_limit), "-o", str(folder / "seq.json")], check=True)
    progress(f"{point.label}: replaying on the host and on gvsoc")
    subprocess.run([*ckpt, "replay", str(folder / "seq.json"), "--model", str(model), "-o", str(folder / "replay"),
                    "--record-time"], check=True)


def fork_lines(point: ForkPoint, basis: ForkBasis, folder: Path) -> list[str]:
    """The fork's row, and ckpt's at the same reduction of the same figure (or the floor that forbids it)."""
    fork = (f"| {point.model} | fork (GAP9) | {point.figure} KB | {point.before_kb} | {point.after_kb} | "
            f"-{point.reduction * 100:.1f}% | {point.recomputed} | +{point.overhead_pct} | - | - |")
    before = ckpt_figure(point, basis.peak, basis.persistent)
    budget = live_budget(point, basis.peak, basis.persistent)
    if budget < basis.floor:
        return [fork, f"| {point.model} | ckpt (Siracusa) | {point.figure} B | {before} | infeasible | "
                      f"-{point.reduction * 100:.1f}% | the live budget {budget} B is below the single-op floor "
                      f"{basis.floor} B ({basis.floor_op}) | - | - | - |"]
    seq, report = folder / "seq.json", folder / "replay" / "report.json"
    if not (seq.is_file() and report.is_file()):
        return [fork, f"| {point.model} | ckpt (Siracusa) | {point.figure} B | {before} | not run | "
                      f"-{point.reduction * 100:.1f}% | - | - | - | - |"]
    predicted = json.loads(seq.read_text())["predicted"]
    doc = json.loads(report.read_text())
    tiled = doc["gvsoc"]["tiled"]
    value = ckpt_figure(point, doc["memory"]["replayed_peak"], basis.persistent)
    reached: int | str = value
    step = predicted.get("step_cycles")
    graph_order = step - predicted["recompute_cost"] if step else None
    measured = f"{100 * (tiled['cycles'] - graph_order) / graph_order:+.2f}" if graph_order and tiled["cycles"] \
        else "-"
    golden = (doc["code_runs"].get("tiled") or {}).get("golden") or {}
    host_text = f"{golden['errors']}/{golden['compared']}" if "compared" in golden else "-"
    gvsoc = f"{tiled['errors']}/{tiled['total']}" if tiled.get("total") is not None else tiled.get("status", "-")
    seconds_gvsoc = sum((tiled.get("seconds") or {}).values())
    home = doc["memory"]["levels"].get(doc["deeploy"]["tiled"]["setup"]["default_mem_level"], {})
    if point.figure == PEAK and "arena" in home:     # the home level's total as the code reserves it, beside
        reached = f"{reached} (home {home['static'] + home['arena']})"
    return [fork, f"| {point.model} | ckpt (Siracusa) | {point.figure} B | {before} | {reached} | "
                  f"{100 * (value - before) / before:.1f}% | {predicted['recomputes']} | "
                  f"{measured} ({predicted['cost_increase_pct']:+.2f}) | {host_text}, {gvsoc} | {seconds_gvsoc:.0f} |"]


# --------------------------------------------------------------------------- the command


def named_folder(text: str) -> tuple[str, str]:
    """NAME=DIR: a model's sweep folder (finished, or the points an interrupted one finished)."""
    name, sep, folder = text.partition("=")
    if not sep or not name or not (Path(folder, "sweep.json").is_file()
                                   or any(Path(folder, "points").glob("*/point.json"))
                                   or any(Path(folder, "points").glob(f"*/{SOLVED}"))):
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=DIR with a sweep in DIR (its sweep.json, or the "
                                         f"points/<label>/point.json or {SOLVED} of an interrupted one)")
    return name, folder


def main() -> int:
    parser = BenchParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", type=existing, help="a split step's train folder (repeatable)")
    parser.add_argument("--sweep", action="append", type=named_folder, default=[],
                        help="NAME=DIR: take model NAME's sweep from DIR, a `ckpt sweep` folder (repeatable, also "
                             "for one NAME: its folders' points are merged into one sweep)")
    parser.add_argument("--read-only", action="store_true",
                        help="run no sweep: a model without --sweep is listed as not swept")
    parser.add_argument("--fork", action="store_true", help="run ckpt's points at the fork's reductions (gvsoc)")
    parser.add_argument("--fork-dir", help="read ckpt's points at the fork's reductions from DIR/<label>")
    parser.add_argument("--range", type=budget_range, help="LOW:HIGH in steps of 0.1 (default 0.5:0.9)")
    parser.add_argument("--budgets", type=fractions, help="budget fractions, comma-separated (instead of --range)")
    parser.add_argument("--home", default="L3", choices=("L3", "L2"))
    parser.add_argument("--jobs", type=jobs, default=0, help="points at once (0: the core count)")
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    parser.add_argument("--costs", default="auto", metavar="auto|estimate|gvsoc|FILE",
                        help="op costs the points are solved with, as `ckpt sweep --costs` (default auto: the "
                             "model's cycles measured on gvsoc, calibrated once and cached)")
    parser.add_argument("--gvsoc-timeout", type=seconds, help="seconds a step may run on gvsoc without printing "
                        "(default: ckpt's, scaled from the step's predicted cycles)")
    parser.add_argument("--outdir")
    parser.add_argument("--noise", type=int, choices=range(0, len(PADS) + 1), default=0, metavar="N",
                        help="each model's layout band (bench/layout_band.py): its graph order's step built N times "
                        "with its network moved and N times with no-ops at its init; a prediction outside the rule "
                        "but inside it is \"in band\" (default 0: none)")
    parser.add_argument("--smoke", action="store_true", help="SimpleMLP, one budget")
    args = parser.parse_args()
    if args.fork and args.read_only:
        parser.error("--fork runs the fork's points and --read-only runs nothing: give one")
    if args.fork and args.fork_dir:
        parser.error("--fork runs the fork's points and --fork-dir reads them: give one")
    if args.range and args.budgets:
        parser.error("--range and --budgets both name the budgets: give one")
    if args.read_only and args.costs != "auto":
        parser.error("--costs names the op costs of the points bench/zoo.py solves, and --read-only solves none: "
                     "give one")
    if args.fork_dir and not Path(args.fork_dir).is_dir():
        parser.error(f"--fork-dir {args.fork_dir}: no such folder")
    kit, sources = find_kit(), find_sources()
    if args.noise and (isinstance(kit, NoKit) or isinstance(sources, NoSources)):
        missing = kit if isinstance(kit, NoKit) else sources
        parser.error(f"--noise runs the graph order's step on gvsoc: {missing.reason}")
    given: dict[str, list[str]] = {}
    for name, folder in args.sweep:
        given.setdefault(name, []).append(folder)
    models = [Path(m) for m in args.model] if args.model else [shared_models() / m for m in ZOO]
    if args.smoke:
        models, args.range, args.budgets = models[:1] if args.model else [shared_models() / ZOO[0]], "0.9:0.9", None
    budgets = tuple(float(f) for f in args.budgets.split(",")) if args.budgets \
        else tuple(parse_range(args.range or "0.5:0.9"))
    if args.costs not in COSTS_CHOICES:       # a bad file, said before the models: it is bad for any of them
        read_cost_file(args.costs)
    for model in models:
        split_step(model)
    if args.costs not in COSTS_CHOICES:       # another model's calibration, before any work
        for model in [m for m in models if m.name not in given] + \
                ([shared_models() / p.model for p in FORK_POINTS] if args.fork else []):
            read_cost_file(args.costs, model, "siracusa")
    if args.outdir:
        check_output_dir(args.outdir)
    asked = args.budgets or args.range or "0.5:0.9"
    ran = "each sweep read from its folder" if args.read_only else \
        f"budgets {asked}, home {args.home}" + ("" if args.costs == "auto" else f", op costs {args.costs}")
    print(f"Deeploy {deeploy_label()}; {ran}")
    print()
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        print(HEAD)
        print("|" + "---|" * HEAD.count(" | ") + "---|")
        print_needs_branch(models, HEAD.count(" | ") + 1, blank_before=1)
        return 0
    with tempfile.TemporaryDirectory(prefix="ckpt_zoo_") as scratch:
        root = Path(args.outdir) if args.outdir else Path(scratch)
        with removed_on_error(root, *(root / model.name for model in models), root / "fork"):
            sweeps = {}
            for model in models:
                if model.name in given:
                    sweeps[model] = SweepRead.merged([SweepRead.of(Path(f)) for f in given[model.name]])
                    continue
                if args.read_only:
                    sweeps[model] = None
                    continue
                options = SweepOptions(fractions=budgets, target="siracusa", costs=args.costs,
                                       jobs=min(args.jobs, os.cpu_count() or 1),
                                       solve=SolveOptions(backend=BackendOptions(time_limit=args.time_limit)),
                                       replay=ReplayOptions(deeploy=setup_for("siracusa", args.home),
                                                            gvsoc_timeout=args.gvsoc_timeout))
                run_sweep(model, root / model.name, options, progress)
                sweeps[model] = SweepRead.of(root / model.name)
            print(HEAD)
            print("|" + "---|" * HEAD.count(" | ") + "---|")
            for model, sweep in sweeps.items():
                print(model_line(model, sweep) if sweep else f"| {model.name} | - | not swept here |" + " - |" * 7,
                      flush=True)
            print()
            bands = {model: layout_band(str(model), "siracusa", args.home, args.noise, kit, sources)
                     for model, sweep in sweeps.items() if sweep and args.noise}
            widths = {model: band.width_pct for model, band in bands.items()}
            print(POINTS_HEAD)
            print("|" + "---|" * POINTS_HEAD.count(" | ") + "---|")
            for model, sweep in sweeps.items():
                if sweep:
                    print("\n".join(point_lines(model, sweep, widths.get(model))), flush=True)
            for model, band in bands.items():
                print(f"\nlayout band of {model.name}: +-{band.width_pct:.3f}% of its graph order's step, over "
                      f"{', '.join(f'{label} {cycles}' for label, cycles in band.cycles.items())}")
            misses = [line for model, sweep in sweeps.items() if sweep
                      for line in miss_lines(model, sweep, widths.get(model))]
            if misses:
                print("\nWhere a prediction misses the rule, layer by layer:")
                print("\n".join(misses))
                print(f"({DEVICE_SPREAD})")
            if args.fork or args.fork_dir:
                fork_root = Path(args.fork_dir) if args.fork_dir else root / "fork"
                print()
                print(FORK_HEAD)
                print("|" + "---|" * FORK_HEAD.count(" | ") + "---|")
                for point in FORK_POINTS:
                    model = shared_models() / point.model
                    basis = ForkBasis.of(model)
                    if args.fork:
                        run_fork_point(point, model, basis, fork_root / point.label, args.time_limit,
                                       args.costs)
                    print("\n".join(fork_lines(point, basis, fork_root / point.label)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
