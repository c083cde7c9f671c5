"""What a schedule will reserve on the device, predicted before any Deeploy run: the tiled flow's home arena.

The schedule is replayed on the lowered graph exactly as `ckpt replay` does (replay.plan), and the home
level's blocks are laid out by the same code Deeploy's tiler runs with ckpt's allocator
(deeploy_bridge.arena), so the prediction is the arena the generated code will reserve.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import onnx

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.broadcast import declared_constant_bytes
from ckpt.deeploy_bridge.errors import BridgeError
from ckpt.deeploy_bridge.records import LoweredGraph
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, DeeploySetup, WeightUpdate
from ckpt.deeploy_bridge.tile_counts import LAYER_TABLE
from ckpt.memory_levels import LevelMemory
from ckpt.replay.graph_view import GraphView
from ckpt.replay.onnx_graph import apply_to_model, rewired_aliases, rewired_scratch, view_of_model
from ckpt.replay.plan import ReplayPlan, plan_replay
from ckpt.schedule_file import clone_of
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.level_price import LevelPrice, tensor_savings
from ckpt.solver.graph.onnx_loader import io_names, load_graph
from ckpt.solver.graph.simulate import RunSequence
from ckpt.solver.memory.layout import Block, Layout, aligned, peak_step
from ckpt.solver.memory.placement import SplitHome, persistent_roots, split_levels
from ckpt.solver.model.on_chip import Candidate, on_chip_within
from ckpt.targets import SPLIT_HOME, TARGET_TABLE


@dataclass(frozen=True)
class Rewired:
    """A replay plan applied to the lowered graph: the ONNX model and ckpt's graph of it as the tiled flow
    deploys it (aliases and scratch carried over, weights written as the layout says)."""

    model: onnx.ModelProto
    graph: TrainGraph


def rewired(lowered: LoweredGraph, view: GraphView, plan: ReplayPlan, weights: WeightUpdate) -> Rewired:
    """The one way a plan becomes the deployed graph: what `ckpt replay` measures and the prediction lays out."""
    model = apply_to_model(lowered.model, plan)
    graph = load_graph(model, aliases=rewired_aliases(view, plan, lowered.aliases),
                       scratch=rewired_scratch(plan, lowered.transients))
    return Rewired(model, lowered.deployed(graph, weights))


def home_layout(plan: ReplayPlan, graph: TrainGraph, inputs: frozenset[str], outputs: frozenset[str],
                inputs_persist: bool = False) -> Layout:
    """The home level's layout for a replay plan on its rewired graph (`graph`, aliases carried over)."""
    return deeploy_bridge.lay_out_home(home_blocks(plan, graph, inputs, outputs, inputs_persist))


def home_blocks(plan: ReplayPlan, graph: TrainGraph, inputs: frozenset[str], outputs: frozenset[str],
                inputs_persist: bool = False) -> list[Block]:
    order = [(e.name, e.inputs, e.outputs) for e in plan.executions]
    return deeploy_bridge.home_blocks(order, graph, inputs, outputs, inputs_persist)


@dataclass(frozen=True)
class HomeBlocks:
    """The blocks Deeploy's tiler will hand its allocator at the home level for a schedule, and the graph I/O
    among them (resident whatever the schedule does)."""

    blocks: list[Block]
    io: frozenset[str]           # the blocks' names that are graph inputs or outputs


def predicted_home_blocks(lowered: LoweredGraph, seq: RunSequence, weights: WeightUpdate = DEFAULT_SETUP.weights
                          ) -> HomeBlocks:
    """Replay `seq` on the lowered graph as `ckpt replay` does and list the home level's blocks."""
    view = view_of_model(lowered.model)
    plan = plan_replay(view, list(seq))
    found = rewired(lowered, view, plan, weights)
    inputs, outputs = io_names(found.model.graph)
    return HomeBlocks(home_blocks(plan, found.graph, inputs, outputs, lowered.persistent_inputs),
                      frozenset(deeploy_bridge.deeploy_tensor_name(t) for t in inputs | outputs))


