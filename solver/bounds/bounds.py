"""A lower bound on recompute cost from memory checked at a few points only: the proof the MILP's LP can't give.

Why: Checkmate's LP relaxation lets a small fraction of an input, carried through many stages, feed a small
recompute in each of them, so a dropped buffer is rebuilt bit by bit almost for free. On the CCT graphs its bound
is a small fraction of the optimum, a gap branch and bound cannot close in time.

This relaxation keeps what every schedule over the stage order must do around chosen points P_1 < ... < P_m
(the first runs of ops t_1 < ... < t_m), and forgets the rest:
- at each point, the buffers present there plus op t's own allocations fit the budget;
- a buffer that a later op reads and that is not present at a point is recomputed between the point and that
  reader;
- a recompute needs each input present at the start of its segment, or recomputed in the same segment;
- likewise from each point on: what runs again anywhere after a point needs each input present there or
  run again after it too (implied for whole answers; it keeps each point's own knapsack in the LP);
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
answer is moved or repaired where that is quick; failing that, memory is also checked while the segments'
recomputes run (kept buffers, inputs, and in a one-stage segment what earlier recomputes made and later ones
read), every segment it goes over in at once: the rounds still prove bounds (before that round where every schedule
known is far above the bound: then a schedule near it is what is missing). After that round, an answer that
costs what the bound proves and goes over in a few segments still unchecked has those segments checked one at a
time, the rest of it kept (a model of a few segments, where the next round is a whole one); else it is
placed exactly (solver/realise/realise.py), and once every such segment is checked, another answer of the round, as
cheap where one is (equal-cost answers abound, and only some of them place): that only finds a schedule, and can
take all the time the rounds have, so it comes after them, on a small share of the time until they are all
checked. Failing that, later rounds keep the excess free at the point. That is a heuristic: those rounds find
schedules, not bounds, and solve() weighs what they find against the bound. An answer that never fits is still a
start for a repair. A round over many points can take longer than the whole limit on a big graph, so the rounds
leave a share of their time to walk the newest answer that overflowed to a schedule that fits
(solver/realise/realise.py: the relaxation solved again only around each stage it goes over, the rest kept): often the
optimum, where the bound already proves it. If no schedule met the bound, the time left goes to the strongest
form: every binding point, every segment checked while it recomputes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ckpt.events import Incumbent, LowerBound, Progress, ignore
from ckpt.solver.bounds.windows import infeasible_window
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace, plain_sequence
from ckpt.solver.model import clock
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.relaxation import RELAXATION_GAP, Relaxation, Span
from ckpt.solver.realise.greedy import greedy, outside_space, polish
from ckpt.solver.realise.realise import (
    by_first_reader,
    checked_where_over,
    moved_earlier,
    over_at_own_op,
    overflow,
    placed_exactly,
    walked,
)

START_OF_LAST = 0.25     # the repair that starts a round takes at most this share of the last round's time
GROWTH = 1               # stages added per round: the one where the realised schedule is furthest over
JOINT = 4                # strongest single points the first round is chosen from (first_points)
SINGLES_STALL = 32       # single points tried in a row without raising the bound, after which the rest are skipped
REPAIRS = 2              # newest answers repaired between rounds: the repair stage after them repairs every one
ALTERNATIVES = 2         # other answers of a round tried for an exact placement when its own cannot (small graphs)
PLACE_SHARE = 0.3        # of the rounds' time left, the most an exact placement takes: the rounds after it prove
PLACE_FIRST_SHARE = 0.1  # ... while segments are left to check (a round that checks them proves, it only finds)
WALK_SHARE = 0.15        # of the rounds' time, kept for walking their newest answer to a schedule that fits...
WALK_NEAR = 0.1          # ... when a schedule known before costs at most this much more than the points alone prove
LAST_RESORT_SHARE = 0.4  # of the bound's time, kept for the last resort when no schedule is known (and it is small)
LAST_RESORT_PRESENCE = 2000   # ... judged by its presence variables (a residual CNN: ~1,200; a 2-block CCT: ~5,000)
WINDOWS_SHARE = 0.7      # of the bound's time, the most the window proof takes when no schedule is known
# The least a round takes to be built, per presence variable (the build alone of the relaxation over every binding
# point, every segment checked: DS-CNN 0.3, the residual CNN 0.44, CCT 0.3; busy machine, CPU s): measured 3.8e-4
# to 2.4e-3, set below all. A round given less than this returns no bound, only spends the time.
BUILD_SECONDS_PER_PRESENCE = 2e-4


@dataclass(frozen=True)
class Bound:
    cost: float                 # no schedule over this stage order is cheaper
    points: tuple[int, ...]     # the stages whose first-run memory the relaxation checked
    schedule: Decisions | None = None   # the relaxation's answer as a schedule that replays within the budget
    sketches: tuple[Decisions, ...] = ()   # its answers realised that overflow, newest last: starts for a repair
    answer: tuple[Span, ...] = ()          # the answer of the round that proved `cost` (a start for a walk)...
    chained: frozenset[int] = frozenset()  # ... and the points whose segments that round checked while recomputing


def over_budget_points(problem: Problem, budget: int) -> list[int]:
    """Stages whose own op, run without any recompute, lifts memory above the budget: the points that bind."""
    return list(_binding_levels(problem, budget))


def binding_points(problem: Problem, budget: int) -> list[int]:
    """The binding points, highest level first (the likeliest to bind hardest), earliest first among equals."""
    levels = _binding_levels(problem, budget)
    return sorted(levels, key=lambda t: (-levels[t], t))


def _binding_levels(problem: Problem, budget: int) -> dict[int, int]:
    """Binding point -> the level its op reaches with no recompute."""
    levels = memory_trace(problem.graph, plain_sequence(problem.graph)).levels
    return {t: level for t, level in enumerate(levels) if level > budget}


def lower_bound(problem: Problem, budget: int, seconds: float | None, enough: float = math.inf,
                joint: int = JOINT, threads: int | None = 1, stall: int = SINGLES_STALL,
                progress: Progress = ignore, any_schedule: bool = False) -> Bound:
    """The best bound found within about `seconds` (None: no limit): each binding point alone (highest level
    first, until `stall` of them in a row raise nothing: the strongest are among the highest, and on a big
    graph the hundreds of others would take all the time), then the strongest point with those of the
    `joint` strongest that its answer goes over (first_points), growing by the stages where the answer's
    realised schedule goes over the budget (few to start with: a round over many points can take longer than
    the whole limit, and grown rounds add the points that bind).
    Stops once the bound reaches `enough` (a known cost), or once a realised answer fits and costs what the
    bound proves (often the case at the strongest single point). HiGHS runs on `threads` (see backends: one
    thread keeps the answer independent of the machine). `progress` hears each raise of the bound and each
    schedule found as it happens: the rounds can take most of a solve's time. `any_schedule`: stop at the
    first schedule that fits, whatever it costs (a feasibility probe: the bound proven by then still holds).
    With no schedule known (`enough` infinite), a few windows of neighbouring stages are asked first whether
    any schedule fits at all (solver/bounds/windows.py): below the smallest feasible budget the reason is
    often local, and a window proves it in a fraction of the time the rounds take."""
    deadline = _Deadline(clock.now() + (math.inf if seconds is None else seconds), threads)
    levels = _binding_levels(problem, budget)
    if math.isinf(enough) and levels:
        window = infeasible_window(problem, budget, list(levels), _share(deadline, WINDOWS_SHARE), threads)
        if window is not None:
            return Bound(math.inf, window)
    best, singles, found, since_raised = Bound(0.0, ()), [], _Found(progress=progress, any_schedule=any_schedule), 0
    lead: Decisions | None = None     # the strongest single's answer, realised
    for t in sorted(levels, key=lambda t: (-levels[t], t)):
        if _left(deadline) <= 0 or best.cost >= enough:
            return found.with_bound(problem, best)
        if since_raised >= stall:
            break
        relaxation = Relaxation(problem, budget, [t], threads=deadline.threads)
        bound = Bound(relaxation.solve(_limit(deadline)), (t,))
        bound = replace(bound, answer=_answer_of(relaxation))
        singles.append((bound.cost, t))
        since_raised += 1
        if bound.cost > best.cost:
            best, since_raised = bound, 0
            found.raised(best)
            lead = None
            if relaxation.answered:
                if found.realised(problem, budget, relaxation.answer(), best.cost) or found.meets(problem, best.cost):
                    return found.with_bound(problem, best)
                lead = found.sketch
    first = first_points(problem, budget, singles, best.points, lead, joint)
    return _bound_from_growing_points(problem, budget, first, best, deadline, enough, list(levels), found)


def first_points(problem: Problem, budget: int, singles: list[tuple[float, int]], strongest: tuple[int, ...],
                 lead: Decisions | None, joint: int) -> list[int]:
    """The first round's points: the `strongest` single, and those of the next strongest singles (`joint` in
    all, at most) where its realised answer `lead` runs over the budget at the stage's own op. A point that
    answer already fits adds nothing to the round, like a lazy constraint that is not violated; the next
    strongest singles are often the strongest one's neighbours, whose knapsacks are nearly its own, and
    together they make every later round many times slower. Without an answer, the `joint` strongest."""
    ranked = [t for _, t in sorted(singles, key=lambda c: (-c[0], c[1]))[:joint]]
    if lead is None or not strongest:
        return sorted(ranked)
    over = over_at_own_op(problem.graph, lead, budget)
    return sorted({*strongest, *(t for t in ranked if t in over)})


def _growing_deadline(deadline: _Deadline, enough: float, walking: bool, small: bool) -> _Deadline:
    """Growing rounds stop early enough to leave the walk of their newest answer its share (if `walking`);
    and, when no schedule is known (`enough` infinite), the last resort its share too, if it is small enough
    to use it: below the smallest feasible budget it often proves infeasibility in a second or two, where
    growing one checked segment at a time does not get there. `small`: judged by the model's size, not a clock."""
    if math.isinf(deadline.at):
        return deadline
    share = WALK_SHARE if walking else 0.0
    if math.isinf(enough) and small:
        share += LAST_RESORT_SHARE
    return replace(deadline, at=deadline.at - share * max(0.0, _left(deadline)))


