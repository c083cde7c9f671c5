"""The stages of a solve that may park activations off chip (`solve(..., park=prices)`; solver/model/parking.py).

The relaxation's bound, the focused model and the single-op floor know nothing of parking (a parked activation can
make a schedule cheaper than the bound allows, and an op whose inputs are parked needs less of the chip than the
floor counts), so a parking solve first finds the cheapest schedule without parking as the MILP method does, in a
share of its limit (where one can fit), and then runs the exact model with parking from it until the end of its
limit; what it proves is HiGHS's own proof. `chip_graph` is the graph as the
chip's level sees it: the parked activations take no bytes there, so the replay's peak of a parked schedule is the
chip's.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ckpt.errors import InfeasibleBudget
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.model.backends import RunStatus
from ckpt.solver.model.model_run import run_model
from ckpt.solver.model.options import Method
from ckpt.solver.model.records import Answer
from ckpt.solver.model.time_plan import TimePlan
from ckpt.solver.stages import HEURISTIC, STAGES, Attempt, Found, Stage

UNPARKED_SHARE = 0.5     # of a parking solve's limit, for the schedule without parking that starts the model


def chip_graph(graph: TrainGraph, parked: Iterable[str]) -> TrainGraph:
    """`graph` with the `parked` activations at 0 bytes: what the chip's level holds of a parked schedule."""
    parked = frozenset(parked)
    if not parked:
        return graph
    sizes = {t: 0 if t in parked else n for t, n in graph.tensor_bytes.items()}
    return replace(graph, tensor_bytes=sizes)


def parking_stage(attempt: Attempt, found: Found) -> Found:
    """The exact model with parking (warm-started from the heuristics' schedule, which parks nothing) until the end
    of the limit; its schedule, or the start where the model gave none or a dearer one."""
    options, plan = attempt.options, attempt.plan
    ran = run_model(attempt.problem, options.live_budget, options, plan, 1.0, found.start, attempt.progress,
                    "exact (with parking)", park=attempt.park) if plan.allows() else None
    if ran is not None and ran.outcome.status is RunStatus.FEASIBLE and not ran.outcome.timed_out \
            and found.start is not None and plan.allows():
        # ended short of a proof with time left: HiGHS, given a start, can return the start's values as its
        # answer (solver/model/backends.py, `_stale`); the model run again without it
        again = run_model(attempt.problem, options.live_budget, options, plan, 1.0, None, attempt.progress,
                          "exact (with parking), without the start", park=attempt.park)
        if again is not None and again.decisions is not None \
                and attempt.cost(again.decisions) + again.park_cost <= attempt.cost(ran.decisions) + ran.park_cost:
            ran = again
    timed_out = found.timed_out or ran is None or ran.outcome.timed_out
    if ran is not None and ran.infeasible and found.start is None:
        raise InfeasibleBudget(f"no schedule fits {options.budget} B on chip, even with activations parked off chip "
                               "(proven by the exact model)", "raise the budget")
    if ran is None or ran.decisions is None:
        if found.start is None:
            raise InfeasibleBudget(f"no schedule with parking was found for {options.budget} B in the time limit "
                                   "(not proven infeasible)", "give it more --time-limit, or raise the budget",
                                   proven=False)
        return replace(found, answer=Answer(found.start, replace(HEURISTIC, timed_out=timed_out)))
    if found.start is not None and attempt.cost(found.start) < attempt.cost(ran.decisions) + ran.park_cost:
        return replace(found, answer=Answer(found.start, replace(HEURISTIC, timed_out=timed_out)))
    return replace(found, answer=Answer(ran.decisions, replace(ran.outcome, timed_out=timed_out), ran.booked,
                                        ran.sizes, parked=ran.parked, park_cost=ran.park_cost))


def parking_start(attempt: Attempt, found: Found) -> Found:
    """The cheapest schedule without parking, as the exact model's start: the MILP method's own stages (heuristics,
    bound, repair, focused and exact model) in the first `UNPARKED_SHARE` of the limit (on a large graph they find in
    that time what the model with parking alone would not). Below the single-op floor none fits: the whole limit
    goes to the model with parking."""
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
