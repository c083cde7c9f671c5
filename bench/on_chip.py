"""Which deployment of a training step trains fastest, and what each keeps on chip: one row per deployment.

For each model (a split step of Deeploy's training branch: `<name>_train` beside `<name>_optimizer`), on gvsoc's
Siracusa with the branch's harness (deeploytraintest.c), each deployment's step built and run, on this host and on
gvsoc:
- `all-L3`: the branch's deployment, every buffer in L3, at the graph order (the off-chip reference of a sweep:
  the tiler's L2 at the branch's own setting);
- `split`: ckpt's per-tensor home (`--home split`: what persists in L3, activations and transients in L2) at the
  graph order (where it does not fit L2, its row says so, with the bytes), and at the largest budget of the range
  whose whole step fits L2 (the graph order itself where it fits);
- `split+`: the split row's schedule replayed with `--home split --persist-on-chip auto`: the persistent tensors
  (weights, accumulators, constants) whose off-chip transfers cost the most cycles per byte brought on chip as
  well, within what L2 has left beside the activations and the step's code (all of them where all fit); where none
  more fits, its step is the split row's: that row's figures, said in its errors cell, not built and run again;
- `all-L2`: every buffer in L2 (`--home L2`), at the graph order, where it fits.
Columns: l2_total, what the step needs of L2 (its code and data and what it allocates there, both networks);
l3_total, what both networks keep in L3 (constants and arenas); train_cycles per mini-batch and optimizer_cycles per
update (gvsoc); errors, the harness's `Errors` on gvsoc; host_errors, ckpt's host executor against the goldens.
Writes OUT/on_chip.csv and OUT/on_chip.png (train cycles against L2 bytes, one marker per deployment) and prints
the table, with the gvsoc seconds of each row (building and running both networks).
Needs the training branch (pip install ../shared/deeploy-train) and gvsoc.

Run: python bench/on_chip.py --model DIR [--model DIR ...] -o OUT [--range 0.5:0.9] [--budget NAME=0.23 ...]
    [--clock cpu] [--include EARLIER/on_chip.csv] [--smoke]
(--smoke: SimpleMLP, the graph order only. --budget: a model's split row at that budget alone, or at the largest of
a range NAME=LOW:HIGH that fits, in place of --range for that model, where its largest fitting budget is known from a
sweep and a range would solve and replay many points that do not fit. --include: the rows of an earlier run's CSV,
of the models not run here, kept in the table, CSV and plot as they are.)
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import sys
from dataclasses import dataclass, replace
from pathlib import Path

from common import print_needs_branch

from ckpt.budgets.ranges import parse_range
from ckpt.budgets.sweep import SweepOptions, run_sweep
from ckpt.deeploy_bridge.setup import SPLIT_HOME, setup_for
from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label
from ckpt.errors import CkptError
from ckpt.files import atomic_write
from ckpt.paths import shared_models
from ckpt.pipeline.calibrate import measured_code_bytes, measured_tiler_tables
from ckpt.pipeline.row import BASELINE, REFERENCE, PointCheck, PointRow, empty_row, replayed_row
from ckpt.replay.run import ReplayOptions, brought_on_chip, replay_schedule
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.options import Clock
from ckpt.solver.model.records import SolveOptions

COLUMNS = ("model", "deployment", "budget", "l2_total", "l3_total", "train_cycles", "optimizer_cycles", "errors",
           "host_errors")
TARGET = "siracusa"


@dataclass(frozen=True)
class Row:
    model: str
    deployment: str
    budget: str
    l2_total: int | None
    l3_total: int | None
    train_cycles: int | None
    optimizer_cycles: int | None
    errors: str
    host_errors: str
    gvsoc_seconds: float | None = None      # printed, not a CSV column

    def cells(self) -> list[str]:
        return ["" if v is None else str(v) for v in (getattr(self, c) for c in COLUMNS)]


NUMBERS = frozenset({"l2_total", "l3_total", "train_cycles", "optimizer_cycles"})


def included_rows(path: Path, skip: frozenset[str] = frozenset()) -> list[Row]:
    """The rows of an earlier run's on_chip.csv, but those of the models in `skip` (run again here); no gvsoc
    seconds (the CSV does not keep them)."""
    with path.open(newline="") as handle:
        found = list(csv.DictReader(handle))
    if found and set(found[0]) != set(COLUMNS):
        raise CkptError(f"{path} is not an on_chip.csv: its columns are {', '.join(found[0])}",
                        "give the on_chip.csv an earlier run of bench/on_chip.py wrote")
    return [Row(**{c: (int(r[c]) if r[c] else None) if c in NUMBERS else r[c] for c in COLUMNS})
            for r in found if r["model"] not in skip]


def model_budgets(texts: list[str]) -> dict[str, tuple[float, ...]]:
    """`--budget NAME=FRACTION` (or NAME=LOW:HIGH, a range as --range takes it) -> the model's split budgets."""
    found = {}
    for text in texts:
        name, _, value = text.partition("=")
        if not name or not value:
            raise CkptError(f"--budget '{text}' is not NAME=FRACTION", "write e.g. --budget mobilenetv1_train=0.23")
        found[name] = tuple(parse_range(value if ":" in value else f"{value}:{value}"))
    return found


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _l3(row: PointRow) -> int | None:
    level = row.levels.get("L3")
    return level.total if level is not None else None


