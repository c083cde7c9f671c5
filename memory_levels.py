"""One memory level of a tiled deployment, as one record keyed by the level's name (targets.py names the levels).

The same record says what ckpt predicts for a schedule (its layout's arena), what Deeploy's generated code
reserves (the arena it declares, beside ckpt's prediction), and what a sweep row, the CI figures and the plot
read: a level or a chip is data, never a field of its own.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LevelMemory:
    """One memory level, bytes: what the deployment holds there and what explains it."""

    arena: int | None                       # the arena: the generated code's, or ckpt's layout in a prediction
    predicted_arena: int | None = None      # ckpt's layout beside the code's arena (a replay, home level only)
    live_max: int | None = None             # the most bytes alive at once among the level's blocks (its floor)
    static: int | None = None               # constants placed at the level, outside the arena (kept once)
    activations_at_peak: int | None = None  # of the arena's peak, activations (the rest, graph I/O, stays)
    code: int = 0                           # the step's own code and data there (on chip), where counted
    home_arena: int | None = None           # split home: of the code's arena, the whole network's blocks (from
                                            # address 0; the layers' tiles lie above): what ckpt predicts there
    tiles: int = 0                          # a split home's prediction: the layers' tiles above its arena, where
                                            # counted (replay.predict.predicted_split_tiles)

    @property
    def total(self) -> int | None:
        """What the level must hold: static + arena (+ the step's code and the tiles above the arena where
        counted)."""
        if self.arena is None or self.static is None:
            return None
        return self.static + self.arena + self.code + self.tiles

    def document(self) -> dict:
        """The form a schedule file keeps a predicted level in."""
        found = {"static": self.static, "arena": self.arena, "live_max": self.live_max, "total": self.total,
                 "activations_at_peak": self.activations_at_peak}
        return {**found, **({"code": self.code} if self.code else {}), **({"tiles": self.tiles} if self.tiles else {})}
