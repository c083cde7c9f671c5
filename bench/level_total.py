"""Level-total bench: `--budget-total` at each sweep point's total, against that point (CCT2_FT2, Siracusa).

For each budget of a sweep (default 0.6:0.9, step 0.1, and the baseline) it solves the point as `ckpt sweep` does
(the live-byte budget, each point given the cheapest schedule a tighter one found that fits it) and reads the
point's home-level total T (constants + the arena ckpt predicts, which the generated code reserves: the sweep
table's "L3 total"), then solves `--budget-total L3=T` and prints a row: T, the point's cost, the level-total
answer's cost, its status, its seconds and whether it is at least as good. A level total is solved as the
live-byte problem on the arena itself (pipeline/level_total.py), so every answer should cost no more than the
point and be proven optimal. Op costs are the built-in estimate; nothing is replayed or simulated.
Run: python bench/level_total.py [--model DIR] [--budgets 0.6:0.9] [--time-limit S] [--home L3|L2]
     [--smoke]   (the smallest run: a tiny MLP, one budget)
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from common import MODEL_HELP, BenchParser, budget_range, existing, model_folder, parse_args, run_bench, seconds

from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, HOMES
from ckpt.errors import CkptError
from ckpt.pipeline.deployed_solve import SolveRequest, solve_and_document
from ckpt.pipeline.load import load_for_target
from ckpt.pipeline.point import carried
from ckpt.replay.predict import predicted_levels
from ckpt.schedule_file import Schedule
from ckpt.solver.budget import LevelTotal, parse_budget
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

SMOKE = {"budgets": "0.8:0.8", "time_limit": 10.0}   # on the tiny model, a budget met only by recomputes
TARGET = "siracusa"
GAP = 1e-4


def fractions(text: str, step: float = 0.1) -> list[float]:
    low, _, high = text.partition(":")
    low, high = float(low), float(high or low)
    count = round((high - low) / step)
    return sorted({round(high - k * step, 4) for k in range(count + 1)}, reverse=True)


def sweep_points(model: str, budgets: list[float], options: SolveOptions, home: str) -> list[Point]:
    """The baseline (the graph order, no recompute) and each budget's point as the sweep gives them."""
    loaded = load_for_target(model, TARGET, home=home)
    order = [(op.name, 0) for op in loaded.graph.ops]
    baseline = predicted_levels(loaded.lowered, order, loaded.weights, home)[home]
    found: list[tuple[str, Schedule | None, str]] = []
    for fraction in budgets:
        try:
            doc, _ = solve_and_document(SolveRequest(model, TARGET, parse_budget(str(fraction)), None, options,
                                                     home=home))
            found.append((f"{fraction:g}", doc, ""))
        except CkptError as err:
            found.append((f"{fraction:g}", None, str(err)[:70]))
    solved = [(label, doc) for label, doc, _ in found if doc is not None]
    points = [Point("baseline", baseline.total, 0)]
    for label, doc, why in found:
        if doc is None:
            points.append(Point(label, None, None, why))
            continue
        doc, _ = carried(doc, [(other, s) for other, s in solved if other != label], doc.budget.bytes, GAP)
        points.append(Point(label, doc.predicted.levels[home]["total"], doc.predicted.recompute_cost))
    return points


@dataclass(frozen=True)
class Point:
    label: str
    total: int | None             # the home level's total its schedule deploys with (None: no schedule)
    cost: int | None              # its recompute cycles
    why: str = ""


def main() -> int:
    parser = BenchParser()
    parser.add_argument("--model", type=existing, default=None, help=MODEL_HELP)
    parser.add_argument("--budgets", type=budget_range, default="0.6:0.9",
                        help="LOW:HIGH, step 0.1, as `ckpt sweep` takes them")
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    parser.add_argument("--home", default=DEFAULT_SETUP.default_mem_level, choices=HOMES)
    args = parse_args(parser, SMOKE)
    options = SolveOptions(backend=BackendOptions(time_limit=args.time_limit, gap=GAP))
    with model_folder(args.model, args.smoke) as model:
        points = sweep_points(model, fractions(args.budgets), options, args.home)
        print(f"model {model} (target {TARGET}, home {args.home}): time limit {args.time_limit} s per solve")
        print(f"| point | {args.home} total T B | point's cost | total's cost | planned cost | status | "
              "bound (on the planned cost) | seconds | at least as good |")
        print("|---|---|---|---|---|---|---|---|---|")
        for point in points:
            if point.total is None:
                print(f"| {point.label} | - | - | - | - | - | - | - | {point.why} |", flush=True)
                continue
            total = point.total
            request = SolveRequest(model, TARGET, None, LevelTotal(f"{args.home}={total}", args.home, total),
                                   options, home=args.home)
            began = time.perf_counter()
            try:
                answer, _ = solve_and_document(request)
            except CkptError as err:
                cells = ["-", "-", str(err)[:70], "-", f"{time.perf_counter() - began:.1f}", "no"]
            else:
                cost, solver = answer.predicted.recompute_cost, answer.solver
                good = cost <= point.cost and answer.predicted.checked_bytes <= total
                cells = [cost, answer.predicted.planned_cost, solver.status, solver.cost_lower_bound,
                         f"{time.perf_counter() - began:.1f}",
                         "yes" if good else "NO"]
            print(f"| {point.label} | {total} | {point.cost} | " + " | ".join(str(c) for c in cells) + " |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
