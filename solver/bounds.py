"""A lower bound on recompute cost from memory checked at a few points only: the proof the MILP's LP can't give.

Why: Checkmate's LP relaxation lets a small fraction of an input, carried through many stages, feed a small
recompute in each of them, so a dropped buffer is rebuilt bit by bit almost for free. On CCT2_FT2 at 0.8 its
bound is 17k cycles against a 246k-cycle schedule, and branch and bound cannot close that gap in time.

This relaxation keeps what every schedule over the stage order must do around chosen points P_1 < ... < P_m
(the first runs of ops t_1 < ... < t_m), and forgets the rest:
- at each point, the buffers present there plus op t's own allocations fit the budget;
- a buffer that a later op reads and that is not present at a point is recomputed between the point and that
  reader;
- a recompute needs each input present at the start of its segment, or recomputed in the same segment;
- a buffer present at the next point was present at this one, or was made in between;
- a recompute that reads a view reads the very version the view was made from: once that version is gone, a
  recompute of its producer makes a new one the view never sees.
Every schedule maps onto it (present = has a live version at the point, D = recomputed in the segment) at no
more cost, so any proven bound on its optimum bounds the exact MILP's optimum from below. Its LP is a
precedence-constrained knapsack per point, far tighter than Checkmate's, and it is small.

Which points? All of them is slow (CCT2_FT2 at 0.6: 82 points, 180 s), a few is weak. So points are added where
they are needed, like lazy constraints: solve over the strongest few, turn the answer into a real schedule
(each recompute placed before its first reader in its segment), replay it, and add the stages where it goes
over the budget. When the replayed schedule fits, it costs what the bound proves: it is optimal.
When it only goes over while a recompute chain runs before a point (intermediates that no point sees), the
answer is placed exactly (solver/realise.py), and failing that, memory is also checked while that segment's
recomputes run (kept buffers, inputs, and in a one-stage segment what earlier recomputes made and later ones
read), one segment a round: the rounds still prove bounds. Once every such segment is checked, later rounds
keep the excess free at the point. That is a heuristic: those rounds find schedules, not bounds, and solve()
weighs what they find against the bound. An answer that never fits is still a start for a repair. If no
schedule met the bound, the time left goes to the strongest form: every binding point, every segment checked
while it recomputes.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

import pulp

from ckpt.solver.backends import Backend, RunStatus, SolverOptions, run
from ckpt.solver.greedy import holds_two_versions
from ckpt.solver.linear import at_least, at_most
from ckpt.solver.milp import BuildTimedOut, stop_if_past
from ckpt.solver.problem import Problem
from ckpt.solver.realise import Span, by_first_reader, placed_exactly
from ckpt.solver.schedule import Decisions
from ckpt.solver.simulate import memory_trace, plain_sequence

GROWTH = 1               # stages added per round: the one where the realised schedule is furthest over
SINGLES_STALL = 32       # single points tried in a row without raising the bound, after which the rest are skipped
RELAXATION_GAP = 1e-6    # the relaxation is solved to (near) optimality: its dual bound is the proof
HEURISTIC_GAP = 1e-3     # rounds with headroom only look for a schedule that fits
LAST_RESORT_SHARE = 0.4  # of the bound's time, kept for the last resort when no schedule is known (and it is small)
LAST_RESORT_PRESENCE = 2000   # ... judged by its presence variables (a residual CNN: ~1,200; a 2-block CCT: ~5,000)


@dataclass(frozen=True)
class Bound:
    cost: float                 # no schedule over this stage order is cheaper
    points: tuple[int, ...]     # the stages whose first-run memory the relaxation checked
    schedule: Decisions | None = None   # the relaxation's answer as a schedule that replays within the budget
    sketches: tuple[Decisions, ...] = ()   # its answers realised that overflow, newest last: starts for a repair


def over_budget_points(problem: Problem, budget: int) -> list[int]:
    """Stages whose own op, run without any recompute, lifts memory above the budget: the points that bind."""
    return list(_binding_levels(problem, budget))


def _binding_levels(problem: Problem, budget: int) -> dict[int, int]:
    """Binding point -> the level its op reaches with no recompute."""
    levels = memory_trace(problem.graph, plain_sequence(problem.graph)).levels
    return {t: level for t, level in enumerate(levels) if level > budget}


def lower_bound(problem: Problem, budget: int, seconds: float | None, enough: float = math.inf,
                joint: int = 4, threads: int | None = 1, stall: int = SINGLES_STALL) -> Bound:
    """The best bound found within about `seconds` (None: no limit): each binding point alone (highest level
    first, until `stall` of them in a row raise nothing: the strongest are among the highest, and on a big
    graph the hundreds of others would take all the time), then the `joint` strongest points together,
    growing by the stages where the answer's realised schedule goes over the budget (few to start with: a
    round over many points can take longer than the whole limit, and grown rounds add the points that bind).
    Stops once the bound reaches `enough` (a known cost), or once a realised answer fits and costs what the
    bound proves (often the case at the strongest single point). HiGHS runs on `threads` (see backends: one
    thread keeps the answer independent of the machine)."""
    deadline = _Deadline(time.perf_counter() + (math.inf if seconds is None else seconds), threads)
    levels = _binding_levels(problem, budget)
    best, singles, found, since_raised = Bound(0.0, ()), [], _Found(), 0
    for t in sorted(levels, key=lambda t: (-levels[t], t)):
        if _left(deadline) <= 0 or best.cost >= enough:
            return found.with_bound(problem, best)
        if since_raised >= stall:
            break
        relaxation = _Relaxation(problem, budget, [t], threads=deadline.threads)
        bound = relaxation.solve(_limit(deadline))
        singles.append((bound.cost, t))
        since_raised += 1
        if bound.cost > best.cost:
            best, since_raised = bound, 0
            if relaxation.answered and found.realised(problem, budget, relaxation.answer(), best.cost):
                return found.with_bound(problem, best)
    strongest = sorted(t for _, t in sorted(singles, key=lambda c: (-c[0], c[1]))[:joint])
    return _bound_from_growing_points(problem, budget, strongest, best, deadline, enough, list(levels), found)


def _growing_deadline(problem: Problem, deadline: _Deadline, every: list[int], enough: float) -> _Deadline:
    """When no schedule is known (`enough` infinite), growing rounds stop early enough to leave the last
    resort its share, if it is small enough to use it: below the smallest feasible budget it often proves
    infeasibility in a second or two, where growing one checked segment at a time does not get there. With a
    schedule known, the rounds get all the time. Judged by the model's size, not a clock."""
    presence = sum(1 for t in every for x in problem.buffers if problem.producer(x) < t)
    if math.isinf(deadline.at) or not math.isinf(enough) or presence > LAST_RESORT_PRESENCE:
        return deadline
    return replace(deadline, at=deadline.at - LAST_RESORT_SHARE * max(0.0, _left(deadline)))