def _small(problem: Problem, every: list[int]) -> bool:
    """Whether the relaxation over every binding point is small (by its presence variables): then a round
    takes a second or so, and extra rounds (the last resort, another answer to place) are affordable."""
    return presence_variables(problem, every) <= LAST_RESORT_PRESENCE


def presence_variables(problem: Problem, points: list[int]) -> int:
    """The relaxation's presence variables over `points` (one per buffer made before each point): its least size."""
    return sum(1 for t in points for x in problem.buffers if problem.producer(x) < t)


def least_round_seconds(problem: Problem, points: list[int]) -> float:
    """The least time a round over `points` takes before HiGHS can prove anything, judged by its size (a round
    that checks segments while they recompute is many times larger than this counts: it is a floor)."""
    return BUILD_SECONDS_PER_PRESENCE * presence_variables(problem, points)


@dataclass
class _Found:
    """What the relaxation's answers gave so far: schedules that fit, and the realised answers that do not
    (`sketch`: the last answer's, either way); `progress` hears of each schedule and each raise of the bound."""

    schedules: list[Decisions] = field(default_factory=list)
    sketch: Decisions | None = None
    sketches: list[Decisions] = field(default_factory=list)
    progress: Progress = ignore
    any_schedule: bool = False      # any schedule that fits ends the search, not only one that meets the bound
    repaired: set[Decisions] = field(default_factory=set)   # sketches the greedy heuristic already repaired

    def add(self, problem: Problem, schedule: Decisions | None, how: str) -> None:
        """Keep a schedule that fits (None: nothing found), and say so."""
        if schedule is not None:
            self.schedules.append(schedule)
            self.progress(Incumbent(schedule.cost(problem.graph), how))

    def raised(self, bound: Bound) -> None:
        """Say the bound rose to `bound` (infeasible: the solve says so, and why)."""
        if not math.isinf(bound.cost):
            self.progress(LowerBound(bound.cost, len(bound.points)))

    def realised(self, problem: Problem, budget: int, answer: list[Span], bound: float) -> bool:
        """Realise `answer` (each recompute before its first reader); keep it if it fits. True when it fits
        and costs what `bound` proves: an optimal schedule, nothing more to look for."""
        self.sketch = by_first_reader(problem.graph, answer)
        if overflow(problem.graph, self.sketch, budget)[0] or outside_space(problem.graph, self.sketch):
            self.sketches += [self.sketch] if self.sketch not in self.sketches else []
            return False
        self.add(problem, self.sketch, "the relaxation's answer")
        return self.sketch.cost(problem.graph) <= as_cheap_as(bound)

    def meets(self, problem: Problem, bound: float) -> bool:
        """Whether a schedule found so far costs what `bound` proves (the bound rose to it since), or, with
        `any_schedule`, whether one was found at all."""
        cheapest = self.cheapest(problem)
        return cheapest is not None and (self.any_schedule or cheapest.cost(problem.graph) <= as_cheap_as(bound))

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
    """Solve over `chosen`, then add the stages whose own op its realised schedule runs over the budget as
    points, until that schedule fits, the bound reaches `enough`, nothing is left to add, or time runs out (a
    stage it goes over in only while recomputes run would not cut the answer off as a point: the round would
    give it again). Where the schedule overflows only while recompute chains run (intermediates no point sees),
    the moves of its recomputes are tried (the repairs wait for the first round that checks them);
    failing that, memory is checked while each segment it overflows in recomputes (`chained`, the segment
    shortened to start at the binding point before it: a short segment keeps the check tight), all of them in
    the next round (one a round takes a round each, and the rounds grow slower): still a bound. Once every
    such segment is checked, the exact placement of the answer's recomputes is tried; failing that, those
    points keep the excess free in later rounds: a heuristic to find a schedule that fits, so those rounds
    prove nothing."""
    headroom: dict[int, int] = {}
    chained: set[int] = set()
    # a walk pays where a schedule near the bound is known already: what is missing is one at the bound.
    # Far above it, the bound's rounds are what is missing, and they get all the time.
    walking = enough <= (1 + WALK_NEAR) * best.cost
    small = _small(problem, every)
    growing = _growing_deadline(deadline, enough, walking, small)
    newest: _Answer | None = None
    last, last_seconds = _Answer(list(best.points), list(best.answer), frozenset()), 0.0   # no round yet: not started
    while chosen and _left(growing) > 0 and best.cost < enough and not found.meets(problem, best.cost):
        relaxation = _started(Relaxation(problem, budget, chosen, dict(headroom), frozenset(chained), deadline.threads),
                              last, last_seconds)
        # every round may stop at the proven bound: a round's optimum cannot be below it, so nothing is lost
        began = clock.now()
        bound = Bound(relaxation.solve(_limit(growing), target=as_cheap_as(best.cost) if best.cost > 0 else None),
                      tuple(chosen))
        bound = replace(bound, answer=_answer_of(relaxation), chained=frozenset(chained))
        if not headroom and bound.cost > best.cost:
            best = bound
            found.raised(best)
        if math.isinf(bound.cost) or not relaxation.answered or found.meets(problem, best.cost):
            break
        answer = relaxation.answer()
        last, last_seconds = _Answer(list(chosen), answer, frozenset(chained)), clock.now() - began
        if found.realised(problem, budget, answer, best.cost):
            break
        over, in_recomputes = overflow(problem.graph, found.sketch, budget)
        if not over and not outside_space(problem.graph, found.sketch):
            break                      # it fits (kept by `found`), at a cost above the bound
        at_ops = over_at_own_op(problem.graph, found.sketch, budget)
        added = [t for t in over if t not in chosen and t in at_ops][:GROWTH]
        if added:   # a new round over more points, without headroom: it proves a bound again
            if found.sketch.cost(problem.graph) <= as_cheap_as(bound.cost):   # solved to the end: a good start
                newest = _Answer(chosen, answer, frozenset(chained))
            chosen, headroom = sorted(chosen + added), {}
            continue
        if not in_recomputes:
            break
        unchecked = sorted((t for t in in_recomputes if t not in chained), key=lambda t: (-in_recomputes[t], t))
        # before the first round that checks segments, the answer is placed only while every schedule known is far
        # above the bound: a schedule near it is then what is missing, and that round, proving more, may take all
        # the time left and still decide nothing
        first = bool(unchecked) and not chained
        if unchecked and not first and not headroom and _checked_where_over(problem, budget, chosen, answer,
                                                                            frozenset(chained), best, growing, found):
            break
        if not headroom and _placed_at(problem, budget, chosen, frozenset(chained), answer, best, small, growing,
                                       deadline, found, checked=not unchecked,
                                       placing=not first or _far_above(problem, found, enough, best.cost),
                                       share=PLACE_FIRST_SHARE if unchecked and not first else PLACE_SHARE,
                                       far_from=enough if first else None):
            break
        if unchecked and not headroom:     # every segment it overflows in: one at a time takes a round each
            chained.update(unchecked)
            chosen = sorted({*chosen, *unchecked, *(b for t in unchecked for b in [b for b in every if b < t][-1:])})
            continue
        for t, excess in in_recomputes.items():
            headroom[t] = headroom.get(t, 0) + excess
    if walking and newest is not None and not found.meets(problem, best.cost) and best.cost < enough:
        _walk(problem, budget, newest, deadline, found, enough)
    return _with_last_resort_bound(problem, budget, best, found, deadline, enough, every)


