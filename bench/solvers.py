"""Solve benchmark: CCT2_FT2 (as it is, target none) at budgets 0.9/0.8/0.7/0.6, HiGHS and CBC side by side.

Prints one row per (budget, solver): variables, constraints, seconds, status, gap, predicted peak and recompute
cost; the greedy heuristic alone is a row too.
A row with 0 variables was proven before any MILP was built: a schedule (the greedy's, or the point relaxation's
own answer replayed) met the relaxation's lower bound (solver/bounds/bounds.py, always on HiGHS). The gap is to the
better of that bound and the solver's own.
Run: python bench/solvers.py [--model DIR] [--time-limit S] [--budgets 0.9,0.8,0.7,0.6] [--solvers highs,cbc]
     [--smoke]   (the smallest run: a tiny MLP, one budget)
"""
from __future__ import annotations

import sys
import time

from common import MODEL_HELP, BenchParser, existing, fractions, model_folder, names_of, parse_args, run_bench, seconds

from ckpt.errors import CkptError
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.solve import solve

SMOKE = {"budgets": "0.7", "time_limit": 10.0}   # on the tiny model, a budget met only by recomputes


def row(fraction: float, label: str, cells: list) -> str:
    return f"| {fraction:.2f} | {label} | " + " | ".join(str(c) for c in cells) + " |"


def main() -> int:
    parser = BenchParser()
    parser.add_argument("--model", type=existing, default=None, help=MODEL_HELP)
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    parser.add_argument("--budgets", type=fractions, default="0.9,0.8,0.7,0.6")
    parser.add_argument("--solvers", type=names_of("highs", "cbc"), default="highs,cbc")
    args = parse_args(parser, SMOKE)
    with model_folder(args.model, args.smoke) as model:
        graph = load_graph(model)
    base = baselines(graph)
    print(f"model {model}: {len(graph.ops)} ops, graph-order peak {base.graph_order_peak} B, "
          f"min-memory order {base.min_memory_peak} B, floor {base.lower_bound} B, time limit {args.time_limit} s")
    print("| budget | solver | variables (unpruned) | constraints | seconds | status | gap | peak B | cost cycles |")
    print("|---|---|---|---|---|---|---|---|---|")
    for fraction in map(float, args.budgets.split(",")):
        budget = int(fraction * base.graph_order_peak)
        for method, name in [("greedy", "greedy")] + [("milp", s) for s in args.solvers.split(",")]:
            options = SolveOptions(budget=budget, method=method,
                                   backend=BackendOptions(name=name if method == "milp" else "highs",
                                                         time_limit=args.time_limit))
            start = time.perf_counter()
            try:
                r = solve(graph, options)
            except CkptError as err:
                cells = ["-", "-", f"{time.perf_counter() - start:.1f}", str(err)[:60], "-", "-", "-"]
                print(row(fraction, name, cells))
                continue
            gap = "-" if r.gap is None else f"{100 * r.gap:.2f}%"
            print(row(fraction, name, [f"{r.variables} ({r.variables_unpruned})", r.constraints, f"{r.seconds:.1f}",
                                       r.status, gap, r.peak_bytes, r.recompute_cost]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
