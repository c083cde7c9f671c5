"""`--budget-total LEVEL=SIZE`: what the tiled flow reserves at its home level, solved as a live-byte problem.

The home level holds a static part and the arena ckpt lays out there:
- static: the constants, each kept once (a recompute reads its original's constants, never a copy of them, so
  no schedule changes them), and, for a home level on chip, the step's own code and data (`code`, measured by
  the caller);
- the arena: at least the most bytes its blocks hold at once (their live maximum), which ckpt's layout
  reaches where the layout is tight (checked for every schedule: see below where it is not).
That live maximum is the live peak of the arena model (solver.memory.resident: graph I/O counted where the arena holds
it, scratch left to L1) for the same schedule: equal where every op writes one activation (Deeploy's lowered
CCTs), at most it otherwise (Deeploy keeps an unread second output to the last layer). So for every schedule

    total = static + arena >= static + live peak of the arena model,  with equality where the layout is tight,

and a total T is the live-byte problem on the arena model with the budget T - static: its answer fits T, and
what it proves (a lower bound on the cost, infeasibility, the smallest budget) holds for every schedule that
fits T. The model is solved in the real graph's stage order, so that space holds every schedule a `--budget`
solve can return, and it is warm-started from the live-byte answer of the real graph at the same budget.

Where the layout is not tight (ops of several outputs), the model's answer can need more than T, by an excess
that neither the arena budget nor the live budget predicts (the total is no monotone function of either). Then
the answer is the cheapest that fits among the `--budget` schedules of the live budgets `probed_live_budgets`
searches and the model's answers at arena budgets tightened by each one's excess; a refusal states the smallest
total any of them needs.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.events import Incumbent, Progress, Step
from ckpt.memory_levels import LevelMemory
from ckpt.pipeline.load import LoadedModel
from ckpt.replay.predict import predicted_levels, predicted_split_tiles
from ckpt.solver.budget import LevelTotal
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.simulate import RunSequence, memory_trace, plain_sequence
from ckpt.solver.memory.heap import GRANULE
from ckpt.solver.memory.resident import arena_resident, real_sequence, resident_order, resident_sequence
from ckpt.solver.model import clock
from ckpt.solver.model.options import StageOrder
from ckpt.solver.model.records import SolveOptions, SolveResult, Status
from ckpt.solver.realise.result import planned_sequence, result_on
from ckpt.solver.solve import solve, stage_order
from ckpt.targets import SPLIT_HOME, TARGET_TABLE

LIVE_SHARE = 0.25        # of the time left, at most, for a live-byte answer: the warm start, each --budget probe
MAX_TIGHTENINGS = 12     # solves spent bringing a layout that misses its live maximum under the total
SLACK_FLOOR = 8          # a fit steps the live budget up by at least 1/8 of what is not yet settled
CHECKS = 3               # solves spent, after a refusal, finding a total to state that a solve then fits


class MissedTotal(InfeasibleBudget):
    """No schedule found fits the total; its floor is the total the closest schedule found needs (a schedule
    known to need it, where a refusal's floor can otherwise be the model's bound)."""


@dataclass(frozen=True)
class LevelModel:
    """A home level's total as a live-byte problem: its static part and the arena model in its stage order."""

    level: str
    constants: int
    code: int
    graph: TrainGraph                 # the arena model (solver.memory.resident)
    order: tuple[str, ...]            # its stage order: the real graph's, between the synthetic ops
    tiles: int = 0                    # a split home: the layers' tiles above the arena (the same for every schedule)

    @property
    def static(self) -> int:
        return self.constants + self.code + self.tiles

    def parts(self) -> str:
        """The static part in words."""
        if not self.code and not self.tiles:
            return f"constants {self.constants} B"
        found = [f"constants {self.constants} B"] + ([f"the step's code and data {self.code} B"] if self.code else [])
        found += [f"the tiler's tiles of what stays off chip {self.tiles} B"] if self.tiles else []
        return " + ".join(found) + f" = {self.static} B"


