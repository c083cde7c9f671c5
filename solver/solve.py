"""solve(): a TrainGraph and a budget in, the cheapest recompute schedule that fits out.

Several solvers sit behind this one signature (`method`): the exact MILP (warm-started from the greedy
heuristic) and the greedy heuristic alone, so they can be swapped and compared in a benchmark.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace

from ckpt.errors import InfeasibleBudget
from ckpt.solver import milp
from ckpt.solver.backends import Outcome, SolverOptions, run
from ckpt.solver.baselines import Baselines, baselines, reorder
from ckpt.solver.bounds import Bound, lower_bound
from ckpt.solver.graph import TrainGraph
from ckpt.solver.greedy import greedy, holds_two_versions, polish
from ckpt.solver.problem import Problem
from ckpt.solver.schedule import Decisions, needed_retentions
from ckpt.solver.heap import heap_bytes
from ckpt.solver.simulate import Sequence, drop_dead, memory_trace

METHODS = ("milp", "greedy")
BOUND_SHARE = 0.8     # of the time limit for the relaxation: its bound is the proof, and its answer often the optimum
FOCUS_SHARE = 0.7     # of the time limit for the focused model, which finds good schedules far sooner
MINIMUM_SHARE = 0.25  # of the time limit for finding the smallest feasible peak after an infeasible budget
ORDERS = ("minmem", "graph")


@dataclass(frozen=True)
class SolveOptions:
    budget: int | None                     # bytes; None with objective "peak"
    objective: str = "cost"                # "cost": cheapest under budget; "peak": lowest peak under cost_cap
    cost_cap: int | None = None
    order: str = "minmem"                  # the stage order: min-memory list schedule or the graph's own
    method: str = "milp"
    backend: SolverOptions = field(default_factory=SolverOptions)
    focus: str = "seed"                    # "seed": a focused model seeds the exact one; "only": focused only; "off"
    explain: bool = True                   # on an infeasible budget, spend time finding the smallest feasible peak


@dataclass(frozen=True)
class SolveResult:
    seq: Sequence                          # what runs: the decisions' sequence less executions nobody reads
    decisions: Decisions                   # the MILP's recomputes (stage, op) over `stage_order`
    stage_order: tuple[str, ...]
    peak_bytes: int                        # replayed peak of `seq`: what the schedule really uses
    heap_bytes: int                        # first-fit L2 heap that serves `seq` (fragmentation included)
    booked_peak_bytes: int | None          # what the MILP booked for it (None when no MILP ran)
    baselines: Baselines
    persistent_bytes: int
    recomputes: int
    recompute_cost: int
    base_cost: int
    status: str
    gap: float | None
    seconds: float
    variables: int
    constraints: int
    variables_unpruned: int
    space: str = "stage-order"            # the schedules a proof is relative to (see README)

    @property
    def cost_lower_bound(self) -> int | None:
        """The best proven lower bound on the recompute cost (the relaxation's or the solver's), if any."""
        return None if self.gap is None else math.floor(self.recompute_cost * (1 - self.gap) + 1e-6)

    @property
    def cost_increase_pct(self) -> float:
        return 100.0 * self.recompute_cost / self.base_cost if self.base_cost else 0.0


def solve(graph: TrainGraph, options: SolveOptions, progress=lambda msg: None,
          incumbents: list[Sequence] | None = None) -> SolveResult:
    """The cheapest schedule under the budget (or the lowest peak under the cost cap). `incumbents`: schedules
    found before (say, at a tighter budget); the cheapest that fits is a start, and the answer if none is cheaper."""
    start = time.perf_counter()
    base = baselines(graph)
    order = list(base.min_memory_order) if options.order == "minmem" else [op.name for op in graph.ops]
    staged = reorder(graph, order)
    if options.budget is not None and options.budget < base.lower_bound:
        raise _infeasible(graph, options, base, staged, progress)
    free_run = Decisions(frozenset())
    plain_peak = base.min_memory_peak if options.order == "minmem" else base.graph_order_peak
    if options.objective == "cost" and plain_peak <= options.budget:
        return _result(staged, base, free_run, None, Outcome("optimal", 0.0, 0.0), start, (0, 0, 0))
    progress("greedy heuristic")
    # under a cost cap the plain order (no recompute, cost 0) is always a feasible start
    heuristic = greedy(staged, options.budget) if options.objective == "cost" else free_run
    if options.objective == "cost":
        heuristic = _cheaper(staged, heuristic, *_fitting(staged, incumbents or [], options.budget))
    if options.method == "greedy":
        if heuristic is None:
            raise InfeasibleBudget(f"the greedy heuristic found no schedule for {options.budget} B "
                                   "(not proven infeasible)", "use --method milp or raise the budget", proven=False)
        heuristic = polish(staged, heuristic, options.budget)
        return _result(staged, base, heuristic, None, Outcome("heuristic", None, 0.0), start, (0, 0, 0))
    return _solve_milp(staged, base, options, heuristic, start, progress)


def _solve_milp(staged: TrainGraph, base: Baselines, options: SolveOptions, heuristic: Decisions | None,
                start: float, progress) -> SolveResult:
    """Bound first, then the focused model and the exact one, each stopping once a schedule meets the bound."""
    budget = options.budget if options.objective == "cost" else None
    problem = Problem(staged, focus=options.focus == "only")
    floor = _floor(problem, options, heuristic, progress) if budget is not None else Bound(0.0, ())
    if math.isinf(floor.cost):
        raise _infeasible(staged, options, base, staged, progress)
    # The solver starts from the greedy schedule as it is (polished, it tends to trap HiGHS's heuristics),
    # or from the relaxation's where that is cheaper.
    relaxed = _from_relaxation(staged, floor, budget)
    polished = polish(staged, heuristic, budget) if heuristic is not None and budget is not None else heuristic
    polished, heuristic = _cheaper(staged, polished, relaxed), _cheaper(staged, heuristic, relaxed)
    if _meets_floor(staged, polished, floor, options):
        progress(f"a schedule meets the lower bound {floor.cost:.0f}: optimal")
        return _result(staged, base, polished, None, _bounded(Outcome("heuristic", None, 0.0),
                       _cost(staged, polished), floor.cost, options), start, (0, 0, 0))
    enough = _enough(floor.cost, options.backend.gap)
    heuristic, backend = _focused_seed(staged, options, heuristic, start, progress, enough)
    if _meets_floor(staged, heuristic, floor, options):
        progress(f"the focused model's schedule meets the lower bound {floor.cost:.0f}: optimal")
        return _result(staged, base, heuristic, None, _bounded(Outcome("feasible", None, 0.0),
                       _cost(staged, heuristic), floor.cost, options), start, (0, 0, 0))
    found = _run_model(problem, budget, options, backend, heuristic, progress, "exact", enough)
    if found is None or (found[0].status == "infeasible" and heuristic is not None):
        return _known_schedule(staged, base, options, found, heuristic, polished, floor, start, progress)
    outcome, chosen, booked, sizes = found
    if outcome.status == "infeasible":
        raise _infeasible(staged, options, base, staged, progress)
    if budget is not None:
        solver_bound = _cost(staged, chosen) * (1 - outcome.gap) if outcome.gap is not None else 0.0
        if outcome.status != "optimal":
            better = _cheaper(staged, polish(staged, chosen, budget), polished)
            chosen, booked = better, (booked if better == chosen else None)
        outcome = _bounded(outcome, _cost(staged, chosen), max(floor.cost, solver_bound), options)
    return _result(staged, base, chosen, booked, outcome, start, sizes)


def _known_schedule(staged: TrainGraph, base: Baselines, options: SolveOptions, found, heuristic: Decisions | None,
                    polished: Decisions | None, floor: Bound, start: float, progress) -> SolveResult:
    """The exact model gave nothing usable: return the best schedule already checked, or say none was found."""
    if heuristic is None:
        raise _infeasible(staged, options, base, staged, progress, timed_out=True)
    if found is not None:
        # A replay-checked schedule fits, so "infeasible" is the solver stopping early (CBC's preprocessing
        # says so when its time runs out): keep the known schedule rather than believe it.
        progress(f"{options.backend.name} reported infeasible although a checked schedule fits; keeping it")
    budget = options.budget if options.objective == "cost" else None
    best = _cheaper(staged, polish(staged, heuristic, budget) if budget is not None else heuristic, polished)
    outcome = _bounded(Outcome("heuristic", None, 0.0), _cost(staged, best), floor.cost, options)
    return _result(staged, base, best, None, outcome, start, found[3] if found else (0, 0, 0))


def _meets_floor(staged: TrainGraph, decisions: Decisions | None, floor: Bound, options: SolveOptions) -> bool:
    """A schedule within the gap tolerance of a proven floor needs no solver to call it optimal."""
    return (decisions is not None and options.objective == "cost" and floor.cost > 0
            and _gap(_cost(staged, decisions), floor.cost) <= options.backend.gap)


def _enough(floor: float, tolerance: float) -> float | None:
    """The cost at which a schedule is within the gap tolerance of the proven floor (None: no floor)."""
    return floor / (1 - tolerance) if 0 < floor and tolerance < 1 else None


def _focused_seed(staged: TrainGraph, options: SolveOptions, heuristic: Decisions | None, start: float,
                  progress, enough: float | None = None) -> tuple[Decisions | None, SolverOptions]:
    """Run the focused model on its share of the time; return the better start and the exact model's backend."""
    if options.focus != "seed" or options.objective != "cost":
        return heuristic, options.backend
    share = replace(options.backend, time_limit=_share(options.backend.time_limit, FOCUS_SHARE,
                                                       time.perf_counter() - start))
    seeded = _run_model(Problem(staged, focus=True), options.budget, options, share, heuristic, progress, "focused",
                        enough)
    if seeded is not None:
        heuristic = _cheaper(staged, heuristic, seeded[1])
    remaining = _share(options.backend.time_limit, 1.0, time.perf_counter() - start)
    return heuristic, replace(options.backend, time_limit=remaining)


