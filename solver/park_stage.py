"""The stages of a solve that may park activations off chip (`solve(..., park=prices)`; solver/model/parking.py).

The relaxation's bound, the focused model and the single-op floor know nothing of parking (a parked activation can
make a schedule cheaper than the bound allows, and an op whose inputs are parked needs less of the chip than the
floor counts), so a parking solve runs the heuristics for a start (where one fits without parking) and then the exact
model with parking until the end of its limit; what it proves is HiGHS's own proof. `chip_graph` is the graph as the
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
from ckpt.solver.model.records import Answer
from ckpt.solver.stages import HEURISTIC, Attempt, Found, Stage, greedy_start


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
    """The heuristics' schedule as the exact model's start, where one can fit without parking: below the single-op
    floor none can, and the heuristics' share of the time goes to the exact model."""
    if attempt.options.budget is not None and attempt.options.budget < attempt.base.lower_bound:
        return found
    return greedy_start(attempt, found)


PARKING_STAGES: tuple[Stage, ...] = (parking_start, parking_stage)
