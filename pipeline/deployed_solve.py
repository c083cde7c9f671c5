"""The library's front door for one schedule: model -> (Deeploy bridge) lowered graph -> solver -> document.

The budget holds on what the device reserves, not only on live bytes. The solver works on the live activation
peak; the figure the budget is checked on depends on the flow the schedule is deployed with:
- `--budget` with the non-tiled flow (target none, or --flow non-tiled): the live activation peak, which is the
  floor of the arena ckpt lays the code's buffers out in (solver.memory.static_arena; the document reports the arena,
  and its excess over the peak where the layout has one); with `--allocator heap`, the first-fit heap Deeploy's
  own code would need for them, fragmentation included (solver.memory.heap);
- `--budget` with the tiled flow: the live activation peak, which is the activations' share of the home arena
  once ckpt lays it out (the arena adds the graph I/O that lives there; the document reports it);
- `--budget-total LEVEL=SIZE` (tiled flow, home level): the static part (constants, and the step's own code and
  data where the level holds them) + the arena ckpt predicts there, solved as the live-byte problem on the
  arena itself (pipeline.level_total).
Where the checked figure goes over (the heap only), the live budget is tightened (by the square root of the ratio)
and the schedule solved again, until the figure fits or no tighter live budget has a schedule; then the refusal says
which figure cannot fit and by how much.
The CLI only parses arguments and prints.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, Allocator, Flow, WeightUpdate, deployed_weights
from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.events import Progress, Step, ignore
from ckpt.pipeline.level_total import solve_level_total
from ckpt.pipeline.load import LoadedModel, load_for_target
from ckpt.pipeline.on_chip import on_chip_home, refuse_beyond_floor, refuse_over
from ckpt.pipeline.parking import park_prices_of, parked_names, with_parked
from ckpt.pipeline.split_plus import chosen_with_schedule, priced_on_chip
from ckpt.pipeline.split_plus import step_cycles as split_plus_cycles
from ckpt.replay.predict import TilerTables, predicted_levels
from ckpt.schedule_file import BudgetSpec, GraphId, Predicted, Schedule, SolverRecord
from ckpt.solver.budget import Budget, LevelTotal
from ckpt.solver.graph.baselines import graph_order_peak
from ckpt.solver.graph.costs import CostModel
from ckpt.solver.graph.simulate import RunSequence
from ckpt.solver.memory.heap import GRANULE, heap_bytes
from ckpt.solver.memory.static_arena import arena_layout
from ckpt.solver.model import clock
from ckpt.solver.model.options import Policy
from ckpt.solver.model.records import SolveOptions, SolveResult
from ckpt.solver.policies.policies import branch_order, policy_result, top_k
from ckpt.solver.solve import solve

MAX_TIGHTENINGS = 12      # solves spent bringing the deployed figure under the budget


@dataclass(frozen=True)
class SolveRequest:
    source: str
    target: str
    budget: Budget | None              # the user's, as parsed (None: objective peak, or a level total)
    total: LevelTotal | None = None
    options: SolveOptions = SolveOptions()
    costs: CostModel | None = None
    warm_starts: tuple[Schedule, ...] = ()
    record_time: bool = False
    flow: Flow | None = None           # None: the target's default (tiled for a Deeploy target)
    weights: WeightUpdate = DEFAULT_SETUP.weights     # how the tiled flow writes weights (in place by default)
    home: str = DEFAULT_SETUP.default_mem_level       # where the tiled flow keeps its tensors
    optimizer: str | None = None       # a split step's optimizer graph (None: found beside the model, if any)
    code_bytes: int = 0    # the step's own code and data in the home level (L2 on chip holds the program beside
                           # the constants and the arena; L3 holds none): part of a level total's static part
    policy: Policy = Policy.SOLVE      # a baseline of the training branch's instead of ckpt's own schedule
    k: int | None = None               # top-k: how many forward nodes to recompute
    allocator: Allocator = DEFAULT_SETUP.allocator    # HEAP: the non-tiled budget is held on the first-fit heap
    on_chip: bool = False              # hold a home on chip to what it gives (pipeline.on_chip): refuse what cannot fit
    on_chip_code: int | None = None    # ... counting the step's code there (None: not measured)
    persist_on_chip: bool = False      # split+: what persists brought on chip where the schedule leaves room
    split_plus_code: int | None = None  # ... beside the step's code of these bytes (counted on the safe side)
    split_plus_tables: TilerTables | None = None   # ... and the tiler's tables, from this code's (None: not counted)
    loaded: LoadedModel | None = None  # the model as `load_request` loads it, where the caller has it (its costs too)
    park: bool = False                 # --park auto: the exact model may park activations off chip (pipeline.parking)

    @property
    def deployed_flow(self) -> Flow:
        return self.flow or Flow.default_for(self.target)

    @property
    def deployed_weights(self) -> WeightUpdate:
        return deployed_weights(self.target, self.flow, self.weights)

    @property
    def on_heap(self) -> bool:
        """The budget is held on the first-fit heap of Deeploy's non-tiled code (--allocator heap)."""
        return self.deployed_flow is Flow.NON_TILED and not self.allocator.non_tiled_arena