def _started(relaxation: Relaxation, last: _Answer, seconds: float) -> Relaxation:
    """The round started from the newest answer `last` (a round of `seconds`), solved afresh only in the segments
    beside the points it adds (relaxation.py: _repaired_start); as it is where it adds none, or no answer is known."""
    new = [k for k, t in enumerate(relaxation.points) if t not in last.points]
    if not last.spans or not new:
        return relaxation
    return replace(relaxation, previous=frozenset(last.spans), changed=range(max(0, new[0] - 1), new[-1] + 1),
                   repair_cap=START_OF_LAST * seconds)


def _answer_of(relaxation: Relaxation) -> tuple[Span, ...]:
    return tuple(relaxation.answer()) if relaxation.answered else ()


def _checked_where_over(problem: Problem, budget: int, chosen: list[int], answer: list[Span], chained: frozenset[int],
                        best: Bound, growing: _Deadline, found: _Found) -> bool:
    """After a round that checks segments, an answer that costs what the bounds prove and goes over only while
    the recomputes of a few segments not yet checked run: those segments checked one at a time, the rest of
    the answer kept (solver/realise/realise.py). The next round checks them too, but is a whole relaxation
    again, many times slower; the steps stop short of that size, so they may have the rounds' time left.
    Whether a schedule that meets the bound came of it."""
    if found.sketch is None or found.sketch.cost(problem.graph) > as_cheap_as(best.cost):
        return False
    placed = checked_where_over(problem, budget, chosen, answer, chained, _limit(growing), growing.threads)
    found.add(problem, placed, "the relaxation's answer, its segments checked where it goes over")
    return placed is not None and placed.cost(problem.graph) <= as_cheap_as(best.cost)


