"""How solve() shares its time limit: models that cannot be built and run in their share leave it to the bound."""
import math
import time
from dataclasses import dataclass

import onnx
import pytest
from graphs import chain

from ckpt import examples
from ckpt.solver import stages
from ckpt.solver.bounds.bounds import Bound
from ckpt.solver.graph.baselines import baselines, reorder
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.graph.schedule import Decisions
from ckpt.solver.graph.simulate import memory_trace
from ckpt.solver.graph.views import collapsed
from ckpt.solver.model import milp, time_plan
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import SolveOptions, Status
from ckpt.solver.model.time_plan import TimePlan
from ckpt.solver.solve import solve


@pytest.fixture(scope="module")
def resnet(tmp_path_factory):
    folder = tmp_path_factory.mktemp("resnet")
    onnx.save(examples.resnet(), folder / "network.onnx")
    return load_graph(folder / "network.onnx")


def test_whether_models_fit_depends_on_size_and_limit_only(resnet):
    problem = Problem(reorder(resnet, list(baselines(resnet).min_memory_order)))
    needed = 2 * time_plan.model_seconds(problem)
    share = (1 - time_plan.BOUND_UNTIL) * (1 - time_plan.RESERVE_SHARE)
    assert time_plan.models_fit(problem, TimePlan(0.0, None))
    assert time_plan.models_fit(problem, TimePlan(0.0, 1.01 * needed / share))
    assert not time_plan.models_fit(problem, TimePlan(0.0, 0.99 * needed / share))


