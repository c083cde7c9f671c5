"""Point-relaxation rounds benchmark: what the strengthening rows (solver/model/relaxation.py, `strengthened`) do to
the rounds solver/bounds/bounds.py solves, on fixed point sets.

For each graph and budget (a fraction of its graph-order peak), solve() runs once on the CPU clock, and every
round of the point relaxation it solves as a bound (no headroom, no excluded answer, no local repair) is kept with
its points. Each kept round over at least --min-points points is then solved again without and with the
strengthening rows, --draws times each on one thread with no time limit and the same objective target: CPU seconds
(the median of the draws, children included), HiGHS's nodes, the LP value of the relaxation, and the bound. The
bounds must agree (both are the relaxation's optimum, or HiGHS stopped at the same target); the seconds vary with
the machine's load, the nodes and the LP do not.
Run: python bench/rounds.py [--graphs resnet:0.44,dscnn_train:0.3,mobilenetv1_train:0.2] [--draws 3]
       [--min-points 6] [--time-limit 60] [--smoke]   (the smallest run: the residual CNN at 0.5, one draw)
"""
from __future__ import annotations

import math
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pulp
from common import BenchParser, at_least_one, parse_args, run_bench
from common import seconds as time_limit
from decisive import cpu_seconds, graph_of

from ckpt.solver.graph.baselines import baselines
from ckpt.solver.model import relaxation
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.options import Clock
from ckpt.solver.model.problem import Problem
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.solve import solve

SMOKE = {"graphs": "resnet:0.5", "draws": 1, "min_points": 2, "time_limit": 10.0}


@dataclass(frozen=True)
class Round:
    problem: Problem
    budget: int
    points: tuple[int, ...]
    chained: frozenset[int]
    target: float | None        # the objective at which HiGHS stopped early: a bound proven before


def rounds_of(graph, fraction: float, limit: float) -> list[Round]:
    """The bound rounds the solve of `graph` at `fraction` solved, in order."""
    kept: list[Round] = []
    solve_round = relaxation.Relaxation.solve

    def spied(model: relaxation.Relaxation, seconds: float | None, target: float | None = None) -> float:
        if not (model.headroom or model.excluded or model.free is not None or model.feasibility):
            kept.append(Round(model.problem, model.budget, tuple(model.points), model.chained, target))
        return solve_round(model, seconds, target)

    relaxation.Relaxation.solve = spied
    try:
        budget = int(fraction * baselines(graph).graph_order_peak)
        solve(graph, SolveOptions(budget=budget, backend=BackendOptions(time_limit=limit, clock=Clock.CPU)))
    finally:
        relaxation.Relaxation.solve = solve_round
    return kept


def fresh(found: Round, strengthened: bool) -> relaxation.Relaxation:
    return relaxation.Relaxation(found.problem, found.budget, list(found.points), chained=found.chained, threads=1,
                                 strengthened=strengthened)


def lp_value(model: relaxation.Relaxation) -> float:
    """The relaxation's LP optimum (every variable continuous)."""
    model.build()
    for var in model.lp.variables():
        var.cat = pulp.LpContinuous
    model.lp.solve(pulp.HiGHS(msg=False, mip=False, threads=1))
    return pulp.value(model.lp.objective) or 0.0


def measured(found: Round, strengthened: bool, draws: int) -> tuple[float, float, int, float]:
    """Bound, median CPU seconds, HiGHS nodes, LP value."""
    seconds, bound, nodes = [], math.nan, 0
    for _ in range(draws):
        again = fresh(found, strengthened)
        began = cpu_seconds()
        bound = again.solve(None, found.target)
        seconds.append(cpu_seconds() - began)
        nodes = again.lp.solverModel.getInfo().mip_node_count
    return bound, statistics.median(seconds), nodes, lp_value(fresh(found, strengthened))


def main() -> int:
    parser = BenchParser()
    parser.add_argument("--graphs", default="resnet:0.44,dscnn_train:0.3,mobilenetv1_train:0.2",
                        help="graph:fraction, comma-separated (graph names as bench/decisive.py takes them)")
    parser.add_argument("--draws", type=at_least_one, default=3)
    parser.add_argument("--min-points", type=at_least_one, default=6)
    parser.add_argument("--time-limit", type=time_limit, default=60.0)
    args = parse_args(parser, SMOKE)
    print("| graph | fraction | round | points | checked segments | bound | CPU s before | CPU s after | "
          "nodes before | nodes after | LP before | LP after |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for item in args.graphs.split(","):
            name, _, fraction = item.partition(":")
            graph = graph_of(name, Path(scratch))
            for n, found in enumerate(rounds_of(graph, float(fraction), args.time_limit)):
                if len(found.points) < args.min_points:
                    continue
                before, after = measured(found, False, args.draws), measured(found, True, args.draws)
                agree = "" if before[0] == after[0] else f" (before: {before[0]:.0f})"
                print(f"| {name} | {fraction} | {n} | {len(found.points)} | {len(found.chained)} | "
                      f"{after[0]:.0f}{agree} | {before[1]:.2f} | {after[1]:.2f} | {before[2]} | {after[2]} | "
                      f"{before[3]:.0f} | {after[3]:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
