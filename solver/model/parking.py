"""Parking: an activation may live off chip for the whole step instead of on chip (POET's paging, beside
rematerialisation), chosen in the exact MILP with the recomputes.

Under a split home the budget is held on the chip's level, which holds the activations. A parked activation has the
off-chip level as its home, as the split home gives what persists: Deeploy's tiler moves its tiles to and from there
at each layer that writes or reads it, and the chip's level never holds it. In the MILP's schedule space a parked
buffer is written once, by its producer's first run (its producer is never recomputed), and kept (off chip) until its
last reader: so its bytes leave the chip's accounting exactly where the accounting would hold them, and every layer
that writes or reads it pays what the cost model's level price says it saves with the tensor on chip, once per run
(a recomputed reader reads it again). Off by default: `build(..., park=None)` is the model without it.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

import pulp

from ckpt.solver.model.accounting import active_ops
from ckpt.solver.model.linear import at_least, at_most

if TYPE_CHECKING:
    from ckpt.solver.model.milp import Model

# activation buffer -> op name -> cycles one run of that op adds with the buffer off chip (its writer and readers)
ParkPrices = Mapping[str, Mapping[str, float]]

Relief = dict[tuple[int, int], list[tuple[float, object]]]


def parkable(problem, prices: ParkPrices) -> tuple[str, ...]:
    """The problem's activation buffers that may be parked: those priced, in producer order."""
    return tuple(e for e in problem.buffers if e in prices)


def first_runs_price(prices: ParkPrices, tensor: str) -> float:
    """Cycles parking `tensor` adds to the step's first runs: each op that writes or reads it, once."""
    return float(sum(prices[tensor].values()))


def park_family(m: Model, prices: ParkPrices) -> Relief:
    """P[e] = 1 parks buffer e. A parked buffer is carried through every stage to its last possible reader and its
    producer is never recomputed; its bytes are taken off the chip's level at every point where the accounting holds
    them (the returned relief: (stage, op) -> terms the budget row subtracts), and the objective pays its writer's and
    readers' transfers (`m.park_cost`), again at each recompute of a reader (W[t,j,e] = R[t,j] and P[e])."""
    p, relief, cost = m.problem, {}, []
    for e in parkable(p, prices):
        m.check_time()
        n = p.tensor_id[e]
        park = m.P[e] = pulp.LpVariable(f"P_{n}", cat="Binary")
        size, made, last = p.graph.tensor_bytes[e], p.producer(e), p.needed_until(e)
        for t in p.retain_stages(e):                                    # kept until its last reader
            m.lp += at_least([(1, m.S[t, e]), (-1, park)], 0, f"park_kept_{t}_{n}")
        for t in p.recompute_stages(made):                              # written once
            if (t, made) in m.R:
                m.lp += at_most([(1, m.R[t, made]), (1, park)], 1, f"park_once_{t}_{n}")
        relief.setdefault((made, made), []).append((size, park))       # its producer's point
        for t in range(made + 1, last):
            for k in active_ops(p, t):
                relief.setdefault((t, k), []).append((size, park))
        if last > made:                       # the last stage: held until freed after its last reader there
            gone: list = []
            for k in active_ops(p, last):
                if not gone:
                    relief.setdefault((last, k), []).append((size, park))
                else:                         # V = P and still held: V <= P, V <= 1 - frees before k
                    held = pulp.LpVariable(f"V_{last}_{n}_{k}", lowBound=0, upBound=1)
                    m.lp += at_most([(1, held), (-1, park)], 0, f"park_held_{last}_{n}_{k}")
                    m.lp += at_most([(1, held), *((1, f) for f in gone)], 1, f"park_freed_{last}_{n}_{k}")
                    relief.setdefault((last, k), []).append((size, held))
                if k in p.free_points(e) and k < last:
                    gone.append(m.free(last, e, k))
        cost.append((first_runs_price(prices, e), park))
        names = {op.name: j for j, op in enumerate(p.graph.ops)}
        for op_name, cycles in prices[e].items():
            j = names.get(op_name)
            if j is None or j == made or not cycles:
                continue
            for t in p.recompute_stages(j):
                if (t, j) in m.R:               # W >= R + P - 1: the recompute reads it off chip
                    both = pulp.LpVariable(f"W_{t}_{j}_{n}", lowBound=0)
                    m.lp += at_least([(1, both), (-1, m.R[t, j]), (-1, park)], -1, f"park_reread_{t}_{j}_{n}")
                    cost.append((cycles, both))
    m.park_cost = pulp.lpSum(c * v for c, v in cost)
    return relief


def chip_level(relief: Relief, t: int, k: int, level: float, value) -> float:
    """The chip's level at point (t, k) of a solved model: the accounting's `level` less what is parked there
    (`value`: a variable -> its value)."""
    return level - sum(c * (value(v) or 0.0) for c, v in relief.get((t, k), ()))


def parked_retentions(problem, parked: Iterable[str]) -> set[tuple[int, str]]:
    """The (stage, buffer) retentions parking `parked` asks for: each carried to its last possible reader."""
    return {(t, e) for e in parked for t in problem.retain_stages(e)}


def park_start_values(m: Model, values: dict[str, float], parked: frozenset[str]) -> dict[str, float]:
    """`values` (milp.start_values of a schedule, its retentions with `parked_retentions`) with `parked` parked:
    each P, and each held-until-freed (V) and re-read (W) variable at the least value its rows allow, so HiGHS starts
    from that schedule with those activations off chip (a start that leaves them at 0 has their bytes on chip, over
    the budget where parking was needed)."""
    out = dict(values)
    out.update({var.name: float(e in parked) for e, var in m.P.items()})

    def rest(row, own: str) -> float:     # the row's left side less its right, without the variable `own`
        return sum(c * out.get(v.name, 0.0) for v, c in row.items() if v.name != own) + row.constant

    rows = m.lp.constraints
    for name, row in rows.items():
        if name.startswith("park_freed_"):             # V <= 1 - frees before it, V <= P
            held = "V_" + name.removeprefix("park_freed_")
            out[held] = max(0.0, min(-rest(row, held), -rest(rows["park_held_" + name.removeprefix("park_freed_")],
                                                             held)))
        elif name.startswith("park_reread_"):          # W >= R + P - 1
            both = "W_" + name.removeprefix("park_reread_")
            out[both] = max(0.0, -rest(row, both))
    return out