@dataclass
class _Found:
    """What the relaxation's answers gave so far: schedules that fit, and the realised answers that do not
    (`sketch`: the last answer's, either way)."""

    schedules: list[Decisions] = field(default_factory=list)
    sketch: Decisions | None = None
    sketches: list[Decisions] = field(default_factory=list)

    def realised(self, problem: Problem, budget: int, answer: list[Span], bound: float) -> bool:
        """Realise `answer` (each recompute before its first reader); keep it if it fits. True when it fits
        and costs what `bound` proves: an optimal schedule, nothing more to look for."""
        self.sketch = by_first_reader(problem.graph, answer)
        if _overflow(problem, self.sketch, budget)[0] or holds_two_versions(problem.graph, self.sketch):
            self.sketches += [self.sketch] if self.sketch not in self.sketches else []
            return False
        self.schedules.append(self.sketch)
        return self.sketch.cost(problem.graph) <= _as_cheap_as(bound)

    def meets(self, problem: Problem, bound: float) -> bool:
        """Whether a schedule found so far costs what `bound` proves (the bound rose to it since)."""
        cheapest = self.cheapest(problem)
        return cheapest is not None and cheapest.cost(problem.graph) <= _as_cheap_as(bound)

    def cheapest(self, problem: Problem) -> Decisions | None:
        return min(self.schedules, key=lambda d: d.cost(problem.graph), default=None)

    def with_bound(self, problem: Problem, bound: Bound) -> Bound:
        return replace(bound, schedule=self.cheapest(problem), sketches=tuple(self.sketches))


@dataclass(frozen=True)
class _Deadline:
    """When the bound's time is up, and the threads its HiGHS runs get."""

    at: float
    threads: int | None


