"""A schedule made a SolveResult: the sequence that runs, its figures, and what is proven of it."""
from __future__ import annotations

from dataclasses import replace

from ckpt.solver.graph.baselines import Baselines, baselines
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import RunSequence, check_in_place, check_ready, drop_dead, memory_trace
from ckpt.solver.graph.views import Collapsed, expanded, view_cost
from ckpt.solver.model import clock
from ckpt.solver.model.backends import Outcome, RunStatus
from ckpt.solver.model.options import Objective
from ckpt.solver.model.records import Answer, SolveOptions, SolveResult, Status, space_of
from ckpt.solver.model.time_plan import TimePlan
from ckpt.solver.realise.canonical import canonical


def result_of(staged: TrainGraph, base: Baselines, answer: Answer, plan: TimePlan, options: SolveOptions
              ) -> SolveResult:
    """The result of `answer` over the stage order of `staged`."""
    decisions = answer.decisions
    if options.objective is Objective.COST and decisions.recomputes:
        decisions = canonical(staged, decisions, options.budget)   # one schedule per set of tied choices
    seq = drop_dead(staged, decisions.sequence(staged))  # Deeploy deletes runs nobody reads: so do we
    check_ready(staged, seq)
    check_in_place(staged, seq)
    # What runs can cost less than the decisions: where an op's first run is read by nobody, its recompute only
    # moves it later, a schedule of another stage order. The proof (status, gap, bound) is about the planned
    # cost over this order; what runs may be cheaper still, and nothing is proven of that saving.
    planned, cost = decisions.cost(staged), sum(staged.op_cost[name] for name, flag in seq if flag)
    outcome, sizes = answer.outcome, answer.sizes
    return SolveResult(
        seq=seq, decisions=decisions, stage_order=tuple(op.name for op in staged.ops),
        peak_bytes=memory_trace(staged, seq).peak_bytes,
        booked_peak_bytes=answer.booked, baselines=base, persistent_bytes=staged.persistent_bytes,
        recomputes=sum(flag for _, flag in seq), recompute_cost=cost, planned_cost=planned,
        base_cost=sum(staged.op_cost.values()), status=status_of(outcome, options.backend.gap), gap=outcome.gap,
        seconds=clock.now() - plan.start, variables=sizes.variables, constraints=sizes.constraints,
        variables_unpruned=sizes.unpruned, space=space_of(options), timed_out=outcome.timed_out,
        models_need=answer.models_need, parked=answer.parked, park_cost=answer.park_cost)


def status_of(outcome: Outcome, tolerance: float) -> Status:
    if outcome.status is RunStatus.OPTIMAL or (outcome.gap is not None and outcome.gap <= tolerance):
        return Status.OPTIMAL
    return Status.FEASIBLE if outcome.gap is not None else Status.HEURISTIC


def expanded_result(graph: TrainGraph, views: Collapsed, result: SolveResult) -> SolveResult:
    """A result on the graph without views as a result on the real one: views written back where they are read."""
    seq = expanded(views, result.seq)
    check_ready(graph, seq)
    check_in_place(graph, seq)
    return replace(result, seq=seq, peak_bytes=memory_trace(graph, seq).peak_bytes,
                   baselines=baselines(graph), persistent_bytes=graph.persistent_bytes,
                   recomputes=sum(flag for _, flag in seq), recompute_cost=view_cost(graph, seq, views),
                   base_cost=sum(graph.op_cost.values()))


def result_on(graph: TrainGraph, result: SolveResult, seq: RunSequence) -> SolveResult:
    """`result` (solved on a model of `graph`, such as solver.resident's) with the figures `seq` has on `graph`;
    its decisions over the stage order less the model's own ops (a recompute in the stage of one of them runs in
    the next stage)."""
    kept = [k for k, name in enumerate(result.stage_order) if name in graph.index]
    position = {k: n for n, k in enumerate(kept)}
    stage, following = {}, len(kept)
    for k in reversed(range(len(result.stage_order))):
        following = position.get(k, following)
        stage[k] = following
    decisions = Decisions(frozenset((stage[t], position[i]) for t, i in result.decisions.recomputes))
    return replace(result, seq=seq, peak_bytes=memory_trace(graph, seq).peak_bytes,
                   baselines=baselines(graph), persistent_bytes=graph.persistent_bytes,
                   base_cost=sum(graph.op_cost.values()), decisions=decisions,
                   stage_order=tuple(result.stage_order[k] for k in kept))


def planned_sequence(result: SolveResult) -> RunSequence:
    """The decisions of `result` as a sequence over its stage order (views left out): the schedule its proof is
    about, and the form a warm start of the same stage order takes (what runs may have moved an op later)."""
    return result.decisions.over(result.stage_order)