@dataclass(frozen=True)
class Checked:
    """The deployed figure a schedule was held to: its name, its bytes, and the limit it had to fit."""

    name: str                          # peak_bytes | heap_bytes | total_<level>
    nbytes: int
    limit: int | None
    live_budget: int | None            # the live budget the final solve ran with
    levels: dict | None = None         # per level, when the tiled flow was predicted
    activations_at_peak: int | None = None   # live activations where the checked arena peaks (None: a heap)
    arena: int | None = None           # the non-tiled flow's arena ckpt lays out (None: another deployment)


def solve_and_document(request: SolveRequest, progress: Progress = ignore) -> tuple[Schedule, SolveResult]:
    """Solve the request and return the schedule record (what seq.json holds) with the solve's result."""
    loaded = request.loaded.with_costs(request.costs) if request.loaded is not None else None
    if loaded is None:
        progress(Step(f"loading {request.source} for target {request.target}"))
        loaded = load_request(request, request.costs)
    if request.budget is not None:       # resolved here, once, unless the caller did (a sweep point)
        request = replace(request, budget=request.budget.resolved(graph_order_peak(loaded.graph)))
    starts = warm_start_sequences(loaded, request.warm_starts)
    if request.policy is not Policy.SOLVE:
        return _policy_schedule(loaded, request, starts, progress)
    home = on_chip_home(loaded, request.on_chip_code) if request.on_chip and request.total is None else None
    if home is not None:
        refuse_beyond_floor(loaded, home)
    with clock.reading(request.options.backend.clock):   # every deadline of the solve on the clock asked for
        result, options, checked = _solve_deployed(loaded, request, starts, progress)
    if home is not None and request.budget is not None and checked.levels:
        refuse_over(home, checked.levels[home.level]["arena"], request.budget.text)
    if request.persist_on_chip:
        return with_split_plus(loaded, request, result, options, checked, progress), result
    doc = schedule_of(loaded, request.budget, result, options, request.record_time, checked, request.total)
    return with_parked(doc, loaded, result), result


def with_split_plus(loaded: LoadedModel, request: SolveRequest, result: SolveResult, options: SolveOptions,
                    checked: Checked, progress: Progress = ignore) -> Schedule:
    """The schedule's record with split+ chosen for it (pipeline.split_plus): its levels with what persists brought
    on chip, its cycles priced for them, and what was brought."""
    chosen = chosen_with_schedule(loaded, result.seq, request.split_plus_code, request.split_plus_tables)
    code = "the step's code not counted" if request.split_plus_code is None else f"code {request.split_plus_code:,} B"
    progress(Step(f"split+: {len(chosen)} persistent tensors brought on {loaded.home_level} ({code})"))
    priced = priced_on_chip(loaded.costs, loaded, chosen)
    levels = _levels_doc(loaded, result, request.code_bytes, chosen, tables=request.split_plus_tables)
    doc = schedule_of(replace(loaded, costs=priced), request.budget, result, options, request.record_time,
                      replace(checked, levels=levels), request.total)
    graph = loaded.graph
    sizes = {deeploy_bridge.deeploy_tensor_name(t): b for t, b in graph.tensor_bytes.items() if graph.root(t) == t}
    record = {"tensors": sorted(chosen), "bytes": sum(sizes.get(t, 0) for t in chosen),   # shared copies once
              "code": request.split_plus_code}
    return replace(doc, predicted=replace(
        doc.predicted, split_plus=record,
        step_cycles=split_plus_cycles(priced, result.seq) if priced is not None else None))


