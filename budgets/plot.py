"""The Pareto plot of a sweep: peak memory against recompute cost, each point labelled with its budget.

The baseline and the single-op lower bound are marked; points without a replayed schedule are listed in the
plot rather than dropped. Files are rendered in memory and renamed into place, and carry no dates, so the same
rows give the same bytes.
"""
from __future__ import annotations

import io
from pathlib import Path

from ckpt.budgets.table import PointRow
from ckpt.replay.outputs import write_bytes

KIB = 1024


def pareto_front(rows: list[PointRow]) -> list[PointRow]:
    """Rows no other row beats on both peak and cost, by increasing cost."""
    placed = [r for r in rows if r.replayed_peak is not None and r.cost_increase_pct is not None]
    front = [r for r in placed if not any(
        (o.replayed_peak <= r.replayed_peak and o.cost_increase_pct <= r.cost_increase_pct)
        and (o.replayed_peak < r.replayed_peak or o.cost_increase_pct < r.cost_increase_pct) for o in placed)]
    return sorted(front, key=lambda r: (r.cost_increase_pct, -r.replayed_peak))


def pareto_plot(rows: list[PointRow], lower_bound: int, stem: Path, title: str = "") -> list[Path]:
    """Write stem.png and stem.svg."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "ckpt"  # stable ids: same sweep, same SVG
    fig, ax = plt.subplots(figsize=(8, 5), dpi=130)
    placed = [r for r in rows if r.replayed_peak is not None and r.cost_increase_pct is not None]
    front = pareto_front(rows)
    baseline = [r for r in placed if r.status == "baseline"]
    solved = [r for r in placed if r.status != "baseline"]
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
        text = ("baseline" if r.status == "baseline" else f"budget {r.label}") + f": {r.replayed_peak / KIB:.0f} KiB"
        if not r.verified:
            text += " (unverified)"
        ax.annotate(text, (r.cost_increase_pct, r.replayed_peak / KIB), textcoords="offset points",
                    xytext=(7, 5), fontsize=9)
    ax.axhline(lower_bound / KIB, color="tab:red", linestyle="--", linewidth=1.2,
               label=f"single-op lower bound ({lower_bound / KIB:.0f} KiB)")
    missing = [f"{r.label}: {r.status}" for r in rows if r not in placed]
    if missing:
        ax.text(0.99, 0.02, "no schedule: " + ", ".join(missing), transform=ax.transAxes, ha="right",
                va="bottom", fontsize=8, color="dimgray")
    _limits(ax, placed, lower_bound)
    ax.set_xlabel("recompute cost (% cycles over the baseline step)")
    ax.set_ylabel("peak activation memory (KiB)")
    ax.set_title(title or "Memory / compute operating points", fontsize=11)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    written = []
    for suffix, metadata in ((".png", {"Software": None}), (".svg", {"Date": None})):
        buffer = io.BytesIO()
        fig.savefig(buffer, format=suffix[1:], metadata=metadata)
        path = stem.with_suffix(suffix)
        write_bytes(path, buffer.getvalue())
        written.append(path)
    plt.close(fig)
    return written


def _limits(ax, placed: list[PointRow], lower_bound: int) -> None:
    """Room for the labels on the right and the legend on top; the lower bound always in view."""
    costs = [r.cost_increase_pct for r in placed] or [0.0]
    peaks = [r.replayed_peak / KIB for r in placed] + [lower_bound / KIB]
    span = max(max(costs) - min(costs), 1.0)
    ax.set_xlim(min(costs) - 0.08 * span, max(costs) + 0.3 * span)
    low, high = min(peaks), max(peaks)
    pad = max(high - low, 1.0)
    ax.set_ylim(low - 0.1 * pad, high + 0.35 * pad)