def predicted_levels(lowered: LoweredGraph, seq: RunSequence, weights: WeightUpdate = DEFAULT_SETUP.weights,
                     home: str = DEFAULT_SETUP.default_mem_level, persistent_io: frozenset[str] = frozenset(),
                     on_chip: frozenset[str] = frozenset(), parked: frozenset[str] = frozenset(),
                     tables: TilerTables | None = None) -> dict[str, LevelMemory]:
    """The home level of the tiled flow for `seq` on the lowered graph (static + arena), weights written as
    `weights` says; for the split home, both its levels (`predicted_split_levels`; `on_chip`: what persists brought
    on chip, split+; `parked`: activations parked off chip, Deeploy's names; `tables`: the tiler's tables counted)."""
    if home == SPLIT_HOME:
        return predicted_split_levels(lowered, seq, weights, persistent_io, on_chip, parked, tables)
    predicted = predicted_home_blocks(lowered, seq, weights)
    layout = deeploy_bridge.lay_out_home(predicted.blocks)
    step, _ = peak_step(predicted.blocks)
    activations = sum(b.size for b in predicted.blocks if b.first <= step <= b.last and b.name not in predicted.io)
    return {home: LevelMemory(arena=layout.size, live_max=layout.live_max, static=lowered.static_bytes(weights),
                              activations_at_peak=activations)}


def home_arena_overflow(lowered: LoweredGraph, seq: RunSequence, setup: DeeploySetup) -> BridgeError | None:
    """Why a home on chip (--home L2) cannot hold `seq`'s whole-network arena, as ckpt predicts it, beside the level's
    constants: Deeploy's tiler refuses it in these words (deeploy_bridge.arena.arena_overflow; its capacity there is
    the level's size less its constants), but only after code generation and tiling, minutes on a large model. None
    where it fits, or the home is off chip or split (replay.run refuses that one by its activations)."""
    level = setup.default_mem_level
    if setup.home == SPLIT_HOME or not TARGET_TABLE[lowered.target].is_on_chip(level):
        return None
    layout = deeploy_bridge.lay_out_home(predicted_home_blocks(lowered, seq, setup.weights).blocks)
    free = setup.size(level) - lowered.static_bytes(setup.weights)
    return deeploy_bridge.arena_overflow(level, layout, free) if layout.size > free else None


def split_home_of(lowered: LoweredGraph) -> SplitHome:
    """The two levels of the split home on the lowered graph's target."""
    found = TARGET_TABLE[lowered.target].home_levels(SPLIT_HOME)
    return SplitHome(found.default, found.persistent)


def predicted_split_levels(lowered: LoweredGraph, seq: RunSequence, weights: WeightUpdate,
                           persistent_io: frozenset[str], on_chip: frozenset[str] = frozenset(),
                           parked: frozenset[str] = frozenset(), tables: TilerTables | None = None
                           ) -> dict[str, LevelMemory]:
    """The split home's two levels for `seq`: the blocks Deeploy's tiler lays out for the whole network, each in the
    level solver.memory.placement gives its tensor (`on_chip`: persistent tensors brought on chip, Deeploy's names).
    On chip this is the activations' arena (with what persists brought there), which the code reserves from address
    0; the tiler puts each layer's tiles of the tensors kept off chip above it (not predicted here). Its static is
    the constants brought there at the bytes the code declares them with and, given the code with every tensor off
    chip (`tables`), the tables the tiler adds for the layers it tiles from off chip (`predicted_tiler_tables`). Off
    chip it holds the constants and the persistent graph I/O (and the activations
    `parked` there, Deeploy's names)."""
    found = _SplitBlocks.of(lowered, seq, weights).levels(persistent_io, on_chip, lowered.static_bytes(weights),
                                                          parked)
    if tables is None:
        return found
    chip = split_home_of(lowered).default
    held = predicted_tiler_tables(lowered, seq, tables, weights, persistent_io, on_chip, parked)
    return {**found, chip: replace(found[chip], static=found[chip].static + held)}


