"""The targets ckpt knows and the Deeploy configuration it measures in: one definition, read everywhere.

Code generation, the tiled flow's memory levels, the gvsoc harness and the CI files Deeploy adopts all take
their values from `DeeploySetup`, so they cannot drift apart. The defaults are Deeploy's CI values for the CCT
training graphs (L1 128,000 B, L2 1,024,000 B, default level L3, 8 cluster cores).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

from ckpt.targets import (
    DEEPLOY_TARGETS,
    HOMES,
    PLATFORM_NAMES,
    SIMULATED_TARGETS,
    SPLIT_HOME,
    TARGET_TABLE,
    TARGETS,
    Flow,
    Level,
    WeightUpdate,
)

__all__ = ["DEEPLOY_TARGETS", "HOMES", "SPLIT_HOME", "PLATFORM_NAMES", "SIMULATED_TARGETS", "TARGETS", "DeeploySetup",
           "Flow", "Allocator", "WeightUpdate", "DEFAULT_SETUP", "deployed_weights", "setup_for"]


class Allocator(StrEnum):
    """How a deployment's buffers get their place: the tiled flow's arena per memory level, the non-tiled flow's
    local buffers."""

    CKPT = "ckpt"            # ckpt's own static layout (omnimalloc): in process through Deeploy's MiniMalloc hook
                             # (tiled), in one arena of static offsets in place of the heap (non-tiled)
    TETRIS = "tetris"        # Deeploy's TetrisRandom for the tiled arenas, for comparison (non-tiled: ckpt's)
    MINIMALLOC = "minimalloc"   # Deeploy's own MiniMalloc path: $MINIMALLOC_INSTALL_DIR/minimalloc per layer
    HEAP = "heap"            # the non-tiled code as Deeploy writes it: each buffer malloc'ed from the first-fit L2
                             # heap and freed (tiled: ckpt's layout), for comparison

    @property
    def deeploy_strategy(self) -> str:
        """The value of Deeploy's `Tiler.memoryAllocStrategy` this allocator runs under."""
        return "TetrisRandom" if self is Allocator.TETRIS else "MiniMalloc"

    @property
    def tiled_layout(self) -> Allocator:
        """What lays out the tiled flow's arenas under this choice."""
        return Allocator.CKPT if self is Allocator.HEAP else self

    @property
    def non_tiled_arena(self) -> bool:
        """Whether the non-tiled flow's buffers sit in ckpt's arena (else on Deeploy's heap)."""
        return self is not Allocator.HEAP


@dataclass(frozen=True)
class DeeploySetup:
    """Memory levels, cores, allocator and weight update of a Deeploy deployment."""

    # (level name, bytes the tiler may use there), outermost first: the hierarchy Deeploy is given
    levels: tuple[tuple[str, int], ...] = (("L3", 64_000_000), ("L2", 1_024_000), ("L1", 128_000))
    default_mem_level: str = "L3"
    n_cores: int = 8
    allocator: Allocator = Allocator.CKPT
    weights: WeightUpdate = WeightUpdate.IN_PLACE
    persistent_mem_level: str | None = None   # where what persists lives, when not the default level (split home)
    persist_on_chip: bool = False             # split home: bring what persists on chip where room is left (split+)
    on_chip_persistent: tuple[str, ...] = ()  # split+: what persists that the replay brought on chip (Deeploy names)
    parked: tuple[str, ...] = ()              # split home: activations parked off chip, in the persistent level
                                              # for the whole step (Deeploy names; `ckpt solve --park auto`)

    @property
    def persistent_level(self) -> str:
        """The level of what persists across steps: constants, a split step's weights and accumulators."""
        return self.persistent_mem_level or self.default_mem_level

    @property
    def home(self) -> str:
        """The home as `--home` names it: a level, or the split home."""
        return SPLIT_HOME if self.persistent_level != self.default_mem_level else self.default_mem_level

    def size(self, level: str) -> int:
        """The bytes the tiler may use at `level`."""
        found = next((size for name, size in self.levels if name == level), None)
        if found is None:
            raise KeyError(f"the Deeploy setup has no memory level {level}")
        return found

    @property
    def optimizer_borrows(self) -> tuple[str, ...]:
        """The arenas a split step's optimizer network takes from its train network's (the two never run at once,
        deeploy_bridge.split_step): the innermost level's always (nothing outlives a layer there), and the on-chip
        default level's under a split home where nothing that persists was brought there (split+): that arena then
        holds only what a mini-batch makes or the harness writes again before each run of the train network (its
        data, the reset flag, the loss), never a weight or an accumulator the optimizer reads."""
        shared = [self.innermost]
        if self.home == SPLIT_HOME and not self.on_chip_persistent and self.default_mem_level != self.innermost:
            shared.insert(0, self.default_mem_level)
        return tuple(shared)

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.levels)

    @property
    def outermost(self) -> str:
        """The level behind the chip (Deeploy's L3): what the code reaches through the uDMA only."""
        return self.levels[0][0]

    @property
    def innermost(self) -> str:
        """The level the cluster computes in (Deeploy's L1): where the tiler brings every tile."""
        return self.levels[-1][0]

    def as_dict(self) -> dict:
        """The form cache keys and calibrations keep: one key per level, its name lower-cased, innermost first."""
        return {**{name.lower(): size for name, size in reversed(self.levels)},
                "default_mem_level": self.default_mem_level, "n_cores": self.n_cores,
                "allocator": self.allocator.value, "weights": self.weights.value,
                **({"persistent_mem_level": self.persistent_mem_level} if self.persistent_mem_level else {}),
                **({"persist_on_chip": True} if self.persist_on_chip else {}),
                **({"on_chip_persistent": sorted(self.on_chip_persistent)} if self.on_chip_persistent else {}),
                **({"parked": sorted(self.parked)} if self.parked else {})}


DEFAULT_SETUP = DeeploySetup()


def setup_for(target: str, home: str = DEFAULT_SETUP.default_mem_level, **changes) -> DeeploySetup:
    """The Deeploy setup of a tiled deployment for `target` whose tensors live in `home`: the target's levels,
    each with Deeploy's CI size where CI sizes it, but never more than the chip gives data there (its size less
    what the runtime reserves) on chip (GAP9's L1 is smaller than CI's); the home, when not Deeploy's default,
    and a level CI does not know get what the chip gives. The split home keeps what persists in the level
    behind the chip and the rest on chip (targets.HomeLevels)."""
    spec = TARGET_TABLE.get(target)
    if home == SPLIT_HOME and spec is not None and spec.levels:
        split = spec.home_levels(home)
        home = split.default
        changes = {"persistent_mem_level": split.persistent, **changes}
    setup = replace(DEFAULT_SETUP, default_mem_level=home, **changes)
    if spec is None or not spec.levels:
        return setup
    ci = dict(setup.levels)

    def size(level: Level) -> int:
        chip = level.name not in ci or (level.name == home and home != DEFAULT_SETUP.default_mem_level)
        if chip:
            return level.usable
        return ci[level.name] if level.name == spec.off_chip else min(ci[level.name], level.usable)

    return replace(setup, levels=tuple((level.name, size(level)) for level in spec.levels))


def deployed_weights(target: str, flow: Flow | None, weights: WeightUpdate = DEFAULT_SETUP.weights) -> WeightUpdate:
    """How the deployment a schedule is solved for writes its weights: in place only in a Deeploy target's tiled
    flow (the non-tiled code is left as Deeploy makes it)."""
    tiled = (flow or Flow.default_for(target)) is Flow.TILED and target in DEEPLOY_TARGETS
    return weights if tiled else WeightUpdate.OUT_OF_PLACE
