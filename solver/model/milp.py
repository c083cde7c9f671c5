"""Checkmate's rematerialisation MILP (Jain et al., MLSys 2020) over a fixed stage order, per-buffer.

Decisions: R[t,i] recompute op i in stage t (i < t; stage t always computes op t), S[t,x] carry buffer or pin
x into stage t, F[t,e,k] free buffer e right after op k in stage t, U[t,k] memory after op k's allocations.
Each constraint family below sits in its own block. The accounting (solver/model/accounting.py) is shared with the
solution checker, so what the MILP books is what `booked_levels` computes from its decisions.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pulp

from ckpt.solver.model import clock
from ckpt.solver.model.accounting import all_levels, decision_terms, stage_points
from ckpt.solver.model.linear import at_least, at_most, equal
from ckpt.solver.model.parking import ParkPrices, Relief, park_family
from ckpt.solver.model.problem import Problem

CHECK_EVERY = 4096   # iterations between two looks at the clock in the families that loop over every row


class BuildTimedOut(Exception):
    """The model was not finished by the deadline given to `build` (big graphs take seconds to build)."""


def stop_if_past(deadline: float | None) -> None:
    """Raise BuildTimedOut once `deadline` (clock.now()) has passed: model builds call it between steps."""
    if deadline is not None and clock.now() > deadline:
        raise BuildTimedOut()


@dataclass
class Model:
    problem: Problem
    lp: pulp.LpProblem
    deadline: float | None = None          # clock.now() by which the build must be done
    R: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    S: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)
    F: dict[tuple[int, str, int], pulp.LpVariable] = field(default_factory=dict)
    U: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)
    peak: pulp.LpVariable | None = None
    P: dict[str, pulp.LpVariable] = field(default_factory=dict)      # parked buffers (solver/model/parking.py)
    park_cost: object = 0                                             # cycles the parked buffers add
    relief: Relief = field(default_factory=dict)                      # parked bytes off each budget row

    def check_time(self) -> None:
        stop_if_past(self.deadline)

    def r(self, t: int, i: int):
        return 1 if i == t else self.R.get((t, i), 0)

    def s(self, t: int, x: str):
        return self.S.get((t, x), 0)

    def free(self, t: int, e: str, k: int):
        if k == t:
            return 1 - self.s(t + 1, e)
        return self.F.get((t, e, k), 0)

    def recompute_cost(self):
        cost = self.problem.graph.op_cost
        return pulp.lpSum(cost[self.problem.graph.ops[i].name] * v for (t, i), v in self.R.items())


def build(problem: Problem, budget: int | None, cost_cap: int | None = None, deadline: float | None = None,
          park: ParkPrices | None = None) -> Model:
    """Minimise recompute cost under `budget`; with budget None, minimise the peak under `cost_cap`. Raises
    BuildTimedOut if the model is not built by `deadline` (clock.now()). `park`: the activations that may be parked
    off chip and their prices (solver/model/parking.py; a live budget only), added to the cost."""
    lp = pulp.LpProblem("ckpt", pulp.LpMinimize)
    m = Model(problem, lp, deadline=deadline)
    for family in (_decisions, _dependencies, _retention_needs_a_source, _pins_hold_their_buffer,
                   _one_version_at_a_time, _free_after_last_use):
        family(m)
        m.check_time()
    if park is not None and budget is not None:
        m.relief = park_family(m, park)
        m.check_time()
    _memory(m, budget)
    if budget is None:
        lp += m.peak
        if cost_cap is not None:
            lp += m.recompute_cost() <= cost_cap, "cost_cap"
    else:
        lp += m.recompute_cost() + m.park_cost
    return m


def _decisions(m: Model) -> None:
    p = m.problem
    for i in range(p.n):
        m.check_time()
        for t in p.recompute_stages(i):
            m.R[t, i] = pulp.LpVariable(f"R_{t}_{i}", cat="Binary")
    for x in p.buffers + p.pins:
        m.check_time()
        for t in p.retain_stages(x):
            m.S[t, x] = pulp.LpVariable(f"S_{t}_{p.tensor_id[x]}", cat="Binary")
    for e in p.buffers:
        m.check_time()
        for t in p.present_stages(e):
            for k in p.free_points(e):
                if k < t and (t, k) in m.R:
                    m.F[t, e, k] = pulp.LpVariable(f"F_{t}_{p.tensor_id[e]}_{k}", lowBound=0, upBound=1)


def _dependencies(m: Model) -> None:
    """An op runs in stage t only if each input is there: computed earlier in t, or carried into t."""
    p, g = m.problem, m.problem.graph
    tracked = set(p.buffers) | set(p.pins)
    for j in range(p.n):
        m.check_time()
        inputs = [x for x in dict.fromkeys(g.ops[j].inputs) if x in tracked]
        for t in [j, *p.recompute_stages(j)]:
            for x in inputs:
                made = p.producer(x)
                if made == t:
                    continue
                # a pin is made once, so later stages have it only if it was carried
                source = m.s(t, x) if x in g.aliases else m.s(t, x) + m.r(t, made)
                m.lp += m.r(t, j) <= source, f"dep_{t}_{j}_{p.tensor_id[x]}"


def _retention_needs_a_source(m: Model) -> None:
    """A buffer is carried into t+1 only if it was there in t: carried in, or (re)computed in t."""
    p = m.problem
    for n, ((t, x), var) in enumerate(m.S.items()):
        if n % CHECK_EVERY == 0:
            m.check_time()
        made = p.producer(x)
        if t - 1 == made:
            continue
        previous = m.s(t - 1, x)
        if x in p.buffers:
            previous = previous + m.r(t - 1, made)
        m.lp += var <= previous, f"carry_{t}_{p.tensor_id[x]}"


def _pins_hold_their_buffer(m: Model) -> None:
    """While a view of a buffer is kept, the buffer it lives in is kept too."""
    p, g = m.problem, m.problem.graph
    for (t, x), var in m.S.items():
        if x in g.aliases:
            m.lp += var <= m.s(t, g.root(x)), f"pin_{t}_{p.tensor_id[x]}"


def _one_version_at_a_time(m: Model) -> None:
    """Recomputing a buffer that was carried in would hold two versions: carry it or recompute it, not both."""
    p = m.problem
    for n, ((t, e), var) in enumerate(m.S.items()):
        if n % CHECK_EVERY == 0:
            m.check_time()
        if e in p.buffers and (t, p.producer(e)) in m.R:
            m.lp += var + m.R[t, p.producer(e)] <= 1, f"onever_{t}_{p.tensor_id[e]}"


def _free_after_last_use(m: Model) -> None:
    """F[t,e,k] = 1 exactly when k runs in t, no later reader of e runs in t, and e is not carried on."""
    p = m.problem
    for n_free, ((t, e, k), var) in enumerate(m.F.items()):
        if n_free % CHECK_EVERY == 0:
            m.check_time()
        later = [m.r(t, j) for j in p.free_points(e) if k < j <= t]
        runs, kept, name = m.r(t, k), m.s(t + 1, e), f"{t}_{p.tensor_id[e]}_{k}"
        m.lp += at_most([(1, var), (-1, runs)], 0, f"free_runs_{name}")                   # var <= r
        m.lp += at_most([(1, var), (1, kept)], 1, f"free_dropped_{name}")                 # var <= 1 - s
        for n, later_run in enumerate(later):
            m.lp += at_most([(1, var), (1, later_run)], 1, f"free_last_{name}_{n}")      # var <= 1 - later
        m.lp += at_least([(1, var), (-1, runs), (1, kept), *((1, j) for j in later)], 0,  # var >= r - s - later
                         f"free_forced_{name}")


def _memory(m: Model, budget: int | None) -> None:
    """U[t,k] follows the accounting; every point stays within the budget (or under the peak variable)."""
    p = m.problem
    limit = budget
    if budget is None:
        m.peak = pulp.LpVariable("peak", lowBound=0)
        limit = m.peak
    for t in range(p.n):
        m.check_time()
        previous = None
        for k, change in stage_points(p, t, m.r, m.s, m.free):
            u = pulp.LpVariable(f"U_{t}_{k}", lowBound=0)
            m.U[t, k] = u
            m.lp += equal([(1, u), (-1, change), (-1, 0 if previous is None else previous)], 0, f"level_{t}_{k}")
            parked = [(-c, v) for c, v in m.relief.get((t, k), ())]
            m.lp += at_most([(1, u), (-1, limit), *parked], 0, f"budget_{t}_{k}")
            previous = u


def start_values(m: Model, recomputes: set[tuple[int, int]], retained: set[tuple[int, str]]) -> dict[str, float]:
    """Variable name -> value for a known solution, so the solver starts from it (a warm start)."""
    values = {var.name: float(key in recomputes) for key, var in m.R.items()}
    values.update({var.name: float(key in retained) for key, var in m.S.items()})
    _, _, free = decision_terms(m.problem, recomputes, retained)
    values.update({var.name: float(free(t, e, k)) for (t, e, k), var in m.F.items()})
    levels = all_levels(m.problem, recomputes, retained)
    values.update({m.U[key].name: float(level) for key, level in levels.items()})
    if m.peak is not None:
        values[m.peak.name] = float(max(levels.values(), default=0))
    return values
