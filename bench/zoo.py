"""The training zoo of Deeploy's training branch swept end to end: one line per model.

For each model (a split step: `<name>_train` beside `<name>_optimizer`), `ckpt sweep` over the budgets for
Siracusa: lowering, the calibration on gvsoc, a solve per budget, each point's two networks generated, built with
the branch's harness and run on this host and on gvsoc. The line says: the lowered graph's nodes, the points run
(and how many of them passed every check), the solve seconds, the gvsoc seconds per point, and the train network's
cycles per mini-batch and the optimizer's per update at the graph order and at the cheapest point whose whole
step fits the chip's L2 (or "none fits"). Needs the training branch installed (pip install
../shared/deeploy-train); under the release each model's line says so.

Run: python bench/zoo.py [--model DIR ...] [--range 0.5:0.9] [--home L3] [--jobs N] [--outdir DIR] [--smoke]
(default models: the five of ../shared/models; MobileNetV1 and CCT come from Deeploy's repository at a0e1e531:
pass their folders; --smoke: SimpleMLP, one budget.)
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from common import BenchParser, budget_range, existing, jobs, removed_on_error, run_bench, seconds, split_step

from ckpt import deeploy_bridge
from ckpt.budgets.ranges import parse_range
from ckpt.budgets.sweep import SweepOptions, run_sweep
from ckpt.deeploy_bridge.setup import setup_for
from ckpt.deeploy_identity import Flavour, deeploy_flavour, deeploy_label
from ckpt.files import check_output_dir
from ckpt.paths import shared_models
from ckpt.pipeline.row import BASELINE
from ckpt.replay.run import ReplayOptions
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

ZOO = ("simplemlp_train", "autoencoder_train", "dscnn_train", "resnet8_train", "cct_lora_train")
HEAD = ("| model | nodes | points run (all checks pass) | solve s | gvsoc s per point | train cycles graph order | "
        "opt cycles graph order | cheapest fitting point | its train cycles | its opt cycles |")


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _line(model: Path, result) -> str:
    rows = result.rows
    base = next((r for r in rows if r.status == BASELINE), None)
    run = [r for r in rows if r.replayed_peak is not None]
    passed = [r for r in run if r.verified]
    fitting = [r for r in passed if r.fits_on_chip and r.cycles is not None]
    best = min(fitting, key=lambda r: (r.cycles + (r.optimizer_cycles or 0), r.label), default=None)
    stages = result.stage_seconds
    per_point = stages.get("gvsoc", 0.0) / max(1, len(run))
    nodes = len(deeploy_bridge.lower(model, "siracusa").model.graph.node)

    def cell(value) -> str:
        return "-" if value is None else str(value)

    return (f"| {model.name} | {nodes} | {len(run)} ({len(passed)}) | {stages.get('solve', 0.0):.1f} | "
            f"{per_point:.1f} | {cell(base and base.cycles)} | {cell(base and base.optimizer_cycles)} | "
            f"{best.label if best else 'none fits'} | {cell(best and best.cycles)} | "
            f"{cell(best and best.optimizer_cycles)} |")


def main() -> int:
    parser = BenchParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", type=existing, help="a split step's train folder (repeatable)")
    parser.add_argument("--range", default="0.5:0.9", type=budget_range)
    parser.add_argument("--home", default="L3", choices=("L3", "L2"))
    parser.add_argument("--jobs", type=jobs, default=0, help="points at once (0: the core count)")
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    parser.add_argument("--outdir")
    parser.add_argument("--smoke", action="store_true", help="SimpleMLP, one budget")
    args = parser.parse_args()
    models = [Path(m) for m in args.model] if args.model else [shared_models() / m for m in ZOO]
    if args.smoke:
        models, args.range = models[:1] if args.model else [shared_models() / ZOO[0]], "0.9:0.9"
    for model in models:
        split_step(model)
    if args.outdir:
        check_output_dir(args.outdir)
    print(f"Deeploy {deeploy_label()}; budgets {args.range}, home {args.home}")
    print()
    print(HEAD)
    print("|" + "---|" * HEAD.count(" | ") + "---|")
    if deeploy_flavour() is not Flavour.TRAINING_BRANCH:
        for model in models:
            print(f"| {model.name} | - | needs Deeploy's training branch (pip install ../shared/deeploy-train) |"
                  + " - |" * 7)
        return 0
    with tempfile.TemporaryDirectory(prefix="ckpt_zoo_") as scratch:
        root = Path(args.outdir) if args.outdir else Path(scratch)
        with removed_on_error(root, *(root / model.name for model in models)):
            for model in models:
                options = SweepOptions(fractions=tuple(parse_range(args.range)), target="siracusa",
                                       jobs=min(args.jobs, os.cpu_count() or 1),
                                       solve=SolveOptions(backend=BackendOptions(time_limit=args.time_limit)),
                                       replay=ReplayOptions(deeploy=setup_for("siracusa", args.home)))
                result = run_sweep(model, root / model.name, options, progress)
                print(_line(model, result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