def _l2(row: PointRow) -> int | None:
    """What the step needs of L2: `on_chip` counts, for a home off chip, its L3 level as if brought on chip."""
    if row.on_chip is None:
        return None
    return row.on_chip - (_l3(row) or 0) if row.home == "L3" else row.on_chip


def _row(model: str, deployment: str, budget: str, found: PointRow, seconds: float | None = None) -> Row:
    errors = found.errors
    if found.fits_on_chip is False and deployment != "all-L3":     # all-L3 keeps its tensors off chip by design
        errors = f"does not fit L2: {_l2(found):,} B of {found.on_chip_capacity:,} B ({errors})"
    elif found.check in (PointCheck.REPLAY_FAILED, PointCheck.DOES_NOT_FIT):   # e.g. its activations alone
                                                                                # overflow L2 (the bytes)
        errors = found.reason
    return Row(model, deployment, budget, _l2(found), _l3(found), found.cycles, found.optimizer_cycles, errors,
               found.host_errors, seconds)


def _gvsoc_seconds(report: Path) -> float | None:
    """The seconds gvsoc took to build and run a replay's step (its report, written with the time recorded; a run
    ckpt's gvsoc cache answered keeps the seconds of the run that filled it), None where not recorded."""
    try:
        tiled = (json.loads(report.read_text()).get("gvsoc") or {}).get("tiled") or {}
    except (OSError, ValueError):
        return None
    seconds = tiled.get("seconds")
    return round(sum(seconds.values()), 1) if seconds else None


def gvsoc_seconds(sweep_folder: Path, row: PointRow) -> float | None:
    """What gvsoc took for a sweep row's step, as its replay's report records it; None where it did not run there."""
    if row.status == "reference":
        return _gvsoc_seconds(sweep_folder / "reference" / "report.json")
    if not row.schedule:
        return None
    return _gvsoc_seconds(sweep_folder / Path(row.schedule).parent / "replay" / "report.json")


# split+ where it brings nothing on chip: its step is the split row's, measured there, not built and run again
NOTHING_MORE = "the split row's step and figures: 0 persistent tensors brought on chip, none more fits L2"


def _split_plus(model: Path, out: Path, sweep_folder: Path, fitting: PointRow, label: str) -> Row:
    """The split row's schedule replayed with what persists brought on chip where L2 has room (split+); where
    nothing more fits, the split row itself (NOTHING_MORE), said in its errors cell."""
    setup = setup_for(TARGET, SPLIT_HOME)
    code = measured_code_bytes(model, TARGET, setup, progress, safe_side=True)
    tables = measured_tiler_tables(model, TARGET, setup, progress)
    options = ReplayOptions(target=TARGET, overwrite=True, deeploy=setup_for(TARGET, SPLIT_HOME, persist_on_chip=True),
                            on_chip_code=code, on_chip_tables=tables, record_time=True)
    schedule = sweep_folder / fitting.schedule
    try:
        if not brought_on_chip(schedule, model, options, progress):
            found = _row(model.name, "split+", label, fitting)
            return replace(found, errors=f"{found.errors} ({NOTHING_MORE})")
        result = replay_schedule(schedule, model, out / "split+", options, progress)
    except CkptError as err:
        return Row(model.name, "split+", label, None, None, None, None, f"refused: {err.problem}", "-")
    found = replayed_row(replace(empty_row(label, fitting.budget_fraction, None, BASELINE, ""),
                                 check=PointCheck.NONE.value), result.report, True)
    return _row(model.name, "split+", label, found, _gvsoc_seconds(out / "split+" / "report.json"))