def _floor(problem: Problem, options: SolveOptions, heuristic: Decisions | None, progress) -> Bound:
    """The relaxation's lower bound on the cost (solver/bounds.py), within its share of the time limit.
    It holds for every schedule over the stage order, so the focus setting of `problem` does not matter."""
    progress("lower bound: memory at the binding points")
    enough = _cost(problem.graph, heuristic) * (1 - options.backend.gap) if heuristic is not None else math.inf
    floor = lower_bound(problem, options.budget, _share(options.backend.time_limit, BOUND_SHARE), enough)
    progress(f"lower bound {floor.cost:.0f} cycles from {len(floor.points)} point(s)")
    return floor


def _gap(cost: int, bound: float) -> float:
    return 0.0 if cost <= bound or cost == 0 else (cost - bound) / cost


def _bounded(outcome: Outcome, cost: int, floor: float, options: SolveOptions) -> Outcome:
    """The verdict on a schedule of `cost` given the best proven bound `floor` (the relaxation's, or the
    solver's own): a gap within the tolerance is a proof of optimality whoever found the schedule."""
    if outcome.gap is None and floor <= 0:
        return outcome
    gap = _gap(cost, floor)
    return Outcome("optimal" if gap <= options.backend.gap else outcome.status, gap, outcome.seconds)