def load_request(request: SolveRequest, costs: CostModel | None = None) -> LoadedModel:
    """The model as a solve of `request` loads it (with `costs`): the one load a caller may make first and hand on
    (`SolveRequest.loaded`), e.g. to price the split home's costs and count its code on it."""
    return load_for_target(request.source, request.target, costs, request.deployed_weights, request.optimizer,
                           request.home, request.deployed_flow)


def _policy_schedule(loaded: LoadedModel, request: SolveRequest, starts: list[RunSequence],
                     progress: Progress) -> tuple[Schedule, SolveResult]:
    """A baseline of the training branch's (solver.policies): ckpt's recompute set for the budget ordered by the
    branch's rule, or the top-K forward nodes so ordered. It answers to no budget: the file carries none (the
    budget that chose the set is in its `space`), and a replay holds it to none."""
    graph = loaded.graph
    if request.policy is Policy.TOP_K:
        candidates = top_k(graph)
        if not candidates or (request.k or 0) > len(candidates):
            raise CkptError(f"--k {request.k}: {len(candidates)} forward node(s) of this graph free bytes when "
                            "recomputed (a backward node reads their outputs)",
                            (f"give --k 1 to {len(candidates)}" if len(candidates) > 1 else "give --k 1") if candidates
                            else "solve with --budget instead")
        chosen = candidates[:request.k]
        space = (f"the {len(chosen)} forward nodes whose recomputation frees the most bytes per cycle (the branch's "
                 "own choice of K nodes is not public), ordered by the branch's rule (gcpScheduler.py)")
    else:
        solved, _, _ = _solve_deployed(loaded, request, starts, progress)
        chosen = sorted({name for name, flag in solved.seq if flag})
        space = (f"ckpt's recompute set at budget {request.budget.text if request.budget else '-'} "
                 f"({len(chosen)} nodes), ordered by the branch's rule (gcpScheduler.py)")
    seq = branch_order(graph, chosen)
    recomputed = len({name for name, flag in seq if flag and name in set(chosen)})
    if recomputed < len(chosen):       # said in the file, never a silent K: the rule places no recompute of the rest
        space += (f"; {recomputed} of them recomputed: the rule places no recompute of the other "
                  f"{len(chosen) - recomputed} (no backward node reads it before it runs again, or its first run "
                  "is then read by nothing and is dropped)")
    result = policy_result(graph, seq, space)
    checked = Checked("peak_bytes", result.peak_bytes, None, None, _levels_doc(loaded, result, request.code_bytes))
    doc = schedule_of(loaded, None, result, request.options, request.record_time, checked, None)
    return replace(doc, solver=replace(doc.solver, method=request.policy.value)), result


def warm_start_sequences(loaded: LoadedModel, schedules: tuple[Schedule, ...]) -> list[RunSequence]:
    """The sequences of earlier schedule files solved on this very graph (others are refused)."""
    fingerprint = loaded.graph.fingerprint()
    nodes = {op.name for op in loaded.graph.ops}
    found = []
    for schedule in schedules:
        if schedule.fingerprint not in (None, fingerprint):
            raise CkptError("a --warm-start schedule was solved on another graph",
                            "give schedules solved on this model and --target")
        runs = {name for name, flag in schedule.seq if not flag}
        if runs != nodes:
            missing = sorted(nodes - runs)
            raise CkptError(f"a --warm-start schedule runs {len(runs & nodes)} of this graph's {len(nodes)} nodes"
                            + (f" (not '{missing[0]}')" if missing else f" and {len(runs - nodes)} it does not have"),
                            "give whole schedules solved on this model and --target")
        found.append(list(schedule.seq))
    return found


