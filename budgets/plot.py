"""The Pareto plot of a sweep: memory against recompute cost, each point labelled with its budget.

Left: the live activation peak, with the baseline and the single-op lower bound marked. Right: what the device
reserves for the same schedules: the first-fit heap of the non-tiled code and, where the tiled flow ran, the
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
from ckpt.pipeline.row import BASELINE, PointRow

KIB = 1024


def pareto_front(rows: list[PointRow]) -> list[PointRow]:
    """Rows no other row beats on both peak and cost, by increasing cost."""
    placed = _placed(rows)
    front = [r for r in placed if not any(
        (o.replayed_peak <= r.replayed_peak and o.cost_increase_pct <= r.cost_increase_pct)
        and (o.replayed_peak < r.replayed_peak or o.cost_increase_pct < r.cost_increase_pct) for o in placed)]
    return sorted(front, key=lambda r: (r.cost_increase_pct, -r.replayed_peak))


def _placed(rows: list[PointRow]) -> list[PointRow]:
    return [r for r in rows if r.replayed_peak is not None and r.cost_increase_pct is not None]


def pareto_plot(rows: list[PointRow], lower_bound: int, stem: Path, title: str = "") -> list[Path]:
    """Write stem.png and stem.svg."""
    with matplotlib.rc_context({"svg.hashsalt": "ckpt"}):   # stable ids: same sweep, same SVG
        fig = Figure(figsize=(13, 5.2), dpi=120)
        live, deployed = fig.subplots(1, 2)
        _live_panel(live, rows, lower_bound)
        _deployed_panel(deployed, rows)
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


def _live_panel(ax: Axes, rows: list[PointRow], lower_bound: int) -> None:
    placed, front = _placed(rows), pareto_front(rows)
    baseline = [r for r in placed if r.status == BASELINE]
    solved = [r for r in placed if r.status != BASELINE]
    if len(front) > 1:
        ax.step([r.cost_increase_pct for r in front], [r.replayed_peak / KIB for r in front], where="post",
                color="tab:blue", alpha=0.4, linewidth=1.5, label="Pareto front")
    on_front = [r for r in solved if r in front]
    dominated = [r for r in solved if r not in front]
    ax.plot([r.cost_increase_pct for r in on_front], [r.replayed_peak / KIB for r in on_front], "o",
            color="tab:blue", markersize=7, label="schedule (replayed peak)")
    if dominated:
        ax.plot([r.cost_increase_pct for r in dominated], [r.replayed_peak / KIB for r in dominated], "o",
                markerfacecolor="white", color="tab:blue", markersize=7, label="dominated schedule")
    for r in baseline:
        ax.plot([r.cost_increase_pct], [r.replayed_peak / KIB], "s", color="black", markersize=8,
                label="baseline (no recompute)")
    for r in placed:
        text = ("baseline" if r.status == BASELINE else f"budget {r.label}") + f": {r.replayed_peak / KIB:.0f} KiB"
        if not r.verified:
            text += " (unverified)"
        ax.annotate(text, (r.cost_increase_pct, r.replayed_peak / KIB), textcoords="offset points",
                    xytext=(7, 5), fontsize=8)
    ax.axhline(lower_bound / KIB, color="tab:red", linestyle="--", linewidth=1.2,
               label=f"single-op lower bound ({lower_bound / KIB:.0f} KiB)")
    missing = [f"{r.label}: {r.status}" for r in rows if r not in placed]
    if missing:
        ax.text(0.99, 0.02, "no schedule: " + ", ".join(missing), transform=ax.transAxes, ha="right",
                va="bottom", fontsize=7, color="dimgray")
    _limits(ax, [r.cost_increase_pct for r in placed], [r.replayed_peak / KIB for r in placed] + [lower_bound / KIB])
    ax.set_xlabel("recompute cost (% cycles over the baseline step)")
    ax.set_ylabel("live activation peak (KiB)")
    ax.set_title("live bytes", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")


def _deployed_panel(ax: Axes, rows: list[PointRow]) -> None:
    """What the device reserves: first-fit heap (non-tiled), the tiled home arena, and the home level in all
    (constants + arena), per schedule."""
    placed = _placed(rows)
    series = [("heap", "first-fit heap, non-tiled code", "tab:green", "o"),
              ("arena_l3", "L3 arena in the tiled code", "tab:purple", "D"),
              ("total_l3", "L3 in all (constants + arena), tiled code", "tab:red", "s")]
    values = []
    for key, label, color, marker in series:
        points = sorted((r.cost_increase_pct, getattr(r, key) / KIB, r.label) for r in placed
                        if getattr(r, key) is not None)
        if not points:
            continue
        ax.plot([p[0] for p in points], [p[1] for p in points], marker=marker, color=color, linestyle=":",
                markersize=6, label=label)
        for cost, kib, name in points:
            ax.annotate(name, (cost, kib), textcoords="offset points", xytext=(6, 4), fontsize=7, color=color)
        values += [p[1] for p in points]
    _limits(ax, [r.cost_increase_pct for r in placed], values or [0.0])
    ax.set_xlabel("recompute cost (% cycles over the baseline step)")
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
