"""The Pareto plot of a sweep: memory against step time, each point labelled with its budget.

The time axis is the step's cycles over the baseline's: measured on gvsoc where the points were simulated, else
predicted (the calibrated costs, or ckpt's estimate); the axis says which.

Left: the live activation peak, with the baseline and the single-op lower bound marked. Right: what the device
reserves for the same schedules: the non-tiled code's arena (or, with --allocator heap, its first-fit heap) and,
where the tiled flow ran, the
home level's arena and its total (constants + arena) as the generated code reserves them. Points without a
replayed schedule are listed rather than dropped. Files are rendered in memory (matplotlib's object API, no
global backend) and renamed into place, and carry no dates, so the same rows give the same bytes.
"""
from __future__ import annotations

import io
from pathlib import Path

import matplotlib
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ckpt.files import write_bytes
from ckpt.pipeline.row import BASELINE, PointRow, over_off_chip

KIB = 1024


def time_axis(rows: list[PointRow]) -> tuple[str, str, str]:
    """(row field, axis label, what the title calls it) of the time axis: measured cycles when every placed point
    has them, else the predicted ones, else ckpt's estimate."""
    placed = [r for r in rows if r.replayed_peak is not None]
    over = "the off-chip graph order" if over_off_chip(rows) else "the baseline"
    if placed and all(r.overhead_pct is not None for r in placed):
        return "overhead_pct", f"step cycles over {over}, measured on gvsoc (%)", "measured step cycles"
    if placed and all(r.overhead_pct_predicted is not None for r in placed):
        return ("overhead_pct_predicted", f"step cycles over {over}, predicted from measured op costs (%)",
                "predicted step cycles")
    return ("cost_increase_pct", "recompute cost (% cycles over the baseline step, ckpt's estimate)",
            "estimated recompute cost")


def _x(row: PointRow, key: str) -> float:
    return getattr(row, key)


def pareto_front(rows: list[PointRow], key: str = "cost_increase_pct") -> list[PointRow]:
    """Rows no other row beats on both peak and time, by increasing time."""
    placed = _placed(rows, key)
    front = [r for r in placed if not any(
        (o.replayed_peak <= r.replayed_peak and _x(o, key) <= _x(r, key))
        and (o.replayed_peak < r.replayed_peak or _x(o, key) < _x(r, key)) for o in placed)]
    return sorted(front, key=lambda r: (_x(r, key), -r.replayed_peak))


def _placed(rows: list[PointRow], key: str = "cost_increase_pct") -> list[PointRow]:
    return [r for r in rows if r.replayed_peak is not None and getattr(r, key) is not None]


def pareto_plot(rows: list[PointRow], lower_bound: int, stem: Path, title: str = "") -> list[Path]:
    """Write stem.png and stem.svg."""
    with matplotlib.rc_context({"svg.hashsalt": "ckpt"}):   # stable ids: same sweep, same SVG
        fig = Figure(figsize=(13, 5.2), dpi=120)
        live, deployed = fig.subplots(1, 2)
        key, label, _ = time_axis(rows)
        _live_panel(live, rows, lower_bound, key, label)
        _deployed_panel(deployed, rows, key, label)
        fig.suptitle(title or "Memory / compute operating points", fontsize=11)
        fig.tight_layout()
        written = []
        for suffix, metadata in ((".png", {"Software": None}), (".svg", {"Date": None})):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=suffix[1:], metadata=metadata)
            path = stem.with_suffix(suffix)
            write_bytes(path, buffer.getvalue())
            written.append(path)
    return written