def _far_above(problem: Problem, found: _Found, enough: float, bound: float) -> bool:
    """Whether a schedule is known and every one costs more than WALK_NEAR above `bound`: then finding one near
    it is what the solve lacks, and a round that checks more segments, proving more, would not decide it alone.
    With none known, that round may prove that none fits: it comes first."""
    cheapest = found.cheapest(problem)
    known = min(enough, math.inf if cheapest is None else cheapest.cost(problem.graph))
    return math.isfinite(known) and known > (1 + WALK_NEAR) * bound


def _placed_at(problem: Problem, budget: int, chosen: list[int], chained: frozenset[int], answer: list[Span],
               best: Bound, small: bool, growing: _Deadline, deadline: _Deadline, found: _Found,
               checked: bool = True, placing: bool = True, share: float = PLACE_SHARE,
               far_from: float | None = None) -> bool:
    """The answer's recomputes moved earlier or repaired, then placed exactly (and, once every segment it
    overflows in is `checked`, on small graphs, another answer's): whether a schedule that fits and meets the
    bound came of it (`found` keeps any that fits). An exact placement can take all the rounds' time and only
    finds a schedule, where a round that checks those segments while they recompute proves a bound: until
    they are checked, it gets a `share` of the time, and none at all (not `placing`) before the first round
    that checks any (that round often proves the optimum) unless every schedule known is far above the bound.
    `far_from`: a cost known before the rounds; the exact placement runs only if the repairs found nothing
    near the bound either."""
    until = growing.at if not math.isinf(growing.at) else None
    placed = moved_earlier(problem.graph, answer, budget, until)
    found.add(problem, placed, "the relaxation's answer, recomputes moved earlier")
    if placed is None and placing:     # before that round, the repairs wait for the repair stage
        placed = _repaired(problem, budget, found, best, until)
    if placed is None and placing and (far_from is None or _far_above(problem, found, far_from, best.cost)):
        known = found.cheapest(problem)
        placed = placed_exactly(problem.graph, answer, budget, _share(growing, share), deadline.threads,
                                as_cheap_as(best.cost), None if known is None else known.cost(problem.graph))
        found.add(problem, placed, "the relaxation's answer, placed exactly")
    if placed is None and small and checked:
        placed = _alternative_placed(problem, budget, chosen, chained, answer, found.sketch.cost(problem.graph),
                                     growing)
        found.add(problem, placed, "another answer of the relaxation's, placed exactly")
    return placed is not None and placed.cost(problem.graph) <= as_cheap_as(best.cost)


