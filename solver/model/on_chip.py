"""What persists to bring on chip beside a split home's activations (`split+`): an exact 0/1 knapsack.

Each persistent tensor kept off chip costs its layers' transfers (what the target's level price says they save with
it on chip: solver.graph.level_price.tensor_savings); brought on chip it costs its bytes there. The choice is the
most cycles saved whose bytes fit the room the chip's level has
left, solved exactly on HiGHS; the level laid out with the choice is checked against what it gives.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pulp

from ckpt.solver.model.backends import BackendOptions, make_solver


@dataclass(frozen=True)
class Candidate:
    """A persistent tensor that could be brought on chip: its bytes there and the cycles it saves per step."""

    nbytes: int
    saves: float


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