def _live_panel(ax: Axes, rows: list[PointRow], lower_bound: int, key: str, xlabel: str) -> None:
    placed, front = _placed(rows, key), pareto_front(rows, key)
    baseline = [r for r in placed if r.status == BASELINE]
    solved = [r for r in placed if r.status != BASELINE]
    if len(front) > 1:
        ax.step([_x(r, key) for r in front], [r.replayed_peak / KIB for r in front], where="post",
                color="tab:blue", alpha=0.4, linewidth=1.5, label="Pareto front")
    on_front = [r for r in solved if r in front]
    dominated = [r for r in solved if r not in front]
    ax.plot([_x(r, key) for r in on_front], [r.replayed_peak / KIB for r in on_front], "o",
            color="tab:blue", markersize=7, label="schedule (replayed peak)")
    if dominated:
        ax.plot([_x(r, key) for r in dominated], [r.replayed_peak / KIB for r in dominated], "o",
                markerfacecolor="white", color="tab:blue", markersize=7, label="dominated schedule")
    for r in baseline:
        ax.plot([_x(r, key)], [r.replayed_peak / KIB], "s", color="black", markersize=8,
                label="baseline (no recompute)")
    for r in placed:
        text = ("baseline" if r.status == BASELINE else f"budget {r.label}") + f": {r.replayed_peak:,} B"
        if not r.verified:
            text += " (unverified)"
        ax.annotate(text, (_x(r, key), r.replayed_peak / KIB), textcoords="offset points",
                    xytext=(7, 5), fontsize=8)
    ax.axhline(lower_bound / KIB, color="tab:red", linestyle="--", linewidth=1.2,
               label=f"single-op lower bound ({lower_bound:,} B)")
    missing = [f"{r.label}: {r.status}" for r in rows if r not in placed]
    if missing:
        ax.text(0.99, 0.02, "no schedule: " + ", ".join(missing), transform=ax.transAxes, ha="right",
                va="bottom", fontsize=7, color="dimgray")
    _limits(ax, [_x(r, key) for r in placed], [r.replayed_peak / KIB for r in placed] + [lower_bound / KIB])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("live activation peak (KiB)")
    ax.set_title("live bytes", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")


def _deployed_panel(ax: Axes, rows: list[PointRow], key: str, xlabel: str) -> None:
    """What the device reserves: the non-tiled code's arena (its first-fit heap where it mallocs), the tiled home
    arena, and the home level in all (constants + arena), per schedule."""
    placed = _placed(rows, key)
    home = next((r.home for r in placed if r.home), None)
    arena = any(r.non_tiled_arena is not None for r in placed)
    series = [(lambda r: r.non_tiled_arena if arena else r.heap,
               "arena, non-tiled code" if arena else "first-fit heap, non-tiled code", "tab:green", "o"),
              (lambda r: r.home_figures and r.home_figures.arena, f"{home} arena in the tiled code", "tab:purple",
               "D"),
              (lambda r: r.home_figures and r.home_figures.total, f"{home} in all (constants + arena), tiled code",
               "tab:red", "s")]
    values = []
    for at, (figure, label, color, marker) in enumerate(series):
        points = sorted((_x(r, key), figure(r), r.label) for r in placed if figure(r) is not None)
        if not points:
            continue
        ax.plot([p[0] for p in points], [p[1] / KIB for p in points], marker=marker, color=color, linestyle=":",
                markersize=6, label=label)
        for i, (cost, nbytes, name) in enumerate(points):     # each series and neighbour its own offset: no overprint
            ax.annotate(f"{name}: {nbytes:,} B", (cost, nbytes / KIB), textcoords="offset points",
                        xytext=(6, 4 - 11 * at + (6 if i % 2 else 0)), fontsize=7, color=color)
        values += [p[1] / KIB for p in points]
    _limits(ax, [_x(r, key) for r in placed], values or [0.0])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("reserved by the deployment (KiB)")
    ax.set_title("what the device reserves", fontsize=10)
    ax.grid(True, alpha=0.3)
    if values:
        ax.legend(fontsize=8, loc="upper right")


def _limits(ax: Axes, costs: list[float], values: list[float]) -> None:
    """Room for the labels on the right and the legend on top."""
    costs = costs or [0.0]
    span = max(max(costs) - min(costs), 1.0)
    ax.set_xlim(min(costs) - 0.08 * span, max(costs) + 0.3 * span)
    low, high = min(values), max(values)
    pad = max(high - low, 1.0)
    ax.set_ylim(low - 0.1 * pad, high + 0.35 * pad)