def test_models_that_fit_are_run_not_only_built(resnet):
    """Where the models fit, each one's share covers its build, its handover to HiGHS (by the built model's own
    size, what run_model checks before it runs one) and a stage's least run: else it is built for nothing."""
    problem = Problem(reorder(resnet, list(baselines(resnet).min_memory_order)))
    recomputes = sum(len(problem.recompute_stages(i)) for i in range(problem.n))
    variables = len(milp.build(problem, baselines(resnet).graph_order_peak // 2).lp.variables())
    least = recomputes * time_plan.BUILD_SECONDS_PER_RECOMPUTE + time_plan.MIN_STAGE_SECONDS \
        + variables * time_plan.HANDOVER_SECONDS_PER_VARIABLE
    assert time_plan.model_seconds(problem) >= 0.9 * least


def test_without_the_models_the_bound_and_repairs_still_answer(resnet, monkeypatch):
    """A limit too short for the models: none is built, and the schedule found is checked, fits and is
    proven optimal by the bound alone (residual CNN at 0.7)."""
    def refused(*args, **kwargs):
        raise AssertionError("a model was built although it could not run in its share")

    monkeypatch.setattr(milp, "build", refused)
    budget = int(0.7 * baselines(resnet).graph_order_peak)
    problem = Problem(reorder(resnet, list(baselines(resnet).min_memory_order)))
    limit = 5.0
    assert not time_plan.models_fit(problem, TimePlan(0.0, limit))
    messages = []
    result = solve(resnet, SolveOptions(budget=budget, backend=BackendOptions(time_limit=limit)), messages.append)
    assert memory_trace(resnet, result.seq).peak_bytes <= budget
    assert result.status is Status.OPTIMAL and result.recompute_cost > 0


def test_a_repair_that_fails_on_the_newest_near_miss_falls_back_to_older_ones(monkeypatch):
    """The relaxation's near misses are repaired newest first, and an older one is tried when that fails (on
    a 2-block CCT at 0.30 under load the newest one could not be repaired and the cell ended without a
    schedule); the cheapest repair wins."""
    graph = reorder(chain(8), list(baselines(chain(8)).min_memory_order))
    budget = baselines(graph).min_memory_peak - 8
    older, newer = Decisions(frozenset()), Decisions(frozenset({(len(graph.ops) - 1, 0)}))
    real, tried = stages.greedy, []

    def greedy(staged, limit, start=None, deadline=None):
        tried.append(start)
        return None if start == newer else real(staged, limit, start=start, deadline=deadline)

    monkeypatch.setattr(stages, "greedy", greedy)
    repaired = stages.from_relaxation(graph, Bound(0.0, (), sketches=(older, newer)), budget, None)
    assert tried == [newer, older]
    assert repaired is not None and memory_trace(graph, repaired.sequence(graph)).peak_bytes <= budget


@dataclass(frozen=True)
class _Costed:
    """A schedule that only has a cost (the repairs' choice looks at nothing else)."""
    cycles: int

    def cost(self, graph) -> int:
        return self.cycles


def test_every_repair_is_polished_where_nothing_else_is_searched_from(monkeypatch):
    """A repair far dearer than another can polish to the cheaper schedule (CCT at 0.3: twice the cheapest
    repair's cost before, below its polish after). With `others` (the greedy found no schedule and the models
    cannot run) every repair is polished, cheapest first; without, only the cheapest: the search or the models
    have that time."""
    cheap, dear = _Costed(10), _Costed(20)
    repaired, polished = {"newer": cheap, "older": dear}, {cheap: _Costed(9), dear: _Costed(5)}
    monkeypatch.setattr(stages, "greedy", lambda staged, limit, start=None, deadline=None: repaired[start])
    monkeypatch.setattr(stages, "polish", lambda staged, schedule, budget, deadline: polished[schedule])
    floor = Bound(0.0, (), sketches=("older", "newer"))
    assert stages.from_relaxation(None, floor, 100, None).cost(None) == 9
    assert stages.from_relaxation(None, floor, 100, None, others=True).cost(None) == 5


def test_near_misses_are_repaired_unless_the_relaxation_has_a_schedule_at_the_bound(monkeypatch):
    """A walked schedule that fits but costs more than the bound does not stop the repairs of the near
    misses (one of them may be cheaper); one at the bound does (nothing is cheaper)."""
    graph = reorder(chain(8), list(baselines(chain(8)).min_memory_order))
    budget = baselines(graph).min_memory_peak - 8
    sketch = Decisions(frozenset())
    fitting = stages.greedy(graph, budget)
    real, tried = stages.greedy, []

    def greedy(staged, limit, start=None, deadline=None):
        tried.append(start)
        return real(staged, limit, start=start, deadline=deadline)

    monkeypatch.setattr(stages, "greedy", greedy)
    cost = fitting.cost(graph)
    stages.from_relaxation(graph, Bound(0.0, (), schedule=fitting, sketches=(sketch,)), budget, None)
    assert tried == [sketch]
    tried.clear()
    stages.from_relaxation(graph, Bound(float(cost), (), schedule=fitting, sketches=(sketch,)), budget, None)
    assert tried == []


def test_models_skipped_for_their_size_are_not_a_time_limit_that_ran_out(resnet, monkeypatch):
    """Issue 54, defect 23: a limit too short for the models (judged by their size) and a bound that finishes
    at once without meeting the schedule: the solve ends in a fraction of its limit, so the warning says the
    models were not run and the limit at which they would be, not that the time limit ran out."""
    from ckpt.pipeline.solve_summary import not_proven_warning

    staged = collapsed(resnet).without_views         # what solve() stages (its views re-made)
    problem = Problem(reorder(staged, list(baselines(staged).min_memory_order)))
    need = time_plan.limit_for_models(problem)
    limit = 0.99 * need
    assert not time_plan.models_fit(problem, TimePlan(0.0, limit)) and time_plan.models_fit(problem,
                                                                                          TimePlan(0.0, need))
    monkeypatch.setattr(stages, "lower_bound", lambda *args, **kwargs: Bound(1.0, (0,)))   # proves next to nothing
    budget = int(0.7 * baselines(resnet).graph_order_peak)
    result = solve(resnet, SolveOptions(budget=budget, backend=BackendOptions(time_limit=limit)))
    assert result.status is not Status.OPTIMAL and result.seconds < 0.5 * limit
    assert not result.timed_out and result.models_need == pytest.approx(need)
    text = not_proven_warning(result)
    assert "ran out" not in text and f"they run from --time-limit {math.ceil(need)}" in text


def test_a_bound_that_used_its_share_to_the_end_ran_out_of_time(monkeypatch):
    """A solve whose models do not fit its limit (as the residual CNN's below) and whose bound ran until its
    deadline: that limit did run out. A chain's models need less time than the CNN's: the bound's wait is shorter."""
    def slow_bound(problem, budget, seconds, *args, **kwargs):
        time.sleep(seconds + 0.01)
        return Bound(1.0, (0,))

    graph = chain(8)
    problem = Problem(reorder(graph, list(baselines(graph).min_memory_order)))
    limit = 0.5 * time_plan.limit_for_models(problem)
    monkeypatch.setattr(stages, "lower_bound", slow_bound)
    budget = baselines(graph).min_memory_peak - 8
    result = solve(graph, SolveOptions(budget=budget, backend=BackendOptions(time_limit=limit)))
    assert result.timed_out and result.models_need is not None


def test_the_exact_model_s_dearer_answer_never_replaces_a_cheaper_schedule_known(monkeypatch):
    """The exact model, stopped by its limit, can hold a dearer schedule than its warm start (HiGHS may not keep
    the start): the answer is the cheapest known, here the start it was given."""
    graph = chain(6)
    budget = int(0.6 * baselines(graph).graph_order_peak)
    attempt = stages.Attempt(graph, baselines(graph), SolveOptions(budget=budget), TimePlan(time.perf_counter(), None),
                             lambda event: None)
    cheap = stages.greedy(graph, budget)
    dear = Decisions(cheap.recomputes | {(t, 0) for t in range(2, len(graph.ops)) if (t, 0) not in cheap.recomputes})
    assert memory_trace(graph, dear.sequence(graph)).peak_bytes <= budget and dear.cost(graph) > cheap.cost(graph)
    stopped = stages.Outcome(stages.RunStatus.FEASIBLE, 0.5, 1.0, 0.0, True, True)
    ran = stages.ModelRun(stopped, dear, None, stages.Sizes())
    monkeypatch.setattr(stages, "run_model", lambda *args, **kwargs: ran)
    monkeypatch.setattr(stages, "polish", lambda graph, decisions, *args: decisions)   # (it would drop the extras)
    found = stages.exact_stage(attempt, stages.Found(start=cheap))
    assert found.answer.decisions == cheap
