"""gvsoc benchmark: each operating point's step measured on gvsoc's Siracusa model, against what ckpt predicted.

A sweep of the model (default CCT2_FT2) with op costs calibrated on gvsoc (`--costs gvsoc`): per point the
recomputes, the predicted step cycles (the calibrated graph-order step + the recompute cycles) and the measured
ones, both overheads over the baseline, their difference, the step's Errors on gvsoc, and the gvsoc seconds the
point took (building the step and simulating it, both flows). Then, with --noise N, the layout band: the graph
order's step built N more times with its own network moved by a few bytes (gvsoc.step's pad; everything else stays
where it is), and N more times with a few no-ops run once at its init, before the harness starts its timer (no
layer's code, data or place changes: only the state the step starts from, its instruction caches, their
replacement LFSRs and the clocks' phases), the largest change of the step's cycles and of one layer's; a point
whose prediction misses the rule but lies inside that band is marked "in band" (the device's figure stands; the
difference is printed).
Run: python bench/gvsoc.py [--model DIR] [--range 0.7:0.9] [--noise 2] [--jobs N] [--outdir DIR] [--smoke]
(--smoke: a small CCT example, the baseline and one point, no noise runs). Skips, saying why, without gvsoc.
With --cct-train, every CCT of Deeploy's CCT_Train tests in the shared models instead (CCT2_LP, FT1, FT2, LoRA1,
LoRA2), each swept over --range (default there 0.7:0.7): one table, a line per model, with the graph order's step
and each point's on gvsoc (recomputes, cycles, their overhead, Errors, whether the code computed the graph
order's code's outputs bit for bit, or why a point has no schedule).
`--home L3|L2|split` deploys each point with that home (a split step of the training branch with `split`, run with
the branch installed); the calibration and every point then use it.
Each point's predicted overhead is held to max(10% of the measured one, 0.1 points) (column "within"); with
--draws N the calibration and every point run from N starting states (ckpt's --gvsoc-draws), the overheads are
of their medians, and a prediction outside the rule but within how far one draw of the point over one of the graph
order strays from the medians' overhead is "in band" too (common.draws_band).
The second table splits each point's measured - predicted cycles into its clones' cycles over their originals'
calibrated ones, the change of every other probed layer and the change outside the probes, and names the other
layer (one the point runs as the graph order does) that moved most: what moves there is the device's own spread,
whose causes traced on gvsoc the line under the table names (common.DEVICE_SPREAD).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from common import (
    DEVICE_SPREAD,
    MODEL_HELP,
    BenchParser,
    budget_range,
    draws_band,
    existing,
    jobs,
    miss_split,
    parse_args,
    replayed_order,
    run_bench,
    seconds,
    within,
)
from layout_band import PADS, band_table, layout_band

from ckpt.budgets.ranges import parse_range
from ckpt.budgets.sweep import SweepOptions, run_sweep
from ckpt.coderun.sources import NoSources, find_sources
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.examples import write_example
from ckpt.gvsoc.draws import MAX_DRAWS
from ckpt.gvsoc.kit import NoKit, find_kit
from ckpt.paths import shared_models
from ckpt.replay.report import ReplayReport, SimStatus
from ckpt.replay.run import ReplayOptions
from ckpt.schedule_file import clone_of
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

SMOKE = {"range": "0.8:0.8", "noise": 0, "time_limit": 30.0}
SMALL = {"blocks": 1, "embed_dim": 32, "heads": 2, "image_size": 16, "conv_channels": 8}
CCT_TRAIN = ("cct2_lp", "cct2_ft1", "cct2_lora1", "cct2_ft2", "cct2_lora2")   # Deeploy's CCT_Train tests


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def points_table(result, band_pct: float | None = None) -> None:
    print("| point | recomputes | cycles predicted | cycles measured | +% predicted | +% measured | diff (pp) | "
          "within | predicted / measured | gvsoc Errors | gvsoc s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    base = next((row for row in result.rows if row.label == "baseline"), None)
    for row in result.rows:
        if row.recomputes is None:
            continue
        drawn = draws_band(row.cycles_draws, base.cycles_draws, row.overhead_pct) if base is not None else None
        band = max((b for b in (band_pct, drawn) if b is not None), default=None)
        diff = None if row.overhead_pct is None or row.overhead_pct_predicted is None \
            else row.overhead_pct_predicted - row.overhead_pct
        ratio = "-" if not row.cycles or not row.cycles_predicted else f"{row.cycles_predicted / row.cycles:.4f}"
        seconds = result.point_seconds.get(row.label, {}).get("gvsoc")
        measured = f"{row.cycles or '-'}" + (f" ({min(row.cycles_draws)}..{max(row.cycles_draws)})"
                                             if row.cycles_draws else "")
        print(f"| {row.label} | {row.recomputes} | {row.cycles_predicted or '-'} | {measured} | "
              f"{_pct(row.overhead_pct_predicted)} | {_pct(row.overhead_pct)} | {_pct(diff)} | "
              f"{within(row.overhead_pct_predicted, row.overhead_pct, band)} | {ratio} | "
              f"{row.errors} | {'-' if seconds is None else f'{seconds:.1f}'} |")


def gap_table(result) -> None:
    """Where each point's measured cycles part from the prediction (measured - predicted = the clones' cycles over
    their originals' calibrated ones + the change of every other probed layer + the change outside the probes)."""
    def tiled(label: str):
        path = result.outdir / "points" / label / "replay" / "report.json"
        run = ReplayReport.read(path).gvsoc.get("tiled") if path.is_file() else None
        return run if run is not None and run.status is SimStatus.MEASURED and run.layer_cycles else None

    base = tiled("baseline")
    if base is None:
        return
    print("\n| point | measured - predicted | clones over their originals | other layers | outside the probes | "
          "largest clone excess (cycles, % of its original) | that clone | largest change of another layer | "
          "that layer |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in result.rows:
        run = tiled(row.label) if row.label != "baseline" and row.cycles and row.cycles_predicted else None
        if run is None:
            continue
        split = miss_split(base.layer_cycles, base.cycles, run.layer_cycles, run.cycles,
                           replayed_order(result.outdir / "points" / row.label / "replay"))
        excess = {name: cycles - base.layer_cycles.get(clone_of(name)[0], cycles)
                  for name, cycles in run.layer_cycles.items() if clone_of(name)}
        name, worst = max(excess.items(), key=lambda kv: abs(kv[1]), default=("-", 0))
        original = base.layer_cycles.get(clone_of(name)[0]) if clone_of(name) else None
        share = f"{100.0 * worst / original:+.1f}%" if original else "-"
        moved, by = split.largest or ("-", 0)
        print(f"| {row.label} | {row.cycles - row.cycles_predicted} | {split.clones} | {split.unchanged} | "
              f"{split.outside} | {worst} ({share}) | {name[:60]} | {by:+} | {moved[:60]} |")
    print(f"\n(other layers: {DEVICE_SPREAD})")


def cct_train_table(results: dict[str, object]) -> None:
    """One line per CCT_Train model: its graph order's step on gvsoc and each budget's."""
    labels = sorted({row.label for result in results.values() for row in result.rows} - {"baseline"}, reverse=True)
    head = ["model", "graph order cycles", "graph order Errors"]
    for label in labels:
        head += [f"{label} recomputes", f"{label} cycles", f"{label} +%", f"{label} Errors",
                 f"{label} vs graph order's code"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for model, result in results.items():
        rows = {row.label: row for row in result.rows}
        base = rows.get("baseline")
        cells = [model, str(base.cycles or "-") if base else "-", base.errors if base else "-"]
        for label in labels:
            row = rows.get(label)
            if row is None or row.recomputes is None:
                why = (row.reason or row.status) if row is not None else "not run"
                cells += ["-", "-", "-", "-", why[:90]]
                continue
            cells += [str(row.recomputes), str(row.cycles or "-"), _pct(row.overhead_pct), row.errors,
                      row.code_check]
        print("| " + " | ".join(cells) + " |")


def main() -> int:
    parser = BenchParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=existing, default=None,
                        help=MODEL_HELP.replace("a tiny MLP", "a small CCT example"))
    parser.add_argument("--range", type=budget_range, default=None,
                        help="budget fractions LOW:HIGH, step 0.1 (default 0.7:0.9; with --cct-train 0.7:0.7)")
    parser.add_argument("--noise", type=int, default=2,
                        help=f"the layout band: the graph order's step built N times with its network moved and "
                        f"N times with no-ops at its init (N <= {len(PADS)})")
    parser.add_argument("--draws", type=int, choices=range(1, MAX_DRAWS + 1), default=1, metavar="N",
                        help="run the calibration and each point from N starting states (--gvsoc-draws): the overheads "
                        "and the verdict are of the medians")
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    parser.add_argument("--jobs", type=jobs, default=0)
    parser.add_argument("--outdir", default=None, help="sweep folder (default: a fresh temporary one)")
    parser.add_argument("--home", choices=("L3", "L2", "split"), default="L3",
                        help="the tiled deployment's home (split: a split step, with the training branch installed)")
    parser.add_argument("--cct-train", action="store_true",
                        help="every CCT_Train model of the shared models, one table (--range default 0.7:0.7)")
    args = parse_args(parser, SMOKE)
    kit, sources = find_kit(), find_sources()
    if isinstance(kit, NoKit) or isinstance(sources, NoSources):
        print(f"skipped: {(kit if isinstance(kit, NoKit) else sources).reason}")
        return 0
    if args.cct_train:
        return _cct_train(args, kit)
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-gvsoc-") as tmp:
        model = args.model or (str(_small(Path(tmp) / "small")) if args.smoke else str(shared_models() / "cct2_ft2"))
        fractions = tuple(parse_range(args.range or "0.7:0.9"))
        options = SweepOptions(fractions=fractions, target="siracusa", jobs=args.jobs,
                               costs="gvsoc", solve=SolveOptions(backend=BackendOptions("highs", args.time_limit)),
                               replay=ReplayOptions(target="siracusa", deeploy=setup_for("siracusa", args.home),
                                                    gvsoc_draws=args.draws))
        result = run_sweep(model, Path(args.outdir) if args.outdir else Path(tmp) / "sweep", options, progress)
        print(f"model {model} on gvsoc's Siracusa model ({kit.compiler.version}), home {args.home}; "
              f"{result.seconds:.0f} s in all\n")
        band = layout_band(model, "siracusa", args.home, args.noise, kit, sources) if args.noise else None
        points_table(result, band.width_pct if band else None)
        gap_table(result)
        if band is not None:
            band_table(band)
    return 1 if result.failed else 0


def _cct_train(args, kit) -> int:
    """--cct-train: each CCT_Train model swept over the range (0.7 unless given), one table."""
    fractions = tuple(parse_range(args.range or "0.7:0.7"))
    results, failed = {}, False
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-gvsoc-") as tmp:
        root = Path(args.outdir) if args.outdir else Path(tmp)
        for name in CCT_TRAIN[:1] if args.smoke else CCT_TRAIN:
            model = shared_models() / name
            if not model.is_dir():
                print(f"{name}: skipped, {model} is not there")
                continue
            options = SweepOptions(fractions=fractions, target="siracusa", jobs=args.jobs, costs="gvsoc",
                                   solve=SolveOptions(backend=BackendOptions("highs", args.time_limit)),
                                   replay=ReplayOptions(target="siracusa"))
            progress(f"{name}: sweeping {', '.join(map(str, fractions))} on gvsoc")
            results[name] = run_sweep(str(model), root / name, options, progress)
            failed = failed or bool(results[name].failed)
        print(f"CCT_Train models on gvsoc's Siracusa model ({kit.compiler.version}), home L3, tiled, weights in "
              "place\n")
        cct_train_table(results)
    return 1 if failed else 0


def _small(folder: Path) -> Path:
    write_example("cct", folder, **SMALL)
    return folder


if __name__ == "__main__":
    sys.exit(run_bench(main))