def _bound_from_growing_points(problem: Problem, budget: int, chosen: list[int], best: Bound, deadline: _Deadline,
                               enough: float, every: list[int], found: _Found) -> Bound:
    """Solve over `chosen`, then add the stages its realised schedule overflows as points, until that
    schedule fits, the bound reaches `enough`, nothing is left to add, or time runs out. Where the schedule
    overflows only while recompute chains run (intermediates no point sees), the exact placement of the
    answer's recomputes is tried; failing that, memory is checked while that segment recomputes (`chained`,
    the segment shortened to start at the binding point before it: a short segment keeps the check tight),
    one segment a round, furthest over first: still a bound. Once every such segment is checked, those points
    keep the excess free in later rounds: a heuristic to find a schedule that fits, so those rounds prove
    nothing."""
    headroom: dict[int, int] = {}
    chained: set[int] = set()
    growing = _growing_deadline(problem, deadline, every, enough)
    while chosen and _left(growing) > 0 and best.cost < enough:
        relaxation = _Relaxation(problem, budget, chosen, dict(headroom), frozenset(chained), deadline.threads)
        # every round may stop at the proven bound: a round's optimum cannot be below it, so nothing is lost
        bound = relaxation.solve(_limit(growing), target=_as_cheap_as(best.cost) if best.cost > 0 else None)
        if not headroom:
            best = max(best, bound, key=lambda b: b.cost)
        if math.isinf(bound.cost) or not relaxation.answered or found.meets(problem, best.cost):
            break
        answer = relaxation.answer()
        if found.realised(problem, budget, answer, best.cost):
            break
        overflow, in_recomputes = _overflow(problem, found.sketch, budget)
        if not overflow and not holds_two_versions(problem.graph, found.sketch):
            break                      # it fits (kept by `found`), at a cost above the bound
        added = [t for t in overflow if t not in chosen][:GROWTH]
        if added:   # a new round over more points, without headroom: it proves a bound again
            chosen, headroom = sorted(chosen + added), {}
            continue
        if not in_recomputes:
            break
        placed = None if headroom else placed_exactly(problem.graph, answer, budget, _limit(growing),
                                                      deadline.threads)
        found.schedules += [placed] if placed is not None else []
        if placed is not None and placed.cost(problem.graph) <= _as_cheap_as(best.cost):
            break
        unchecked = sorted((t for t in in_recomputes if t not in chained), key=lambda t: (-in_recomputes[t], t))
        if unchecked and not headroom:
            t = unchecked[0]
            chained.add(t)
            chosen = sorted({*chosen, t, *[b for b in every if b < t][-1:]})
            continue
        for t, excess in in_recomputes.items():
            headroom[t] = headroom.get(t, 0) + excess
    return _with_last_resort_bound(problem, budget, best, found, deadline, enough, every)


def _with_last_resort_bound(problem: Problem, budget: int, best: Bound, found: _Found, deadline: _Deadline,
                            enough: float, every: list[int]) -> Bound:
    """The bound with the cheapest schedule found. If that does not meet it, the time left goes to the last
    resort for a proof: every binding point, with memory checked while every segment's recomputes run. Valid
    and much tighter where recompute chains bind (a residual CNN at 0.5: 348,160 -> 360,447), but slow on big
    graphs, so it only gets the time the rounds leave."""
    cheapest = found.cheapest(problem)
    unmet = cheapest is None or cheapest.cost(problem.graph) > _as_cheap_as(best.cost)
    if unmet and _left(deadline) > 0 and best.cost < enough:
        strongest = point_bound(problem, budget, every, _limit(deadline), chains=True, threads=deadline.threads)
        best = max(best, strongest, key=lambda b: b.cost)
    return found.with_bound(problem, best)


def _as_cheap_as(bound: float) -> float:
    """The cost at which an answer meets a proven bound: HiGHS may stop there, since no proof is needed."""
    return bound / (1 - RELAXATION_GAP) + 1


def _overflow(problem: Problem, schedule: Decisions, budget: int) -> tuple[list[int], dict[int, int]]:
    """Stages where `schedule` replays above the budget, furthest over first; and, for those where it is
    over while a recompute runs, by how much."""
    seq = schedule.sequence(problem.graph)
    result = memory_trace(problem.graph, seq)
    peaks, during = result.stage_peaks(), {}
    for (_, is_recompute), stage, level in zip(seq, result.stage_of, result.levels):
        if is_recompute and level > budget:
            during[stage] = max(during.get(stage, 0), level - budget)
    return sorted((t for t, peak in peaks.items() if peak > budget), key=lambda t: (-peaks[t], t)), during


def _left(deadline: _Deadline) -> float:
    return deadline.at - time.perf_counter()


def _limit(deadline: _Deadline) -> float | None:
    return None if math.isinf(deadline.at) else max(0.0, _left(deadline))