def _run_model(problem: Problem, budget: int | None, options: SolveOptions, backend: SolverOptions,
               start_from: Decisions | None, progress, label: str, stop_at: float | None = None):
    """Build and solve one model: (outcome, decisions, booked peak, sizes), or None if it found nothing."""
    staged = problem.graph
    model = milp.build(problem, budget, options.cost_cap)
    sizes = (len(model.lp.variables()), len(model.lp.constraints), unpruned_variables(problem))
    progress(f"{label} MILP: {sizes[0]} variables ({sizes[2]} before pruning), {sizes[1]} constraints, "
             f"{backend.time_limit:.0f} s limit" if backend.time_limit else f"{label} MILP: {sizes[0]} variables")
    warm = None
    if start_from is not None:
        warm = milp.start_values(model, set(start_from.recomputes),
                                 needed_retentions(staged, start_from.sequence(staged)))
    outcome = run(model.lp, backend, warm, stop_at)
    if outcome.status == "infeasible":
        return outcome, None, None, sizes
    if outcome.status == "no_solution":
        return None
    chosen = Decisions(frozenset(key for key, var in model.R.items() if var.value() > 0.5))
    booked = max(round(u.value()) for (t, k), u in model.U.items() if k == t or model.R[t, k].value() > 0.5)
    return outcome, chosen, booked, sizes


def _from_relaxation(staged: TrainGraph, floor: Bound, budget: int | None) -> Decisions | None:
    """The relaxation's schedule, or its near miss made to fit by the greedy heuristic; polished."""
    if budget is None:
        return None
    found = floor.schedule or (greedy(staged, budget, start=floor.sketch) if floor.sketch else None)
    return polish(staged, found, budget) if found is not None else None


def _fitting(staged: TrainGraph, sequences: list[Sequence], budget: int) -> list[Decisions]:
    """The given schedules that are schedules of this stage order and fit the budget, as decisions."""
    found = []
    for seq in sequences:
        decisions = Decisions.from_sequence(staged, seq)
        if decisions is not None and not holds_two_versions(staged, decisions) \
                and memory_trace(staged, decisions.sequence(staged)).peak_bytes <= budget:
            found.append(decisions)
    return found


