"""A tiled deployment whose home is the chip's own level (`--home L2` on Siracusa): does the step fit there at all?

On chip, the home level holds the step's constants (each kept once), the arena ckpt lays out and the step's own
code and data (measured by the model's calibration, where gvsoc is at hand). No schedule takes its arena below
the single-op floor of the arena model (solver.memory.resident), so constants + that floor + code above what the level
gives data is a request no budget meets: refused before any solve, with the bytes (exit 2). A schedule found for a
live `--budget` is held to the same count afterwards: its constants + predicted arena + code must fit the level,
else the budget cannot be met there and `--budget-total` (which solves for exactly that) is the way out.
"""
from __future__ import annotations

from dataclasses import dataclass

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.errors import InfeasibleBudget
from ckpt.pipeline.load import LoadedModel
from ckpt.solver.graph.baselines import single_op_lower_bound
from ckpt.solver.memory.resident import arena_resident
from ckpt.targets import SPLIT_HOME, TARGET_TABLE


@dataclass(frozen=True)
class OnChipHome:
    """What a step whose home is on chip needs there, and what the level gives."""

    level: str
    capacity: int                      # the bytes the level gives data (what the tiler is given there)
    constants: int
    code: int | None                   # the step's own code and data (None: not measured here)
    home: str = ""                     # the home as --home names it (the level, or the split home)

    def parts(self, arena: int, arena_says: str) -> str:
        code = "" if self.code is None else f" + its code and data ({self.code:,} B)"
        total = self.constants + arena + (self.code or 0)
        constants = "" if self.home == SPLIT_HOME else f"its constants ({self.constants:,} B) + "
        return (f"{constants}{arena_says} ({arena:,} B){code} = {total:,} B, "
                f"{total - self.capacity:,} B more than the {self.capacity:,} B {self.level} gives")

    def over(self, arena: int) -> bool:
        return self.constants + arena + (self.code or 0) > self.capacity


def on_chip_home(loaded: LoadedModel, code: int | None) -> OnChipHome | None:
    """The on-chip home of `loaded`'s tiled deployment (None: its home is off chip, or no Deeploy target)."""
    if loaded.lowered is None or not TARGET_TABLE[loaded.target].is_on_chip(loaded.home_level):
        return None
    capacity = setup_for(loaded.target, loaded.home).size(loaded.home_level)
    return OnChipHome(loaded.home_level, capacity, loaded.home_constants(), code, loaded.home)


def refuse_beyond_floor(loaded: LoadedModel, home: OnChipHome) -> None:
    """Refuse (exit 2), before any solve, a home on chip that no schedule's arena fits beside the constants."""
    resident = arena_resident(loaded.graph, *loaded.arena_io(), deeploy_bridge.ALIGNMENT)
    floor, _ = single_op_lower_bound(resident)
    if home.over(floor):
        what = "its activations" if home.home == SPLIT_HOME else "its tensors"
        raise InfeasibleBudget(f"the step cannot run with {what} in {home.level} at any budget: "
                               + home.parts(floor, "the smallest arena any schedule needs"),
                               f"keep them off chip (--home {TARGET_TABLE[loaded.target].off_chip})", proven=True)


def refuse_floor_before_code(loaded: LoadedModel) -> None:
    """Refuse (exit 2) a home on chip that the constants and the arena's floor overflow without the step's code,
    before the code is measured: measuring it runs the graph order's step on gvsoc, long work no count of the code
    could turn into a fit."""
    found = on_chip_home(loaded, None)
    if found is not None:
        refuse_beyond_floor(loaded, found)


def refuse_over(home: OnChipHome, arena: int, budget: str) -> None:
    """Refuse (exit 2) a schedule for a live budget whose home level it cannot fit beside the constants."""
    if home.over(arena):
        fit = "give a lower --budget (ckpt sweep --home split names the largest that fits)" if home.home == SPLIT_HOME \
            else f"solve for what fits there with --budget-total {home.level}={home.capacity}"
        what = "its activations" if home.home == SPLIT_HOME else "its tensors"
        raise InfeasibleBudget(f"at --budget {budget} the step does not fit {home.level}: "
                               + home.parts(arena, "the schedule's arena"),
                               f"{fit}, or keep {what} off chip (drop --home {home.home or home.level})", proven=True)


def unmeasured_note(level: str, capacity: int, total: int) -> str:
    """What a schedule whose home `level` holds `total` bytes leaves there for the code, where the code could not
    be counted."""
    return (f"note: {level} keeps {capacity - total:,} B of its {capacity:,} B beside the constants and the arena for "
            "the step's own code and data, which ckpt measures on gvsoc and could not here (--budget-total "
            f"{level}=SIZE counts them)")