def _solve_deployed(loaded: LoadedModel, request: SolveRequest, starts: list[RunSequence],
                    progress: Progress) -> tuple[SolveResult, SolveOptions, Checked]:
    """Solve, tightening the live budget until the deployed figure fits (see the module doc): first by the square
    root of the ratio (`tightened`), then, once a tighter budget has no schedule, halfway between that and the
    last one tried."""
    options = request.options
    if options.objective == "peak":
        result = solve(loaded.graph, options, progress, incumbents=starts)
        return result, options, Checked("peak_bytes", result.peak_bytes, None, None,
                                        arena=_arena(loaded, request, result))
    if request.total is not None:
        return _solve_total(loaded, request, starts, progress)
    limit = request.budget.nbytes
    live = limit
    park = park_prices_of(loaded) if request.park else None
    deadline = None if options.backend.time_limit is None else clock.now() + options.backend.time_limit
    best_over: tuple[int, SolveResult] | None = None
    fits_above, none_below = None, None          # live budgets known to give a schedule / to give none
    for _ in range(MAX_TIGHTENINGS):
        attempt = replace(options, budget=live, backend=replace(options.backend, time_limit=_left(deadline)),
                          explain=best_over is None)
        try:
            result = solve(loaded.graph, attempt, progress, incumbents=starts, park=park)
        except InfeasibleBudget as err:
            if best_over is None:
                raise _deployed_floor(loaded, request, options, err, progress) from None
            none_below = live
            if fits_above is None or fits_above - none_below <= GRANULE or _spent(deadline):
                raise _cannot_fit(request, limit, best_over, err) from None
            live = (fits_above + none_below) // 2
            continue
        checked = _checked(loaded, request, result, limit, live)
        if checked.nbytes <= limit:
            return result, replace(options, budget=live), checked    # the user's time limit, not what was left
        progress(Step(f"{checked.name} {checked.nbytes} B is over the budget {limit} B by "
                      f"{checked.nbytes - limit} B: tightening the live budget"))
        best_over = min(best_over or (checked.nbytes, result), (checked.nbytes, result), key=lambda c: c[0])
        fits_above = min(live, result.peak_bytes)
        wanted = tightened(fits_above, limit, checked.nbytes)
        live = wanted if none_below is None else max(none_below + 1, wanted)
        if live <= (none_below or 0) or _spent(deadline):
            break
    raise _cannot_fit(request, limit, best_over, None, _spent(deadline))