@dataclass(frozen=True)
class LevelAnswer:
    result: SolveResult               # on the real graph; status, gap and bound about the total asked for
    arena_budget: int                 # the live budget it was solved with: on the arena model, or on the graph
                                      # itself for a `--budget` schedule (probed_live_budgets)
    level: LevelMemory             # the home level as the schedule deploys it (static: constants only; a split
                                   # home's tiles above the arena included)
    code: int

    @property
    def total(self) -> int:
        return self.level.total + self.code


def level_model(loaded: LoadedModel, level: str, code: int, options: SolveOptions) -> LevelModel:
    """The level total's model for `loaded` (refused unless `level` is the tiled flow's home level)."""
    if loaded.lowered is None:
        raise CkptError("--budget-total holds a tiled Deeploy deployment", "add --target siracusa (or gap9)")
    if level != loaded.home_level:
        homes = TARGET_TABLE[loaded.target].level_homes
        raise CkptError(f"ckpt predicts the tiled flow's home level ({loaded.home_level}), not {level}",
                        f"give --budget-total {loaded.home_level}=SIZE" + (f", or --home {level}" if level in homes
                                                                          else f" ({' or '.join(homes)} with --home)"))
    resident = arena_resident(loaded.graph, *loaded.arena_io(), deeploy_bridge.ALIGNMENT)
    order = resident_order(stage_order(loaded.graph, options))
    return LevelModel(level, loaded.home_constants(), code, resident, tuple(order), split_tiles(loaded))


def split_tiles(loaded: LoadedModel) -> int:
    """A split home's tiles above its on-chip arena (replay.predict.predicted_split_tiles), 0 for another home."""
    if loaded.home != SPLIT_HOME:
        return 0
    setup = setup_for(loaded.target, SPLIT_HOME, weights=loaded.weights)
    return predicted_split_tiles(loaded.lowered, loaded.weights, loaded.persistent_io, setup.size(setup.innermost))


def solve_level_total(loaded: LoadedModel, total: LevelTotal, code: int, options: SolveOptions,
                      starts: list[RunSequence], progress: Progress) -> LevelAnswer:
    """The cheapest schedule whose home level fits `total` (see the module doc); InfeasibleBudget stating the
    smallest total that fits when none does, checked to fit (`_checked`)."""
    try:
        return _solve_total(loaded, total, code, options, starts, progress)
    except InfeasibleBudget as err:
        if err.floor is None or err.floor <= total.nbytes:
            raise
        beyond = _beyond_the_level(loaded, total, err)
        if beyond is not None:
            raise beyond from None
        raise _checked(loaded, total, code, options, starts, progress, err) from None


def level_capacity(target: str, level: str) -> int | None:
    """The bytes `target`'s `level` gives data (what the runtime reserves left out), None for a level it lacks."""
    spec = TARGET_TABLE.get(target)
    return next((lv.usable for lv in (spec.levels if spec else ()) if lv.name == level), None)


def _beyond_the_level(loaded: LoadedModel, total: LevelTotal, err: InfeasibleBudget) -> InfeasibleBudget | None:
    """The refusal restated when the smallest total it found is more than the level has: raising the budget to
    it cannot help (None when it is within the level)."""
    capacity = level_capacity(loaded.target, total.level)
    if capacity is None or err.floor is None or err.floor <= capacity:
        return None
    chip = TARGET_TABLE[loaded.target]
    off = next((home for home in chip.homes if home != total.level), None)
    way_out = (f"deploy it with its home in {off} (--home {off}, --budget-total {off}=SIZE)" if off else
               "make the step smaller")
    return InfeasibleBudget(f"the {total.level} total cannot fit {total.nbytes} B: the smallest total found is "
                            f"{err.floor:,} B, more than the {capacity:,} B {chip.name}'s {total.level} gives: no "
                            f"schedule of this step fits there", way_out, proven=err.proven, floor=err.floor,
                            floor_exact=err.floor_exact)


