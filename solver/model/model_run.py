"""One MILP built and run by a deadline: the focused and the exact model go through here."""
from __future__ import annotations

from dataclasses import dataclass

import pulp

from ckpt.events import Progress, Step
from ckpt.solver.graph.schedule import Decisions, needed_retentions
from ckpt.solver.model import milp
from ckpt.solver.model.backends import Outcome, RunStatus, run
from ckpt.solver.model.parking import ParkPrices, chip_level, park_start_values, parked_retentions
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import Sizes, SolveOptions
from ckpt.solver.model.time_plan import HANDOVER_SECONDS_PER_VARIABLE, TimePlan


@dataclass(frozen=True)
class ModelRun:
    """What a model run gave: its outcome, and its schedule unless it proved the budget infeasible."""

    outcome: Outcome
    decisions: Decisions | None
    booked: int | None                     # the peak the model booked for its schedule
    sizes: Sizes
    parked: frozenset[str] = frozenset()   # with `park`: the activations it parked
    park_cost: int = 0                     # ... and the cycles they add

    @property
    def infeasible(self) -> bool:
        return self.outcome.status is RunStatus.INFEASIBLE


def run_model(problem: Problem, budget: int | None, options: SolveOptions, plan: TimePlan, until: float,
              start_from: Decisions | None, progress: Progress, label: str, stop_at: float | None = None,
              park: ParkPrices | None = None, start_parked: frozenset[str] = frozenset()) -> ModelRun | None:
    """Build and solve one model by the plan's `until` deadline (`stop_at`: a cost at which HiGHS may stop; `park`:
    the activations it may park off chip, solver/model/parking.py, and `start_parked` those the start parks); None if
    it found nothing, or could not be built and run in time."""
    try:
        model = milp.build(problem, budget, options.cost_cap, deadline=plan.at(until), park=park)
    except milp.BuildTimedOut:
        progress(Step(f"{label} MILP: not built in the time left"))
        return None
    sizes = Sizes(len(model.lp.variables()), len(model.lp.constraints), unpruned_variables(problem))
    if not plan.allows(until, overhead=sizes.variables * HANDOVER_SECONDS_PER_VARIABLE):
        progress(Step(f"{label} MILP: built, but too little time left to run it"))
        return None
    backend = plan.backend(options.backend, until)
    limit = f", {backend.time_limit:.1f} s left" if backend.time_limit is not None else ""
    progress(Step(f"{label} MILP: {sizes.variables} variables ({sizes.unpruned} before pruning), "
                  f"{sizes.constraints} constraints{limit}"))
    warm = None
    if start_from is not None:
        retained = needed_retentions(problem.graph, start_from.sequence(problem.graph))
        warm = milp.start_values(model, set(start_from.recomputes), retained | parked_retentions(problem, start_parked))
        if model.P:
            warm = park_start_values(model, warm, start_parked)
    outcome = run(model.lp, backend, warm, stop_at)
    if outcome.status is RunStatus.INFEASIBLE:
        return ModelRun(outcome, None, None, sizes)
    if not outcome.has_answer:
        return None
    chosen = Decisions(frozenset(key for key, var in model.R.items() if var.value() > 0.5))
    booked = max(round(chip_level(model.relief, t, k, u.value(), lambda v: v.value()))
                 for (t, k), u in model.U.items() if k == t or model.R[t, k].value() > 0.5)
    parked = frozenset(e for e, var in model.P.items() if var.value() > 0.5)
    park_cost = round(pulp.value(model.park_cost) or 0) if parked else 0
    return ModelRun(outcome, chosen, booked, sizes, parked, park_cost)


def unpruned_variables(problem: Problem) -> int:
    """Checkmate's count for the same graph without ckpt's provable reductions (R, S, FREE, U)."""
    n = problem.n
    edges = sum(len(problem.free_points(e)) for e in problem.buffers)
    return n * (n - 1) // 2 + n * len(problem.buffers + problem.pins) + n * edges + n * (n + 1) // 2
