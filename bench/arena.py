"""Arena benchmark (issue 13): what the tiled deployment reserves at its home level (L3), per CCT2_FT2 point.

Per point (the graph order, then schedules solved at each budget of --range for Siracusa), one tiled Deeploy run
with Deeploy's TetrisRandom and one with ckpt's layout (omnimalloc, in process), both with the replay as the
scheduler, and ckpt's prediction from the schedule alone. Columns (bytes unless named):
  live peak      ckpt's live activation peak (what the solver bounds)
  predicted      the L3 arena ckpt predicts (its model of Deeploy's lifetimes, laid out by ckpt)
  Deeploy live   the most bytes alive at once among the L3 blocks Deeploy handed ckpt's allocator (views out)
  Tetris         the L3 arena TetrisRandom's generated code reserves
  ckpt           the L3 arena ckpt's generated code reserves (must equal `predicted`, and `Deeploy live`)
  placed by      the omnimalloc allocator that placed the L3 blocks
  Tetris s / ckpt s   wall seconds of each whole tiled deploy (front, mid, back end and code)
Run: python bench/arena.py [--model DIR] [--range 0.6:0.9] [--time-limit S]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace

from onnx_graphsurgeon.logger import G_LOGGER

from ckpt import deeploy_bridge
from ckpt.budgets.ranges import parse_range
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, Allocator
from ckpt.errors import CkptError
from ckpt.paths import shared_models
from ckpt.pipeline.load import load_for_target
from ckpt.pipeline.solve import solve_model
from ckpt.replay.predict import predicted_levels
from ckpt.replay.scheduler import ReplayScheduler
from ckpt.solver.backends import SolverOptions
from ckpt.solver.budget import parse_budget
from ckpt.solver.simulate import memory_trace, plain_sequence
from ckpt.solver.solve import SolveOptions

TARGET = "siracusa"
HEADER = ["point", "live peak", "predicted", "Deeploy live", "Tetris", "ckpt", "ckpt/live", "placed by",
          "Tetris s", "ckpt s"]


def tiled(model, doc: dict, allocator: Allocator) -> tuple[object, float]:
    setup = replace(DEFAULT_SETUP, allocator=allocator)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ckpt_arena_") as code, G_LOGGER.suppress(G_LOGGER.ERROR):
        figures = deeploy_bridge.deploy(model, ReplayScheduler.from_document(doc), TARGET, tiled=True, setup=setup,
                                        code_dir=code)
    return figures, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=os.environ.get("CKPT_BENCH_MODEL", str(shared_models() / "cct2_ft2")))
    parser.add_argument("--range", default="0.6:0.9")
    parser.add_argument("--time-limit", type=float, default=60.0)
    args = parser.parse_args()
    loaded = load_for_target(args.model, TARGET)
    graph = loaded.graph
    points = [("graph order", {"seq": [list(e) for e in plain_sequence(graph)], "graph": {}}, None)]
    for fraction in parse_range(args.range):
        options = SolveOptions(budget=None, backend=SolverOptions(time_limit=args.time_limit))
        try:
            doc, result = solve_model(args.model, parse_budget(str(fraction)), TARGET, options)
        except CkptError as err:
            print(f"{fraction:g}: {err}", file=sys.stderr)
            continue
        points.append((f"{fraction:g}", doc, result.peak_bytes))
    print(f"model {args.model}, target {TARGET}, L3 home level, {len(graph.ops)} lowered nodes")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    for label, doc, live in points:
        seq = [(name, flag) for name, flag in doc["seq"]]
        live = live if live is not None else memory_trace(graph, seq).peak_bytes
        predicted = predicted_levels(loaded.lowered, seq)["L3"]
        tetris, tetris_s = tiled(loaded.lowered.model, doc, Allocator.TETRIS)
        ckpt, ckpt_s = tiled(loaded.lowered.model, doc, Allocator.CKPT)
        arena = ckpt.arena["L3"]
        cells = [label, live, predicted.arena, ckpt.live_max["L3"], tetris.arena["L3"], arena,
                 f"{arena / ckpt.live_max['L3']:.4f}", ckpt.placed_by.get("L3", "-"), f"{tetris_s:.1f}",
                 f"{ckpt_s:.1f}"]
        print("| " + " | ".join(str(c) for c in cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
