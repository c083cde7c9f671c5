"""The solver's stages swapped in and out: what each one adds (cost, status, gap, seconds) per budget.

A method is a tuple of stages with one signature (solver/stages.py); this runs the greedy method, then the MILP
method with stages left out, on one graph. A row whose stages cannot answer says so.
Run: python bench/stages.py [--model DIR] [--budgets 0.9,0.8,0.7] [--time-limit S]
     [--smoke]   (the smallest run: a tiny MLP, one budget)
"""
from __future__ import annotations

import os
import sys

from common import MODEL_HELP, BenchParser, existing, fractions, model_folder, parse_args, run_bench, seconds

from ckpt.errors import CkptError
from ckpt.solver import stages as st
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.onnx_loader import load_graph
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.options import Method
from ckpt.solver.model.records import SolveOptions
from ckpt.solver.solve import solve

SMOKE = {"budgets": "0.8", "time_limit": 10.0}   # on the tiny model, a budget met only by recomputes
VARIANTS = {
    "greedy method": st.STAGES[Method.GREEDY],
    "greedy, bound, repair, exact": (st.greedy_start, st.bound_stage, st.repair_stage, st.exact_stage),
    "greedy, exact": (st.greedy_start, st.exact_stage),
    "MILP method (all five)": st.STAGES[Method.MILP],
}


def main() -> int:
    parser = BenchParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=existing, default=None, help=MODEL_HELP)
    parser.add_argument("--budgets", type=fractions, default="0.9,0.8,0.7")
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    args = parse_args(parser, SMOKE)
    with model_folder(args.model, args.smoke) as model:
        graph = load_graph(model)
    peak = baselines(graph).graph_order_peak
    print(f"model {model} (target none), time limit {args.time_limit:g} s; machine: {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.2f} at the start")
    print("| budget | stages | recompute cost | status | gap | seconds |")
    print("|---|---|---|---|---|---|")
    for text in args.budgets.split(","):
        options = SolveOptions(budget=int(float(text) * peak), backend=BackendOptions(time_limit=args.time_limit))
        for name, stages in VARIANTS.items():
            try:
                result = solve(graph, options, stages=stages)
            except CkptError as err:
                print(f"| {text} | {name} | - | {str(err).splitlines()[0][:60]} | - | - |", flush=True)
                continue
            gap = "-" if result.gap is None else f"{100 * result.gap:.3f}%"
            print(f"| {text} | {name} | {result.recompute_cost} | {result.status} | {gap} | {result.seconds:.1f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
