"""A sweep's files people read: the table as Markdown, CSV and JSON, and the Pareto plot."""
from __future__ import annotations

from pathlib import Path

from ckpt.budgets.plot import pareto_plot, time_axis
from ckpt.budgets.table import csv_text, json_text, markdown_table
from ckpt.deeploy_identity import deeploy_label
from ckpt.files import atomic_write, printable
from ckpt.pipeline.row import REFERENCE, PointRow, over_off_chip
from ckpt.solver.model.records import SolveOptions
from ckpt.targets import uses_deeploy


def write_reports(outdir: Path, rows: list[PointRow], model: str, target: str, solve: SolveOptions,
                  lower_bound: int, baseline_peak: int, said: list[str] = ()) -> list[Path]:
    """sweep.md, sweep.csv, sweep.json and the Pareto plot (PNG and SVG) of one model's sweep; `said`: why a
    column is empty for every point (budgets.table.column_notes), under the table's facts."""
    header = {"model": model, "target": target, "baseline_peak_bytes": baseline_peak,
              "lower_bound_bytes": lower_bound, "method": solve.method, "time_limit": solve.backend.time_limit,
              **({"notes": list(said)} if said else {}),
              **({"overheads_over": REFERENCE} if over_off_chip(rows) else {})}   # the baseline does not fit its home
    made = f"Deeploy {deeploy_label()} lowered the graph and generated the code. " if uses_deeploy(target) else ""
    if made:
        header["deeploy"] = deeploy_label()
    facts = (f"Baseline peak {baseline_peak} B (graph order, no recompute); single-op lower bound {lower_bound} B. "
             f"{made}Seconds are wall time and differ run to run.\n\n" + "".join(f"{note}\n\n" for note in said))
    written = write_tables(outdir, rows, header, f"{Path(model).name} (target {target})", facts)
    plotted = [r for r in rows if r.label != REFERENCE]         # the off-chip reference is another deployment
    title = printable(f"{Path(model).name} ({target}): replayed peak against {time_axis(plotted)[2]}")
    return written + pareto_plot(plotted, lower_bound, outdir / "pareto", title)


def write_tables(outdir: Path, rows: list[PointRow], header: dict, what: str = "", facts: str = "") -> list[Path]:
    title = f"# ckpt sweep: {what or ', '.join(header.get('models', []))}\n\n"
    written = []
    table = markdown_table(rows, header.get("target"))
    for name, text in (("sweep.md", title + facts + table), ("sweep.csv", csv_text(rows, header.get("target"))),
                       ("sweep.json", json_text(rows, header))):
        atomic_write(outdir / name, text)
        written.append(outdir / name)
    return written