def _sweep(model: Path, out: Path, home: str, fractions: tuple[float, ...], time_limit: float,
           clock: Clock = Clock.WALL, costs: str = "auto"):
    options = SweepOptions(fractions=fractions, target=TARGET, jobs=1, costs=costs,
                           solve=SolveOptions(backend=BackendOptions(time_limit=time_limit, clock=clock)),
                           replay=ReplayOptions(deeploy=setup_for(TARGET, home), record_time=True))
    return run_sweep(model, out, options, progress)


def measure(model: Path, out: Path, fractions: tuple[float, ...], time_limit: float,
            clock: Clock = Clock.WALL, costs: str = "auto", own: bool = False) -> tuple[list[Row], float]:
    """The model's rows and the gvsoc seconds its sweeps spent. With `own` budgets (--budget: the graph order is
    known not to fit) one sweep runs them beside the graph order: each sweep deploys the off-chip reference again."""
    name, rows, seconds = model.name, [], 0.0
    try:
        split = _sweep(model, out / "split", SPLIT_HOME, fractions if own else (), time_limit, clock, costs)
    except CkptError as err:                       # refused: no budget brings its activations on chip
        return [Row(name, "split", "-", None, None, None, None, f"refused: {err.problem}", "-")], seconds
    seconds += split.stage_seconds.get("gvsoc", 0.0)
    base = next(r for r in split.rows if r.status == BASELINE)
    reference = next((r for r in split.rows if r.status == "reference"), None)
    if reference is not None:
        rows.append(_row(name, "all-L3", REFERENCE, reference, gvsoc_seconds(out / "split", reference)))
    rows.append(_row(name, "split", "graph order", base, gvsoc_seconds(out / "split", base)))
    fitting = base if base.fits_on_chip and base.verified else None
    if fitting is None and fractions:
        swept = split if own else _sweep(model, out / "split", SPLIT_HOME, fractions, time_limit, clock, costs)
        seconds += 0.0 if own else swept.stage_seconds.get("gvsoc", 0.0)
        points = [r for r in swept.rows if r.budget_fraction is not None and r.fits_on_chip and r.verified]
        fitting = max(points, key=lambda r: r.budget_fraction, default=None)
    if fitting is not None:
        label = "graph order (fits)" if fitting is base else fitting.label
        if fitting is not base:
            rows.append(_row(name, "split", label, fitting, gvsoc_seconds(out / "split", fitting)))
        rows.append(_split_plus(model, out, out / "split", fitting, label))
    else:
        rows.append(Row(name, "split", "none fits", None, None, None, None, "no budget of the range fits L2", "-"))
    try:
        on_chip = _sweep(model, out / "all-L2", "L2", (), time_limit, clock)
        seconds += on_chip.stage_seconds.get("gvsoc", 0.0)
        found = next(r for r in on_chip.rows if r.status == BASELINE)
        rows.append(_row(name, "all-L2", "graph order", found, gvsoc_seconds(out / "all-L2", found)))
    except CkptError as err:
        rows.append(Row(name, "all-L2", "graph order", None, None, None, None, f"does not fit: {err.problem}", "-"))
    return rows, seconds


