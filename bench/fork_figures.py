"""The fork's published Checkmate points and the same figures counted on ckpt's graphs.

The fork (github runwangdl/TrainDeeploy, DeeployTest/tools/checkmate/README.md; GAP9, PULP LLVM, gvsoc) reports
two figures. Each is counted here on ckpt's lowered graph of the same zoo model, tiled flow, home L3 (Deeploy's CI
setting), so that ckpt's point can be solved at the same reduction of the same figure:

- `activations` (its CCT figure: the measured peak less what persists, 2064.8 KB at every point): ckpt's live
  activation peak at the home level: every activation the schedule keeps alive, and the scratch the home level
  holds (none in the tiled flow: L1 tiles); no constant, weight, gradient accumulator or other graph I/O. A
  reduction r of it is the budget fraction 1 - r of the graph order's peak (`ckpt solve --budget`).
- `peak` (its ResNet-8 figure: an address-deduplicated sum of what the deployment keeps, what persists included):
  the home level's total as the tiled code reserves it: its constants + its arena (activations, and the graph I/O
  the arena holds: weights, gradient accumulators, the mini-batch's data and loss); the program's code is not
  data and stays out (it sits in L2, not in the L3 home). A reduction r of it is a level total of (1 - r) x the
  graph order's (`ckpt solve --budget-total L3=...`).

The overheads are each tool's own train step over its own graph order (ckpt: the train network's cycles per
mini-batch on gvsoc; the optimizer network runs once per update whatever the schedule).
"""
from __future__ import annotations

from dataclasses import dataclass

ACTIVATIONS = "activations"
PEAK = "peak"
HOME = "L3"


@dataclass(frozen=True)
class ForkPoint:
    """One published point: the figure, its graph-order and reduced values (KB as the fork prints them), the
    measured cycle overhead, and what the fork recomputed."""

    model: str            # the zoo model (../shared/models/<model>) it is compared on
    figure: str           # ACTIVATIONS | PEAK
    before_kb: float
    after_kb: float
    overhead_pct: float
    recomputed: str

    @property
    def reduction(self) -> float:
        """The fork's reduction of its figure, as a fraction (0.238 for -23.8%)."""
        return round(1 - self.after_kb / self.before_kb, 3)

    @property
    def label(self) -> str:
        return f"{self.model.removesuffix('_train')}-{self.reduction * 100:.1f}"


FORK_POINTS = (
    ForkPoint("cct_train", ACTIVATIONS, 834.5, 545.5, 8.32, "3 attention groups recomputed whole"),
    ForkPoint("resnet8_train", PEAK, 1313, 1000, 13.6, "12 recomputes"),
    ForkPoint("resnet8_train", PEAK, 1313, 969, 39.8, "30 recomputes"),
)


def ckpt_budget(point: ForkPoint, graph_order_total: int) -> list[str]:
    """The `ckpt solve` budget options that ask for the fork's reduction of its figure on ckpt's graph
    (`graph_order_total`: the home level's static + arena at the graph order, used for PEAK only)."""
    if point.figure == ACTIVATIONS:
        return ["--budget", f"{1 - point.reduction:.3f}"]
    return ["--budget-total", f"{HOME}={int((1 - point.reduction) * graph_order_total)}"]


def ckpt_figure(point: ForkPoint, peak_bytes: int, home_total: int) -> int:
    """ckpt's value of the fork's figure for a schedule: its live activation peak, or its home level's total."""
    return peak_bytes if point.figure == ACTIVATIONS else home_total