def _repaired(problem: Problem, budget: int, found: _Found, best: Bound, until: float | None) -> Decisions | None:
    """The rounds' newest answers not yet repaired (REPAIRS of them, newest first), each repaired by the greedy
    heuristic and polished: the first that meets the bound, if one does by `until` (quick next to an exact
    placement, and often at the bound; `found` keeps whatever fits). The older ones wait for the repair stage
    (solver/stages.py repairs every answer the rounds leave): here they delay the round that may prove the bound."""
    tried = 0
    for sketch in reversed([*found.sketches, found.sketch]):
        if until is not None and clock.now() > until or tried >= REPAIRS:
            return None
        if sketch in found.repaired:        # the same repair again would give the same schedule
            continue
        tried += 1
        found.repaired.add(sketch)
        repaired = greedy(problem.graph, budget, start=sketch, deadline=until)
        placed = polish(problem.graph, repaired, budget, until) if repaired is not None else None
        found.add(problem, placed, "the relaxation's answer, repaired")
        if placed is not None and (found.any_schedule or placed.cost(problem.graph) <= as_cheap_as(best.cost)):
            return placed
    return None


def _alternative_placed(problem: Problem, budget: int, points: list[int], chained: frozenset[int],
                        answer: list[Span], cost: int, deadline: _Deadline) -> Decisions | None:
    """Another answer of the round, as cheap as `answer` (of `cost`) where one is, placed exactly. An answer
    often has equal-cost alternatives, and the one HiGHS gives first may be the one no placement realises
    (a residual CNN at 0.42). Each try cuts off the answers before it, so it proves nothing."""
    excluded = [frozenset(answer)]
    for _ in range(ALTERNATIVES):
        if _left(deadline) <= 0:
            return None
        model = Relaxation(problem, budget, points, chained=chained, threads=deadline.threads,
                           excluded=tuple(excluded))
        model.solve(_limit(deadline), target=cost + 1)
        if not model.answered:
            return None
        other = model.answer()
        placed = placed_exactly(problem.graph, other, budget, _limit(deadline), deadline.threads, cost + 1)
        if placed is not None:
            return placed
        excluded.append(frozenset(other))
    return None


