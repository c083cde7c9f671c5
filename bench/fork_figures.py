"""The fork's published Checkmate points and the same figures counted on ckpt's graphs.

The fork (github runwangdl/TrainDeeploy, DeeployTest/tools/checkmate/README.md; GAP9, PULP LLVM, gvsoc) reports
two figures. Each is counted here on ckpt's lowered graph of the same zoo model (Siracusa, tiled flow, home L3:
Deeploy's CI setting), so that ckpt's point can be solved at the same reduction of the same figure:

- `activations` (its CCT figure: the measured peak less what persists, 2064.8 KB at every point): ckpt's live
  activation peak at the home level: every activation the schedule keeps alive, and the scratch the home level
  holds (none in the tiled flow: L1 tiles); no constant, weight, gradient accumulator or other graph I/O. A
  reduction r of it is the budget fraction 1 - r of the graph order's peak (`ckpt solve --budget`).
- `peak` (its ResNet-8 figure: an address-deduplicated sum of what the deployment keeps, what persists included):
  what persists on ckpt's graph (`persistent_bytes`: constants, weights, gradient accumulators and the other
  graph I/O, the same at every point) + the live activation peak above. A reduction r of it is the live budget
  (1 - r) x (persistent + graph-order peak) - persistent, in bytes (`ckpt solve --budget <bytes>B`); below the
  single-op floor no schedule reaches it. The tiled code's home level total (constants + arena, which holds the
  same graph I/O) is reported beside it: at ResNet-8's graph order the two differ by 0.14%.

The overheads are each tool's own train step over its own graph order (ckpt: the train network's cycles per
mini-batch on gvsoc; the optimizer network runs once per update whatever the schedule).
"""
from __future__ import annotations

from dataclasses import dataclass

ACTIVATIONS = "activations"
PEAK = "peak"


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


def live_budget(point: ForkPoint, graph_order_peak: int, persistent: int) -> int:
    """The live activation budget (bytes) that is the fork's reduction of its figure on ckpt's graph."""
    if point.figure == ACTIVATIONS:
        return int((1 - point.reduction) * graph_order_peak)
    return int((1 - point.reduction) * (persistent + graph_order_peak)) - persistent


def ckpt_figure(point: ForkPoint, peak_bytes: int, persistent: int) -> int:
    """ckpt's value of the fork's figure for a schedule of live activation peak `peak_bytes`."""
    return peak_bytes if point.figure == ACTIVATIONS else persistent + peak_bytes
