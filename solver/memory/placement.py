"""Where each tensor of a deployment lives when its home is split between two levels (`--home split`).

What persists across steps is read a few times per step; activations are written and read at every layer in both
passes. The split home keeps the first off chip and the second on chip, a rule per kind of tensor:
- persistent: the constants (a tensor nobody produces that is no graph input), the graph I/O that persists
  (`persistent_io`: a split step's weights and gradient accumulators, what its optimizer graph reads; the harness's
  per-mini-batch data, reset flag and loss stay), and every tensor whose bytes are one of those (a view, an
  accumulator's output: `TrainGraph.root`);
- the rest (activations, the per-mini-batch I/O) in the default level.
No schedule changes this: a recompute writes an activation. Where the default level has room left beside the
activations, what persists may be brought on chip as well (`split+`, solver.model.on_chip): the tensors whose transfers
from the level behind the chip cost the most cycles for their bytes, chosen exactly (a 0/1 knapsack) within the
room, weighed by the target's level price (solver.graph.level_price: the price the cost model prices a split
home with, one price for one fact). The levels a deployment gives each buffer are checked against this decision
(tests/test_home_split.py), and the capacity of each level against what is placed there (`over_capacity`).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ckpt.solver.graph.graph import TrainGraph


@dataclass(frozen=True)
class SplitHome:
    """The two levels of a split home: `default` (on chip) and `persistent` (behind the chip)."""

    default: str
    persistent: str


def persistent_roots(graph: TrainGraph, inputs: Iterable[str], persistent_io: Iterable[str] = ()) -> frozenset[str]:
    """The tensors that persist on their own (see the module doc); views of them persist with them."""
    inputs = frozenset(inputs)
    constants = {t for t in graph.tensor_bytes if t not in graph.producer and t not in inputs}
    return frozenset(constants | set(persistent_io))


def split_levels(graph: TrainGraph, inputs: Iterable[str], home: SplitHome, persistent_io: Iterable[str] = (),
                 on_chip: Iterable[str] = (), parked: Iterable[str] = ()) -> dict[str, str]:
    """Each tensor of `graph` -> the level the split home keeps it in; `on_chip`: persistent tensors brought on chip
    (`bring_on_chip`), which keep the default level with their views; `parked`: activations parked off chip
    (solver.model.parking), which take the persistent level with their views."""
    roots = (persistent_roots(graph, inputs, persistent_io) - frozenset(on_chip)) | frozenset(parked)
    return {t: home.persistent if t in roots or graph.root(t) in roots else home.default for t in graph.tensor_bytes}


def level_bytes(levels: Mapping[str, str], sizes: Mapping[str, int]) -> dict[str, int]:
    """Bytes placed at each level, every tensor counted once (what a level holds if all of it lived at once)."""
    found: dict[str, int] = {}
    for tensor, level in sorted(levels.items()):
        found[level] = found.get(level, 0) + int(sizes.get(tensor, 0))
    return found


def over_capacity(held: Mapping[str, int], capacity: Mapping[str, int]) -> dict[str, int]:
    """Level -> bytes by which what it must hold (`held`) exceeds its capacity; empty when every level fits."""
    return {level: nbytes - capacity[level] for level, nbytes in sorted(held.items())
            if level in capacity and nbytes > capacity[level]}