def _checked(loaded: LoadedModel, total: LevelTotal, code: int, options: SolveOptions, starts: list[RunSequence],
             progress: Progress, err: InfeasibleBudget) -> InfeasibleBudget:
    """The refusal `err`, the total it advises shown to fit by a solve at that total, as the command the user runs
    next would solve it, beside the smallest total of any schedule found on the way. A total the model proves no
    schedule goes below can still miss when ckpt's layout of the answer misses its live maximum: then the total
    that solve's closest schedule needs is tried, and last the graph order's own (no recompute). The first that
    fits is the one advised; if none does, the smallest total a schedule found needs is, said as not checked (a
    solve at a total need not find every schedule that fits it: the search is no monotone function of it)."""
    found = [err.floor] if isinstance(err, MissedTotal) else []    # totals schedules found are known to need
    tried, candidate = [], err.floor
    for _ in range(CHECKS):
        tried.append(candidate)
        progress(Step(f"checking that a total of {candidate} B fits, as stated"))
        try:
            answer = _solve_total(loaded, replace(total, text=f"{total.level}={candidate}", nbytes=candidate), code,
                                  options, starts, progress)
            return _restated(err, total, candidate, min([*found, answer.total]), checked=True)
        except InfeasibleBudget as again:
            needs = again.floor if again.floor is not None and again.floor > candidate else None
            if isinstance(again, MissedTotal):
                found.append(again.floor)
        if needs is None or needs in tried:
            candidate = _graph_order_total(loaded, code)
            found.append(candidate)
        else:
            candidate = needs
        if candidate in tried:
            break
    smallest = min(found, default=tried[-1])
    return _restated(err, total, smallest, smallest, checked=False)


def _graph_order_total(loaded: LoadedModel, code: int) -> int:
    """The home level's total of the graph order without recompute."""
    plain = [(op.name, 0) for op in loaded.graph.ops]
    return predicted_levels(loaded.lowered, plain, loaded.weights, loaded.home,
                            loaded.persistent_io)[loaded.home_level].total + code + split_tiles(loaded)


def _restated(err: InfeasibleBudget, total: LevelTotal, fits: int, smallest: int, checked: bool) -> InfeasibleBudget:
    """`err` with `fits` as the total to raise the budget to and `smallest` as the least total a schedule found
    needs: the floor it proved still said where it holds."""
    if fits == err.floor == smallest and checked:
        return err
    said = f"the smallest total a schedule was found to need is {smallest} B"
    if not checked:
        said += " (no solve at it was checked to find one)"
    elif fits != smallest:
        said += f", and a solve at {fits} B finds one"
    if err.floor_exact:
        said = f"no schedule fits below {err.floor} B (proven), and {said}"
    return InfeasibleBudget(f"the {total.level} total cannot fit {total.nbytes} B: {said}",
                            f"raise the budget to {fits} B", proven=err.proven, floor=fits, floor_exact=False)


