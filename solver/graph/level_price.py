"""What a layer saves on the device when a tensor it reads or writes lives on chip instead of off chip.

A calibration measures each layer's cycles at one home. Where the split home's graph order cannot run on chip (its
activations overflow the chip: the models the split home is for), its layers are measured with every tensor off
chip, and each layer is priced for the split home from there: a tensor the split home keeps on chip spares the
layer its transfers from off chip: a fixed part per copy (the set-up and wait of each: the layer moves each tensor
it keeps off chip once per tile it cuts into the chip's level, as one copy or, where a tile's rows lie apart there,
one copy per row, so a layer the tiler cuts into many tiles or rows pays it many times), a part per line a copy
moves beyond its first (a 2-D copy off chip is a burst per line: a tile of short rows moves its bytes in many), and
a part per byte (the bandwidth), one rate for every op type (a rate per op type can be fitted; with the lines
priced none is needed: the op types' own rates come out alike). The calibration reads each layer's tiles, copies
per tile and lines from its generated code (deeploy_bridge.tile_counts). The price is data, fitted
(`fit_level_price`) from pairs of calibrations of the same models, every tensor off chip against the split home,
layer by layer (bench/level_price.py), and kept per target (targets.py). Its rates are never negative and a layer's
saving never exceeds its measured cycles, so moving a tensor on chip never predicts more cycles.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ckpt.solver.graph.costs import CostModel
from ckpt.solver.graph.graph import Op, TrainGraph

MIN_TYPE_BYTES = 64 * 1024     # with rates by op type, a type gets its own where the fitting layers move at least this


@dataclass(frozen=True)
class LevelPrice:
    """Cycles a layer saves per transfer of a tensor it no longer moves between off chip and on chip (each copy's
    set-up and wait), per line beyond a copy's first (each a burst of its own off chip), and per byte of the
    tensors it finds on chip."""

    per_transfer: float                               # per copy the layer issues (per tile, per row copied apart)
    per_byte: float                                   # op types without their own rate
    per_byte_by_type: Mapping[str, float] = field(default_factory=dict)
    per_line: float = 0.0                             # per line a copy moves beyond its first

    def per_layer(self, op_type: str, nbytes: int, tiles: int = 1, transfers: int = 1,
                  lines: int | None = None) -> float:
        """What one layer of `op_type`, moving `tiles` tiles into the chip's level, saves with one tensor of
        `nbytes` it reads or writes on chip, that it copied `transfers` times per tile off chip in `lines` lines
        over all its tiles (None: one per copy); no rate is taken below 0."""
        copies = max(1, tiles) * max(0, transfers)
        extra = 0 if lines is None else max(0, lines - copies)
        return (max(0.0, self.per_transfer) * copies + max(0.0, self.per_line) * extra
                + max(0.0, self.per_byte_by_type.get(op_type, self.per_byte)) * nbytes)

    def saving(self, op_type: str, moved: Sequence[int], cycles: int, tiles: int = 1,
               transfers: Sequence[int] | None = None, lines: Sequence[int | None] | None = None) -> int:
        """What a layer of `op_type` measured at `cycles` off chip, in `tiles` tiles, saves with the tensors of
        `moved` bytes on chip (`transfers`: the copies per tile of each, one where not given; `lines`: the lines of
        each over all tiles, one per copy where not given): never below 0, never all its cycles (a layer still makes
        its call)."""
        copies = transfers if transfers is not None else (1,) * len(moved)
        bursts = lines if lines is not None else (None,) * len(moved)
        found = sum(self.per_layer(op_type, nbytes, tiles, n, b)
                    for nbytes, n, b in zip(moved, copies, bursts, strict=True))
        return int(min(max(0, cycles - 1), round(found)))

    def as_dict(self) -> dict:
        return {"per_transfer": self.per_transfer, "per_line": self.per_line, "per_byte": self.per_byte,
                "per_byte_by_type": dict(sorted(self.per_byte_by_type.items()))}

    @classmethod
    def from_dict(cls, doc: Mapping) -> LevelPrice:
        return cls(float(doc["per_transfer"]), float(doc["per_byte"]),
                   {k: float(v) for k, v in dict(doc.get("per_byte_by_type", {})).items()},
                   float(doc.get("per_line", 0.0)))


def tensor_savings(graph: TrainGraph, tensors: Iterable[str], price: LevelPrice,
                   more: Mapping[str, Sequence[str]] | None = None, tiles: Mapping[str, int] | None = None,
                   transfers: Mapping[str, Mapping[str, int]] | None = None,
                   lines: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, float]:
    """Each tensor of `tensors` (a root: its views and in-place outputs move with it) -> the cycles a step saves
    with it on chip rather than off chip: `layer_price` for each distinct tensor of it every op of `graph` reads or
    writes, at the tiles, copies per tile and lines the calibration read for the op (`tiles`, `transfers`, `lines`,
    as `priced_at_levels` prices the cost model with them; one copy each where none), and over the op types `more`
    names for it (layers of another network that touch it, e.g. a split step's optimizer, one copy each). What
    split+ weighs (solver.model.on_chip); no layer's measured cycles cap it here."""
    found = {t: 0.0 for t in tensors}
    for op in graph.ops:
        for name in dict.fromkeys((*op.inputs, *op.outputs)):
            if graph.root(name) in found:
                found[graph.root(name)] += layer_price(graph, price, op, name, tiles, transfers, lines)
    for tensor, op_types in (more or {}).items():
        if tensor in found:
            found[tensor] += sum(price.per_layer(t, int(graph.tensor_bytes.get(tensor, 0))) for t in op_types)
    return found


def layer_price(graph: TrainGraph, price: LevelPrice, op: Op, tensor: str, tiles: Mapping[str, int] | None,
                transfers: Mapping[str, Mapping[str, int]] | None, lines: Mapping[str, Mapping[str, int]] | None
                ) -> float:
    """What one run of `op` saves with `tensor` on chip rather than off chip: `price.per_layer` at the tiles,
    copies per tile and lines the calibration read for the op (one where none), as `LevelPrice.saving` prices it in
    `priced_at_levels` (before that caps a layer at its measured cycles)."""
    return price.per_layer(op.op_type, int(graph.tensor_bytes.get(tensor, 0)), (tiles or {}).get(op.name, 1),
                           copies_per_tile(graph, transfers, op.name, tensor),
                           lines_moved(graph, lines, op.name, tensor))


def park_prices(graph: TrainGraph, price: LevelPrice, tiles: Mapping[str, int] | None = None,
                transfers: Mapping[str, Mapping[str, int]] | None = None,
                lines: Mapping[str, Mapping[str, int]] | None = None) -> dict[str, dict[str, float]]:
    """Each activation buffer of `graph` -> op name -> the cycles one run of that op adds with the buffer (or a view
    of it) parked off chip: what `layer_price` says the layer saves with it on chip, at the tiles, copies per tile
    and lines the calibration read for the layer (`tiles`, `transfers`, `lines`; one where none), as
    `priced_at_levels` prices a split home. What the exact model weighs parking with (solver.model.parking); no
    layer's measured cycles cap it here."""
    found: dict[str, dict[str, float]] = {}
    for op in graph.ops:
        for name in dict.fromkeys((*op.inputs, *op.outputs)):
            root = graph.root(name)
            if graph.buffer_bytes(root) > 0:
                per_op = found.setdefault(root, {})
                per_op[op.name] = per_op.get(op.name, 0.0) + layer_price(graph, price, op, name, tiles, transfers,
                                                                         lines)
    return found


def copies_per_tile(graph: TrainGraph, transfers: Mapping[str, Mapping[str, int]] | None, op: str,
                    tensor: str) -> int:
    """The copies per tile the calibration read for `op` moving `tensor` (or the buffer it is a view of) off chip:
    none where it read the layer's copies and none was of the tensor (an output written in place of an input, which
    moves with it), one where it read none for the layer (a calibration without them)."""
    if transfers is None or op not in transfers:
        return 1
    found = transfers[op]
    return int(found.get(tensor, found.get(graph.root(tensor), 0)))


def lines_moved(graph: TrainGraph, lines: Mapping[str, Mapping[str, int]] | None, op: str, tensor: str
                ) -> int | None:
    """The lines the calibration read for `op` moving `tensor` (or the buffer it is a view of) over all its tiles;
    None where it read none (one per copy)."""
    found = (lines or {}).get(op, {})
    return found.get(tensor, found.get(graph.root(tensor)))


def on_chip_tensors(graph: TrainGraph, levels: Mapping[str, str], on_chip: str) -> dict[str, tuple[int, ...]]:
    """Op name -> the bytes of each distinct tensor it reads or writes that `levels` keeps in `on_chip` (a tensor
    the placement does not name is taken as off chip: no saving is claimed for it)."""
    return {op: tuple(int(graph.tensor_bytes.get(t, 0)) for t in names)
            for op, names in _on_chip_names(graph, levels, on_chip).items()}


def on_chip_copies(graph: TrainGraph, levels: Mapping[str, str], on_chip: str,
                   transfers: Mapping[str, Mapping[str, int]] | None) -> dict[str, tuple[int, ...]]:
    """Op name -> the copies per tile the calibration read for each tensor of `on_chip_tensors` (in its order)."""
    return {op: tuple(copies_per_tile(graph, transfers, op, t) for t in names)
            for op, names in _on_chip_names(graph, levels, on_chip).items()}


def on_chip_lines(graph: TrainGraph, levels: Mapping[str, str], on_chip: str,
                  lines: Mapping[str, Mapping[str, int]] | None) -> dict[str, tuple[int | None, ...]]:
    """Op name -> the lines the calibration read for each tensor of `on_chip_tensors` (in its order; None: none)."""
    return {op: tuple(lines_moved(graph, lines, op, t) for t in names)
            for op, names in _on_chip_names(graph, levels, on_chip).items()}


def _on_chip_names(graph: TrainGraph, levels: Mapping[str, str], on_chip: str) -> dict[str, tuple[str, ...]]:
    return {op.name: tuple(t for t in dict.fromkeys((*op.inputs, *op.outputs)) if levels.get(t) == on_chip)
            for op in graph.ops}


def priced_at_levels(costs: CostModel, graph: TrainGraph, levels: Mapping[str, str], on_chip: str,
                     price: LevelPrice, home: str) -> CostModel:
    """`costs` (measured with every tensor off chip) priced for a deployment that keeps `levels`: each measured
    op's cycles less its saving (`LevelPrice.saving`, at the tiles, copies per tile and lines the costs'
    calibration read for it), and the step less the savings of the ops it ran once each."""
    if costs.measured is None:
        return costs
    kinds = {op.name: op.op_type for op in graph.ops}
    moved = on_chip_tensors(graph, levels, on_chip)
    copies = on_chip_copies(graph, levels, on_chip, costs.transfers)
    bursts = on_chip_lines(graph, levels, on_chip, costs.lines)
    tiles = costs.tiles or {}
    measured, saved = {}, 0
    for name, cycles in costs.measured.items():
        cut = price.saving(kinds[name], moved[name], int(cycles), tiles.get(name, 1), copies[name], bursts[name]) \
            if name in kinds else 0
        measured[name] = int(cycles) - cut
        saved += cut
    step = None if costs.measured_step is None else max(1, costs.measured_step - saved)
    return replace(costs, measured=measured, measured_step=step,
                   source=f"{costs.source}, priced at home {home} by each tensor's level")


@dataclass(frozen=True)
class LayerPair:
    """One layer measured twice: every tensor off chip, and with the tensors of `moved` bytes on chip."""

    model: str
    op_type: str
    moved: tuple[int, ...]
    off_chip: int
    on_chip: int
    tiles: int = 1            # the tiles the layer moves into the chip's level off chip (the calibration's)
    copies: tuple[int, ...] = ()   # the copies per tile off chip of each tensor of `moved` (empty: one each)
    lines: tuple[int | None, ...] = ()   # the lines of each over all tiles (empty or None: one per copy)

    @property
    def transfers(self) -> int:
        """The copies the layer no longer issues with the tensors of `moved` on chip: over all its tiles."""
        return max(1, self.tiles) * (sum(self.copies) if self.copies else len(self.moved))

    @property
    def extra_lines(self) -> int:
        """The lines those copies moved beyond the first of each, over all its tiles."""
        copies = self.copies or (1,) * len(self.moved)
        return sum(max(0, n - max(1, self.tiles) * c) for n, c in zip(self.lines, copies, strict=False)
                   if n is not None)


def fit_level_price(layers: Iterable[LayerPair], min_type_bytes: int | None = None) -> LevelPrice:
    """Least squares of each layer's saving (off-chip cycles less on-chip cycles) on the copies it no longer issues,
    their lines beyond the first of each and its bytes on chip, each model weighted by its whole saving (a small
    model counts as much as a large one); one rate per byte for every op type, or, given `min_type_bytes` (e.g.
    MIN_TYPE_BYTES), a rate of its own for each op type whose layers move at least that. A rate that comes out
    negative is dropped (its layers then take the shared one, the copies or lines none) and the rest fitted again:
    no rate is negative."""
    layers = [p for p in layers if p.moved]
    per_type: dict[str, int] = {}
    for p in layers:
        per_type[p.op_type] = per_type.get(p.op_type, 0) + sum(p.moved)
    own = sorted(t for t, n in per_type.items() if min_type_bytes is not None and n >= min_type_bytes)
    totals: dict[str, int] = {}
    for p in layers:
        totals[p.model] = totals.get(p.model, 0) + p.off_chip - p.on_chip
    columns = ["transfer", "line", "byte", *own]
    while True:
        typed = frozenset(columns) - {"transfer", "line", "byte"}
        x = np.array([[_feature(p, c, typed) for c in columns] for p in layers], dtype=float)
        x = x.reshape(len(layers), len(columns))
        y = np.array([p.off_chip - p.on_chip for p in layers], dtype=float)
        w = np.sqrt(np.array([1.0 / max(1, abs(totals[p.model])) for p in layers]))
        coef = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)[0] if layers else np.zeros(len(columns))
        negative = [c for c, v in zip(columns, coef, strict=True) if v < 0]
        if not negative:
            break
        columns = [c for c in columns if c not in negative]
    found = dict(zip(columns, (float(v) for v in coef), strict=True))
    return LevelPrice(round(found.get("transfer", 0.0), 1), round(found.get("byte", 0.0), 3),
                      {t: round(v, 3) for t, v in found.items() if t not in ("transfer", "line", "byte")},
                      round(found.get("line", 0.0), 2))


def _feature(pair: LayerPair, column: str, typed: frozenset[str]) -> float:
    """A layer's entry in a column of the fit: the copies it no longer issues, or its bytes on chip under its own
    type's rate (`typed`: the types that have one) or the shared one."""
    if column == "transfer":
        return float(pair.transfers)
    if column == "line":
        return float(pair.extra_lines)
    if column == "byte":
        return 0.0 if pair.op_type in typed else float(sum(pair.moved))
    return float(sum(pair.moved)) if pair.op_type == column else 0.0
