"""Operating-point rows and their renderings: a terminal table, markdown, CSV and JSON."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class PointRow:
    """One operating point of a sweep; a field is None where it was not measured (the reason says why)."""

    label: str                       # "baseline" or the budget as given
    budget_fraction: float | None
    budget_bytes: int | None
    predicted_peak: int | None
    replayed_peak: int | None
    deeploy_nontiled: int | None
    deeploy_tiled_l3: int | None
    deeploy_tiled_l2: int | None
    deeploy_tiled_l1: int | None
    persistent_bytes: int | None
    recomputes: int | None
    clones_kept: int | None
    recompute_cost: int | None
    cost_increase_pct: float | None
    cycles: str                      # measured train cycles, or "not simulated"
    errors: str                      # "0/16", "2/16", or "not verified"
    status: str                      # solver status, or why the point has no schedule
    gap: float | None
    seconds: float | None
    schedule: str | None             # path of the point's seq.json, relative to the sweep folder


COLUMNS = [
    ("point", "label"), ("budget B", "budget_bytes"), ("predicted", "predicted_peak"),
    ("replayed", "replayed_peak"), ("Deeploy", "deeploy_nontiled"), ("tiled L3", "deeploy_tiled_l3"),
    ("recomp", "recomputes"), ("clones", "clones_kept"), ("cost +%", "cost_increase_pct"),
    ("cycles", "cycles"), ("Errors", "errors"), ("status", "status"), ("gap", "gap"), ("s", "seconds"),
]


def _cell(row: PointRow, key: str) -> str:
    value = getattr(row, key)
    if value is None:
        return "-"
    if key == "gap":
        return f"{100 * value:.2f}%"
    if key in ("cost_increase_pct", "seconds"):
        return f"{value:.1f}"
    return str(value)


def terminal_table(rows: list[PointRow]) -> str:
    cells = [[title for title, _ in COLUMNS]] + [[_cell(r, key) for _, key in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in cells)


def markdown_table(rows: list[PointRow]) -> str:
    lines = ["| " + " | ".join(title for title, _ in COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_cell(r, key) for _, key in COLUMNS) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def csv_text(rows: list[PointRow]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(PointRow)], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(asdict(row))
    return out.getvalue()


def json_text(rows: list[PointRow]) -> str:
    return json.dumps([asdict(r) for r in rows], indent=2, sort_keys=True) + "\n"
