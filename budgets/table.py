"""A sweep's rows (pipeline.row.PointRow) rendered: a terminal table, markdown, CSV and JSON."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass

from ckpt.deeploy_identity import deeploy_label
from ckpt.pipeline.row import BASELINE, REFERENCE, PointCheck, PointRow, over_off_chip
from ckpt.pipeline.solve_summary import OVER_OP_COSTS
from ckpt.targets import TARGET_TABLE, uses_deeploy


@dataclass(frozen=True)
class Column:
    """One column of the table: its title, the CSV fields it shows (in that order) and what it means."""

    title: str
    keys: tuple[str, ...]
    legend: str


MAIN = [Column("point", ("label",), "the budget as given (a fraction of the baseline peak), or baseline: the graph "
                                    "order with no recompute"),
        Column("budget B", ("budget_bytes",), "the budget in bytes (live activations)"),
        Column("peak B", ("peak",), "the live activation peak of the replayed schedule (else the predicted one)"),
        Column("on chip B", ("on_chip",), "what the whole step needs in {on_chip} to run on chip: its code and data, "
                                          "what it allocates there, and, home off chip, its constants "
                                          "and arena brought in (the parts: on_chip_parts in sweep.json)"),
        Column("fits {on_chip}", ("fits_on_chip",), "whether that fits the chip's {on_chip} (no: by how many bytes "
                                                   "it misses)"),
        Column("train cycles", ("cycles",), "the deployed (tiled) step's cycles on gvsoc, measured (a split step: "
                                            "its train network per mini-batch); run from several starting states "
                                            "(--gvsoc-draws), their median and, in brackets, the least and most"),
        Column("+% (pred)", ("overhead_pct", "overhead_pct_predicted"),
               "train cycles over the baseline's, measured on gvsoc, and in brackets as predicted from the "
               "calibrated op costs (%)"),
        Column("Errors host, gvsoc", ("code_errors", "gvsoc_errors"),
               "Errors N/M by the rule of Deeploy's harness: of the generated code run on this host (target none: "
               "ckpt's host executor), and of the step on gvsoc (- not simulated)"),
        Column("recomp", ("recomputes",), "recomputed executions in the schedule"),
        Column("status", ("status",), "the solver's status (optimal, feasible, heuristic, baseline) or why the "
                                      "point has no schedule (infeasible, timeout, error)")]
DETAIL = [Column("budget", ("budget_fraction",), "the budget as a fraction of the baseline peak"),
          Column("predicted", ("predicted_peak",), "the live peak ckpt predicts for the schedule"),
          Column("replayed", ("replayed_peak",), "the live peak of the rewired graph the replay deploys"),
          Column("heap", ("heap",), "the first-fit L2 heap Deeploy's own non-tiled code would need"),
          Column("non-tiled arena", ("non_tiled_arena",), "what the generated non-tiled code allocates for its "
                                                          "buffers (else ckpt's layout of them)"),
          Column("Deeploy non-tiled", ("deeploy_nontiled",), "Deeploy's own non-tiled memory counter"),
          Column("arena pred", ("arena_predicted",), "ckpt's predicted arena of the home level"),
          Column("home", ("home",), "the tiled flow's home level (--home), where its constants and arena live")]
LEVEL_PARTS = (("const", "static"), ("arena", "arena"), ("total", "total"))
LEVEL_LEGEND = {"static": "the constants Deeploy's tiler counts in {level} (its count: with the shape constants "
                          "its code never declares there)",
                "arena": "the arena the generated tiled code reserves in {level}",
                "total": "{level} in all: constants (Deeploy's count) + the arena the generated tiled code reserves "
                         "(not the code itself: see on chip B)"}
DETAIL_TAIL = [
    Column("capacity B", ("on_chip_capacity",), "the bytes the chip's {on_chip} gives the step"),
    Column("persistent", ("persistent_bytes",), "bytes live through the whole step (weights' gradients, state)"),
    Column("split+ on chip", ("persist_on_chip", "persist_on_chip_bytes"),
           "--persist-on-chip auto: how many persistent tensors (Deeploy's names; an in-place copy is named apart "
           "from its tensor) the point brings into {on_chip}, and their bytes (a shared copy counted once)"),
    Column("parked", ("parked", "parked_bytes"),
           "--park auto: how many activations (Deeploy's names) the point's schedule parks off chip for the whole "
           "step, and their bytes"),
    Column("clones", ("clones_kept",), "recompute clones the replayed graph keeps"),
    Column("cost", ("recompute_cost",), "the recomputes' cycles by ckpt's cost model"),
    Column("cost +%", ("cost_increase_pct",), f"that cost {OVER_OP_COSTS} (%), ckpt's cost model"),
    Column("cycles pred", ("cycles_predicted",), "the step's cycles predicted: the calibrated graph-order step + "
                                                 "the recomputes' measured costs"),
    Column("opt cycles pred", ("optimizer_cycles_predicted",), "a split step: its optimizer network's cycles as "
                                                               "the calibration measured them"),
    Column("opt cycles", ("optimizer_cycles",), "a split step: its optimizer network's cycles on gvsoc (several "
                                                "draws: their median, the least and most in brackets)"),
    Column("Errors", ("errors",), "the verdict: gvsoc's Errors when simulated, else the generated code's on this "
                                  "host; failed / not run: see the point's line"),
    Column("host Errors", ("host_errors",), "ckpt's numpy host executor against the goldens, same rule"),
    Column("code = graph order", ("code_check",), "whether the generated code's outputs equal the graph order's "
                                                  "code's, bit for bit"),
    Column("gvsoc = graph order", ("device_check",), "a split step on gvsoc: its weights at the end against the "
                                                     "baseline's"),
    Column("replay check", ("check",), "whether the replayed order computes what the graph order computes on "
                                       "the host, bit for bit"),
    Column("gap", ("gap",), "the solver's optimality gap"),
    Column("s", ("seconds",), "solver wall time (differs run to run)"),
    Column("schedule", ("schedule",), "the point's seq.json in the sweep folder"),
    Column("reason", ("reason",), "why the point has no verified schedule, or what its Errors mean")]
PERCENT = {"cost_increase_pct", "overhead_pct", "overhead_pct_predicted"}
NOISE_PCT = 1.0          # below this, a change of cycles with no recompute is the code's layout, not work


def on_chip_name(target: str | None) -> str:
    """The target's on-chip level as the table names it: what `on chip B` is counted against."""
    chip = TARGET_TABLE.get(target) if target else None
    return chip.on_chip if chip is not None and chip.on_chip else "on-chip memory"


