"""The point relaxation of solver/bounds/bounds.py as a model: its variables, constraint families and answer.

Which points it checks, and what its answers are worth, is for bounds.py to decide; this module only builds
and solves one relaxation over the points it is given.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import pulp

from ckpt.solver.model import clock
from ckpt.solver.model.backends import Backend, BackendOptions, RunStatus, run
from ckpt.solver.model.linear import at_least, at_most
from ckpt.solver.model.milp import BuildTimedOut, stop_if_past
from ckpt.solver.model.problem import Problem

RELAXATION_GAP = 1e-6    # the relaxation is solved to (near) optimality: its dual bound is the proof
HEURISTIC_GAP = 1e-3     # rounds with headroom only look for a schedule that fits
RESTART = False          # HiGHS's restart after the root: the rounds' models are small and solved many times
                         # a solve, and a restart repeats presolve and cuts on them for little gain
START_SHARE = 0.1        # of a round's time, the most the repair of the last round's answer that starts it takes
START_GAP = 1e-3         # ... and how near its optimum it stops: a start within that of it is as good
ROUNDED_MOST = 16        # a point's fits row is rounded by a buffer size only where at most this many of it fit


@dataclass(frozen=True)
class Span:
    op: int
    first: int    # the op runs again after stage `first`'s own op...
    last: int     # ...and no later than stage `last` (before its op)


@dataclass
class Relaxation:
    problem: Problem
    budget: int
    points: list[int]
    headroom: dict[int, int] = field(default_factory=dict)   # point -> bytes left free there (a heuristic)
    chained: frozenset[int] = frozenset()   # points whose segment before them is checked while it recomputes
    threads: int | None = 1
    kept: frozenset[Span] = frozenset()     # with `free`: what the other segments recompute, as an answer had it
    free: range | None = None               # the segments solved afresh (None: all; else a local repair, no bound)
    excluded: tuple[frozenset[Span], ...] = ()   # answers not to give again (another of equal cost is wanted)
    feasibility: bool = False               # no objective: only whether any answer exists (inf: none does)
    previous: frozenset[Span] = frozenset()  # with `changed`: an answer of the last round over points like these...
    changed: range | None = None            # ... and the segments it has to be solved afresh in (starts the solve)
    repair_cap: float = math.inf            # ... in at most these seconds
    strengthened: bool = True               # the rows only fractional answers break (bench/rounds.py: without;
                                            # a local repair, `free`, leaves them out: no bound is wanted there,
                                            # and they slowed its small models)
    lp: pulp.LpProblem = field(default_factory=lambda: pulp.LpProblem("ckpt_bound", pulp.LpMinimize))
    K: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)   # buffer present at point s
    D: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)   # op recomputed in segment s
    at: dict[int, dict[str, pulp.LpVariable]] = field(default_factory=dict)   # point s -> its K, by buffer
    P: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)   # view's own version kept at s
    H: dict[tuple[int, str], pulp.LpVariable] = field(default_factory=dict)   # kept through all of segment s
    U: dict[tuple[int, int], pulp.LpVariable] = field(default_factory=dict)   # op run again after point s
    W: dict[tuple[int, int, int], pulp.LpVariable | int] = field(default_factory=dict)   # ... in segments s to e
    answered: bool = False                  # after solve: HiGHS holds an answer (a feasible point) to realise
    deadline: float | None = None           # clock.now() by which the build must be done

    def solve(self, seconds: float | None, target: float | None = None) -> float:
        """The bound on the cost this relaxation proves (inf: infeasible; 0: none, not built in time). HiGHS
        stops early at an answer costing `target` or less (a bound that low is proven already); with headroom
        the answer is all that is wanted, so a looser gap does."""
        began = clock.now()
        self.deadline = None if seconds is None else began + seconds
        try:
            self.build()
        except BuildTimedOut:            # the strongest form over every point can take minutes to build
            return 0.0
        if seconds is not None:          # the build counts against the time given
            seconds -= clock.now() - began
            if seconds <= 0:
                return 0.0
        start = None
        cap = min(self.repair_cap, math.inf if seconds is None else START_SHARE * seconds)
        if self.changed is not None and cap > 0.01:
            began = clock.now()
            start = self._repaired_start(None if math.isinf(cap) else cap)
            if seconds is not None:
                seconds -= clock.now() - began
        gap = HEURISTIC_GAP if self.headroom else RELAXATION_GAP
        outcome = run(self.lp, BackendOptions(name=Backend.HIGHS, time_limit=seconds, gap=gap, threads=self.threads,
                                              restart=RESTART), start=start, stop_at=target)
        self.answered = outcome.has_answer
        if outcome.status is RunStatus.INFEASIBLE:
            return math.inf
        return outcome.dual_bound

    def build(self) -> None:
        """The relaxation's constraint families; BuildTimedOut once the deadline passes."""
        for s in range(len(self.points)):
            stop_if_past(self.deadline)
            self._presence(s)
        for s in range(len(self.points)):
            stop_if_past(self.deadline)
            self._needs(s)
            self._fits(s)
            if self.strengthened and self.free is None:
                self._fits_rounded(s)
        for s in range(1, len(self.points)):
            self._made_before_next_point(s)
        for s in range(len(self.points) - 1):
            if self.points[s + 1] in self.chained:
                self._fits_while_recomputing(s)
        for s in range(len(self.points) - 1):
            stop_if_past(self.deadline)
            self._once_after(s)
            if self.strengthened and self.free is None:
                self._once_within(s)
        if self.free is not None:
            self._kept_outside_free()
        for n, answer in enumerate(self.excluded):
            self._not_again(n, answer)
        if self.feasibility:
            return
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
        if not self.problem.recomputable(i) or i >= self._segment_end(s) \
                or self.points[s] >= self.problem.graph.deadline[i]:   # it would run after its deadline
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
        """H[s,x] >= 1 when x (there at point s, or made by op t_s) is there at point s+1 and was not recomputed
        in between: that version was made before the segment, so it is in memory during all of it. (Present at
        point s too is implied, and asking for it left H at 0 wherever both points held half of x.)"""
        p = self.problem
        if (s, x) not in self.H:
            name = f"{s}_{p.tensor_id[x]}"
            self.H[s, x] = pulp.LpVariable(f"H_{name}", lowBound=0, upBound=1)
            self.lp += at_least([(1, self.H[s, x]), (-1, self.K[s + 1, x]),                   # H >= K' - D
                                 (1, self._recompute(s, p.producer(x)))], 0, f"held_{name}")
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

    def _fits_rounded(self, s: int) -> None:
        """Point s's fits row divided by a buffer size d and rounded (mixed-integer rounding): every answer holds
        whole buffers, so it keeps them all, while the LP, which holds half of two buffers where one fits,
        loses that half. A buffer of size a counts floor(a/d), plus the share of its remainder beyond the
        room's (r = room mod d): (a mod d - r) / (d - r). One row per size that fits a few times (a small
        size gives a weak row)."""
        p, t = self.problem, self.points[s]
        size = p.graph.tensor_bytes
        room = self.budget - self.headroom.get(t, 0) - p.alloc[t]
        for d in sorted({size[x] for x in self.at[s]}, reverse=True):
            if not 0 < d <= room or room // d > ROUNDED_MOST or room % d == 0:
                continue         # over the room (the row holds it), too small, or the row divides exactly
            r = room % d
            terms = [(size[x] // d + max(0, size[x] % d - r) / (d - r), v) for x, v in self.at[s].items()]
            self.lp += at_most([(c, v) for c, v in terms if c > 0], room // d, f"fits_rounded_{s}_{d}")

    def _fits_while_recomputing(self, s: int) -> None:
        """While a recompute in segment s runs, what is kept through the segment, its inputs and its own
        allocations are all in memory: recompute chains whose intermediates die before point s+1 pay here.
        A segment of one stage runs its recomputes in op order, so whatever is there at point s+1 and was
        not made by a later recompute is there too, and what later ones read from before."""
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
                there = {x: self._there_while(s, i, x) if in_order else self._held(s, x)
                         for x in kept if x not in outputs}
                terms = [(size[y], self._read_while_recomputing(s, i, y, there.get(y, 0))) for y in inputs]
                terms += [(size[x], v) for x, v in there.items()]
                if in_order:
                    skip = outputs | set(inputs)
                    terms += [(size[x], v) for x, v in self._read_later(s, i, ops, skip, readers).items()]
                terms.append((p.alloc[i], self.D[s, i]))
                self.lp += at_most(terms, self.budget, f"fits_recompute_{s}_{i}")

    def _read_later(self, s: int, i: int, ops: list[int], skip: set[str], readers_of: dict[str, list[int]]
                    ) -> dict[str, pulp.LpVariable]:
        """Buffers a later recompute of a one-stage segment reads, which are there while recompute i runs:
        made by an earlier recompute, or there before the segment and not remade in it. A buffer from before
        the segment whose producer may run again before i is there whether it does or not: remade, or else the
        old version is kept until the read. Those still there at point s+1 are counted elsewhere (kept, or made
        for the point)."""
        p, _g, found = self.problem, self.problem.graph, {}
        for k in (k for k in ops if k > i):
            for x in self.problem.input_buffers[k]:
                if x in skip or x in found:
                    continue
                j, there = p.producer(x), self.K.get((s + 1, x), 0)
                before = (s, x) in self.K or j == self.points[s]           # a version from before the segment
                if j in ops and j < i:                                     # made by recompute j, or else kept
                    source = [(1, 1)] if before else [(1, self.D[s, j])]    # from before to the read
                elif before:
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

    def _read_while_recomputing(self, s: int, i: int, y: str, there) -> pulp.LpVariable:
        """1 when recompute i of segment s runs and its input y is not counted as `there` already."""
        name = f"{s}_{i}_{self.problem.tensor_id[y]}"
        z = pulp.LpVariable(f"Z_{name}", lowBound=0, upBound=1)
        self.lp += at_least([(1, z), (-1, self.D[s, i]), (1, there)], 0, f"input_held_{name}")   # Z >= D - there
        return z

    def _there_while(self, s: int, i: int, x: str):
        """x (made before point s+1) is in memory while recompute i of one-stage segment s runs, if it is there
        at point s+1: its version there was made before the stage, or by a recompute before i, unless x's
        producer is recomputed after i (then only if x was held through the segment)."""
        j = self.problem.producer(x)
        redo = self._recompute(s, j)
        return self.K[s + 1, x] if isinstance(redo, int) or j < i else self._held(s, x)

    def _made_before_next_point(self, s: int) -> None:
        """A buffer present at point s was present at point s-1, or was made in the segment between them."""
        p = self.problem
        for x, present in self.at[s].items():
            if x not in self.at[s - 1]:
                continue
            self.lp += present <= self.K[s - 1, x] + self._recompute(s - 1, p.producer(x)), \
                f"made_{s}_{p.tensor_id[x]}"

    def _once_after(self, s: int) -> None:
        """Point s's own knapsack, as if it were the only point: U[s,i] (op i runs again somewhere after
        point s) needs i's inputs present at s or run again after s themselves, and a buffer read later and
        not present at s needs its producer run again after s. Every integer answer meets these (a version
        used in a later segment chains back to point s through `made`), but without them the LP spreads a
        recompute over several segments, each needing a fraction of its inputs, and the LP over many
        points falls far below the LP over any one of them."""
        p, g, t = self.problem, self.problem.graph, self.points[s]
        after: dict[int, list] = {}
        for (q, i), var in self.D.items():
            if q >= s:
                after.setdefault(i, []).append(var)
        for i, runs in sorted(after.items()):
            once = self.U[s, i] = pulp.LpVariable(f"U_{s}_{i}", lowBound=0, upBound=1)
            self.lp += at_most([(1, once), *((-1, v) for v in runs)], 0, f"once_{s}_{i}")
        for i in sorted(after):
            for y in dict.fromkeys(g.ops[i].inputs):
                if not g.is_activation(y) or p.producer(y) >= t or y not in p.tensor_id:
                    continue         # a zero-byte tensor (and a view of one) holds no memory: nothing to book
                name = f"once_input_{s}_{i}_{p.tensor_id[y]}"
                if y in g.aliases:
                    pinned = self._pinned(s, y)
                    if pinned is not None:
                        self.lp += self.U[s, i] <= pinned, name
                elif (s, y) in self.K:
                    self.lp += self.U[s, i] <= self.K[s, y] + self.U.get((s, p.producer(y)), 0), name
        for x, present in self.at[s].items():
            once = self.U.get((s, p.producer(x)))
            if once is not None and any(j > t for j in g.readers.get(x, ())):
                self.lp += present + once >= 1, f"once_need_{s}_{p.tensor_id[x]}"

    def _once_within(self, s: int) -> None:
        """`once` over a window: W[s,e,i] (op i runs again in segments s to e) needs i's inputs present at
        point s or run again in the window themselves, and a buffer that a stage of segment e reads first
        after point s is present at s or made again in the window. Every integer answer meets these (what
        `need` asks for in the window chains back to point s through `input` and `made`), and they cut off
        the LP's recompute made in segments past the reader, where its inputs cost the point nothing."""
        p, g, t = self.problem, self.problem.graph, self.points[s]
        inputs_of_t = {g.root(y) for y in g.ops[t].inputs}
        for x, present in self.at[s].items():
            later = [j for j in g.readers.get(x, ()) if j > t]
            if not later or x in inputs_of_t:
                continue
            e = self._segment_of(min(later))
            if e < len(self.points) - 1:        # a window to the last segment is `once` itself
                within = self._within(s, e, p.producer(x))
                if not isinstance(within, int):
                    self.lp += present + within >= 1, f"within_need_{s}_{p.tensor_id[x]}"

    def _within(self, s: int, e: int, i: int):
        """W[s,e,i] with its input rows, made the first time something asks for it (0: no segment of the window
        may run i again). Only the recomputes the model has are summed: a missing one is one no row asks for.
        The producers it reads from are made first, without recursion: a chain can be hundreds of ops long."""
        todo = [i]
        while todo:
            k = todo[-1]
            if (s, e, k) in self.W:
                todo.pop()
                continue
            runs = [self.D[q, k] for q in range(s, e + 1) if (q, k) in self.D]
            inputs = self._within_inputs(s, k) if runs else []
            missing = [j for _, j in inputs if j is not None and (s, e, j) not in self.W]
            if missing:
                todo += missing
                continue
            todo.pop()
            if not runs:
                self.W[s, e, k] = 0
                continue
            within = self.W[s, e, k] = pulp.LpVariable(f"W_{s}_{e}_{k}", lowBound=0, upBound=1)
            self.lp += at_most([(1, within), *((-1, v) for v in runs)], 0, f"within_{s}_{e}_{k}")
            for n, (held, j) in enumerate(inputs):
                self.lp += within <= held + (0 if j is None else self.W[s, e, j]), f"within_input_{s}_{e}_{k}_{n}"
        return self.W[s, e, i]

    def _within_inputs(self, s: int, i: int) -> list[tuple[pulp.LpVariable, int | None]]:
        """Op i's inputs as `once` books them at point s: what holds each there (its pinned version for a view,
        else its presence), and the producer that could make it again instead (None for a view)."""
        p, g, t = self.problem, self.problem.graph, self.points[s]
        found = []
        for y in dict.fromkeys(g.ops[i].inputs):
            if not g.is_activation(y) or p.producer(y) >= t or y not in p.tensor_id:
                continue             # as in `once`: made after point s, or holding no memory
            if y in g.aliases:
                pinned = self._pinned(s, y)
                if pinned is not None:
                    found.append((pinned, None))
            elif (s, y) in self.K:
                found.append((self.K[s, y], p.producer(y)))
        return found

    def _kept_outside_free(self) -> None:
        """Segments outside `free` recompute what `kept` says, no more, no less: a local repair of that answer."""
        self._fixed_outside(self.kept, self.free)

    def _fixed_outside(self, answer: frozenset[Span], solved: range
                       ) -> list[tuple[pulp.LpVariable, float | None, float | None]]:
        """Each recompute outside the segments `solved` fixed to what `answer` does there; each fixed variable with
        the bounds it had, to put back."""
        before = []
        for (s, i), var in self.D.items():
            if s not in solved:
                before.append((var, var.lowBound, var.upBound))
                var.lowBound = var.upBound = int(Span(i, self.points[s], self._segment_end(s)) in answer)
        return before

    def _not_again(self, n: int, answer: frozenset[Span]) -> None:
        """Some recompute differs from `answer`'s: one recomputed that it leaves out, or one it has left out.
        It cuts that one answer off, so the model bounds nothing: it looks for another answer."""
        chosen = [Span(i, self.points[s], self._segment_end(s)) in answer for s, i in self.D]
        terms = [(-1 if on else 1, var) for on, var in zip(chosen, self.D.values())]
        self.lp += at_least(terms, 1 - sum(chosen), f"not_again_{n}")   # sum(1 - D, in it) + sum(D, not) >= 1

    def _repaired_start(self, seconds: float | None) -> dict[str, float] | None:
        """The last round's answer kept in the segments this round shares with it, and solved afresh in those
        it `changed` (the ones beside the points it adds), over this round's own model: an answer of it (None:
        none in time), its first incumbent. On the transformer graphs HiGHS's cuts and sub-MIPs spend most of a
        round finding an answer near the optimum; holding one, it proves the optimum at its first node. The
        answer only starts the search: the bound is what HiGHS proves either way."""
        fixed = self._fixed_outside(self.previous, self.changed)
        try:
            outcome = run(self.lp, BackendOptions(name=Backend.HIGHS, time_limit=seconds, gap=START_GAP,
                                                  threads=self.threads, restart=RESTART))
        finally:
            for var, low, up in fixed:
                var.lowBound, var.upBound = low, up
        if not outcome.has_answer:
            return None
        return {var.name: var.value() for var in self.lp.variables()}

    # --- the answer ------------------------------------------------------------------------------------
    def answer(self) -> list[Span]:
        """The solved D: each op that runs again, and between which stages."""
        return [Span(i, self.points[s], self._segment_end(s)) for (s, i), var in self.D.items() if var.value() > 0.5]
