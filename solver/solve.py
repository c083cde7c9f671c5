"""solve(): a TrainGraph and a budget in, the cheapest recompute schedule that fits out.

Several solvers sit behind this one signature (`method`): the exact MILP (warm-started from the heuristics'
schedule: the greedy's, else the eviction walk's) and the heuristics alone. Each is a tuple of stages with one
signature (solver/stages.py), so a benchmark can run any of them, or a prefix of one (`stages=`).

The schedule space: a fixed stage order (a memory-minimising list order, or the graph's own; `order=search`
solves a local search's orders one by one, solver/order_search.py), any op recomputed in any later stage, one
version of a buffer at a time; views are re-made where they are read (solver.views), or, with `views=fixed`,
made once. A proof ("optimal", "infeasible") is relative to that space, and the result says which (`space`).
Where the min-memory order ends with neither a schedule nor a proof, the eviction walk over the graph's own
order gives one (`in_graph_order`): a heuristic schedule of that order, and its space says so.

Time: `backend.time_limit` bounds the whole solve in seconds of `backend.clock` (`TimePlan`; wall-clock seconds by
default, or the solve's CPU seconds: solver/model/clock.py). The heuristics run
until half of it (on large graphs its schedule may be all there is), the lower bound until 80%, the focused
model until 90%, the exact model until the end; when the models are too big to be built, handed to HiGHS and
run at all in the last fifth (judged by their size, `time_plan.models_fit`), a local search improves the greedy's
schedule until 15% (solver/realise/search.py: it stops sooner once it stalls), the bound runs until 85%, then the
repair of its answers and the local search again, from the best schedule known, until 95%. What a stage leaves
goes to the next, and no stage starts with less than half a second left (a model run: more, by its size, for the
handover to HiGHS). Model builds stop at their stage's deadline; a HiGHS run stops at its own, checked only now
and then, so every deadline keeps a share of the limit in reserve for that overrun (and a model run far past it,
or still going at the limit, is killed: solver/model/watchdog.py).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.events import Progress, Step, ignore
from ckpt.solver import order_search
from ckpt.solver.bounds.infeasible import infeasible_error
from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import RunSequence, memory_trace, plain_sequence
from ckpt.solver.graph.views import collapsed
from ckpt.solver.model import clock
from ckpt.solver.model.backends import Outcome, RunStatus
from ckpt.solver.model.options import Objective, StageOrder, Views
from ckpt.solver.model.parking import ParkPrices
from ckpt.solver.model.records import Answer, SolveOptions, SolveResult
from ckpt.solver.model.time_plan import TimePlan
from ckpt.solver.park_stage import PARKING_STAGES, chip_graph
from ckpt.solver.realise.evicting import evicting
from ckpt.solver.realise.greedy import polish
from ckpt.solver.realise.result import expanded_result, result_of
from ckpt.solver.stages import HEURISTIC, STAGES, Attempt, Found, Stage


def solve(graph: TrainGraph, options: SolveOptions, progress: Progress = ignore,
          incumbents: list[RunSequence] | None = None, stages: tuple[Stage, ...] | None = None,
          order: Sequence[str] | None = None, park: ParkPrices | None = None) -> SolveResult:
    """The cheapest schedule under the budget (or the lowest peak under the cost cap). `incumbents`: schedules
    found before (say, at a tighter budget); the cheapest that fits is a start, and the answer if none is cheaper.
    `stages`: the stages to run instead of the method's (a benchmark's choice). `order`: op names in the stage
    order to solve over instead of the one `options.order` makes of `graph` (names of ops the solve does not
    stage, such as re-made views, are passed over): a model of another graph is solved in that graph's order
    (solver.resident), so a proof on it is over the same schedules; `--order search` starts from it. `park`: the
    activations that may be parked off chip and what parking each costs (solver/model/parking.py; the exact model
    decides, solver/park_stage.py); None parks nothing."""
    if park is not None:
        _check_parking(options)
    with clock.reading(options.backend.clock):
        plan = TimePlan(clock.now(), options.backend.time_limit)
        run = _Run(options, plan, progress, stages or (PARKING_STAGES if park is not None else STAGES[options.method]),
                   order, park)
        if options.views is Views.FIXED:
            return run.solve(graph, incumbents or [])
        views = collapsed(graph)
        if not views.view_ops:
            return run.solve(graph, incumbents or [])
        names = {graph.ops[i].name for i in views.view_ops}
        starts = [[(n, f) for n, f in seq if n not in names] for seq in incumbents or []]
        result = run.solve(views.without_views, starts)
        if not result.parked:
            return expanded_result(graph, views, result)
        return replace(expanded_result(chip_graph(graph, result.parked), views, result), baselines=baselines(graph))


def _check_parking(options: SolveOptions) -> None:
    """Parking is decided by the exact model under a live budget over one stage order."""
    if options.objective is not Objective.COST or options.budget is None:
        raise CkptError("parking activations off chip is chosen for the cheapest schedule under a budget",
                        "give a budget (--objective cost), or drop --park")
    if options.order is StageOrder.SEARCH:
        raise CkptError("parking activations off chip is solved over one stage order",
                        "use --order minmem or --order graph with --park")


def stage_order(graph: TrainGraph, options: SolveOptions) -> list[str]:
    """The op names solve() stages `graph` in under `options` (without the views it re-makes; `--order search`:
    the order the search starts from)."""
    staged = graph if options.views is Views.FIXED else collapsed(graph).without_views
    return _own_order(staged, options.order)


def _own_order(graph: TrainGraph, order: StageOrder) -> list[str]:
    if order is StageOrder.GRAPH:
        return [op.name for op in graph.ops]
    return list(baselines(graph).min_memory_order)


class _Run:
    """One call of solve(): its options, time plan, listener and stages, over one stage order or several."""

    def __init__(self, options: SolveOptions, plan: TimePlan, progress: Progress, stages: tuple[Stage, ...],
                 order: Sequence[str] | None = None, park: ParkPrices | None = None):
        self.options, self.plan, self.progress, self.stages = options, plan, progress, stages
        self.order, self.park = order, park

    def solve(self, graph: TrainGraph, incumbents: list[RunSequence]) -> SolveResult:
        if self.options.order is StageOrder.SEARCH:
            return self.searched(graph, incumbents)
        try:
            return self.over(graph, self.first_order(graph), incumbents)
        except InfeasibleBudget as err:
            found = self.in_graph_order(graph, proven=err.proven)
            if found is None:
                raise
            return found

    def in_graph_order(self, graph: TrainGraph, proven: bool = False) -> SolveResult | None:
        """A schedule over the graph's own order, where the min-memory order ended with none (`proven`: none
        exists over that order). The list schedule can leave an op late (MobileNetV1's last weight gradient at
        the end of the step), so that a buffer it reads lives across the heaviest backward stages, where near the
        floor the heuristics find no room for it; the graph's order runs that op next to its input. A proof over
        one order says nothing of another, so a proven refusal is only given where this walk is stuck too. The
        eviction walk (milliseconds), polished until the limit: a heuristic schedule, nothing proven of it, and
        its space names the order. Not where the caller chose the order, or parks activations (parking is solved
        over one order)."""
        options = self.options
        if self.order is not None or options.order is not StageOrder.MINMEM or self.park is not None \
                or options.live_budget is None:
            return None
        walked = evicting(graph, options.live_budget)
        if walked is None:
            return None
        self.progress(Step("no schedule found over the min-memory order; the eviction walk over the graph order "
                           f"found one ({walked.cost(graph)} cycles)"))
        polished = polish(graph, walked, options.live_budget, self.plan.at())
        result = result_of(graph, baselines(graph), Answer(polished, HEURISTIC), self.plan, options)
        over_minmem = "none fits over the min-memory order (proven)" if proven else \
            "none found over the min-memory order"
        return replace(result, space=f"stage order graph ({over_minmem}), views "
                                     f"{options.views.value}, one version of a buffer at a time")

    def first_order(self, graph: TrainGraph) -> list[str]:
        """The order given to solve(), else the one the options make of `graph`."""
        if self.order is None:
            return _own_order(graph, self.options.order)
        names = [name for name in self.order if name in graph.index]
        if len(names) != len(graph.ops):
            missing = next(op.name for op in graph.ops if op.name not in set(names))
            raise CkptError(f"the stage order given leaves out op '{missing}'", "give an order of every op staged")
        return names

    def searched(self, graph: TrainGraph, incumbents: list[RunSequence]) -> SolveResult:
        """`--order search` (solver/order_search.py): each order it tries solved as any other, on the plan's time."""
        options, plan = self.options, self.plan
        if options.objective is not Objective.COST or options.budget is None:
            raise CkptError("--order search looks for the cheapest schedule under a budget",
                            "use --objective cost, or --order minmem with --objective peak")
        base = baselines(graph)
        if options.budget < base.lower_bound:      # below what one op needs, whatever the order
            raise infeasible_error(options, base, graph, plan, self.progress)
        # an order without a schedule is a step of the search, not an answer: no explanation, no progress
        quiet = replace(options, explain=False)

        def exact(order: list[str], seconds: float | None) -> SolveResult:
            return _Run(quiet, TimePlan(clock.now(), seconds), ignore, self.stages).over(graph, order,
                                                                                                 incumbents)

        found = order_search.search(graph, options.budget, self.first_order(graph), exact,
                                    lambda r: r.recompute_cost, plan.left(), self.progress)
        if found.result is None:
            raise InfeasibleBudget(f"no schedule fits {options.budget} B over the {found.solved} stage order(s) "
                                   "the search solved (not proven for other orders)", "raise the budget", proven=False)
        return replace(found.result, seconds=clock.now() - plan.start,
                       space=f"stage order found by a local search from minmem ({found.solved} orders solved; a "
                             f"proof holds for that order), views {options.views.value}, one version of a buffer "
                             "at a time")

    def over(self, graph: TrainGraph, order: list[str], incumbents: list[RunSequence]) -> SolveResult:
        """The stages run over one stage order until one answers."""
        options, plan = self.options, self.plan
        base = baselines(graph)
        staged = reorder(graph, order)
        if options.budget is not None and options.budget < base.lower_bound and self.park is None:
            raise infeasible_error(options, base, staged, plan, self.progress)
        plain_peak = memory_trace(staged, plain_sequence(staged)).peak_bytes
        if options.objective is Objective.COST and plain_peak <= options.budget:
            free_run = Answer(Decisions(frozenset()), Outcome(RunStatus.OPTIMAL, 0.0, 0.0))
            return result_of(staged, base, free_run, plan, options)
        attempt = Attempt(staged, base, options, plan, self.progress, tuple(incumbents), self.park)
        found = Found()
        for stage in self.stages:
            found = stage(attempt, found)
            if found.answer is not None:
                return result_of(chip_graph(staged, found.answer.parked), base, found.answer, plan, options)
        raise CkptError(f"the stages {', '.join(s.__name__ for s in self.stages)} ended without a schedule",
                        "end the stages with one that answers (greedy_answer or exact_stage)")
