"""solve(): a TrainGraph and a budget in, the cheapest recompute schedule that fits out.

Several solvers sit behind this one signature (`method`): the exact MILP (warm-started from the greedy
heuristic) and the greedy heuristic alone, so they can be swapped and compared in a benchmark.

The schedule space: a fixed stage order (a memory-minimising list order, or the graph's own; `order=search`
solves a local search's orders one by one, solver/order_search.py), any op recomputed in any later stage, one
version of a buffer at a time; views are re-made where they are read (solver.views), or, with `views=fixed`,
made once. A proof ("optimal", "infeasible") is relative to that space, and the result says which (`space`).

Time: `backend.time_limit` bounds the whole solve in wall-clock seconds (`TimePlan`). The greedy heuristic runs
until half of it (on large graphs its schedule may be all there is), the lower bound until 80%, the focused
model until 90%, the exact model until the end; when the models are too big to be built and run in the last
fifth (judged by their size, `_models_fit`), the bound runs until 90% instead and the rest goes to repairing
its answers. What a stage leaves goes to the next, and no stage starts with less than half a second left (a
model run: more, by its size, for the handover to HiGHS). Model builds stop at their stage's deadline; a HiGHS
run stops at its own, checked only now and then, so every deadline keeps a share of the limit in reserve for
that overrun (and a model run far past it, or still going at the limit, is killed: solver/watchdog.py).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from enum import StrEnum

from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.solver import milp, order_search
from ckpt.solver.backends import Outcome, RunStatus, SolverOptions, run
from ckpt.solver.baselines import Baselines, baselines, reorder
from ckpt.solver.bounds import Bound, as_cheap_as, lower_bound
from ckpt.solver.canonical import canonical
from ckpt.solver.graph import TrainGraph
from ckpt.solver.greedy import greedy, outside_space, polish
from ckpt.solver.heap import heap_bytes
from ckpt.solver.options import Focus, Method, Objective, StageOrder, Views
from ckpt.solver.problem import Problem
from ckpt.solver.schedule import Decisions, needed_retentions
from ckpt.solver.simulate import Sequence, check_in_place, drop_dead, memory_trace, plain_sequence
from ckpt.solver.smallest import FeasibleRange, smallest_feasible_budget
from ckpt.solver.views import Collapsed, collapsed, expanded, view_cost


class Status(StrEnum):
    """What is known of a returned schedule."""

    OPTIMAL = "optimal"        # within the gap tolerance of a proven lower bound
    FEASIBLE = "feasible"      # a solver's schedule, with a gap to the best bound
    HEURISTIC = "heuristic"    # a heuristic's schedule


GREEDY_UNTIL = 0.5       # the greedy heuristic (seconds on big graphs, where its schedule may be all there is)
BOUND_UNTIL = 0.8        # the relaxation: its bound is the proof, and its answer often the optimum
BOUND_ALONE_UNTIL = 0.9  # ... when the models could not be built and run in the time after it: the rest is repair
FOCUS_UNTIL = 0.9        # the focused model, which finds good schedules far sooner than the exact one
MIN_STAGE_SECONDS = 0.5  # a stage with less time left than this does not start
HANDOVER_SECONDS_PER_VARIABLE = 4e-5   # handing a built model to HiGHS and reading its answer back
RESERVE_SHARE = 0.05     # kept back from every deadline: a HiGHS run checks its time limit only now and then
BUILD_SECONDS_PER_RECOMPUTE = 6e-4   # building the exact model, per recompute variable (generated CNN and CCTs)


@dataclass(frozen=True)
class SolveOptions:
    budget: int | None                     # bytes; None with objective "peak"
    objective: Objective = Objective.COST
    cost_cap: int | None = None
    order: StageOrder = StageOrder.MINMEM
    method: Method = Method.MILP
    backend: SolverOptions = field(default_factory=SolverOptions)
    focus: Focus = Focus.SEED
    views: Views = Views.REMADE
    explain: bool = True                   # on an infeasible budget, spend what is left finding the smallest peak

    def __post_init__(self) -> None:       # the enums accept their values as plain strings (the CLI's, JSON's)
        for name, kind in (("objective", Objective), ("order", StageOrder), ("method", Method), ("focus", Focus),
                           ("views", Views)):
            object.__setattr__(self, name, kind(getattr(self, name)))


@dataclass(frozen=True)
class TimePlan:
    """Wall-clock deadlines of one solve (see the module doc)."""

    start: float
    limit: float | None

    def left(self, until: float = 1.0) -> float | None:
        """Seconds left until `until` of the limit (None: no limit)."""
        deadline = self.at(until)
        return None if deadline is None else max(0.0, deadline - time.perf_counter())

    def allows(self, until: float = 1.0, overhead: float = 0.0) -> bool:
        """Whether a stage that needs `overhead` seconds before it does any work can still start."""
        left = self.left(until)
        return left is None or left >= MIN_STAGE_SECONDS + overhead

    def at(self, until: float = 1.0) -> float | None:
        """The time.perf_counter() of that deadline (None: no limit)."""
        return None if self.limit is None else self.start + until * (1 - RESERVE_SHARE) * self.limit

    def backend(self, options: SolverOptions, until: float = 1.0) -> SolverOptions:
        """Options for a run that stops by `until`, and is killed at the limit if it overruns that far."""
        ends_by = None if self.limit is None else self.start + self.limit
        return replace(options, time_limit=self.left(until), ends_by=ends_by)


@dataclass(frozen=True)
class SolveResult:
    seq: Sequence                          # what runs: the decisions' sequence less executions nobody reads
    decisions: Decisions                   # the recomputes (stage, op) over `stage_order` (views taken out)
    stage_order: tuple[str, ...]
    peak_bytes: int                        # replayed peak of `seq`: what the schedule really uses
    heap_bytes: int                        # first-fit L2 heap that serves `seq` (fragmentation included)
    booked_peak_bytes: int | None          # what the MILP booked for it (None when no MILP ran)
    baselines: Baselines
    persistent_bytes: int
    recomputes: int                        # recompute executions in `seq` (a re-made view is one, for free)
    recompute_cost: int                    # cycles the recomputes of `seq` add: what runs
    planned_cost: int                      # cycles of `decisions` over `stage_order`: what status, gap and the
                                           # lower bound are about (what runs can cost less: see _result)
    base_cost: int
    status: Status
    gap: float | None
    seconds: float
    variables: int
    constraints: int
    variables_unpruned: int
    space: str = ""                        # the schedules a proof is relative to
    timed_out: bool = False                # a solver run ended on its time limit: another load may answer otherwise

    @property
    def cost_lower_bound(self) -> int | None:
        """The best proven lower bound on the planned cost (the relaxation's or the solver's), if any: no
        schedule of the space costs less."""
        return None if self.gap is None else math.floor(self.planned_cost * (1 - self.gap) + 1e-6)

    @property
    def cost_increase_pct(self) -> float:
        return 100.0 * self.recompute_cost / self.base_cost if self.base_cost else 0.0


def space_of(options: SolveOptions) -> str:
    return f"stage order {options.order.value}, views {options.views.value}, one version of a buffer at a time"


def solve(graph: TrainGraph, options: SolveOptions, progress=lambda msg: None,
          incumbents: list[Sequence] | None = None) -> SolveResult:
    """The cheapest schedule under the budget (or the lowest peak under the cost cap). `incumbents`: schedules
    found before (say, at a tighter budget); the cheapest that fits is a start, and the answer if none is cheaper."""
    plan = TimePlan(time.perf_counter(), options.backend.time_limit)
    if options.views is Views.FIXED:
        return _solve(graph, options, plan, progress, incumbents or [])
    views = collapsed(graph)
    if not views.view_ops:
        return _solve(graph, options, plan, progress, incumbents or [])
    names = {graph.ops[i].name for i in views.view_ops}
    starts = [[(n, f) for n, f in seq if n not in names] for seq in incumbents or []]
    return _expanded_result(graph, views, _solve(views.without_views, options, plan, progress, starts))


def _expanded_result(graph: TrainGraph, views: Collapsed, result: SolveResult) -> SolveResult:
    """A result on the graph without views as a result on the real one: views written back where they are read."""
    seq = expanded(views, result.seq)
    check_in_place(graph, seq)
    return replace(result, seq=seq, peak_bytes=memory_trace(graph, seq).peak_bytes, heap_bytes=heap_bytes(graph, seq),
                   baselines=baselines(graph), persistent_bytes=graph.persistent_bytes,
                   recomputes=sum(flag for _, flag in seq), recompute_cost=view_cost(graph, seq, views),
                   base_cost=sum(graph.op_cost.values()))


def result_on(graph: TrainGraph, result: SolveResult, seq: Sequence) -> SolveResult:
    """`result` (solved on a model of `graph`, such as solver.resident's) with the figures `seq` has on `graph`."""
    return replace(result, seq=seq, peak_bytes=memory_trace(graph, seq).peak_bytes, heap_bytes=heap_bytes(graph, seq),
                   baselines=baselines(graph), persistent_bytes=graph.persistent_bytes,
                   base_cost=sum(graph.op_cost.values()),
                   stage_order=tuple(name for name in result.stage_order if name in graph.index))


def _solve(graph: TrainGraph, options: SolveOptions, plan: TimePlan, progress, incumbents: list[Sequence]
           ) -> SolveResult:
    if options.order is StageOrder.SEARCH:
        return _searched(graph, options, plan, progress, incumbents)
    base = baselines(graph)
    order = list(base.min_memory_order) if options.order is StageOrder.MINMEM else [op.name for op in graph.ops]
    return _solve_over(graph, order, options, plan, progress, incumbents)


def _searched(graph: TrainGraph, options: SolveOptions, plan: TimePlan, progress, incumbents: list[Sequence]
              ) -> SolveResult:
    """`--order search` (solver/order_search.py): each order it tries solved as any other, on the plan's time."""
    if options.objective is not Objective.COST or options.budget is None:
        raise CkptError("--order search looks for the cheapest schedule under a budget",
                        "use --objective cost, or --order minmem with --objective peak")
    base = baselines(graph)
    if options.budget < base.lower_bound:      # below what one op needs, whatever the order
        raise _infeasible(options, base, graph, plan, progress)
    quiet = replace(options, explain=False)    # an order without a schedule is a step of the search, not an answer

    def exact(order: list[str], seconds: float | None) -> SolveResult:
        return _solve_over(graph, order, quiet, TimePlan(time.perf_counter(), seconds), lambda msg: None,
                           incumbents)

    found = order_search.search(graph, options.budget, list(base.min_memory_order), exact,
                                lambda r: r.recompute_cost, plan.left(), progress)
    if found.result is None:
        raise InfeasibleBudget(f"no schedule fits {options.budget} B over the {found.solved} stage order(s) the "
                               "search solved (not proven for other orders)", "raise the budget", proven=False)
    return replace(found.result, seconds=time.perf_counter() - plan.start,
                   space=f"stage order found by a local search from minmem ({found.solved} orders solved; a proof "
                         f"holds for that order), views {options.views.value}, one version of a buffer at a time")


def _solve_over(graph: TrainGraph, order: list[str], options: SolveOptions, plan: TimePlan, progress,
                incumbents: list[Sequence]) -> SolveResult:
    base = baselines(graph)
    staged = reorder(graph, order)
    if options.budget is not None and options.budget < base.lower_bound:
        raise _infeasible(options, base, staged, plan, progress)
    free_run = Decisions(frozenset())
    plain_peak = memory_trace(staged, plain_sequence(staged)).peak_bytes
    if options.objective is Objective.COST and plain_peak <= options.budget:
        return _result(staged, base, free_run, None, Outcome(RunStatus.OPTIMAL, 0.0, 0.0), plan, (0, 0, 0), options)
    progress("greedy heuristic")
    # under a cost cap the plain order (no recompute, cost 0) is always a feasible start
    heuristic = greedy(staged, options.budget, deadline=plan.at(GREEDY_UNTIL)) \
        if options.objective is Objective.COST else free_run
    if options.objective is Objective.COST:
        heuristic = _cheaper(staged, heuristic, *_fitting(staged, incumbents, options.budget))
        if heuristic is not None:
            progress(f"incumbent {_cost(staged, heuristic)} cycles (greedy)")
    if options.method is Method.GREEDY:
        if heuristic is None:
            raise InfeasibleBudget(f"the greedy heuristic found no schedule for {options.budget} B "
                                   "(not proven infeasible)", "use --method milp or raise the budget", proven=False)
        heuristic = polish(staged, heuristic, options.budget, plan.at())
        return _result(staged, base, heuristic, None, _heuristic(), plan, (0, 0, 0), options)
    return _solve_milp(staged, base, options, heuristic, plan, progress)


def _heuristic() -> Outcome:
    return Outcome(RunStatus.FEASIBLE, None, 0.0)


def _solve_milp(staged: TrainGraph, base: Baselines, options: SolveOptions, heuristic: Decisions | None,
                plan: TimePlan, progress) -> SolveResult:
    """Bound first, then the focused model and the exact one, each stopping once a schedule meets the bound."""
    budget = options.budget if options.objective is Objective.COST else None
    problem = Problem(staged, focus=options.focus is Focus.ONLY)
    models = budget is None or _models_fit(problem, plan)
    floor = _floor(problem, options, heuristic, plan, progress, BOUND_UNTIL if models else BOUND_ALONE_UNTIL) \
        if budget is not None else Bound(0.0, ())
    if math.isinf(floor.cost):
        raise _infeasible(options, base, staged, plan, progress)
    # The solver starts from the greedy schedule as it is (polished, it tends to trap HiGHS's heuristics),
    # or from the relaxation's where that is cheaper.
    # Polished first: it is quick, and the repair of the relaxation's near miss may take all the time left.
    polished = polish(staged, heuristic, budget, plan.at()) if heuristic is not None and budget is not None \
        else heuristic
    relaxed = _from_relaxation(staged, floor, budget, plan.at())
    polished, heuristic = _cheaper(staged, polished, relaxed), _cheaper(staged, heuristic, relaxed)
    if polished is not None and budget is not None:
        progress(f"incumbent {_cost(staged, polished)} cycles (relaxation and polish)")
    if _meets_floor(staged, polished, floor, options):
        progress(f"a schedule meets the lower bound {floor.cost:.0f}: optimal")
        return _result(staged, base, polished, None, _bounded(_heuristic(), _cost(staged, polished), floor.cost,
                                                              options), plan, (0, 0, 0), options)
    if not models:
        progress("models: too big to build and run in the time left, the bound had it")
        return _known_schedule(staged, base, options, None, heuristic, polished, floor, plan, progress, timed_out=True)
    target = _cost_meeting_floor(floor.cost, options.backend.gap)
    heuristic, timed_out = _focused_seed(staged, options, heuristic, plan, progress, target)
    if _meets_floor(staged, heuristic, floor, options):
        progress(f"the focused model's schedule meets the lower bound {floor.cost:.0f}: optimal")
        return _result(staged, base, heuristic, None, _bounded(_heuristic(), _cost(staged, heuristic), floor.cost,
                                                               options), plan, (0, 0, 0), options)
    found = _run_model(problem, budget, options, plan, 1.0, heuristic, progress, "exact", target) \
        if plan.allows() else None
    timed_out = timed_out or found is None or found[0].timed_out
    if found is None or (found[0].status is RunStatus.INFEASIBLE and heuristic is not None):
        return _known_schedule(staged, base, options, found, heuristic, polished, floor, plan, progress, timed_out)
    outcome, chosen, booked, sizes = found
    if outcome.status is RunStatus.INFEASIBLE:
        raise _infeasible(options, base, staged, plan, progress)
    if budget is not None:
        solver_bound = _cost(staged, chosen) * (1 - outcome.gap) if outcome.gap is not None else 0.0
        if outcome.status is not RunStatus.OPTIMAL:
            better = _cheaper(staged, polish(staged, chosen, budget, plan.at()), polished)
            chosen, booked = better, (booked if better == chosen else None)
        outcome = _bounded(outcome, _cost(staged, chosen), max(floor.cost, solver_bound), options)
    return _result(staged, base, chosen, booked, replace(outcome, timed_out=timed_out), plan, sizes, options)


def _known_schedule(staged: TrainGraph, base: Baselines, options: SolveOptions, found, heuristic: Decisions | None,
                    polished: Decisions | None, floor: Bound, plan: TimePlan, progress, timed_out: bool
                    ) -> SolveResult:
    """The exact model gave nothing usable: return the best schedule already checked, or say none was found."""
    if heuristic is None:
        raise _infeasible(options, base, staged, plan, progress, timed_out=True)
    if found is not None and found[0].status is RunStatus.INFEASIBLE:
        # A replay-checked schedule fits, so "infeasible" is the solver stopping early (CBC's preprocessing
        # says so when its time runs out): keep the known schedule rather than believe it.
        progress(f"{options.backend.backend.value} reported infeasible although a checked schedule fits; keeping it")
    budget = options.budget if options.objective is Objective.COST else None
    best = _cheaper(staged, polish(staged, heuristic, budget, plan.at()) if budget is not None else heuristic, polished)
    outcome = replace(_bounded(_heuristic(), _cost(staged, best), floor.cost, options), timed_out=timed_out)
    return _result(staged, base, best, None, outcome, plan, found[3] if found else (0, 0, 0), options)


def _meets_floor(staged: TrainGraph, decisions: Decisions | None, floor: Bound, options: SolveOptions) -> bool:
    """A schedule within the gap tolerance of a proven floor needs no solver to call it optimal."""
    return (decisions is not None and options.objective is Objective.COST and floor.cost > 0
            and _gap(_cost(staged, decisions), floor.cost) <= options.backend.gap)


def _cost_meeting_floor(floor: float, tolerance: float) -> float | None:
    """The cost at which a schedule is within the gap tolerance of the proven floor (None: no floor)."""
    return floor / (1 - tolerance) if 0 < floor and tolerance < 1 else None


def _focused_seed(staged: TrainGraph, options: SolveOptions, heuristic: Decisions | None, plan: TimePlan,
                  progress, target: float | None = None) -> tuple[Decisions | None, bool]:
    """Run the focused model until its deadline; return the better start, and whether it ran out of time."""
    if options.focus is not Focus.SEED or options.objective is not Objective.COST or not plan.allows(FOCUS_UNTIL):
        return heuristic, False
    seeded = _run_model(Problem(staged, focus=True), options.budget, options, plan, FOCUS_UNTIL, heuristic,
                        progress, "focused", target)
    if seeded is not None:
        heuristic = _cheaper(staged, heuristic, seeded[1])
        if heuristic is not None:
            progress(f"incumbent {_cost(staged, heuristic)} cycles (focused MILP)")
    return heuristic, seeded is None or seeded[0].timed_out


def _models_fit(problem: Problem, plan: TimePlan) -> bool:
    """Whether the focused and exact models can be built, and run about as long, in the share of the limit
    the bound leaves them. On big graphs the build alone takes longer: that share then goes to the bound. An
    estimate from the model's size, not a clock, so the same inputs take the same path under any load."""
    if plan.limit is None:
        return True
    recomputes = sum(len(problem.recompute_stages(i)) for i in range(problem.n))
    share = (1 - BOUND_UNTIL) * (1 - RESERVE_SHARE) * plan.limit
    return 2 * recomputes * BUILD_SECONDS_PER_RECOMPUTE <= share


def _floor(problem: Problem, options: SolveOptions, heuristic: Decisions | None, plan: TimePlan, progress,
           until: float = BOUND_UNTIL) -> Bound:
    """The relaxation's lower bound on the cost (solver/bounds.py), until its deadline. It holds for every
    schedule over the stage order, so the focus setting of `problem` does not matter."""
    progress("lower bound: memory at the binding points")
    known = _cost(problem.graph, heuristic) * (1 - options.backend.gap) if heuristic is not None else math.inf
    floor = lower_bound(problem, options.budget, plan.left(until), known, threads=options.backend.threads,
                        progress=progress)
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
    return replace(outcome, status=RunStatus.OPTIMAL if gap <= options.backend.gap else outcome.status, gap=gap)


def _run_model(problem: Problem, budget: int | None, options: SolveOptions, plan: TimePlan, until: float,
               start_from: Decisions | None, progress, label: str, stop_at: float | None = None):
    """Build and solve one model by the plan's `until` deadline: (outcome, decisions, booked peak, sizes), or
    None if it found nothing (or could not be built and run in time)."""
    staged = problem.graph
    try:
        model = milp.build(problem, budget, options.cost_cap, deadline=plan.at(until))
    except milp.BuildTimedOut:
        progress(f"{label} MILP: not built in the time left")
        return None
    sizes = (len(model.lp.variables()), len(model.lp.constraints), unpruned_variables(problem))
    if not plan.allows(until, overhead=sizes[0] * HANDOVER_SECONDS_PER_VARIABLE):
        progress(f"{label} MILP: built, but too little time left to run it")
        return None
    backend = plan.backend(options.backend, until)
    limit = f", {backend.time_limit:.1f} s left" if backend.time_limit is not None else ""
    progress(f"{label} MILP: {sizes[0]} variables ({sizes[2]} before pruning), {sizes[1]} constraints{limit}")
    warm = None
    if start_from is not None:
        warm = milp.start_values(model, set(start_from.recomputes),
                                 needed_retentions(staged, start_from.sequence(staged)))
    outcome = run(model.lp, backend, warm, stop_at)
    if outcome.status is RunStatus.INFEASIBLE:
        return outcome, None, None, sizes
    if not outcome.has_answer:
        return None
    chosen = Decisions(frozenset(key for key, var in model.R.items() if var.value() > 0.5))
    booked = max(round(u.value()) for (t, k), u in model.U.items() if k == t or model.R[t, k].value() > 0.5)
    return outcome, chosen, booked, sizes


def _from_relaxation(staged: TrainGraph, floor: Bound, budget: int | None, deadline: float | None
                     ) -> Decisions | None:
    """The cheapest of the relaxation's schedule (its answers made to fit by rule or by walking) and of its
    near misses made to fit by the greedy heuristic by `deadline` (newest first: the last answers saw the
    most points; the older ones are a fallback, since a repair can fail on one and succeed on another); polished.
    A schedule that meets the bound needs no repairs."""
    if budget is None:
        return None
    found = floor.schedule
    met = found is not None and _cost(staged, found) <= as_cheap_as(floor.cost)
    for n, sketch in enumerate(reversed(floor.sketches if not met else ())):
        if n and deadline is not None and time.perf_counter() + MIN_STAGE_SECONDS >= deadline:
            break     # the newest is always tried (as the only one once was); the others while time is left
        found = _cheaper(staged, found, greedy(staged, budget, start=sketch, deadline=deadline))
    return polish(staged, found, budget, deadline) if found is not None else None


def _fitting(staged: TrainGraph, sequences: list[Sequence], budget: int) -> list[Decisions]:
    """The given schedules that are schedules of this stage order and fit the budget, as decisions."""
    found = []
    for seq in sequences:
        decisions = Decisions.from_sequence(staged, seq)
        if decisions is not None and not outside_space(staged, decisions) \
                and memory_trace(staged, decisions.sequence(staged)).peak_bytes <= budget:
            found.append(decisions)
    return found


def _cheaper(staged: TrainGraph, *candidates: Decisions | None) -> Decisions | None:
    """The cheapest of the schedules given (the first of equals), None if none is."""
    found = [c for c in candidates if c is not None]
    return min(found, key=lambda c: _cost(staged, c)) if found else None


def _cost(staged: TrainGraph, decisions: Decisions) -> int:
    return decisions.cost(staged)


def _status(outcome: Outcome, tolerance: float) -> Status:
    if outcome.status is RunStatus.OPTIMAL or (outcome.gap is not None and outcome.gap <= tolerance):
        return Status.OPTIMAL
    return Status.FEASIBLE if outcome.gap is not None else Status.HEURISTIC


def _result(staged: TrainGraph, base: Baselines, decisions: Decisions, booked: int | None, outcome: Outcome,
            plan: TimePlan, sizes: tuple[int, int, int], options: SolveOptions) -> SolveResult:
    if options.objective is Objective.COST and decisions.recomputes:
        decisions = canonical(staged, decisions, options.budget)   # one schedule per set of tied choices
    seq = drop_dead(staged, decisions.sequence(staged))  # Deeploy deletes runs nobody reads: so do we
    check_in_place(staged, seq)
    # What runs can cost less than the decisions: where an op's first run is read by nobody, its recompute only
    # moves it later, a schedule of another stage order. The proof (status, gap, bound) is about the planned
    # cost over this order; what runs may be cheaper still, and nothing is proven of that saving.
    planned, cost = _cost(staged, decisions), sum(staged.op_cost[name] for name, flag in seq if flag)
    return SolveResult(
        seq=seq, decisions=decisions, stage_order=tuple(op.name for op in staged.ops),
        peak_bytes=memory_trace(staged, seq).peak_bytes, heap_bytes=heap_bytes(staged, seq),
        booked_peak_bytes=booked, baselines=base, persistent_bytes=staged.persistent_bytes,
        recomputes=sum(flag for _, flag in seq), recompute_cost=cost, planned_cost=planned,
        base_cost=sum(staged.op_cost.values()), status=_status(outcome, options.backend.gap), gap=outcome.gap,
        seconds=time.perf_counter() - plan.start, variables=sizes[0], constraints=sizes[1],
        variables_unpruned=sizes[2], space=space_of(options), timed_out=outcome.timed_out)


def unpruned_variables(problem: Problem) -> int:
    """Checkmate's count for the same graph without ckpt's provable reductions (R, S, FREE, U)."""
    n = problem.n
    edges = sum(len(problem.free_points(e)) for e in problem.buffers)
    return n * (n - 1) // 2 + n * len(problem.buffers + problem.pins) + n * edges + n * (n + 1) // 2


def _infeasible(options: SolveOptions, base: Baselines, staged: TrainGraph, plan: TimePlan, progress,
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
        progress("budget is infeasible: finding the smallest feasible budget")
        known = smallest_feasible_budget(staged, known.low, plan.left(), options.backend.threads)
    if known.exact:
        floor = f"the smallest feasible budget is {known.low} B (proven)"
    else:
        floor = f"the smallest feasible budget is between {known.low} and {known.high} B"
    return InfeasibleBudget(f"no schedule fits {options.budget} B: {floor} "
                            f"(single-op lower bound {base.lower_bound} B)", f"raise the budget to {known.high} B",
                            floor=known.high)


def minimum_peak(staged: TrainGraph, backend: SolverOptions) -> tuple[int, bool]:
    """Lowest peak any schedule over this stage order reaches, and whether the solver proved it (else a proven
    lower bound on it)."""
    model = milp.build(Problem(staged), None)
    outcome = run(model.lp, backend)
    if outcome.status is RunStatus.OPTIMAL:
        return round(model.peak.value()), True
    if outcome.has_answer:
        return max(int(outcome.dual_bound), baselines(staged).lower_bound), False
    return baselines(staged).lower_bound, False
