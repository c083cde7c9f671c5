"""Where each tensor of a deployment lives when its home is split between two levels (`--home split`).

What persists across steps is read a few times per step; activations are written and read at every layer in both
passes. The split home keeps the first off chip and the second on chip, a rule per kind of tensor:
- persistent: the constants (a tensor nobody produces that is no graph input), the graph I/O that persists
  (`persistent_io`: a split step's weights and gradient accumulators, what its optimizer graph reads; the harness's
  per-mini-batch data, reset flag and loss stay), and every tensor whose bytes are one of those (a view, an
  accumulator's output: `TrainGraph.root`);
- the rest (activations, the per-mini-batch I/O) in the default level.
No schedule changes this: a recompute writes an activation. Where the default level has room left beside the
activations, what persists may be brought on chip as well (`split+`, `bring_on_chip`): the tensors whose transfers
from the level behind the chip cost the most cycles for their bytes, chosen exactly (a 0/1 knapsack) within the
room. The levels a deployment gives each buffer are checked against this decision (tests/test_home_split.py), and
the capacity of each level against what is placed there (`over_capacity`).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import pulp

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.model.backends import BackendOptions, make_solver


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
                 on_chip: Iterable[str] = ()) -> dict[str, str]:
    """Each tensor of `graph` -> the level the split home keeps it in; `on_chip`: persistent tensors brought on chip
    (`bring_on_chip`), which keep the default level with their views."""
    roots = persistent_roots(graph, inputs, persistent_io) - frozenset(on_chip)
    return {t: home.persistent if t in roots or graph.root(t) in roots else home.default for t in graph.tensor_bytes}


@dataclass(frozen=True)
class TransferPrice:
    """What a tensor kept behind the chip costs per step beyond the same tensor on chip, in cycles: each layer that
    reads or writes it pays `per_access` (the transfer's set-up) and `per_byte` for each of its bytes."""

    per_access: float
    per_byte: float

    def of(self, nbytes: int, accesses: int) -> float:
        return accesses * (self.per_access + self.per_byte * nbytes)


@dataclass(frozen=True)
class Candidate:
    """A persistent tensor that could be brought on chip: its bytes there and the cycles it saves per step."""

    nbytes: int
    saves: float


def persistent_accesses(graph: TrainGraph, roots: Iterable[str]) -> dict[str, int]:
    """Each root -> how many ops of `graph` read or write it or a view of it (each op counted once per root)."""
    found = {root: 0 for root in roots}
    for op in graph.ops:
        for root in {graph.root(t) for t in (*op.inputs, *op.outputs)} & found.keys():
            found[root] += 1
    return found


def bring_on_chip(candidates: Mapping[str, Candidate], room: int) -> frozenset[str]:
    """The candidates to bring on chip: the most cycles saved whose bytes fit `room`, solved exactly (a 0/1
    knapsack on HiGHS; all of them, without a solve, when all fit)."""
    if room <= 0 or not candidates:
        return frozenset()
    if sum(c.nbytes for c in candidates.values()) <= room:
        return frozenset(candidates)
    names = sorted(candidates)
    problem = pulp.LpProblem("bring_on_chip", pulp.LpMaximize)
    take = {name: pulp.LpVariable(f"x{i}", cat=pulp.LpBinary) for i, name in enumerate(names)}
    problem += pulp.lpSum(take[n] * candidates[n].saves for n in names)
    problem += pulp.lpSum(take[n] * candidates[n].nbytes for n in names) <= room
    status = problem.solve(make_solver(BackendOptions(time_limit=None, gap=0.0)))   # quiet: no banner
    if pulp.LpStatus[status] != "Optimal":
        raise RuntimeError(f"the on-chip knapsack ended {pulp.LpStatus[status]}")
    return frozenset(n for n in names if (take[n].value() or 0) > 0.5)


def on_chip_within(candidates: Mapping[str, Candidate], limit: int, level_bytes_with: Callable[[frozenset[str]], int],
                   reserve: int = 0) -> frozenset[str]:
    """What persists to bring on chip so that the chip's level, laid out with it (`level_bytes_with`), holds at most
    `limit` bytes: all of it where all fits (nothing then moves from off chip), else the knapsack's choice within
    what the level leaves beside `reserve` (kept for the tiles of what stays off chip). A layout need not grow by
    exactly the bytes brought, so the choice is laid out and the room cut by any excess until it fits."""
    everything = frozenset(candidates)
    if level_bytes_with(everything) <= limit:
        return everything
    limit -= reserve
    room = limit - level_bytes_with(frozenset())
    while room > 0:
        chosen = bring_on_chip(candidates, room)
        over = level_bytes_with(chosen) - limit
        if over <= 0:
            return chosen
        room -= over
    return frozenset()


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
