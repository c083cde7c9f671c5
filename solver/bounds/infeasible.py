"""The error of a budget no schedule was found for: proven or not, and the smallest budget that could work."""
from __future__ import annotations

from ckpt.errors import InfeasibleBudget
from ckpt.events import Progress, Step
from ckpt.solver.bounds.smallest import FeasibleRange, smallest_feasible_budget
from ckpt.solver.graph.baselines import Baselines
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.simulate import memory_trace, plain_sequence
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.model.time_plan import TimePlan


def infeasible_error(options: SolveOptions, base: Baselines, staged: TrainGraph, plan: TimePlan, progress: Progress,
                     timed_out: bool = False) -> InfeasibleBudget:
    """An error stating the smallest budget that could work: exact where the time left decides it."""
    if timed_out:
        return InfeasibleBudget(f"no schedule found within the time limit for budget {options.budget} B "
                                "(not proven infeasible)", "raise --time-limit or the budget", proven=False)
    if not options.explain:
        return InfeasibleBudget(f"no schedule fits {options.budget} B", "raise the budget")
    known = FeasibleRange(max(base.lower_bound, (options.budget or 0) + 1),
                          memory_trace(staged, plain_sequence(staged)).peak_bytes)
    if plan.allows():
        progress(Step("budget is infeasible: finding the smallest feasible budget"))
        known = smallest_feasible_budget(staged, known.low, plan.left(), options.backend.threads)
    # a proof holds for the stage order solved over: another order may fit less (solver/solve.py in_graph_order)
    if known.exact:
        floor = f"the smallest feasible budget is {known.low} B (proven over the stage order solved)"
    else:
        floor = f"the smallest feasible budget is between {known.low} and {known.high} B over the stage order solved"
    return InfeasibleBudget(f"no schedule fits {options.budget} B: {floor} "
                            f"(single-op lower bound {base.lower_bound} B)", f"raise the budget to {known.high} B",
                            floor=known.high, floor_exact=known.exact)