def level_names(rows: list[PointRow]) -> list[str]:
    """The memory levels the rows have figures for, outermost first."""
    return sorted({name for r in rows for name in r.levels}, reverse=True)


def _level_columns(rows: list[PointRow]) -> list[Column]:
    """The home level's constants, arena and total, then every other level's total."""
    levels = level_names(rows)
    homes = [r.home for r in rows if r.home in levels]
    home = homes[:1] or levels[:1]               # the tiled flow's home level (--home): its parts, the others' totals
    found = [Column(f"{name} {title}", (f"{name}.{part}",), LEVEL_LEGEND[part].format(level=name))
             for name in home for title, part in LEVEL_PARTS]
    return found + [Column(f"{name} total", (f"{name}.total",), LEVEL_LEGEND["total"].format(level=name))
                    for name in levels if name not in home]


def _named(found: list[Column], target: str | None) -> list[Column]:
    chip = on_chip_name(target)
    return [Column(c.title.format(on_chip=chip), c.keys, c.legend.format(on_chip=chip)) for c in found]


OFF_CHIP_OVERHEAD = Column("+% off chip (pred)", ("overhead_pct", "overhead_pct_predicted"),
                           "train cycles over the off-chip graph order's (its row; the baseline does not fit "
                           "{on_chip}), measured on gvsoc, and in brackets as predicted from the calibrated op costs "
                           "over the same measured cycles (%)")


def main_columns(target: str | None = None, rows: list[PointRow] = ()) -> list[Column]:
    """The ten columns the terminal and the top of sweep.md show; where the baseline does not fit its home, the
    overheads are over the off-chip graph order (pipeline.row.with_overheads), and their column says so."""
    found = [OFF_CHIP_OVERHEAD if c.keys == OFF_CHIP_OVERHEAD.keys and over_off_chip(rows) else c for c in MAIN]
    return _named(found, target)


def detail_columns(rows: list[PointRow], target: str | None = None) -> list[Column]:
    """Everything else, in the CSV's order: the second section of sweep.md."""
    return _named(DETAIL + _level_columns(rows) + DETAIL_TAIL, target)


def columns(rows: list[PointRow], target: str | None = None) -> list[tuple[str, str]]:
    """(title, key) per CSV field, main columns first, then the details, in the CSV's order; a level's key is
    `<level>.<part>` (its static, arena or total)."""
    return [(c.title, key) for c in main_columns(target, rows) + detail_columns(rows, target) for key in c.keys]


def value(row: PointRow, key: str):
    if "." in key:
        level, part = key.split(".")
        figures = row.levels.get(level)
        return getattr(figures, part) if figures is not None else None
    return getattr(row, key)


def _field(row: PointRow, key: str) -> str:
    found = value(row, key)
    if found is None:
        return "-"
    if key == "gap":
        return f"{100 * found:.2f}%"
    if key in PERCENT:
        return f"{found:.2f}"
    if key == "seconds":
        return f"{found:.1f}"
    if key == "budget_fraction":
        return f"{found:g}"
    if key == "fits_on_chip":
        return "yes" if found else f"no (+{row.on_chip - row.on_chip_capacity:,})"
    if key == "status" and order_relative(row):
        return f"{found} {ORDER_MARK}"
    if isinstance(found, int) and not isinstance(found, bool) and key not in ("label",):
        return f"{found:,}"
    return str(found)