def plot(rows: list[Row], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    markers = {"all-L3": "s", "split": "o", "split+": "D", "all-L2": "^"}
    models = list(dict.fromkeys(r.model for r in rows))
    colour = {model: plt.get_cmap("tab10")(i % 10) for i, model in enumerate(models)}
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for r in rows:
        if r.l2_total is not None and r.train_cycles is not None:
            ax.scatter(r.l2_total, r.train_cycles, marker=markers.get(r.deployment, "x"), edgecolors=colour[r.model],
                       facecolors="none" if r.deployment == "split+" else colour[r.model])
            ax.annotate(r.budget if r.budget[:1].isdigit() else "", (r.l2_total, r.train_cycles), fontsize=6,
                        xytext=(4, 4), textcoords="offset points")
    # one colour per model, one marker per deployment: two legends, not one entry per point
    model_keys = [Line2D([], [], color=colour[m], marker="o", linestyle="", label=m) for m in models]
    shown = [d for d in markers if any(r.deployment == d and r.train_cycles is not None for r in rows)]
    deployment_keys = [Line2D([], [], color="grey", marker=markers[d], linestyle="", label=d,
                              markerfacecolor="none" if d == "split+" else "grey") for d in shown]
    first = ax.legend(handles=model_keys, fontsize=7, loc="center left", title="model", title_fontsize=7)
    ax.add_artist(first)
    ax.legend(handles=deployment_keys, fontsize=7, loc="lower right", title="deployment", title_fontsize=7)
    ax.set_xlabel("L2 the step needs (B)")
    ax.set_ylabel("train cycles per mini-batch (gvsoc)")
    ax.set_yscale("log")
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, metadata={"Software": None})
    plt.close(fig)
    atomic_write(path, buffer.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a split step's train folder (repeatable)")
    parser.add_argument("-o", "--output", required=True, help="folder for on_chip.csv, on_chip.png and the sweeps")
    parser.add_argument("--range", default="0.5:0.9", help="budgets tried where the graph order does not fit L2")
    parser.add_argument("--budget", action="append", default=[], metavar="NAME=FRACTION",
                        help="a model's split budget (or NAME=LOW:HIGH), in place of --range for that model")
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--clock", choices=[c.value for c in Clock], default=Clock.WALL.value,
                        help="what --time-limit counts (cpu: the same schedules however busy the machine is)")
    parser.add_argument("--costs", default="auto", help="the op costs the split budgets are solved with, as "
                        "ckpt sweep takes them (auto: gvsoc's where measured; estimate: ckpt solve's default)")
    parser.add_argument("--include", type=Path, help="an earlier on_chip.csv whose other models' rows are kept")
    parser.add_argument("--smoke", action="store_true", help="SimpleMLP, the graph order only")
    args = parser.parse_args()
    models = [Path(m) for m in args.model] if args.model else [shared_models() / "simplemlp_train"]
    try:
        fractions, budgets = tuple(parse_range(args.range)), model_budgets(args.budget)
        earlier = included_rows(args.include, frozenset(m.name for m in models)) if args.include else []
    except (CkptError, OSError) as err:
        parser.error(err.problem if isinstance(err, CkptError) else str(err))
    if args.smoke:
        models, fractions, budgets, earlier = models[:1], (), {}, []
    out = Path(args.output)
    own = "".join(f"; {name}: {', '.join(map(str, found))}" for name, found in budgets.items())
    print(f"Deeploy {deeploy_label()}; target {TARGET}; budgets tried where the graph order does not fit: "
          f"{args.range if fractions else 'none'}{own}")
    print()
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        print_needs_branch(models, len(COLUMNS), blank_before=1)
        return 0
    rows, seconds = [], {}
    for row in earlier:
        print("| " + " | ".join(row.cells()) + " | (included)", flush=True)
    for model in models:
        found, seconds[model.name] = measure(model, out / model.name, budgets.get(model.name, fractions),
                                             args.time_limit, Clock(args.clock), args.costs, model.name in budgets)
        for row in found:
            seconds_cell = "" if row.gvsoc_seconds is None else f" {row.gvsoc_seconds:.0f} s gvsoc"
            print("| " + " | ".join(row.cells()) + f" |{seconds_cell}", flush=True)
        rows.extend(found)
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    rows = earlier + rows
    writer.writerow(COLUMNS)
    writer.writerows(row.cells() for row in rows)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write(out / "on_chip.csv", text.getvalue().encode())
    plot(rows, out / "on_chip.png")
    print()
    print("gvsoc seconds per model (its rows): " + ", ".join(
        f"{m} {sum(r.gvsoc_seconds or 0 for r in rows if r.model == m):.0f}" for m in seconds))
    print(f"wrote {out / 'on_chip.csv'} and {out / 'on_chip.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
