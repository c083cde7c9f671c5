"""A sweep's rows (pipeline.row.PointRow) rendered: a terminal table, markdown, CSV and JSON."""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, fields

from ckpt.pipeline.row import PointRow

COLUMNS = [
    ("point", "label"), ("budget", "budget_fraction"), ("budget B", "budget_bytes"),
    ("predicted", "predicted_peak"), ("replayed", "replayed_peak"), ("heap", "heap"),
    ("arena pred", "arena_predicted"), ("L3 const", "static_l3"), ("L3 arena", "arena_l3"), ("L3 total", "total_l3"),
    ("L2 total", "total_l2"), ("L1 total", "total_l1"),
    ("persistent", "persistent_bytes"), ("recomp", "recomputes"),
    ("clones", "clones_kept"), ("cost", "recompute_cost"), ("cost +%", "cost_increase_pct"),
    ("cycles", "cycles"), ("Errors", "errors"), ("host Errors", "host_errors"), ("code = graph order", "code_check"),
    ("replay check", "check"), ("status", "status"),
    ("gap", "gap"), ("s", "seconds"),
]


def _cell(row: PointRow, key: str) -> str:
    value = getattr(row, key)
    if value is None:
        return "-"
    if key == "gap":
        return f"{100 * value:.2f}%"
    if key == "cost_increase_pct":
        return f"{value:.2f}"
    if key == "seconds":
        return f"{value:.1f}"
    if key == "budget_fraction":
        return f"{value:g}"
    return str(value)


def notes(rows: list[PointRow]) -> list[str]:
    """One line per point with a reason: what the table's '-' cells mean."""
    return [f"{r.label}: {r.reason}" for r in rows if r.reason]


def terminal_table(rows: list[PointRow]) -> str:
    cells = [[title for title, _ in COLUMNS]] + [[_cell(r, key) for _, key in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(line, widths)) for line in cells]
    return "\n".join(lines + notes(rows))


def markdown_table(rows: list[PointRow]) -> str:
    titles = [title for title, _ in COLUMNS] + ["reason"]
    lines = ["| " + " | ".join(titles) + " |", "|" + "---|" * len(titles)]
    lines += ["| " + " | ".join([_cell(r, key) for _, key in COLUMNS] + [r.reason.replace("|", "/")]) + " |"
              for r in rows]
    return "\n".join(lines) + "\n"


def csv_text(rows: list[PointRow]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[f.name for f in fields(PointRow)], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow(asdict(row))
    return out.getvalue()


def json_text(rows: list[PointRow], extra: dict | None = None) -> str:
    doc = {**(extra or {}), "points": [asdict(r) for r in rows]}
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"