def _cell(row: PointRow, column: Column) -> str:
    cells = [_field(row, key) for key in column.keys]
    if column.keys == ("overhead_pct", "overhead_pct_predicted"):
        return cells[0] if cells[1] == "-" else f"{cells[0]} ({cells[1]})"
    if column.keys in (("persist_on_chip", "persist_on_chip_bytes"), ("parked", "parked_bytes")):
        return cells[0] if cells[1] == "-" else f"{cells[0]} ({cells[1]} B)"
    draws = {("cycles",): row.cycles_draws, ("optimizer_cycles",): row.optimizer_draws}.get(column.keys)
    if draws and cells[0] != "-":
        return f"{cells[0]} ({min(draws):,}..{max(draws):,})"
    return ", ".join(cells)


ORDER_MARK = "(order)"


def order_relative(row: PointRow) -> bool:
    """An optimal schedule with recomputes: proven the cheapest over its stage order, not over every order."""
    return row.status == "optimal" and bool(row.recompute_cost)


def point_lines(rows: list[PointRow]) -> list[str]:
    """One line per point that needs a word: a failed check, a point without a verified schedule (its reason), a
    peak below the baseline's with no recompute (reordering alone), cycles that moved with no recompute (the code's
    layout, not work)."""
    base = next((r for r in rows if r.status == BASELINE), None)
    found = []
    for r in rows:
        words = []
        failed = [f"replay check {r.check}"] if PointCheck(r.check).failed else []
        if r.code_failed:
            failed.append("gvsoc failed" if r.gvsoc_errors == "failed" else f"generated code {r.code_check}, "
                          f"Errors {r.errors}")
        if failed:
            words.append("FAILED (" + ", ".join(failed) + ")")
        if r.reason:
            words.append(r.reason)
        if r.status == BASELINE and r.check == PointCheck.DOES_NOT_FIT:
            words.append("the points' +% are over the off-chip graph order's cycles instead")
        if r.recomputes == 0 and r.status != BASELINE and r.label != REFERENCE and base is not None:
            if r.peak is not None and base.peak and r.peak < base.peak:
                how = f"from reordering and {r.parked} activation(s) parked off chip" if r.parked else \
                    "from reordering alone"
                words.append(f"no recompute: its peak is {base.peak - r.peak:,} B "
                             f"({100 * (base.peak - r.peak) / base.peak:.1f}%) below the baseline's {how}")
            if r.overhead_pct and abs(r.overhead_pct) < NOISE_PCT and not r.parked:
                words.append(f"its {r.overhead_pct:+.2f}% cycles are code layout (the same ops in another order and "
                             "place), not recompute")
        if words:
            found.append(f"{r.label}: " + "; ".join(words))
    return found


def notes(rows: list[PointRow], target: str | None = None) -> list[str]:
    """The points' lines (point_lines), then the table's notes (table_notes)."""
    return point_lines(rows) + table_notes(rows, target)


def table_notes(rows: list[PointRow], target: str | None = None) -> list[str]:
    """What an order-relative optimum is; whether the step fits on chip; which Deeploy lowered the graph and
    generated the code."""
    made = [f"Deeploy {deeploy_label()} lowered the graph and generated the code"] if uses_deeploy(target) else []
    return order_notes(rows) + on_chip_notes(rows, target) + made


def order_notes(rows: list[PointRow]) -> list[str]:
    """What `optimal (order)` in the status column means, where a row says it."""
    return [f"optimal {ORDER_MARK}: proven the cheapest over the schedule's stage order (its seq.json's "
            "solver.space); a schedule of another order may cost less"] if any(map(order_relative, rows)) else []


def on_chip_notes(rows: list[PointRow], target: str | None = None) -> list[str]:
    """The largest budget whose whole step fits the chip's on-chip level, or by how much the smallest misses it;
    with the home on chip, its cycles beside the graph order's off chip (the reference row)."""
    reference = next((r for r in rows if r.label == REFERENCE), None)
    known = [r for r in rows if r.fits_on_chip is not None and r.label != REFERENCE]
    if not known:
        return []
    fitting = [r for r in known if r.fits_on_chip]
    capacity, level = known[0].on_chip_capacity, on_chip_name(target)
    if fitting:
        best = max(fitting, key=lambda r: r.budget_fraction if r.budget_fraction is not None else 2.0)
        line = (f"on chip: the whole step fits the {capacity:,} B of {level} at point {best.label} ({best.on_chip:,} B)"
                + ("" if best.budget_fraction is None else ", the largest budget that does"))
        if reference is not None and reference.cycles and best.cycles:
            line += (f"; there {best.cycles:,} cycles per step against {reference.cycles:,} for the graph order off "
                     f"chip ({reference.home}): {reference.cycles / best.cycles:.2f}x fewer")
        return [line]
    least = min(known, key=lambda r: r.on_chip)
    parts = sorted(least.on_chip_parts.items(), key=lambda kv: (-kv[1], kv[0]))
    said = f": {', '.join(f'{name} {nbytes:,} B' for name, nbytes in parts)}, {parts[0][0]} the most" if parts else ""
    return [f"on chip: no point's step fits the {capacity:,} B of {level}; the smallest, point {least.label}, needs "
            f"{least.on_chip:,} B ({least.on_chip - capacity:,} B over){said}"]