def predicted_tiler_tables(lowered: LoweredGraph, seq: RunSequence, tables: TilerTables,
                           weights: WeightUpdate = DEFAULT_SETUP.weights, persistent_io: frozenset[str] = frozenset(),
                           on_chip: frozenset[str] = frozenset(), parked: frozenset[str] = frozenset()) -> int:
    """The bytes of the tables Deeploy's tiler declares on chip for the split home's layers that tile from off chip
    (those that move a tensor kept there), as the code with every tensor off chip declares them (`tables`: its
    layers' copies and tables, deeploy_bridge.tile_counts, as a calibration keeps them): each such layer's own and,
    per tensor it moves from off chip, that tensor's, once per run of the layer (a recompute's clone declares its
    own). A layer Deeploy adds for a node (a weight's transpose) runs with it."""
    where = predicted_buffer_levels(lowered, persistent_io, weights, on_chip, parked)
    off_chip = split_home_of(lowered).persistent
    name = deeploy_bridge.deeploy_tensor_name
    runs = {node: 1 for node in lowered.node_order}
    for node, again in seq:
        if again:
            runs[node] = runs.get(node, 1) + 1
    nodes = sorted(runs, key=len, reverse=True)
    found = 0
    for layer, moved in sorted(tables.transfers.items()):
        kept = [t for t in moved if where.get(name(t)) == off_chip]
        if not kept:
            continue
        own = tables.tables.get(layer, {})
        node = next((n for n in nodes if layer == n or layer.startswith(f"{n}_")), None)
        found += runs.get(node, 1) * (own.get(LAYER_TABLE, 0) + sum(own.get(t, 0) for t in kept))
    return found


@dataclass(frozen=True)
class TilerTables:
    """The code with every tensor off chip, per layer: the tensors it copies from off chip (deeploy_bridge's or the
    lowered graph's names) with the copies per tile of each, the bytes of its tables on chip (its own under
    LAYER_TABLE, each tensor's), its tiles into the chip's level and each tensor's lines over them (a calibration's
    node_tiles and node_lines: what the level price prices a tensor's transfers at)."""

    transfers: Mapping[str, Mapping[str, int]]
    tables: Mapping[str, Mapping[str, int]]
    tiles: Mapping[str, int] = field(default_factory=dict)
    lines: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def of_runs(self, graph: TrainGraph) -> TilerTables:
        """The same per op of `graph`, a schedule's rewired graph: each recompute's clone copies what its original
        does (its layer is the original's code again)."""
        source = {op.name: (clone_of(op.name) or (op.name, 0))[0] for op in graph.ops}
        return TilerTables(*({op: found[s] for op, s in source.items() if s in found}
                             for found in (self.transfers, self.tables, self.tiles, self.lines)))


def predicted_split_tiles(lowered: LoweredGraph, weights: WeightUpdate, persistent_io: frozenset[str],
                          innermost: int, on_chip: frozenset[str] = frozenset()) -> int:
    """The bytes the tiler puts above the split home's on-chip arena: the tiles, per layer, of the tensors it reads
    or writes off chip, each counted once (an in-place copy moves with its tensor) at its bytes there and at most the
    `innermost` level's size (a tile moved into the chip's level is cut again into the innermost's), the largest
    layer's sum, at most the innermost level's size. A recompute reads the same tensors as its original, so every
    schedule of the graph has the same figure. Where the tiler moves whole tensors this is its figure (the built-in
    MLP, DS-CNN; SimpleMLP 32 B over); where it cuts a layer's tensors finer, an upper bound (CCT)."""
    split = _SplitBlocks.of(lowered, [(name, 0) for name in lowered.node_order], weights)
    graph, name = split.graph, deeploy_bridge.deeploy_tensor_name
    brought = {t for t in graph.tensor_bytes if name(t) in on_chip}
    levels = split_levels(graph, split.inputs, split.home, persistent_io, brought)
    largest = 0
    for op in graph.ops:
        roots = {graph.root(t) for t in (*op.inputs, *op.outputs) if levels.get(t) == split.home.persistent}
        largest = max(largest, sum(min(split.constant_bytes(r), innermost) for r in roots if r in graph.tensor_bytes))
    return min(largest, innermost)


