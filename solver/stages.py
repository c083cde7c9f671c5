"""The solver's stages, each one plain function `stage(attempt, found) -> found` (as PyTorch's knapsack solvers
share one signature), so a method is a tuple of stages and a benchmark can run any prefix or swap one out.

An `Attempt` is one solve over one stage order (what every stage reads); `Found` is what the stages found so
far. A stage that ends the solve sets `Found.answer`; the next stages do not run. The stages of the MILP
method: the greedy heuristic, the relaxation's lower bound, the repair and polish of its answers, the focused
model, the exact model, each stopping once a schedule meets the bound (solver/solve.py has the time shares).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property

from ckpt.errors import InfeasibleBudget
from ckpt.events import Incumbent, LowerBound, Progress, Step
from ckpt.solver.bounds.bounds import Bound, as_cheap_as, lower_bound
from ckpt.solver.bounds.infeasible import infeasible_error
from ckpt.solver.graph.baselines import Baselines
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import RunSequence, memory_trace
from ckpt.solver.model import clock
from ckpt.solver.model.backends import Outcome, RunStatus
from ckpt.solver.model.model_run import ModelRun, run_model
from ckpt.solver.model.options import Focus, Method, Objective
from ckpt.solver.model.parking import ParkPrices
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import Answer, Sizes, SolveOptions
from ckpt.solver.model.relaxation import Span
from ckpt.solver.model.time_plan import (
    BOUND_ALONE_UNTIL,
    BOUND_UNTIL,
    EARLY_SEARCH_UNTIL,
    FOCUS_UNTIL,
    GREEDY_UNTIL,
    MIN_STAGE_SECONDS,
    SEARCH_UNTIL,
    TimePlan,
    limit_for_models,
    models_fit,
)
from ckpt.solver.realise.evicting import evicting
from ckpt.solver.realise.greedy import greedy, outside_space, polish
from ckpt.solver.realise.realise import by_first_reader, overflow, walk
from ckpt.solver.realise.search import searched

NO_BOUND = Bound(0.0, ())
HEURISTIC = Outcome(RunStatus.FEASIBLE, None, 0.0)     # a schedule nobody proved anything of (yet)
WALK_FLOOR_SHARE = 0.5   # of the time left after the bound, the most the walk of its answer takes (repairs: the rest)


@dataclass(frozen=True)
class Attempt:
    """One solve over one stage order: what every stage reads."""

    staged: TrainGraph
    base: Baselines
    options: SolveOptions
    plan: TimePlan
    progress: Progress
    incumbents: tuple[RunSequence, ...] = ()    # schedules found before: the cheapest that fits is a start
    park: ParkPrices | None = None              # activations that may be parked off chip (solver/park_stage.py)

    @cached_property
    def problem(self) -> Problem:
        return Problem(self.staged, focus=self.options.focus is Focus.ONLY)

    @cached_property
    def models(self) -> bool:
        """Whether the models get their share of the time (else the bound takes it: time_plan.models_fit)."""
        return self.options.live_budget is None or models_fit(self.problem, self.plan)

    def cost(self, decisions: Decisions) -> int:
        return decisions.cost(self.staged)

    def cheaper(self, *candidates: Decisions | None) -> Decisions | None:
        return cheapest(self.staged, *candidates)

    def meets(self, decisions: Decisions | None, floor: Bound) -> bool:
        """A schedule within the gap tolerance of a proven floor needs no solver to call it optimal."""
        return (decisions is not None and self.options.objective is Objective.COST and floor.cost > 0
                and _gap(self.cost(decisions), floor.cost) <= self.options.backend.gap)

    def bounded(self, outcome: Outcome, decisions: Decisions, floor: float) -> Outcome:
        """The verdict on `decisions` given the best proven bound `floor` (the relaxation's, or the solver's
        own): a gap within the tolerance is a proof of optimality whoever found the schedule."""
        if outcome.gap is None and floor <= 0:
            return outcome
        gap = _gap(self.cost(decisions), floor)
        return replace(outcome, status=RunStatus.OPTIMAL if gap <= self.options.backend.gap else outcome.status,
                       gap=gap)

    def infeasible(self, timed_out: bool = False) -> InfeasibleBudget:
        return infeasible_error(self.options, self.base, self.staged, self.plan, self.progress, timed_out)


@dataclass(frozen=True)
class Found:
    """What the stages found so far."""

    start: Decisions | None = None        # the best schedule known: the models' warm start
    polished: Decisions | None = None     # the best polished schedule known
    floor: Bound = NO_BOUND               # the proven lower bound on the cost
    timed_out: bool = False               # a stage ran out of its time
    answer: Answer | None = None          # set by the stage that ends the solve


Stage = Callable[[Attempt, Found], Found]


def greedy_start(attempt: Attempt, found: Found) -> Found:
    """The greedy heuristic's schedule, else the eviction walk's (or a given schedule, when cheaper); under a cost
    cap the plain order, cost 0. The walk runs first: it takes a fraction of the greedy's time, and its schedule is
    there where the greedy finds none (near the floor) or runs out of time. Where both find one, the greedy's is
    kept even if the walk's costs less as it is: polished, the greedy's tends to cost less."""
    attempt.progress(Step("greedy heuristic"))
    if attempt.options.objective is not Objective.COST:
        return replace(found, start=Decisions(frozenset()))
    budget, deadline = attempt.options.budget, attempt.plan.at(GREEDY_UNTIL)
    walked = evicting(attempt.staged, budget, deadline=deadline)
    start = greedy(attempt.staged, budget, deadline=deadline) or walked
    start = attempt.cheaper(start, *fitting(attempt.staged, attempt.incumbents, budget))
    if start is not None:
        attempt.progress(Incumbent(attempt.cost(start), "greedy"))
    return replace(found, start=start)


def greedy_answer(attempt: Attempt, found: Found) -> Found:
    """The greedy schedule, polished: the answer of `--method greedy`."""
    if found.start is None:
        raise InfeasibleBudget(f"the heuristics found no schedule for {attempt.options.budget} B "
                               "(not proven infeasible)", "use --method milp or raise the budget", proven=False)
    polished = polish(attempt.staged, found.start, attempt.options.budget, attempt.plan.at())
    return replace(found, answer=Answer(polished, HEURISTIC))


def bound_stage(attempt: Attempt, found: Found) -> Found:
    """The relaxation's lower bound on the cost (solver/bounds/bounds.py), until its deadline. It holds for every
    schedule over the stage order, so the focus setting of the problem does not matter."""
    options = attempt.options
    if options.live_budget is None:
        return found
    attempt.progress(Step("lower bound: memory at the binding points"))
    known = attempt.cost(found.start) * (1 - options.backend.gap) if found.start is not None else math.inf
    until = BOUND_UNTIL if attempt.models else BOUND_ALONE_UNTIL
    floor = lower_bound(attempt.problem, options.budget, attempt.plan.left(until), known,
                        threads=options.backend.threads, progress=attempt.progress)
    attempt.progress(LowerBound(floor.cost, len(floor.points), final=True))
    if math.isinf(floor.cost):
        raise attempt.infeasible()
    return replace(found, floor=floor)


def repair_stage(attempt: Attempt, found: Found) -> Found:
    """The start polished, and the relaxation's answers made to fit; done when one meets the bound. The
    models start from the greedy schedule as it is (polished, it tends to trap HiGHS's heuristics), or from
    the relaxation's where that is cheaper. Polished first: it is quick, and the repair of the relaxation's
    near miss may take all the time left."""
    budget, staged, plan = attempt.options.live_budget, attempt.staged, attempt.plan
    met = found.floor.schedule
    if attempt.meets(met, found.floor):      # the relaxation's answer is proven optimal: nothing to polish
        attempt.progress(Step(f"the relaxation's schedule meets its lower bound {found.floor.cost:.0f}: optimal"))
        return replace(found, polished=met, answer=Answer(met, attempt.bounded(HEURISTIC, met, found.floor.cost)))
    found = _walked_floor(attempt, found)
    if found.answer is not None:
        return found
    polished = polish(staged, found.start, budget, plan.at()) if found.start is not None and budget is not None \
        else found.start
    # where the greedy found no schedule and the models cannot run, the repairs are all there is to search from
    relaxed = from_relaxation(staged, found.floor, budget, plan.at(), others=found.start is None and not attempt.models)
    found = replace(found, polished=attempt.cheaper(polished, relaxed, found.polished),
                    start=attempt.cheaper(found.start, relaxed))
    if found.polished is not None and budget is not None:
        attempt.progress(Incumbent(attempt.cost(found.polished), "relaxation and polish"))
    if attempt.meets(found.polished, found.floor):
        attempt.progress(Step(f"a schedule meets the lower bound {found.floor.cost:.0f}: optimal"))
        return replace(found, answer=Answer(found.polished,
                                            attempt.bounded(HEURISTIC, found.polished, found.floor.cost)))
    return found


def early_search_stage(attempt: Attempt, found: Found) -> Found:
    """Where the models are too big to run, the greedy's schedule improved by the local search before the bound
    (a short share, stopping once it stalls): where the bound's rounds end without a schedule near their bound,
    the repairs' schedules can be far above it. Kept aside as the best polished schedule, not given to the
    rounds as the start: their path (when to walk, when to place exactly) is judged by the cost of the start,
    and a cheaper one there made the repairs after them worse (the 8-block CCT at 0.3)."""
    return _searched(attempt, found, EARLY_SEARCH_UNTIL, as_start=False)


def search_stage(attempt: Attempt, found: Found) -> Found:
    """The local search again after the repairs, from the best schedule known (the greedy may have found none
    before the bound), until its deadline or until it meets the bound."""
    return _searched(attempt, found, SEARCH_UNTIL)


def _searched(attempt: Attempt, found: Found, until: float, as_start: bool = True) -> Found:
    """The best schedule known improved by the local search (solver/realise/search.py) until `until` of the
    limit, only where the models are too big to run: elsewhere they have that time. `as_start`: the searched
    schedule also becomes the start of the stages after it (else only the best polished one)."""
    budget, plan = attempt.options.live_budget, attempt.plan
    start = attempt.cheaper(found.polished, found.start)
    if attempt.models or budget is None or start is None or attempt.meets(start, found.floor) \
            or not plan.allows(until):
        return found
    attempt.progress(Step("local search: ruin and recreate"))
    target = _target(attempt, found) or 0.0
    deadline = plan.at(until)
    improved = searched(attempt.staged, budget, start, math.inf if deadline is None else deadline, target,
                        attempt.progress).schedule
    found = replace(found, polished=attempt.cheaper(found.polished, improved),
                    start=attempt.cheaper(found.start, improved) if as_start else found.start)
    if attempt.meets(improved, found.floor):
        attempt.progress(Step(f"the searched schedule meets the lower bound {found.floor.cost:.0f}: optimal"))
        return replace(found, answer=Answer(improved, attempt.bounded(HEURISTIC, improved, found.floor.cost)))
    return found


def _walked_floor(attempt: Attempt, found: Found) -> Found:
    """The answer of the round that proved the floor, walked to a schedule that fits (solver/realise/realise.py):
    where it overflows at a few stages, the relaxation solved again with those as points is often the optimum, in
    a fraction of the time a repair by the greedy heuristic takes; and where that step is the whole relaxation
    over its points, its bound holds, and may prove the schedule optimal. On a share of the time left, first:
    the repairs after it take what is left."""
    budget, floor = attempt.options.live_budget, found.floor
    if budget is None or not floor.answer or not _over_at_own_ops_only(attempt.staged, floor.answer, budget):
        return found
    left = attempt.plan.left()
    known = attempt.cost(found.start) if found.start is not None else math.inf
    walked = walk(attempt.problem, budget, list(floor.points), list(floor.answer),
                  None if left is None else WALK_FLOOR_SHARE * left, attempt.options.backend.threads, known,
                  floor.chained, whole=True)
    if walked.proven > floor.cost:
        floor = replace(floor, cost=walked.proven, points=walked.points)
        attempt.progress(LowerBound(floor.cost, len(floor.points), final=True))
    schedule = walked.schedule
    if schedule is not None and not attempt.meets(schedule, floor):
        schedule = polish(attempt.staged, schedule, budget, attempt.plan.at())
    if schedule is not None:
        attempt.progress(Incumbent(attempt.cost(schedule), "the bound's answer, walked"))
        floor = replace(floor, schedule=attempt.cheaper(floor.schedule, schedule))
    found = replace(found, floor=floor, start=attempt.cheaper(found.start, schedule))
    if attempt.meets(schedule, floor):
        attempt.progress(Step(f"the walked schedule meets the lower bound {floor.cost:.0f}: optimal"))
        return replace(found, polished=schedule,
                       answer=Answer(schedule, attempt.bounded(HEURISTIC, schedule, floor.cost)))
    return found


def _over_at_own_ops_only(staged: TrainGraph, answer: tuple[Span, ...], budget: int) -> bool:
    """Whether the answer placed by rule goes over the budget only where a stage's own op runs: then those stages
    as points cut it off, and the walk's steps are small rounds. Where it goes over while recomputes run, the walk
    adds points that do not see that, and the greedy's repairs do better on the time."""
    sketch = by_first_reader(staged, list(answer))
    stages, during = overflow(staged, sketch, budget)
    return bool(stages) and not during


def focused_stage(attempt: Attempt, found: Found) -> Found:
    """The focused model (recomputes only where a reader may run) until its deadline, as a better start."""
    options, plan = attempt.options, attempt.plan
    if not attempt.models:
        return _without_models(attempt, found)
    if options.focus is not Focus.SEED or options.objective is not Objective.COST or not plan.allows(FOCUS_UNTIL):
        return found
    seeded = run_model(Problem(attempt.staged, focus=True), options.budget, options, plan, FOCUS_UNTIL, found.start,
                       attempt.progress, "focused", _target(attempt, found))
    start = found.start
    if seeded is not None:
        start = attempt.cheaper(start, seeded.decisions)
        if start is not None:
            attempt.progress(Incumbent(attempt.cost(start), "focused MILP"))
    found = replace(found, start=start, timed_out=seeded is None or seeded.outcome.timed_out)
    if attempt.meets(start, found.floor):
        attempt.progress(Step(f"the focused model's schedule meets the lower bound {found.floor.cost:.0f}: optimal"))
        return replace(found, answer=Answer(start, attempt.bounded(HEURISTIC, start, found.floor.cost)))
    return found


def exact_stage(attempt: Attempt, found: Found) -> Found:
    """The exact model until the end of the limit; its answer polished when not proven (or the best schedule known
    before it, when cheaper: the focused model's, say), and bounded by the best proof either has."""
    if not attempt.models:
        return _without_models(attempt, found)
    options, plan, budget = attempt.options, attempt.plan, attempt.options.live_budget
    ran = run_model(attempt.problem, budget, options, plan, 1.0, found.start, attempt.progress, "exact",
                    _target(attempt, found)) if plan.allows() else None
    timed_out = found.timed_out or ran is None or ran.outcome.timed_out
    if ran is None or (ran.infeasible and found.start is not None):
        return replace(found, answer=_known_answer(attempt, found, ran, timed_out))
    if ran.infeasible:
        raise attempt.infeasible()
    chosen, booked, outcome = ran.decisions, ran.booked, ran.outcome
    if budget is not None:
        solver_bound = attempt.cost(chosen) * (1 - outcome.gap) if outcome.gap is not None else 0.0
        if outcome.status is not RunStatus.OPTIMAL:   # the start too: HiGHS may return a dearer incumbent
            better = attempt.cheaper(polish(attempt.staged, chosen, budget, plan.at()), found.polished, found.start)
            chosen, booked = better, (booked if better == chosen else None)
        outcome = attempt.bounded(outcome, chosen, max(found.floor.cost, solver_bound))
    return replace(found, answer=Answer(chosen, replace(outcome, timed_out=timed_out), booked, ran.sizes))


STAGES: dict[Method, tuple[Stage, ...]] = {
    Method.MILP: (greedy_start, early_search_stage, bound_stage, repair_stage, search_stage, focused_stage,
                  exact_stage),
    Method.GREEDY: (greedy_start, greedy_answer),
}


def _target(attempt: Attempt, found: Found) -> float | None:
    """The cost at which a schedule is within the gap tolerance of the proven floor (None: no floor)."""
    floor, tolerance = found.floor.cost, attempt.options.backend.gap
    return floor / (1 - tolerance) if 0 < floor and tolerance < 1 else None


def _without_models(attempt: Attempt, found: Found) -> Found:
    """The answer of a solve whose models are too big for its limit (judged by size: time_plan.models_fit). The
    limit ran out only if the bound used its share to the end; where it finished sooner, what more time would
    bring is the models, at the limit they need."""
    attempt.progress(Step("models: too big to build and run in the time left, the bound had it"))
    ran_out = attempt.plan.left(BOUND_ALONE_UNTIL) == 0
    answer = _known_answer(attempt, found, None, timed_out=ran_out)
    return replace(found, answer=replace(answer, models_need=limit_for_models(attempt.problem)))


def _known_answer(attempt: Attempt, found: Found, ran: ModelRun | None, timed_out: bool) -> Answer:
    """The exact model gave nothing usable: the best schedule already checked, or say none was found."""
    if found.start is None:
        raise attempt.infeasible(timed_out=True)
    if ran is not None and ran.infeasible:
        # A replay-checked schedule fits, so "infeasible" is the solver stopping early (CBC's preprocessing
        # says so when its time runs out): keep the known schedule rather than believe it.
        attempt.progress(Step(f"{attempt.options.backend.backend.value} reported infeasible although a checked "
                              "schedule fits; keeping it"))
    budget = attempt.options.live_budget
    polished = polish(attempt.staged, found.start, budget, attempt.plan.at()) if budget is not None else found.start
    best = attempt.cheaper(polished, found.polished)
    outcome = replace(attempt.bounded(HEURISTIC, best, found.floor.cost), timed_out=timed_out)
    return Answer(best, outcome, None, ran.sizes if ran else Sizes())


def _gap(cost: int, bound: float) -> float:
    return 0.0 if cost <= bound or cost == 0 else (cost - bound) / cost


def from_relaxation(staged: TrainGraph, floor: Bound, budget: int | None, deadline: float | None,
                    others: bool = False) -> Decisions | None:
    """The cheapest of the relaxation's schedule (its answers made to fit by rule or by walking) and of its
    near misses made to fit by the greedy heuristic by `deadline` (newest first: the last answers saw the
    most points; the older ones are a fallback, since a repair can fail on one and succeed on another); polished.
    A schedule that meets the bound needs no repairs. The cheapest is polished first; with `others`, the rest
    too, cheapest first, while time is left: a repair far dearer than another can polish to a cheaper schedule
    (CCT at 0.3), and where the greedy found no schedule before the bound, there is nothing better to search from."""
    if budget is None:
        return None
    candidates = [floor.schedule] if floor.schedule is not None else []
    met = bool(candidates) and candidates[0].cost(staged) <= as_cheap_as(floor.cost)
    for n, sketch in enumerate(reversed(floor.sketches if not met else ())):
        if n and deadline is not None and clock.now() + MIN_STAGE_SECONDS >= deadline:
            break     # the newest is always tried (as the only one once was); the others while time is left
        repaired = greedy(staged, budget, start=sketch, deadline=deadline)
        candidates += [repaired] if repaired is not None else []
    ranked = sorted(dict.fromkeys(candidates), key=lambda c: c.cost(staged))   # the first of equals stays first
    if not ranked:
        return None
    found = polish(staged, ranked[0], budget, deadline)
    for other in ranked[1:]:
        if not others or deadline is not None and clock.now() + MIN_STAGE_SECONDS >= deadline:
            break
        found = cheapest(staged, found, polish(staged, other, budget, deadline))
    return found


def cheapest(staged: TrainGraph, *candidates: Decisions | None) -> Decisions | None:
    """The cheapest of the schedules given (the first of equals), None if none is."""
    found = [c for c in candidates if c is not None]
    return min(found, key=lambda c: c.cost(staged)) if found else None


def fitting(staged: TrainGraph, sequences: tuple[RunSequence, ...] | list[RunSequence], budget: int) -> list[Decisions]:
    """The given schedules that are schedules of this stage order and fit the budget, as decisions."""
    found = []
    for seq in sequences:
        decisions = Decisions.from_sequence(staged, seq)
        if decisions is not None and not outside_space(staged, decisions) \
                and memory_trace(staged, decisions.sequence(staged)).peak_bytes <= budget:
            found.append(decisions)
    return found
