"""Arena benchmark: what the tiled deployment reserves at its home level (L3), per CCT2_FT2 point, with weights
updated in place (ckpt's default: one copy per constant, the SGD writes the weight) and out of place (Deeploy's
own layout: each update a new arena buffer, each reader its own copy of a constant).

Per weight layout and point (the graph order, then schedules solved for that layout at each budget of --range
for Siracusa), one tiled Deeploy run with Deeploy's TetrisRandom and one with ckpt's layout (omnimalloc, in
process), both with the replay as the scheduler, and ckpt's prediction from the schedule alone. Columns (bytes
unless named):
  live peak      ckpt's live activation peak (what the solver bounds)
  + inputs       the live peak plus the graph inputs the arena also holds (the arena's floor with weights in place)
  predicted      the L3 arena ckpt predicts (its model of Deeploy's lifetimes, laid out by ckpt)
  Deeploy live   the most bytes alive at once among the L3 blocks Deeploy handed ckpt's allocator (views out)
  Tetris         the L3 arena TetrisRandom's generated code reserves
  ckpt           the L3 arena ckpt's generated code reserves (must equal `predicted`, and `Deeploy live`)
  ckpt/+inputs   how far ckpt's arena is above the live peak plus the inputs
  constants      the L3 constants the code keeps (Deeploy's count, less the copies that share bytes)
  L3 total       constants + ckpt's arena: what L3 must hold
  placed by      the omnimalloc allocator that placed the L3 blocks
  Tetris s / ckpt s   wall seconds of each whole tiled deploy (front, mid, back end and code)
Run: python bench/arena.py [--model DIR] [--range 0.6:0.9] [--time-limit S] [--weights both|in-place|out-of-place]
     [--smoke]   (the smallest run: a tiny MLP, one budget)
"""
from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import replace

from common import MODEL_HELP, BenchParser, budget_range, existing, model_folder, parse_args, run_bench, seconds
from onnx_graphsurgeon.logger import G_LOGGER

from ckpt import deeploy_bridge
from ckpt.budgets.ranges import parse_range
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, Allocator, WeightUpdate
from ckpt.errors import CkptError
from ckpt.pipeline.deployed_solve import solve_model
from ckpt.pipeline.load import load_for_target
from ckpt.replay.predict import predicted_levels
from ckpt.replay.scheduler import ReplayScheduler
from ckpt.schedule_file import Schedule
from ckpt.solver.budget import parse_budget
from ckpt.solver.graph.onnx_loader import data_inputs
from ckpt.solver.graph.simulate import memory_trace, plain_sequence
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

TARGET = "siracusa"
SMOKE = {"range": "0.8:0.8", "time_limit": 10.0}   # on the tiny model, a budget met only by recomputes
HEADER = ["weights", "point", "live peak", "+ inputs", "predicted", "Deeploy live", "Tetris", "ckpt", "ckpt/+inputs",
          "constants", "L3 total", "placed by", "Tetris s", "ckpt s"]


def tiled(model, schedule: Schedule, allocator: Allocator, weights: WeightUpdate) -> tuple[object, float]:
    setup = replace(DEFAULT_SETUP, allocator=allocator, weights=weights)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ckpt_arena_") as code, G_LOGGER.suppress(G_LOGGER.ERROR):
        figures = deeploy_bridge.deploy(model, ReplayScheduler.of_schedule(schedule), TARGET, tiled=True, setup=setup,
                                        code_dir=code)
    return figures, time.perf_counter() - start


def main() -> int:
    parser = BenchParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=existing, default=None, help=MODEL_HELP)
    parser.add_argument("--range", type=budget_range, default="0.6:0.9")
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    parser.add_argument("--weights", choices=("both", *(w.value for w in WeightUpdate)), default="both")
    args = parse_args(parser, SMOKE)
    layouts = list(WeightUpdate) if args.weights == "both" else [WeightUpdate(args.weights)]
    with model_folder(args.model, args.smoke) as model:
        rows = [row for weights in layouts for row in _rows(model, args, weights)]
    print(f"model {model}, target {TARGET}, L3 home level")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for cells in rows:
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
    return 0


def _rows(model_dir: str, args, weights: WeightUpdate) -> list[list]:
    loaded = load_for_target(model_dir, TARGET, weights=weights)
    graph, model = loaded.graph, loaded.lowered.model
    inputs = sum(graph.tensor_bytes[i.name] for i in data_inputs(model.graph))
    points = [("graph order", Schedule(tuple(plain_sequence(graph))), None)]
    for fraction in parse_range(args.range):
        options = SolveOptions(backend=BackendOptions(time_limit=args.time_limit))
        try:
            schedule, result = solve_model(model_dir, parse_budget(str(fraction)), TARGET, options, weights=weights)
        except CkptError as err:
            print(f"{weights.value} {fraction:g}: {err}", file=sys.stderr)
            continue
        points.append((f"{fraction:g}", schedule, result.peak_bytes))
    rows = []
    for label, schedule, live in points:
        seq = list(schedule.seq)
        live = live if live is not None else memory_trace(graph, seq).peak_bytes
        predicted = predicted_levels(loaded.lowered, seq, weights)["L3"]
        tetris, tetris_s = tiled(model, schedule, Allocator.TETRIS, weights)
        ckpt, ckpt_s = tiled(model, schedule, Allocator.CKPT, weights)
        arena = ckpt.arena["L3"]
        rows.append([weights.value, label, live, live + inputs, predicted.arena, ckpt.live_max["L3"],
                     tetris.arena["L3"], arena, f"{arena / (live + inputs):.4f}", ckpt.static["L3"],
                     ckpt.static["L3"] + arena, ckpt.placed_by.get("L3", "-"), f"{tetris_s:.1f}", f"{ckpt_s:.1f}"])
    return rows


if __name__ == "__main__":
    sys.exit(run_bench(main))
