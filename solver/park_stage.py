"""The stages of a solve that may park activations off chip (`solve(..., park=prices)`; solver/model/parking.py).

The relaxation's bound, the focused model and the single-op floor know nothing of parking (a parked activation can
make a schedule cheaper than the bound allows, and an op whose inputs are parked needs less of the chip than the
floor counts), so a parking solve first finds the cheapest schedule without parking as the MILP method does, in
half its limit; then parks activations in the stage order until the chip's level fits (`parked_in_order`: at each
point over the budget the live one with the fewest parking cycles per byte, and the greedy heuristic's recomputes
for what parking cannot bring under it; below the floor too); and then runs the exact model with parking from the
cheaper of the two until the end of its limit; the answer is the cheapest of the three. What it proves is HiGHS's
own proof. `chip_graph` is the graph as the chip's level sees it: the parked activations take no bytes there, so the
replay's peak of a parked schedule is the chip's.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from ckpt.errors import InfeasibleBudget
from ckpt.events import Incumbent
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.model import clock
from ckpt.solver.model.backends import RunStatus
from ckpt.solver.model.model_run import run_model
from ckpt.solver.model.options import Method
from ckpt.solver.model.parking import ParkPrices, first_runs_price, parkable
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import Answer
from ckpt.solver.model.time_plan import TimePlan
from ckpt.solver.realise.evicting import evicting
from ckpt.solver.realise.greedy import greedy
from ckpt.solver.stages import HEURISTIC, STAGES, Attempt, Found, Stage, cheapest

UNPARKED_SHARE = 0.5     # of a parking solve's limit, for the schedule without parking that starts the model
PARKED_START_SHARE = 0.1       # of the limit, for the recomputes beside parking in the stage order (the greedy's)


def chip_graph(graph: TrainGraph, parked: Iterable[str]) -> TrainGraph:
    """`graph` with the `parked` activations at 0 bytes: what the chip's level holds of a parked schedule."""
    parked = frozenset(parked)
    if not parked:
        return graph
    sizes = {t: 0 if t in parked else n for t, n in graph.tensor_bytes.items()}
    return replace(graph, tensor_bytes=sizes)


@dataclass(frozen=True)
class ParkedStart:
    """A schedule with activations parked, found without a solver: the exact model's start where it is cheaper."""

    decisions: Decisions
    parked: frozenset[str]
    cycles: int                  # its recomputes' and its parking's


def parked_in_order(problem: Problem, prices: ParkPrices | None, budget: int | None, deadline: float | None = None
                    ) -> ParkedStart | None:
    """Activations parked in `problem`'s stage order until the chip's level fits `budget` (at the highest point over
    it where a live activation can be parked, the one with the fewest parking cycles per byte), recomputes for what
    parking cannot bring under it (the cheaper of the greedy heuristic's and the eviction walk's on the chip's view,
    by `deadline`; an activation whose producer they recompute unparked and tried again), then, the dearest first,
    each parked one the fit does not need unparked again; None where the greedy finds no recomputes that fit, or
    where they would recompute a parked activation's producer. Found with no recompute wherever parking every
    parkable activation fits the stage order."""
    if prices is None or budget is None:
        return None
    staged = problem.graph
    plain = Decisions(frozenset()).sequence(staged)
    can = frozenset(parkable(problem, prices))
    parked: set[str] = set()

    def per_byte(e: str) -> tuple[float, str]:
        return first_runs_price(prices, e) / max(1, staged.tensor_bytes[e]), e

    trace = memory_trace(staged, plain)
    while trace.peak_bytes > budget:
        over = sorted((k for k, level in enumerate(trace.levels) if level > budget), key=lambda k: -trace.levels[k])
        live = next(([b.tensor for b in trace.live_at(k) if b.tensor in can and b.tensor not in parked]
                     for k in over if any(b.tensor in can and b.tensor not in parked for b in trace.live_at(k))), [])
        if not live:
            break
        parked.add(min(live, key=per_byte))
        trace = memory_trace(chip_graph(staged, parked), plain)
    decisions = Decisions(frozenset())
    while trace.peak_bytes > budget:                  # recomputes on the chip's view; a parked producer's unparked
        chip = chip_graph(staged, parked)
        found = cheapest(chip, greedy(chip, budget, deadline=deadline), evicting(chip, budget, deadline=deadline))
        if found is None:
            return None
        rerun = {i for _, i in found.recomputes}
        clash = {e for e in parked if problem.producer(e) in rerun}
        if not clash:
            decisions = found
            break
        parked -= clash
    seq = decisions.sequence(staged)
    for e in sorted(parked, key=lambda e: (-first_runs_price(prices, e), e)):
        if memory_trace(chip_graph(staged, parked - {e}), seq).peak_bytes <= budget:
            parked.discard(e)
    return ParkedStart(decisions, frozenset(parked), decisions.cost(staged) + parking_cycles(problem, prices, parked,
                                                                                             decisions))