@dataclass(frozen=True)
class _SplitBlocks:
    """A schedule's rewired graph and its whole-network blocks, for laying out the split home's levels."""

    home: SplitHome
    graph: TrainGraph
    inputs: frozenset[str]
    io: frozenset[str]           # Deeploy's names of the graph I/O
    blocks: list[Block]
    deployed: dict[str, int] = field(default_factory=dict)   # a constant Deeploy declares at other bytes -> those
    undeclared: frozenset[str] = frozenset()                 # constants Deeploy counts, its code never declares

    def constant_bytes(self, tensor: str) -> int:
        """What a persistent root takes where it lives: the largest copy Deeploy's code declares of it (a reader's
        broadcast, at its bound type: deeploy_bridge.broadcast), else its own bytes; the copies that share its bytes
        move with it."""
        copies = [t for t in self.deployed if self.graph.root(t) == tensor and t != tensor]
        own = self.deployed.get(tensor, int(self.graph.tensor_bytes[tensor]))
        return max([own, *(self.deployed[t] for t in copies)])

    @classmethod
    def of(cls, lowered: LoweredGraph, seq: RunSequence, weights: WeightUpdate) -> _SplitBlocks:
        view = view_of_model(lowered.model)
        plan = plan_replay(view, list(seq))
        found = rewired(lowered, view, plan, weights)
        inputs, outputs = io_names(found.model.graph)
        return cls(split_home_of(lowered), found.graph, inputs,
                   frozenset(deeploy_bridge.deeploy_tensor_name(t) for t in inputs | outputs),
                   home_blocks(plan, found.graph, inputs, outputs, lowered.persistent_inputs),
                   declared_constant_bytes(found.model, lowered.constant_sizes),
                   frozenset(lowered.undeclared_constants))

    def levels(self, persistent_io: frozenset[str], on_chip: frozenset[str], static: int,
               parked: frozenset[str] = frozenset()) -> dict[str, LevelMemory]:
        name = deeploy_bridge.deeploy_tensor_name
        graph_on_chip = {t for t in self.graph.tensor_bytes if name(t) in on_chip}
        graph_parked = {t for t in self.graph.tensor_bytes if name(t) in parked}
        where = {name(t): level for t, level in
                 split_levels(self.graph, self.inputs, self.home, persistent_io, graph_on_chip, graph_parked).items()}
        constants = {t for t in persistent_roots(self.graph, self.inputs) & graph_on_chip
                     if self.graph.root(t) == t}          # a copy sharing another's bytes is not held twice
        on_chip_static = sum(self.constant_bytes(t) for t in constants if t not in self.undeclared)
        counted = sum(self.constant_bytes(t) for t in constants)      # Deeploy's count of them: the undeclared too
        found = {}
        off_chip_static = max(0, static - counted)    # Deeploy's count keeps a shared copy once
        for level, held in ((self.home.default, on_chip_static), (self.home.persistent, off_chip_static)):
            mine = [b for b in self.blocks if where.get(b.name, self.home.default) == level]
            layout = deeploy_bridge.lay_out_home(mine)
            step, _ = peak_step(mine) if mine else (0, 0)
            activations = sum(b.size for b in mine if b.first <= step <= b.last and b.name not in self.io)
            found[level] = LevelMemory(arena=layout.size, live_max=layout.live_max, static=held,
                                       activations_at_peak=activations)
        return found


@dataclass(frozen=True)
class OnChipRoom:
    """What the chip's level must hold beside what persists brought there (`split+`), bytes."""

    capacity: int              # what the level gives data (the tiler's size there)
    code: int                  # the step's own code and data there (0 where not measured)
    tiles: int                 # kept for the tiler's buffers of the tensors left off chip
    tables: TilerTables | None = None   # the code's tables per layer, to count the tiler's tables there (None: not)