def tightened(live: int, limit: int, figure: int) -> int:
    """The next live budget when a schedule of live peak `live` has a deployed figure over `limit`: `live` scaled
    by the square root of limit / figure, halfway (in ratio) between keeping it and shrinking it in proportion.
    The heap's fragmentation grows with the live bytes, so taking the whole excess off, or even shrinking in
    proportion, overshoots into budgets that cost more and take longer to solve; a schedule found a step too
    high only costs another, easier, step."""
    return min(live - GRANULE, math.isqrt(live * live * limit // figure))


def _deployed_floor(loaded: LoadedModel, request: SolveRequest, options: SolveOptions, err: InfeasibleBudget,
                    progress: Progress) -> InfeasibleBudget:
    """The refusal of a live budget restated for the figure the budget is held on: where that is the heap, the
    smallest live budget a schedule fits may still need a larger heap, so the floor stated is the heap of the
    schedule at that live budget (asking for it then succeeds: the tightening reaches that very schedule)."""
    if not request.on_heap or err.floor is None or not err.proven:
        return err
    try:
        at_floor = solve(loaded.graph, replace(options, budget=err.floor, explain=False), progress)
    except InfeasibleBudget:
        return err
    heap = max(heap_bytes(loaded.graph, at_floor.seq), at_floor.peak_bytes)
    if heap <= err.floor:
        return err
    return InfeasibleBudget(f"{err.problem}; a schedule there needs a first-fit heap of {heap} B",
                            f"raise the budget to {heap} B", proven=True, floor=heap)

def _spent(deadline: float | None) -> bool:
    return deadline is not None and deadline - clock.now() <= 0


def _solve_total(loaded: LoadedModel, request: SolveRequest, starts: list[RunSequence],
                 progress: Progress) -> tuple[SolveResult, SolveOptions, Checked]:
    """The level total solved on the arena model (pipeline.level_total), checked on the predicted total."""
    answer = solve_level_total(loaded, request.total, request.code_bytes, request.options, starts, progress)
    level, home = answer.level, loaded.home_level
    levels = {home: replace(level, code=answer.code).document()}
    checked = Checked(f"total_{home}", answer.total, request.total.nbytes, answer.arena_budget, levels,
                      level.activations_at_peak)
    return answer.result, replace(request.options, budget=answer.arena_budget), checked


def _checked(loaded: LoadedModel, request: SolveRequest, result: SolveResult, limit: int, live: int) -> Checked:
    if request.on_heap:
        return Checked("heap_bytes", max(heap_bytes(loaded.graph, result.seq), result.peak_bytes), limit, live)
    if request.deployed_flow is Flow.NON_TILED:
        return Checked("peak_bytes", result.peak_bytes, limit, live, arena=_arena(loaded, request, result))
    return Checked("peak_bytes", result.peak_bytes, limit, live,
                   _levels_doc(loaded, result, request.code_bytes, parked=parked_names(result)))


def _arena(loaded: LoadedModel, request: SolveRequest, result: SolveResult) -> int | None:
    """The arena ckpt lays the non-tiled code's buffers out in, where the schedule is deployed so."""
    if request.deployed_flow is not Flow.NON_TILED or request.on_heap:
        return None
    return arena_layout(loaded.graph, result.seq).size


def _levels_doc(loaded: LoadedModel, result: SolveResult, code: int = 0, on_chip: frozenset[str] = frozenset(),
                parked: frozenset[str] = frozenset(), tables: TilerTables | None = None) -> dict | None:
    """The tiled flow's predicted levels for the document (None without a Deeploy lowering; `on_chip`: what
    persists split+ brings on chip; `parked`: the activations parked off chip, Deeploy's names; `tables`: the
    code's tables per layer, to count the tiler's tables on chip)."""
    if loaded.lowered is None:
        return None
    levels = predicted_levels(loaded.lowered, result.seq, loaded.weights, loaded.home, loaded.persistent_io, on_chip,
                              parked, tables)
    return {name: replace(fig, code=code if name == loaded.home_level else 0).document()
            for name, fig in sorted(levels.items())}


def _cannot_fit(request: SolveRequest, limit: int, best_over: tuple[int, SolveResult] | None,
                err: InfeasibleBudget | None, timed_out: bool = False) -> InfeasibleBudget:
    """The deployed figure cannot be brought under `limit`: exit 2 with the smallest figure a schedule reached
    (asking for that budget then succeeds), or 3 when the time limit cut the search short."""
    what = "the first-fit heap" if request.on_heap else "the live peak"
    if best_over is None:
        return err or InfeasibleBudget(f"no schedule fits {limit} B", "raise the budget")
    nbytes, result = best_over
    timed_out = timed_out or (err is not None and not err.proven)
    return InfeasibleBudget(f"{what} cannot fit {limit} B: the closest schedule found needs {nbytes} B "
                            f"({nbytes - limit} B over) with a live peak of {result.peak_bytes} B",
                            f"raise the budget to at least {nbytes} B"
                            + (", or give it more --time-limit" if timed_out else ""),
                            proven=not timed_out, floor=nbytes)


def _left(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.5, deadline - clock.now())


def schedule_of(loaded: LoadedModel, budget: Budget | None, result: SolveResult, options: SolveOptions,
                      record_time: bool = False, checked: Checked | None = None,
                      total: LevelTotal | None = None) -> Schedule:
    """The seq.json record. Wall-clock seconds only with record_time: same inputs, byte-identical file."""
    base_peak = result.baselines.graph_order_peak
    budget = budget.resolved(base_peak) if budget is not None else None
    checked = checked or Checked("peak_bytes", result.peak_bytes, None, options.budget)
    solver = SolverRecord(
        name=options.backend.name if result.variables else "none", method=options.method, status=result.status,
        gap=None if result.gap is None else round(result.gap, 6), cost_lower_bound=result.cost_lower_bound,
        variables=result.variables, variables_unpruned=result.variables_unpruned, constraints=result.constraints,
        time_limit=options.backend.time_limit, stage_order=options.order, objective=options.objective,
        space=result.space, seconds=round(result.seconds, 3) if record_time else None,
        costs=loaded.costs.source if loaded.costs and loaded.costs.source != "estimate" else None)
    measured_step = loaded.costs.measured_step if loaded.costs else None
    if total is not None:
        spec = BudgetSpec(total.text, None, total.nbytes, total.level)
    elif budget is not None:
        spec = BudgetSpec(budget.text, budget.fraction, budget.nbytes)
    else:
        spec = BudgetSpec()
    predicted = Predicted(
        peak_bytes=result.peak_bytes, heap_bytes=heap_bytes(loaded.graph, result.seq), checked=checked.name,
        checked_bytes=checked.nbytes, live_budget_bytes=checked.live_budget,
        booked_peak_bytes=result.booked_peak_bytes, baseline_peak_bytes=base_peak,
        min_memory_order_peak_bytes=result.baselines.min_memory_peak, persistent_bytes=result.persistent_bytes,
        lower_bound_bytes=result.baselines.lower_bound, recomputes=result.recomputes,
        recompute_cost=result.recompute_cost, planned_cost=result.planned_cost,
        cost_increase_pct=round(result.cost_increase_pct, 4), levels=checked.levels, arena_bytes=checked.arena,
        step_cycles=measured_step + result.recompute_cost if measured_step is not None else None,
        optimizer=None if loaded.optimizer is None else loaded.optimizer.as_dict(),
        optimizer_cycles=loaded.costs.measured_optimizer if loaded.costs and loaded.optimizer else None)
    graph = GraphId(nodes=len(loaded.graph.ops), names_sha256=loaded.graph.fingerprint(),
                    model_sha256=loaded.model_sha256, target=loaded.target, weights=loaded.weights.value,
                    home=loaded.home if loaded.lowered and loaded.home != DEFAULT_SETUP.default_mem_level else None,
                    flow=loaded.deployed_flow.value if loaded.deployed_flow is not Flow.default_for(loaded.target)
                    else None)
    return Schedule(tuple(result.seq), graph, spec, predicted, solver)


def solve_model(source: str | Path, budget: Budget | None, target: str = "none",
                options: SolveOptions | None = None, cost_model: CostModel | None = None,
                progress: Progress = ignore, flow: Flow | None = None,
                weights: WeightUpdate = DEFAULT_SETUP.weights,
                home: str = DEFAULT_SETUP.default_mem_level,
                allocator: Allocator = DEFAULT_SETUP.allocator, persist_on_chip: bool = False,
                split_plus_code: int | None = None, park: bool = False,
                split_plus_tables: TilerTables | None = None) -> tuple[Schedule, SolveResult]:
    """Load, solve with the budget held on the deployed figure (see the module doc), and document it (split+:
    `persist_on_chip`, beside the step's code of `split_plus_code` bytes and the tiler's tables as
    `split_plus_tables` gives them; `park`: --park auto)."""
    request = SolveRequest(str(source), target, budget, None, options or SolveOptions(), cost_model,
                           flow=flow, weights=weights, home=home, allocator=allocator,
                           persist_on_chip=persist_on_chip, split_plus_code=split_plus_code,
                           split_plus_tables=split_plus_tables, park=park)
    return solve_and_document(request, progress)
