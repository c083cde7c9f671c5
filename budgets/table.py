"""A sweep's rows (pipeline.row.PointRow) rendered: a terminal table, markdown, CSV and JSON."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, fields

from ckpt.deeploy_identity import deeploy_label
from ckpt.pipeline.row import REFERENCE, PointRow
from ckpt.targets import TARGET_TABLE, uses_deeploy

HEAD = [("point", "label"), ("budget", "budget_fraction"), ("budget B", "budget_bytes"),
        ("predicted", "predicted_peak"), ("replayed", "replayed_peak"), ("heap", "heap"),
        ("non-tiled arena", "non_tiled_arena"), ("arena pred", "arena_predicted")]
TAIL = [("on chip B", "on_chip"), ("fits {on_chip}", "fits_on_chip"), ("persistent", "persistent_bytes"),
        ("recomp", "recomputes"), ("clones", "clones_kept"),
        ("cost", "recompute_cost"), ("cost +%", "cost_increase_pct"), ("cycles pred", "cycles_predicted"),
        ("cycles", "cycles"), ("+% pred", "overhead_pct_predicted"), ("+%", "overhead_pct"), ("Errors", "errors"),
        ("host Errors", "host_errors"), ("code = graph order", "code_check"), ("replay check", "check"),
        ("status", "status"), ("gap", "gap"), ("s", "seconds")]
OPTIMIZER = [("opt cycles pred", "optimizer_cycles_predicted"), ("opt cycles", "optimizer_cycles")]
LEVEL_PARTS = (("const", "static"), ("arena", "arena"), ("total", "total"))
PERCENT = {"cost_increase_pct", "overhead_pct", "overhead_pct_predicted"}


def on_chip_name(target: str | None) -> str:
    """The target's on-chip level as the table names it: what `on chip B` is counted against."""
    chip = TARGET_TABLE.get(target) if target else None
    return chip.on_chip if chip is not None and chip.on_chip else "on-chip memory"


def level_names(rows: list[PointRow]) -> list[str]:
    """The memory levels the rows have figures for, outermost first."""
    return sorted({name for r in rows for name in r.levels}, reverse=True)


def columns(rows: list[PointRow], target: str | None = None) -> list[tuple[str, str]]:
    """(title, key) per column; a level's key is `<level>.<part>` (its static, arena or total). `target`: the
    rows' target, whose on-chip level names the column saying whether the step fits there."""
    levels = level_names(rows)
    homes = [r.home for r in rows if r.home in levels]
    home = homes[:1] or levels[:1]               # the tiled flow's home level (--home): its parts, the others' totals
    per_level = [(f"{name} {title}", f"{name}.{part}") for name in home for title, part in LEVEL_PARTS]
    per_level += [(f"{name} total", f"{name}.total") for name in levels if name not in home]
    tail = [(title.format(on_chip=on_chip_name(target)), key) for title, key in TAIL]
    if any(r.optimizer_cycles is not None or r.optimizer_cycles_predicted is not None for r in rows):
        at = next(i for i, (_, key) in enumerate(tail) if key == "cycles") + 1   # a split step: its second network
        tail[at:at] = OPTIMIZER
    if any(r.device_check != "-" for r in rows):
        at = next(i for i, (_, key) in enumerate(tail) if key == "code_check") + 1
        tail[at:at] = [("gvsoc = graph order", "device_check")]
    return HEAD + per_level + tail


def value(row: PointRow, key: str):
    if "." in key:
        level, part = key.split(".")
        figures = row.levels.get(level)
        return getattr(figures, part) if figures is not None else None
    return getattr(row, key)


def _cell(row: PointRow, key: str) -> str:
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
        return "yes" if found else f"no (+{row.on_chip - row.on_chip_capacity})"
    if key == "status" and order_relative(row):
        return f"{found} {ORDER_MARK}"
    return str(found)


ORDER_MARK = "(order)"


def order_relative(row: PointRow) -> bool:
    """An optimal schedule with recomputes: proven the cheapest over its stage order, not over every order."""
    return row.status == "optimal" and bool(row.recompute_cost)


def notes(rows: list[PointRow], target: str | None = None) -> list[str]:
    """One line per point with a reason: what the table's '-' cells mean; what an order-relative optimum is; then
    whether the step fits on chip, and which Deeploy lowered the graph and generated the code."""
    made = [f"Deeploy {deeploy_label()} lowered the graph and generated the code"] if uses_deeploy(target) else []
    return [f"{r.label}: {r.reason}" for r in rows if r.reason] + order_notes(rows) + on_chip_notes(rows, target) \
        + made


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
        found.append("cycles: - for every point: " + (f"not simulated ({unsimulated})" if unsimulated else
                                                        "no step ran on gvsoc (each point's reason says why)"))
    return found


def terminal_table(rows: list[PointRow], target: str | None = None, said: list[str] = ()) -> str:
    cols = columns(rows, target)
    cells = [[title for title, _ in cols]] + [[_cell(r, key) for _, key in cols] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cols))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in cells]
    return "\n".join(lines + list(said) + notes(rows, target))


def markdown_table(rows: list[PointRow], target: str | None = None) -> str:
    cols = columns(rows, target)
    titles = [title for title, _ in cols] + ["reason"]
    lines = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
    lines += ["| " + " | ".join([_cell(r, key) for _, key in cols] + [r.reason.replace("|", "/")]) + " |"
              for r in rows]
    notes = order_notes(rows)
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def flat(row: PointRow, levels: list[str]) -> dict:
    """The row as one flat record (CSV): each level's figures as `<part>_<level>` fields."""
    doc = {k: v for k, v in asdict(row).items() if k not in ("levels", "device_state", "on_chip_parts")}
    for name in levels:
        for _, part in LEVEL_PARTS:
            doc[f"{part}_{name}"] = value(row, f"{name}.{part}")
    return doc


def csv_text(rows: list[PointRow]) -> str:
    levels = level_names(rows)
    names = [f.name for f in fields(PointRow) if f.name != "levels"]
    names += [f"{part}_{name}" for name in levels for _, part in LEVEL_PARTS]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=names, lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(flat(row, levels))
    return out.getvalue()


def _json_row(row: PointRow) -> dict:
    doc = asdict(row)
    doc["levels"] = {name: {**asdict(fig), "total": fig.total} for name, fig in sorted(row.levels.items())}
    return doc


def json_text(rows: list[PointRow], extra: dict | None = None) -> str:
    doc = {**(extra or {}), "points": [_json_row(r) for r in rows]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
