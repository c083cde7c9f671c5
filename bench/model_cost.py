"""What building the exact and the focused model and handing each to HiGHS really costs, in CPU seconds, beside
what solver/model/time_plan.py predicts from the model's size (the constants of `model_seconds` come from this
bench's table).

    python bench/model_cost.py none:resnet8_train:0.5 siracusa:cct_lora_train:0.4 ...
    python bench/model_cost.py --smoke     (the built-in MLP example at 0.5)

Per cell (target:graph:fraction of the graph-order peak): the recompute variables, the model's variables, the
predicted build + handover seconds (without MIN_STAGE_SECONDS), the measured build seconds (milp.build), the
handover (a HiGHS run stopped at its first interrupt point, through backends.run as a solve makes it, here in
this process: PuLP's copy into HiGHS, HiGHS's presolve, which no time limit interrupts, the answer read back; a
solve forks the watchdog's child for it, whose kill after a second would cut this measurement short), and the
least limit at which time_plan gives the models their share.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from common import parse_args  # noqa: E402
from decisive import graph_of  # noqa: E402

from ckpt.solver.graph.baselines import baselines, reorder  # noqa: E402
from ckpt.solver.graph.views import collapsed  # noqa: E402
from ckpt.solver.model import backends, clock, milp, time_plan  # noqa: E402
from ckpt.solver.model.backends import BackendOptions, run  # noqa: E402
from ckpt.solver.model.clock import Clock  # noqa: E402
from ckpt.solver.model.problem import Problem  # noqa: E402

SMOKE = {"cells": ["none:mlp:0.5"]}


def measure(problem: Problem, budget: int) -> tuple[int, float, float]:
    """Variables, build CPU-s, handover CPU-s of one model."""
    used = clock.cpu_seconds()
    model = milp.build(problem, budget)
    built = clock.cpu_seconds()
    variables = len(model.lp.variables())
    with clock.reading(Clock.CPU):
        run(model.lp, BackendOptions(time_limit=0.01, clock=Clock.CPU))
    return variables, built - used, clock.cpu_seconds() - built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cells", nargs="*", default=[], help="target:graph:fraction, e.g. none:resnet8_train:0.5")
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/model_cost"))
    args = parse_args(parser, SMOKE)
    args.cells = args.cells or (SMOKE["cells"] if args.smoke else [])   # (a positional's default wins over SMOKE)
    if not args.cells:
        parser.error("name at least one cell, e.g. none:resnet8_train:0.5")
    args.scratch.mkdir(parents=True, exist_ok=True)
    backends.WATCHED_VARIABLES = 2 ** 62     # in this process (see the module doc)
    per = time_plan.BUILD_SECONDS_PER_RECOMPUTE + time_plan.VARIABLES_PER_RECOMPUTE \
        * time_plan.HANDOVER_SECONDS_PER_VARIABLE
    print("| cell | model | recomputes | variables | var/rec | predicted build+handover s | build s | handover s | "
          "build s/rec | handover s/var | limit_for_models s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for spec in args.cells:
        target, name, fraction = spec.split(":")
        graph = collapsed(graph_of(f"{name}@{target}", args.scratch)).without_views
        staged = reorder(graph, list(baselines(graph).min_memory_order))
        budget = int(float(fraction) * baselines(graph).graph_order_peak)
        for label, focus in (("exact", False), ("focused", True)):
            problem = Problem(staged, focus=focus)
            recomputes = sum(len(problem.recompute_stages(i)) for i in range(problem.n))
            variables, build, handover = measure(problem, budget)
            print(f"| {spec} | {label} | {recomputes} | {variables} | {variables / recomputes:.1f} | "
                  f"{recomputes * per:.1f} | {build:.1f} | {handover:.1f} | {build / recomputes:.1e} | "
                  f"{handover / variables:.1e} | {time_plan.limit_for_models(Problem(staged)):.0f} |", flush=True)


if __name__ == "__main__":
    main()
