"""The targets ckpt knows, as data: one entry per target, read everywhere (a new chip is one entry here).

A target names Deeploy's platform for it (None: the ONNX as it is, no Deeploy), its memory levels outermost
first with the bytes each gives data, the level on chip that holds the step's code and data (a home there counts
them, and a step that runs on the chip must fit it), the levels a tiled deployment may keep its tensors in (its
home: Deeploy's default memory level), and whether ckpt runs its generated step on gvsoc.

Siracusa's figures are those of gvsoc's model of it and of pulp-sdk's memory map: L3 is the HyperRAM behind the
uDMA (8 MiB on the model), L2 is 2 MiB of which the two 32 KiB private banks hold the fabric controller's code and
data (the shared banks, 0x1F0000 bytes, hold the cluster's code, data and heap), L1 is the cluster's 256 KiB TCDM.
GAP9's: L3 is the EVK's APS256XXN OctaSPI RAM (256 Mbit) that GAP9's Deeploy deployer drives, L2 1.5 MiB, L1 the
cluster's 128 KiB TCDM, of which the cores' stacks take about 35 KiB with the SDK's default stacks (about 93 KiB
left for data, as the training forks found (TKCW-W/TrainDeeploy); about 123 KiB with the stacks in L2); ckpt does
not simulate it (its gvsoc model ships only with GreenWaves' SDK).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

KIB, MIB = 1024, 1024 * 1024
GAP9_L1_STACKS = 35 * KIB     # the cluster cores' default stacks in GAP9's L1 (see the module doc)


@dataclass(frozen=True)
class Level:
    """One memory level of a chip."""

    name: str
    size: int                 # bytes the chip has there
    reserved: int = 0         # bytes the runtime keeps for itself (not for the step's code, data or heap)

    @property
    def usable(self) -> int:
        return self.size - self.reserved


@dataclass(frozen=True)
class Target:
    name: str
    platform: str | None = None               # Deeploy's platform (its runners' -p name); None: no Deeploy
    levels: tuple[Level, ...] = ()            # outermost first
    homes: tuple[str, ...] = ()               # where the tiled flow may keep its tensors
    simulated: bool = False                   # ckpt runs its generated step on gvsoc
    on_chip: str | None = None                # the level on chip holding the step's code, data and heap
    unsimulated: str = ""                     # why ckpt runs no step of it on gvsoc, where it does not
    clone_cycles: int = 0                     # what a recompute adds on the device beyond its op's calibrated
                                              # cycles (the extra layer's call, its clone's buffer to its readers):
                                              # measured on gvsoc (bench/gvsoc.py, its "clone price" line)
    gvsoc_target: str = ""                    # gvsoc's name of its board (--target of gvsoc's launcher)
    level_price: tuple[tuple[str, object], ...] = ()   # what a layer saves per tensor on chip rather than off chip
                                              # (solver.graph.level_price.LevelPrice's fields): measured on gvsoc
                                              # (bench/level_price.py); the cost model prices a split home
                                              # with it and split+ weighs what to bring on chip with it; empty:
                                              # no price

    def level(self, name: str) -> Level:
        found = next((lv for lv in self.levels if lv.name == name), None)
        if found is None:
            raise KeyError(f"{self.name} has no memory level {name}")
        return found

    @property
    def level_names(self) -> tuple[str, ...]:
        return tuple(lv.name for lv in self.levels)

    @property
    def off_chip(self) -> str | None:
        """The outermost level: the RAM behind the chip, which the cluster reaches through the uDMA only."""
        return self.levels[0].name if self.levels else None

    def is_on_chip(self, level: str | None) -> bool:
        """Whether a tiled deployment's home `level` is where the chip keeps the step's code (then counted there)."""
        return level is not None and level == self.on_chip

    @property
    def level_homes(self) -> tuple[str, ...]:
        """The homes that are one level for every tensor (what a level's total can hold)."""
        return tuple(home for home in self.homes if home in self.level_names)

    def home_levels(self, home: str) -> HomeLevels:
        """Where a tiled deployment with home `home` keeps its tensors: one level for all, or, for the split home,
        what persists off chip and the rest on chip."""
        if home == SPLIT_HOME:
            if self.on_chip is None or self.off_chip is None:
                raise KeyError(f"{self.name} has no on-chip and off-chip level to split a home between")
            return HomeLevels(self.on_chip, self.off_chip)
        return HomeLevels(home, home)


SIRACUSA_CLONE_CYCLES = 194   # DS-CNN's home-L2 sweep 0.5:0.9 on gvsoc: measured - predicted over the recomputes,
                              # least squares through 0 (bench/gvsoc.py --model dscnn_train --home L2)
# Siracusa's level price: least squares over the layers of four zoo models (SimpleMLP, DS-CNN, CCT-LoRA, ResNet-8),
# each calibrated on gvsoc with every tensor in L3 and with the split home (bench/level_price.py prints the fit), on
# the copies, their lines and the bytes each layer's code moves off chip per tensor the split home keeps on chip (read
# from the all-L3 code). One rate per byte for every op type: fitted by op type the rates come out alike (0.9-2.0)
# and MobileNetV1's split points are predicted less well
SIRACUSA_LEVEL_PRICE = (("per_transfer", 2310.8), ("per_line", 27.83), ("per_byte", 1.311))
SPLIT_HOME = "split"   # the home level per tensor: what persists off chip, activations and transients on chip


@dataclass(frozen=True)
class HomeLevels:
    """A tiled deployment's home levels: Deeploy's default memory level (activations, transients, the harness's
    per-mini-batch I/O) and the level of what persists across steps (constants, a split step's weights and
    gradient accumulators, the optimizer network's I/O)."""

    default: str
    persistent: str

    @property
    def split(self) -> bool:
        return self.default != self.persistent


TARGET_TABLE: dict[str, Target] = {t.name: t for t in (
    Target("none"),
    Target("siracusa", "Siracusa",
           (Level("L3", 8 * MIB), Level("L2", 2 * MIB, reserved=64 * KIB), Level("L1", 256 * KIB)),
           homes=("L3", "L2", SPLIT_HOME), simulated=True, on_chip="L2", clone_cycles=SIRACUSA_CLONE_CYCLES,
           gvsoc_target="siracusa", level_price=SIRACUSA_LEVEL_PRICE),
    Target("gap9", "GAP9",
           (Level("L3", 32 * MIB), Level("L2", 1536 * KIB), Level("L1", 128 * KIB, reserved=GAP9_L1_STACKS)),
           homes=("L3", "L2", SPLIT_HOME), on_chip="L2",
           unsimulated="GAP9's gvsoc model ships only with GreenWaves' SDK", gvsoc_target="gap9.evk"),
)}

TARGETS = tuple(TARGET_TABLE)
DEEPLOY_TARGETS = tuple(name for name, t in TARGET_TABLE.items() if t.platform)
PLATFORM_NAMES = {name: t.platform for name, t in TARGET_TABLE.items() if t.platform}
SIMULATED_TARGETS = tuple(name for name, t in TARGET_TABLE.items() if t.simulated)


def simulation_gap(target: str) -> str:
    """Why no generated step of `target` runs on gvsoc here ("" for a target ckpt simulates)."""
    found = TARGET_TABLE.get(target)
    if found is not None and found.simulated:
        return ""
    own = found.unsimulated if found is not None else ""
    return own or f"gvsoc models {', '.join(SIMULATED_TARGETS)} here, not {target}"


def uses_deeploy(target: str) -> bool:
    """Whether ckpt deploys for `target` with Deeploy (else it takes the ONNX graph as it is)."""
    found = TARGET_TABLE.get(target)
    return found is not None and found.platform is not None


HOMES = tuple(dict.fromkeys(home for t in TARGET_TABLE.values() for home in t.homes))


class WeightUpdate(StrEnum):
    """Where a deployment's optimizer writes a weight's new value (deeploy_bridge.in_place): what the order of a
    schedule must respect, so the schedule file records it."""

    IN_PLACE = "in-place"          # into the weight itself, which every reader shares (one copy per constant)
    OUT_OF_PLACE = "out-of-place"  # Deeploy's own: a new buffer; every reader its own copy


class Flow(StrEnum):
    """Which of Deeploy's flows the schedule is deployed with: what the budget is checked on."""

    TILED = "tiled"              # static arenas per memory level (what Deeploy's CI runs the CCT training with)
    NON_TILED = "non-tiled"      # every buffer in L2: at static offsets in one arena ckpt lays out (or, with
                                 # Allocator.HEAP, malloc'ed and freed on the L2 heap as Deeploy writes it)

    @classmethod
    def default_for(cls, target: str) -> Flow:
        return cls.TILED if target in DEEPLOY_TARGETS else cls.NON_TILED