def _solve_total(loaded: LoadedModel, total: LevelTotal, code: int, options: SolveOptions,
                 starts: list[RunSequence], progress: Progress) -> LevelAnswer:
    """The model's answer at the total when its layout fits; otherwise the cheapest that fits among the model's
    answers at tightened arena budgets and the `--budget` schedules of the live budgets `probed_live_budgets`
    tries (a layout that misses its live maximum is no monotone function of either budget, so neither search
    alone finds every schedule that fits). A refusal states the smallest total any of them needs."""
    began = clock.now()
    limit = options.backend.time_limit
    deadline = None if limit is None else began + limit
    model = level_model(loaded, total.level, code, options)
    budget = max(total.nbytes - model.static, 0)
    seeds = [resident_sequence(s) for s in starts]
    live = _live_answer(loaded.graph, model, budget, options, deadline, progress)
    if live is not None:
        seeds.append(resident_sequence(live))
    attempt = _timed(replace(options, budget=budget, explain=True), deadline)
    try:
        proof = solve(model.graph, attempt, progress, seeds, order=model.order)
    except InfeasibleBudget as err:
        raise _refusal(model, total, err) from None

    def answered(result: SolveResult, solved_at: int, on_model: bool = True) -> LevelAnswer:
        real = result_on(loaded.graph, result, real_sequence(result.seq)) if on_model else result
        level = replace(predicted_levels(loaded.lowered, real.seq, loaded.weights, loaded.home,
                                         loaded.persistent_io)[loaded.home_level], tiles=model.tiles)
        timed = replace(real, seconds=clock.now() - began)
        return LevelAnswer(timed if result is proof else _bounded_by(timed, proof, options), solved_at, level, code)

    first = answered(proof, budget)
    if first.total <= total.nbytes:
        return first
    found = [first]
    if not _spent(deadline):
        def probe(live_budget: int) -> LiveProbe | None:
            progress(Step(f"the --budget {live_budget} schedule's total_{model.level}"))
            try:
                result = solve(loaded.graph, _timed(replace(options, budget=live_budget, explain=False), deadline,
                                                    LIVE_SHARE), progress, starts)
            except InfeasibleBudget:
                return None
            found.append(answered(result, live_budget, on_model=False))
            return LiveProbe(live_budget, result.peak_bytes, found[-1].total)
        probed_live_budgets(_live_start(loaded, model, budget), budget, total.nbytes, probe,
                            lambda: _spent(deadline))
    found += _tightened_arenas(model, total, proof, first, deadline, options, progress, answered)
    fits = [a for a in found if a.total <= total.nbytes]
    if fits:
        return min(fits, key=lambda a: (a.result.recompute_cost, a.total))
    closest = min(found, key=lambda a: a.total)
    raise MissedTotal(f"the {model.level} total cannot fit {total.nbytes} B: the closest schedule found needs "
                           f"{closest.total} B ({model.parts()} + an arena of {closest.level.arena} B, whose layout "
                           f"misses its live maximum {closest.level.live_max} B)",
                           f"raise the budget to at least {closest.total} B", proven=False, floor=closest.total)


def _tightened_arenas(model: LevelModel, total: LevelTotal, proof: SolveResult, first: LevelAnswer,
                      deadline: float | None, options: SolveOptions, progress: Progress,
                      answered: Callable[..., LevelAnswer]) -> list[LevelAnswer]:
    """The model's answers at arena budgets tightened by each answer's excess over the total, up to the first
    that fits or the first budget with no schedule."""
    found, result, answer, arena = [], proof, first, first.arena_budget
    for _ in range(MAX_TIGHTENINGS):
        excess = answer.total - total.nbytes           # the layout missed the live maximum
        progress(Step(f"total_{model.level} {answer.total} B is over {total.nbytes} B by {excess} B (the layout "
                      "misses its live maximum): tightening the arena"))
        arena -= max(excess, GRANULE)
        if _spent(deadline):
            break
        try:
            result = solve(model.graph, _timed(replace(options, budget=arena, explain=False), deadline), progress,
                           [planned_sequence(result)], order=model.order)
        except InfeasibleBudget:
            break
        answer = answered(result, arena)
        found.append(answer)
        if answer.total <= total.nbytes:
            break
    return found


@dataclass(frozen=True)
class LiveProbe:
    """A live budget probed: the live peak of its `--budget` schedule and the level total that schedule needs."""

    budget: int
    peak: int
    total: int