@dataclass(frozen=True)
class _Answer:
    """A round's answer: the points it was solved over, its recomputes, and the segments it checked while they run
    (the newest starts the next round; one solved to the end whose schedule overflows is where a walk starts)."""

    points: list[int]
    spans: list[Span]
    chained: frozenset[int]


def _walk(problem: Problem, budget: int, newest: _Answer, deadline: _Deadline, found: _Found, enough: float
          ) -> None:
    """Walk the newest answer that overflowed to a schedule that fits (solver/realise/realise.py), on the time the
    rounds left for it, and keep it. The rounds' next one, over one point more, can take many times as long
    and still end with an answer that overflows; the newest answer saw the most points, so it is the best
    start."""
    cheapest = found.cheapest(problem)
    cap = min(enough, math.inf if cheapest is None else cheapest.cost(problem.graph))
    schedule = walked(problem, budget, newest.points, newest.spans, _limit(deadline), deadline.threads, cap,
                      newest.chained)
    found.add(problem, schedule, "the relaxation's answer, walked")


def _with_last_resort_bound(problem: Problem, budget: int, best: Bound, found: _Found, deadline: _Deadline,
                            enough: float, every: list[int]) -> Bound:
    """The bound with the cheapest schedule found. If that does not meet it, the time left goes to the last
    resort for a proof: every binding point, with memory checked while every segment's recomputes run. Valid
    and much tighter where recompute chains bind (a residual CNN at 0.5: 348,160 -> 360,447), but slow on big
    graphs, so it only gets the time the rounds leave, and does not start where that is less than the least it
    takes to be built and handed to HiGHS (least_round_seconds): it would return no bound, only spend the time."""
    if not found.meets(problem, best.cost) and _left(deadline) > least_round_seconds(problem, every) \
            and best.cost < enough:
        strongest = point_bound(problem, budget, every, _limit(deadline), chains=True, threads=deadline.threads)
        if strongest.cost > best.cost:
            best = strongest
            found.raised(best)
    return found.with_bound(problem, best)


def as_cheap_as(bound: float) -> float:
    """The cost at which an answer meets a proven bound: HiGHS may stop there, since no proof is needed."""
    return bound / (1 - RELAXATION_GAP) + 1


def _left(deadline: _Deadline) -> float:
    return deadline.at - clock.now()


def _share(deadline: _Deadline, share: float) -> float | None:
    """That share of the time left (None: no limit)."""
    left = _limit(deadline)
    return None if left is None else share * left


def _limit(deadline: _Deadline) -> float | None:
    return None if math.isinf(deadline.at) else max(0.0, _left(deadline))


def point_bound(problem: Problem, budget: int, points: list[int], seconds: float | None = None,
                chains: bool = False, threads: int | None = 1) -> Bound:
    """Solve the relaxation over `points` and return the bound it proves: HiGHS's dual bound, rounded to whole
    cycles (solver/model/backends.py), which is valid whether or not the relaxation was solved to the end.
    `chains`: also check memory while the recomputes of each segment run."""
    points = sorted(set(points))
    return Bound(Relaxation(problem, budget, points, chained=frozenset(points if chains else ()),
                            threads=threads).solve(seconds), tuple(points))
