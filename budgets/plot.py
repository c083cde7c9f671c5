"""The Pareto plot of a sweep: peak memory against recompute cost, each point labelled with its budget."""
from __future__ import annotations

from pathlib import Path

from ckpt.budgets.table import PointRow


def pareto_plot(rows: list[PointRow], lower_bound: int, stem: Path) -> list[Path]:
    """Write stem.png and stem.svg; the baseline and the single-op lower bound are marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "ckpt"  # stable ids: same sweep, same SVG
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    points = [r for r in rows if r.replayed_peak is not None and r.cost_increase_pct is not None]
    solved = [r for r in points if r.label != "baseline"]
    ax.plot([r.cost_increase_pct for r in solved], [r.replayed_peak / 1024 for r in solved], "o-",
            color="tab:blue", label="ckpt schedules (replayed peak)")
    for r in solved:
        ax.annotate(r.label, (r.cost_increase_pct, r.replayed_peak / 1024), textcoords="offset points",
                    xytext=(6, 4), fontsize=8)
    for r in points:
        if r.label == "baseline":
            ax.plot([0], [r.replayed_peak / 1024], "s", color="black", label="baseline (no recompute)")
    ax.axhline(lower_bound / 1024, color="tab:red", linestyle="--", label="single-op lower bound")
    ax.set_xlabel("recompute cost (% cycles over the baseline step)")
    ax.set_ylabel("peak activation memory (KiB)")
    ax.set_title("Memory / compute operating points")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    written = []
    for suffix in (".png", ".svg"):
        path = stem.with_suffix(suffix)
        fig.savefig(path, metadata={"Date": None} if suffix == ".svg" else {"Software": None})
        written.append(path)
    plt.close(fig)
    return written