def probed_live_budgets(start: int, ceiling: int, total: int, probe: Callable[[int], LiveProbe | None],
                        spent: Callable[[], bool] = lambda: False, tries: int = MAX_TIGHTENINGS) -> list[LiveProbe]:
    """Live budgets up to `ceiling` searched, from `start`, for the largest whose schedule fits `total` (the
    cheapest, as a larger budget's schedule never costs more). Between the budgets known to fit or to have no
    schedule (`low`) and those known to go over (`high`, which a schedule over the total lowers to its live peak,
    as every budget from there up to the one probed gives that schedule), it steps up by a schedule's slack under
    the total after a fit (a total grows about byte for byte with the live peak), at least an eighth and at most
    half of what lies between, halfway up after a budget with no schedule, and down by a schedule's excess over
    the total after one over it, at most halfway.
    Neither a budget with no schedule nor one over the total ends the search: the level total is no monotone
    function of the live budget. `probe` returns None where a budget has no schedule."""
    probed: list[LiveProbe] = []
    low, high = 0, ceiling + 1
    budget = min(start, ceiling)
    for _ in range(tries):
        if not low < budget < high or spent():
            break
        got = probe(budget)
        if got is not None:
            probed.append(got)
        if got is None:
            low = budget
            budget = (low + high) // 2
        elif got.total <= total:
            low, room = budget, high - budget
            budget += min(max(total - got.total, room // SLACK_FLOOR), room // 2)
        else:
            high = min(budget, got.peak)
            budget = max(high - (got.total - total), (low + high) // 2)
        if high - low <= GRANULE:
            break
    return probed


def _live_start(loaded: LoadedModel, model: LevelModel, budget: int) -> int:
    """The live budget whose schedules would fill an arena of `budget` if the graph I/O the arena holds at the
    graph order's peak held the same bytes at every schedule's peak."""
    plain = plain_sequence(loaded.graph)
    held = memory_trace(model.graph, resident_sequence(plain)).peak_bytes - memory_trace(loaded.graph, plain).peak_bytes
    return max(budget - max(held, 0), GRANULE)


def _spent(deadline: float | None) -> bool:
    return deadline is not None and clock.now() >= deadline


def _live_answer(graph: TrainGraph, model: LevelModel, budget: int, options: SolveOptions,
                 deadline: float | None, progress: Progress) -> RunSequence | None:
    """The live-byte answer of the real graph at the arena's budget (what `--budget` with those bytes gives),
    over the stage order the model shares, when it fits the arena model: a warm start, so the answer at a
    total is never worse than it. None when it does not fit or none is found in its share of the time."""
    if options.order is StageOrder.SEARCH:
        return None
    share = None if deadline is None else LIVE_SHARE * max(deadline - clock.now(), 0.0)
    progress(Step(f"live-byte schedule at the arena's budget {budget} B (a warm start)"))
    try:
        found = solve(graph, replace(options, budget=budget, explain=False,
                                     backend=replace(options.backend, time_limit=share)))
    except (InfeasibleBudget, CkptError):
        return None
    if memory_trace(model.graph, resident_sequence(found.seq)).peak_bytes > budget:
        return None
    progress(Incumbent(found.planned_cost, "the live-byte schedule"))
    return planned_sequence(found)


def _timed(options: SolveOptions, deadline: float | None, share: float = 1.0) -> SolveOptions:
    """`options` with `share` of the time left before `deadline` (half a second at least)."""
    left = None if deadline is None else max(0.5, share * (deadline - clock.now()))
    return replace(options, backend=replace(options.backend, time_limit=left))


def _bounded_by(result: SolveResult, proof: SolveResult, options: SolveOptions) -> SolveResult:
    """`result` (solved at a tightened budget) with what `proof`, the solve at the total's own budget, proves: a
    bound at a tightened budget is no bound at the total asked for."""
    bound = proof.cost_lower_bound
    if bound is None:
        return replace(result, status=Status.HEURISTIC, gap=None)
    cost = result.planned_cost
    gap = 0.0 if cost <= bound or cost == 0 else (cost - bound) / cost
    return replace(result, status=Status.OPTIMAL if gap <= options.backend.gap else Status.FEASIBLE, gap=gap)


def _refusal(model: LevelModel, total: LevelTotal, err: InfeasibleBudget) -> InfeasibleBudget:
    """The arena model's refusal restated for the total: the smallest total is the static part plus the smallest
    arena budget, since every schedule's total is at least that, and the arena of the schedule that fits that
    budget is its live peak."""
    static = model.parts()
    if err.floor is None:
        return InfeasibleBudget(f"the {model.level} total cannot fit {total.nbytes} B ({static}, the rest for the "
                                f"arena): {err.problem}", err.way_out or "raise the budget", proven=err.proven)
    smallest = model.static + err.floor
    known = "proven" if err.floor_exact else "not proven the smallest within the time limit"
    return InfeasibleBudget(f"the {model.level} total cannot fit {total.nbytes} B: the smallest total a schedule "
                            f"fits is {smallest} B ({known}: {static}, and an arena of {err.floor} B)",
                            f"raise the budget to {smallest} B", proven=err.proven, floor=smallest,
                            floor_exact=err.floor_exact)
