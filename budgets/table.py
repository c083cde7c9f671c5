"""Operating-point rows and their renderings: a terminal table, markdown, CSV and JSON.

Every point of a sweep is a row, whatever happened to it: a field is None ("-") where it was not measured and
`reason` says why, so an infeasible, timed-out or unverified point is visible rather than missing.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, fields


@dataclass(frozen=True)
class PointRow:
    """One operating point of a sweep."""

    label: str                       # "baseline" or the budget fraction as given ("0.8")
    budget_fraction: float | None
    budget_bytes: int | None
    predicted_peak: int | None       # ckpt's replay semantics on the graph it solved on
    replayed_peak: int | None        # the same on the rewired graph the replay deploys
    deeploy_nontiled: int | None     # Deeploy's worst-case dynamic bytes, non-tiled flow
    deeploy_tiled_l3: int | None     # Deeploy's tiled arenas per level
    deeploy_tiled_l2: int | None
    deeploy_tiled_l1: int | None
    persistent_bytes: int | None
    recomputes: int | None
    clones_kept: int | None
    recompute_cost: int | None       # cycles (ckpt's cost model) the recomputes add
    cost_increase_pct: float | None  # ... as % of the baseline step
    cycles: str                      # gvsoc's train cycles, or "not simulated"
    errors: str                      # "N/M" (gvsoc's when simulated, else the host's golden check), or why not
    check: str                       # replayed order vs graph order: bit-identical, MISWIRED, not verified, -
    status: str                      # solver status (optimal, feasible, heuristic, baseline), or infeasible, ...
    reason: str                      # why a point has no verified schedule, or what its Errors mean ("" if nothing)
    gap: float | None
    seconds: float | None            # solver seconds (timed: differs run to run)
    schedule: str | None             # the point's seq.json, relative to the sweep folder

    @property
    def verified(self) -> bool:
        return self.check == "bit-identical" and self.replayed_peak is not None


COLUMNS = [
    ("point", "label"), ("budget", "budget_fraction"), ("budget B", "budget_bytes"),
    ("predicted", "predicted_peak"), ("replayed", "replayed_peak"), ("Deeploy", "deeploy_nontiled"),
    ("tiled L3", "deeploy_tiled_l3"), ("persistent", "persistent_bytes"), ("recomp", "recomputes"),
    ("clones", "clones_kept"), ("cost", "recompute_cost"), ("cost +%", "cost_increase_pct"),
    ("cycles", "cycles"), ("Errors", "errors"), ("replay check", "check"), ("status", "status"),
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