def point_bound(problem: Problem, budget: int, points: list[int], seconds: float | None = None,
                chains: bool = False, threads: int | None = 1) -> Bound:
    """Solve the relaxation over `points` and return the bound it proves: HiGHS's dual bound, rounded down,
    which is valid whether or not the relaxation was solved to the end. `chains`: also check memory while
    the recomputes of each segment run."""
    points = sorted(set(points))
    return _Relaxation(problem, budget, points, chained=frozenset(points if chains else ()),
                       threads=threads).solve(seconds)


@dataclass
class _Relaxation:
    problem: Problem
    budget: int
    points: list[int]
    headroom: dict[int, int] = field(default_factory=dict)   # point -> bytes left free there (a heuristic)
    chained: frozenset[int] = frozenset()   # points whose segment before them is checked while it recomputes
    threads: int | None = 1
    lp: pulp.LpProblem = field(default_factory=lambda: pulp.LpProblem("ckpt_bound", pulp.LpMinimize))
    K: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)   # buffer present at point s
    D: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)   # op recomputed in segment s
    at: dict[int, dict[str, pulp.LpVariable]] = field(default_factory=dict)   # point s -> its K, by buffer
    P: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)   # view's own version kept at s
    H: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)   # kept through all of segment s
    M: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)   # remade in s, kept to s+1
    answered: bool = False                  # after solve: HiGHS holds an answer (a feasible point) to realise
    deadline: float | None = None           # time.perf_counter() by which the build must be done

    def solve(self, seconds: float | None, target: float | None = None) -> Bound:
        """The bound this relaxation proves. HiGHS stops early at an answer costing `target` or less (a bound
        that low is proven already); with headroom the answer is all that is wanted, so a looser gap does."""
        began = time.perf_counter()
        self.deadline = None if seconds is None else began + seconds
        try:
            self.build()
        except BuildTimedOut:            # the strongest form over every point can take minutes to build
            return Bound(0.0, tuple(self.points))
        if seconds is not None:          # the build counts against the time given
            seconds -= time.perf_counter() - began
            if seconds <= 0:
                return Bound(0.0, tuple(self.points))
        gap = HEURISTIC_GAP if self.headroom else RELAXATION_GAP
        outcome = run(self.lp, SolverOptions(name=Backend.HIGHS, time_limit=seconds, gap=gap, threads=self.threads),
                      stop_at=target)
        self.answered = outcome.has_answer
        if outcome.status is RunStatus.INFEASIBLE:
            return Bound(math.inf, tuple(self.points))
        return Bound(outcome.dual_bound, tuple(self.points))

    def build(self) -> None:
        """The relaxation's constraint families; BuildTimedOut once the deadline passes."""
        for s in range(len(self.points)):
            stop_if_past(self.deadline)
            self._presence(s)
        for s in range(len(self.points)):
            stop_if_past(self.deadline)
            self._needs(s)
            self._fits(s)
        for s in range(1, len(self.points)):
            self._made_before_next_point(s)
        for s in range(len(self.points) - 1):
            if self.points[s + 1] in self.chained:
                self._fits_while_recomputing(s)
        cost = self.problem.graph.op_cost
        self.lp += pulp.lpSum(cost[self.problem.graph.ops[i].name] * v for (_, i), v in self.D.items())

    # --- variables ------------------------------------------------------------------------------------
    def _presence(self, s: int) -> None:
        """K[s,x] for every buffer made before point s (made at the point itself: counted in its allocation)."""
        t = self.points[s]
        self.at[s] = {}
        for x in self.problem.buffers:
            if self.problem.producer(x) < t:
                self.K[s, x] = self.at[s][x] = pulp.LpVariable(f"K_{s}_{self.problem.tensor_id[x]}", cat="Binary")

    def _segment_end(self, s: int) -> int:
        return self.points[s + 1] if s + 1 < len(self.points) else self.problem.n - 1

    def _recompute(self, s: int, i: int):
        """D[s,i], created with its input needs the first time something asks for it (0 if i cannot run again)."""
        if not self.problem.recomputable(i) or i >= self._segment_end(s):
            return 0
        if (s, i) not in self.D:
            self.D[s, i] = pulp.LpVariable(f"D_{s}_{i}", cat="Binary")
            self._inputs_available(s, i)
        return self.D[s, i]

    def _pinned(self, s: int, y: str):
        """P[s,y]: the buffer version that view y was made from is still there at point s (None: y is made
        later, or its buffer is not an activation). A recompute makes a new version the view never sees, so
        once that version is gone it stays gone."""
        p, g = self.problem, self.problem.graph
        x = g.root(y)
        if p.producer(y) >= self.points[s] or (s, x) not in self.K:
            return None
        if (s, y) not in self.P:
            name = f"{s}_{p.tensor_id[y]}"
            self.P[s, y] = pulp.LpVariable(f"P_{name}", cat="Binary")
            self.lp += self.P[s, y] <= self.K[s, x], f"pinned_present_{name}"
            before = self._pinned(s - 1, y) if s > 0 else None
            if before is not None:
                self.lp += self.P[s, y] <= before, f"pinned_kept_{name}"
        return self.P[s, y]

    def _held(self, s: int, x: str):
        """H[s,x] >= 1 when the version of x there at point s (or made by op t_s) is still there at point s+1
        and x was not recomputed in between: then it is in memory during the whole segment."""
        p = self.problem
        if (s, x) not in self.H:
            name = f"{s}_{p.tensor_id[x]}"
            self.H[s, x] = pulp.LpVariable(f"H_{name}", lowBound=0, upBound=1)
            before = self.K[s, x] if (s, x) in self.K else 1   # made by op t_s itself: there at the point
            self.lp += at_least([(1, self.H[s, x]), (-1, before), (-1, self.K[s + 1, x]),   # H >= before + K' - 1 - D
                                 (1, self._recompute(s, p.producer(x)))], -1, f"held_{name}")
        return self.H[s, x]

    # --- constraint families ----------------------------------------------------------------------------
    def _inputs_available(self, s: int, i: int) -> None:
        """A recompute in segment s reads each input from a version present at point s or made in the segment."""
        p, g, _t = self.problem, self.problem.graph, self.points[s]
        for y in dict.fromkeys(g.ops[i].inputs):
            if not g.is_activation(y):
                continue
            if y in g.aliases:   # a view is made once: it reads the version it was made from
                pinned = self._pinned(s, y)
                if pinned is not None:
                    self.lp += self.D[s, i] <= pinned, f"view_{s}_{i}_{p.tensor_id[y]}"
                continue
            if (s, y) not in self.K:
                continue             # made at or after point s: available in the segment at no cost here
            self.lp += self.D[s, i] <= self.K[s, y] + self._recompute(s, p.producer(y)), \
                f"input_{s}_{i}_{p.tensor_id[y]}"

    def _needs(self, s: int) -> None:
        """What op t reads, or a view made earlier still pins, is present; a buffer read later is there or redone."""
        p, g, t = self.problem, self.problem.graph, self.points[s]
        forced = {g.root(y) for y in g.ops[t].inputs}
        for v in p.pins:
            if p.producer(v) < t and any(j >= t for j in g.readers.get(v, ())):
                forced.add(g.root(v))
                pinned = self._pinned(s, v)
                if pinned is not None:
                    self.lp += pinned >= 1, f"pin_forced_{s}_{p.tensor_id[v]}"
        for x, present in self.at[s].items():
            if x in forced:
                self.lp += present >= 1, f"forced_{s}_{p.tensor_id[x]}"
                continue
            later = [j for j in g.readers.get(x, ()) if j > t]
            if later:
                redo = [self._recompute(q, p.producer(x)) for q in range(s, self._segment_of(min(later)) + 1)]
                self.lp += present + pulp.lpSum(redo) >= 1, f"need_{s}_{p.tensor_id[x]}"

    def _segment_of(self, stage: int) -> int:
        """The last segment starting before `stage` (stage is after the first point)."""
        return max(q for q, point in enumerate(self.points) if point < stage)

    def _fits(self, s: int) -> None:
        p, t = self.problem, self.points[s]
        size = p.graph.tensor_bytes
        present = pulp.lpSum(size[x] * v for x, v in self.at[s].items())
        self.lp += present + p.alloc[t] <= self.budget - self.headroom.get(t, 0), f"fits_{s}"

    def _fits_while_recomputing(self, s: int) -> None:
        """While a recompute in segment s runs, what is kept through the segment, its inputs and its own
        allocations are all in memory: recompute chains whose intermediates die before point s+1 pay here.
        A segment of one stage runs its recomputes in op order, so what earlier ones made for point s+1 or
        for later ones, and what later ones read from before, is there too."""
        p, g = self.problem, self.problem.graph
        size, t = g.tensor_bytes, self.points[s]
        kept = [x for x in self.at[s + 1] if x in self.at[s] or p.producer(x) == t]
        in_order = self.points[s + 1] == t + 1
        done: set[int] = set()
        while todo := sorted(i for (q, i) in self.D if q == s and i not in done):
            ops = sorted(i for (q, i) in self.D if q == s)
            readers: dict[str, list[int]] = {}
            for r in ops:
                for x in self.problem.input_buffers[r]:
                    readers.setdefault(x, []).append(r)
            for i in todo:
                stop_if_past(self.deadline)
                done.add(i)
                outputs, inputs = set(g.ops[i].outputs), self.problem.input_buffers[i]
                terms = [(size[y], self._read_while_recomputing(s, i, y, y in kept)) for y in inputs]
                terms += [(size[x], self._held(s, x)) for x in kept if x not in outputs]
                if in_order:
                    skip = outputs | set(inputs)
                    terms += [(size[x], self._made_for_point(s, j, x)) for j in ops if j < i
                              for x in g.ops[j].outputs if x in self.at[s + 1] and x not in skip]
                    terms += [(size[x], v) for x, v in self._read_later(s, i, ops, skip, readers).items()]
                terms.append((p.alloc[i], self.D[s, i]))
                self.lp += at_most(terms, self.budget, f"fits_recompute_{s}_{i}")

    def _read_later(self, s: int, i: int, ops: list[int], skip: set[str], readers_of: dict[str, list[int]]
                    ) -> dict[str, pulp.LpVariable]:
        """Buffers a later recompute of a one-stage segment reads, which are there while recompute i runs:
        made by an earlier recompute, or there before the segment and not remade in it. Those still there
        at point s+1 are counted elsewhere (kept, or made for the point)."""
        p, _g, found = self.problem, self.problem.graph, {}
        for k in (k for k in ops if k > i):
            for x in self.problem.input_buffers[k]:
                if x in skip or x in found:
                    continue
                j, there = p.producer(x), self.K.get((s + 1, x), 0)
                if j in ops and j < i:
                    source = [(1, self.D[s, j])]                           # made by recompute j
                elif (s, x) in self.K or j == self.points[s]:
                    source = [(1, 1), (-1, self.D.get((s, j), 0))]         # 1 - D: there before, not remade
                else:
                    continue
                readers = [self.D[s, r] for r in readers_of[x] if r > i]
                name = f"{s}_{i}_{p.tensor_id[x]}"
                found[x] = pulp.LpVariable(f"V_{name}", lowBound=0, upBound=1)
                for n, reader in enumerate(readers):
                    self.lp += at_least([(1, found[x]), *((-c, v) for c, v in source), (-1, reader), (1, there)],
                                        -1, f"read_later_{name}_{n}")    # V >= source + reader - 1 - there
        return found

    def _read_while_recomputing(self, s: int, i: int, y: str, kept: bool) -> pulp.LpVariable:
        """1 when recompute i of segment s runs and its input y is not counted as kept through the segment."""
        name = f"{s}_{i}_{self.problem.tensor_id[y]}"
        z = pulp.LpVariable(f"Z_{name}", lowBound=0, upBound=1)
        self.lp += at_least([(1, z), (-1, self.D[s, i]), (1, self._held(s, y) if kept else 0)], 0,
                            f"input_held_{name}")                        # Z >= D - H
        return z

    def _made_for_point(self, s: int, j: int, x: str) -> pulp.LpVariable:
        """1 when recompute j of segment s runs and its output x is still there at point s+1."""
        name = f"{s}_{j}_{self.problem.tensor_id[x]}"
        if (s, x) not in self.M:
            self.M[s, x] = pulp.LpVariable(f"M_{name}", lowBound=0, upBound=1)
            self.lp += at_least([(1, self.M[s, x]), (-1, self.D[s, j]), (-1, self.K[s + 1, x])], -1,
                                f"made_for_point_{name}")                # M >= D + K' - 1
        return self.M[s, x]

    def _made_before_next_point(self, s: int) -> None:
        """A buffer present at point s was present at point s-1, or was made in the segment between them."""
        p = self.problem
        for x, present in self.at[s].items():
            if x not in self.at[s - 1]:
                continue
            self.lp += present <= self.K[s - 1, x] + self._recompute(s - 1, p.producer(x)), \
                f"made_{s}_{p.tensor_id[x]}"

    # --- the answer ------------------------------------------------------------------------------------
    def answer(self) -> list[Span]:
        """The solved D: each op that runs again, and between which stages."""
        return [Span(i, self.points[s], self._segment_end(s)) for (s, i), var in self.D.items() if var.value() > 0.5]