def column_notes(rows: list[PointRow], estimated: str, unsimulated: str) -> list[str]:
    """Why the cycle columns are '-' for every point, where one reason holds for all: the op costs are ckpt's
    estimate (`estimated`, so nothing predicts cycles), or no step ran on gvsoc (`unsimulated`; else each point's
    reason says why its own did not)."""
    found = []
    if rows and all(r.cycles_predicted is None for r in rows):
        found.append(f"cycles pred: - for every point: {estimated or 'the op costs were not measured on gvsoc'}")
    if rows and all(r.cycles is None for r in rows):
        found.append("train cycles: - for every point: " + (
            f"not simulated ({unsimulated})" if unsimulated else "no step ran on gvsoc (each point's reason says why)"))
    return found


def _grid(titles: list[str], cells: list[list[str]]) -> list[str]:
    widths = [max(len(line[i]) for line in [titles] + cells) for i in range(len(titles))]
    return ["  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in [titles] + cells]


def _markdown(titles: list[str], cells: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)] + \
        ["| " + " | ".join(c.replace("|", "/") for c in line) + " |" for line in cells]


def terminal_table(rows: list[PointRow], target: str | None = None, said: list[str] = ()) -> str:
    """The ten main columns, a line per point that needs a word, then the notes."""
    cols = main_columns(target, rows)
    lines = _grid([c.title for c in cols], [[_cell(r, c) for c in cols] for r in rows])
    return "\n".join(lines + point_lines(rows) + list(said) + table_notes(rows, target))


def _shown_details(rows: list[PointRow], target: str | None) -> list[Column]:
    """The detail columns sweep.md shows: a split step's and gvsoc's comparison only where a row has them."""
    optional = {"optimizer_cycles", "optimizer_cycles_predicted", "device_check", "persist_on_chip", "parked"}
    return [c for c in detail_columns(rows, target)
            if not set(c.keys) & optional or any(_cell(r, c) != "-" for r in rows)]


def markdown_table(rows: list[PointRow], target: str | None = None) -> str:
    """The main table and the points' lines and notes; then every other figure (in the CSV's order) and a legend."""
    cols = main_columns(target, rows)
    lines = _markdown([c.title for c in cols], [[_cell(r, c) for c in cols] for r in rows])
    said = point_lines(rows) + order_notes(rows) + on_chip_notes(rows, target)
    lines += [""] + [f"- {line}" for line in said] if said else []
    details = _shown_details(rows, target)
    lines += ["", "## Every figure", ""] + _markdown(["point"] + [c.title for c in details],
                                                     [[r.label] + [_cell(r, c) for c in details] for r in rows])
    lines += ["", "## Legend", "", "Columns in the order of sweep.csv (its field names in brackets); bytes unless "
              "named otherwise; - where a figure was not measured (the point's line or reason says why).", ""]
    lines += [f"- **{c.title}** (`{'`, `'.join(_csv_names(c.keys))}`): {c.legend}"
              for c in main_columns(target, rows) + detail_columns(rows, target)]
    return "\n".join(lines) + "\n"


def _csv_name(key: str) -> str:
    level, _, part = key.partition(".")
    return f"{part}_{level}" if part else key


def _csv_names(keys) -> list[str]:
    return [_csv_name(key) for key in keys]


def csv_text(rows: list[PointRow], target: str | None = None) -> str:
    """Every figure, one field each, in the order of the tables (main columns first)."""
    keys = [key for _, key in columns(rows, target)]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(_csv_names(keys))
    for row in rows:
        writer.writerow(["" if value(row, key) is None else value(row, key) for key in keys])
    return out.getvalue()


def _json_row(row: PointRow) -> dict:
    doc = asdict(row)
    doc["levels"] = {name: {**asdict(fig), "total": fig.total} for name, fig in sorted(row.levels.items())}
    return doc


def json_text(rows: list[PointRow], extra: dict | None = None) -> str:
    doc = {**(extra or {}), "points": [_json_row(r) for r in rows]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