def level_price(target: str) -> LevelPrice | None:
    """The target's measured level price (targets.py; None: it has none): what the cost model prices a split home
    with and what split+ weighs what persists with."""
    found = TARGET_TABLE[target].level_price
    return LevelPrice.from_dict(dict(found)) if found else None


def chosen_on_chip(lowered: LoweredGraph, seq: RunSequence, weights: WeightUpdate, persistent_io: frozenset[str],
                   room: OnChipRoom, price: LevelPrice | None, more_layers: dict[str, tuple[str, ...]] | None = None
                   ) -> frozenset[str]:
    """The persistent tensors (Deeploy's names) the split home brings on chip for `seq` (`split+`,
    solver.memory.placement.on_chip_within): every one where the chip's level, laid out with them all, holds them
    beside the activations, the code and the tiler's tables (`room.tables`), else the most cycles saved that fit with
    `room.tiles` kept for the tiles of what stays off chip, each tensor's cycles by `price`
    (solver.graph.level_price.tensor_savings, as the cost model prices it) over the layers of the rewired graph that
    touch it, at the tiles, copies per tile and lines `room.tables` read for each (one copy each without), and the
    op types `more_layers` names for it (e.g. the optimizer network's layers). Without a price only all or nothing
    is brought: nothing says which tensor saves more."""
    split = _SplitBlocks.of(lowered, seq, weights)
    graph = split.graph
    roots = persistent_roots(graph, split.inputs, persistent_io)
    own = {t for t in roots if graph.root(t) == t}     # a copy sharing another's bytes (in place) moves with it
    name, sizes = deeploy_bridge.deeploy_tensor_name, graph.tensor_bytes
    more = {t: (more_layers or {}).get(name(t), ()) for t in own}
    code = room.tables.of_runs(graph) if room.tables is not None else TilerTables({}, {})
    saves = tensor_savings(graph, own, price, more, code.tiles, code.transfers, code.lines) \
        if price is not None else {t: 0.0 for t in own}
    candidates = {name(t): Candidate(aligned(split.constant_bytes(t), deeploy_bridge.ALIGNMENT), saves[t])
                  for t in own if sizes[t] > 0}
    static = lowered.static_bytes(weights)

    def level_bytes_with(chosen: frozenset[str]) -> int:
        level = split.levels(persistent_io, chosen, static)[split.home.default]
        held = 0 if room.tables is None else predicted_tiler_tables(lowered, seq, room.tables, weights, persistent_io,
                                                                     chosen)
        return level.arena + level.static + held

    limit = room.capacity - room.code
    if price is None:
        everything = frozenset(candidates)
        chosen = everything if level_bytes_with(everything) <= limit else frozenset()
    else:
        chosen = on_chip_within(candidates, limit, level_bytes_with, room.tiles)
    return chosen | {name(t) for t in roots - own if name(graph.root(t)) in chosen}


def predicted_buffer_levels(lowered: LoweredGraph, persistent_io: frozenset[str] = frozenset(),
                            weights: WeightUpdate = DEFAULT_SETUP.weights, on_chip: frozenset[str] = frozenset(),
                            parked: frozenset[str] = frozenset()) -> dict[str, str]:
    """Each buffer of the lowered graph (Deeploy's name) -> the level the split home keeps it in
    (solver.memory.placement; `on_chip`: what persists brought on chip, split+; `parked`: activations parked off
    chip)."""
    graph = lowered.deployed(load_graph(lowered.model, aliases=lowered.aliases), weights)
    inputs, _ = io_names(lowered.model.graph)
    brought = {t for t in graph.tensor_bytes if deeploy_bridge.deeploy_tensor_name(t) in on_chip}
    off = {t for t in graph.tensor_bytes if deeploy_bridge.deeploy_tensor_name(t) in parked}
    levels = split_levels(graph, inputs, split_home_of(lowered), persistent_io, brought, off)
    return {deeploy_bridge.deeploy_tensor_name(t): level for t, level in levels.items()}