def _cheaper(staged: TrainGraph, *candidates: Decisions | None) -> Decisions | None:
    """The cheapest of the schedules given (the first of equals), None if none is."""
    found = [c for c in candidates if c is not None]
    return min(found, key=lambda c: _cost(staged, c)) if found else None


def _share(limit: float | None, fraction: float, used: float = 0.0) -> float | None:
    return None if limit is None else max(1.0, fraction * limit - used)


def _cost(staged: TrainGraph, decisions: Decisions) -> int:
    return decisions.cost(staged)


def result_on(graph: TrainGraph, result: SolveResult, seq: Sequence) -> SolveResult:
    """`result` (solved on a model of `graph`, such as solver.resident's) with the figures `seq` has on `graph`."""
    return replace(result, seq=seq, peak_bytes=memory_trace(graph, seq).peak_bytes, heap_bytes=heap_bytes(graph, seq),
                   baselines=baselines(graph), persistent_bytes=graph.persistent_bytes,
                   base_cost=sum(graph.op_cost.values()),
                   stage_order=tuple(name for name in result.stage_order if name in graph.index))


def _result(staged: TrainGraph, base: Baselines, decisions: Decisions, booked: int | None, outcome: Outcome,
            start: float, sizes: tuple[int, int, int]) -> SolveResult:
    seq = drop_dead(staged, decisions.sequence(staged))  # Deeploy deletes runs nobody reads: so do we
    cost = _cost(staged, decisions)
    return SolveResult(
        seq=seq, decisions=decisions, stage_order=tuple(op.name for op in staged.ops),
        peak_bytes=memory_trace(staged, seq).peak_bytes, heap_bytes=heap_bytes(staged, seq),
        booked_peak_bytes=booked, baselines=base, persistent_bytes=staged.persistent_bytes,
        recomputes=len(decisions.recomputes), recompute_cost=cost, base_cost=sum(staged.op_cost.values()),
        status=outcome.status, gap=outcome.gap, seconds=time.perf_counter() - start,
        variables=sizes[0], constraints=sizes[1], variables_unpruned=sizes[2])


def unpruned_variables(problem: Problem) -> int:
    """Checkmate's count for the same graph without ckpt's provable reductions (R, S, FREE, U)."""
    n = problem.n
    edges = sum(len(problem.free_points(e)) for e in problem.buffers)
    return n * (n - 1) // 2 + n * len(problem.buffers + problem.pins) + n * edges + n * (n + 1) // 2


def _infeasible(graph: TrainGraph, options: SolveOptions, base: Baselines, staged: TrainGraph, progress,
                timed_out: bool = False) -> InfeasibleBudget:
    """An error stating the smallest budget that could work: the solver's proven minimum where it has one."""
    if timed_out:
        return InfeasibleBudget(f"no schedule found within the time limit for budget {options.budget} B "
                                "(not proven infeasible)", "raise --time-limit or the budget", proven=False)
    if not options.explain:
        return InfeasibleBudget(f"no schedule fits {options.budget} B", "raise the budget")
    progress("budget is infeasible: finding the smallest feasible peak")
    minimum, proven = minimum_peak(staged, replace(options.backend, time_limit=_share(
        options.backend.time_limit, MINIMUM_SHARE)))
    if proven:
        floor = f"the proven minimum peak is {minimum} B"
    else:
        # the budget itself is proven too small here, so the answer is above it whatever the solver reached
        least = max(base.lower_bound, minimum, (options.budget or 0) + 1)
        floor = f"the smallest feasible budget is at least {least} B"
    return InfeasibleBudget(f"no schedule fits {options.budget} B: {floor} "
                            f"(single-op lower bound {base.lower_bound} B)", "raise the budget")


def minimum_peak(staged: TrainGraph, backend: SolverOptions) -> tuple[int, bool]:
    """Lowest peak any schedule over this stage order reaches, and whether the solver proved it."""
    problem = Problem(staged)
    model = milp.build(problem, None)
    outcome = run(model.lp, backend)
    if outcome.status in ("optimal", "feasible"):
        bound = model.lp.solverModel.getInfo().mip_dual_bound if backend.name == "highs" else model.peak.value()
        return round(model.peak.value()) if outcome.status == "optimal" else int(bound), outcome.status == "optimal"
    return baselines(staged).lower_bound, False