def parking_cycles(problem: Problem, prices: ParkPrices, parked, decisions: Decisions) -> int:
    """What parking `parked` adds to `decisions`' step, as the exact model counts it: each writer's and reader's
    first run, and each recompute of a reader again."""
    names = [op.name for op in problem.graph.ops]
    return round(sum(first_runs_price(prices, e) + sum(prices[e].get(names[j], 0) for _, j in decisions.recomputes
                                                       if j != problem.producer(e)) for e in parked))


def parking_stage(attempt: Attempt, found: Found) -> Found:
    """The exact model with parking until the end of the limit, warm-started from the cheaper of the schedule
    without parking (`found.start`) and the stage order with activations parked (`parked_in_order`); the cheapest
    of the three, proven only where the model's is the answer."""
    options, plan = attempt.options, attempt.plan
    share = None if plan.limit is None else clock.now() + PARKED_START_SHARE * plan.limit
    in_order = parked_in_order(attempt.problem, attempt.park, options.live_budget, share)
    if in_order is not None:
        attempt.progress(Incumbent(in_order.cycles, f"the stage order, {len(in_order.parked)} activation(s) parked"))
    start, start_parked = found.start, frozenset()
    if in_order is not None and (start is None or in_order.cycles < attempt.cost(start)):
        start, start_parked = in_order.decisions, in_order.parked
    ran = run_model(attempt.problem, options.live_budget, options, plan, 1.0, start, attempt.progress,
                    "exact (with parking)", park=attempt.park, start_parked=start_parked) if plan.allows() else None
    if ran is not None and ran.outcome.status is RunStatus.FEASIBLE and not ran.outcome.timed_out \
            and start is not None and plan.allows():
        # ended short of a proof with time left: HiGHS, given a start, can return the start's values as its
        # answer (solver/model/backends.py, `_stale`); the model run again without it
        again = run_model(attempt.problem, options.live_budget, options, plan, 1.0, None, attempt.progress,
                          "exact (with parking), without the start", park=attempt.park)
        if again is not None and again.decisions is not None \
                and attempt.cost(again.decisions) + again.park_cost <= attempt.cost(ran.decisions) + ran.park_cost:
            ran = again
    timed_out = found.timed_out or ran is None or ran.outcome.timed_out
    if ran is not None and ran.infeasible and found.start is None and in_order is None:
        raise InfeasibleBudget(f"no schedule fits {options.budget} B on chip, even with activations parked off chip "
                               "(proven by the exact model)", "raise the budget")
    heuristic = replace(HEURISTIC, timed_out=timed_out)
    candidates: list[tuple[int, int, Answer]] = []          # (cycles, rank: the model's first on a tie, answer)
    if ran is not None and ran.decisions is not None:
        candidates.append((attempt.cost(ran.decisions) + ran.park_cost, 0, Answer(
            ran.decisions, replace(ran.outcome, timed_out=timed_out), ran.booked, ran.sizes, parked=ran.parked,
            park_cost=ran.park_cost)))
    if found.start is not None:
        candidates.append((attempt.cost(found.start), 1, Answer(found.start, heuristic)))
    if in_order is not None:
        park_cost = in_order.cycles - attempt.cost(in_order.decisions)
        candidates.append((in_order.cycles, 2, Answer(in_order.decisions, heuristic, parked=in_order.parked,
                                                      park_cost=park_cost)))
    if not candidates:
        raise InfeasibleBudget(f"no schedule with parking was found for {options.budget} B in the time limit "
                               "(not proven infeasible)", "give it more --time-limit, or raise the budget",
                               proven=False)
    return replace(found, answer=min(candidates, key=lambda c: c[:2])[2])


def parking_start(attempt: Attempt, found: Found) -> Found:
    """The cheapest schedule without parking, as the exact model's start: the MILP method's own stages (heuristics,
    bound, repair, focused and exact model) in the first `UNPARKED_SHARE` of the limit (on a large graph they find in
    that time what the model with parking alone would not). Below the single-op floor none fits: the whole limit goes
    to parking in the stage order and the model with parking."""
    if attempt.options.budget is not None and attempt.options.budget < attempt.base.lower_bound:
        return found
    plan = attempt.plan
    share = replace(attempt, plan=TimePlan(plan.start, None if plan.limit is None else UNPARKED_SHARE * plan.limit),
                    options=replace(attempt.options, explain=False))     # no schedule without parking is no answer
    unparked = Found()
    try:
        for stage in STAGES[Method.MILP]:
            unparked = stage(share, unparked)
            if unparked.answer is not None:
                return replace(found, start=unparked.answer.decisions)
    except InfeasibleBudget:
        pass
    return replace(found, start=unparked.start)


PARKING_STAGES: tuple[Stage, ...] = (parking_start, parking_stage)
