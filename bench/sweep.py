"""Sweep benchmark: CCT2_FT2 at budgets 0.9/0.8/0.7/0.6 for Siracusa, the whole pipeline per point.

Each point: solve on Deeploy's lowered graph, replay through Deeploy's non-tiled and tiled flows (code
generation included), verify on the host and build and run the generated code; the baseline (graph order, no
recompute) is replayed too.
Prints the sweep table and where the time went: lowering (once), then per point solve, replay (Deeploy) and
verify, and the wall total. Points run in parallel, so the per-stage sums can exceed the wall time.

--executor dask runs the same sweep on a Dask LocalCluster (separate worker processes, one task each at a time,
as many workers as --jobs), --executor both runs it locally and then on the cluster, each with a fresh lowering
cache and folder, and prints whether the two tables agree and what each took (what the cluster path costs beyond the
local one).
Run: python bench/sweep.py [--model DIR] [--time-limit S] [--jobs N] [--outdir DIR] [--range 0.6:0.9]
                           [--executor local|dask|both] [--smoke]
(a fresh temporary folder unless --outdir is given; an existing --outdir resumes; --smoke: the smallest run, a
tiny MLP, the baseline and one point).
"""
from __future__ import annotations

import os
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from common import MODEL_HELP, BenchParser, budget_range, existing, jobs, model_folder, parse_args, run_bench, seconds
from distributed import LocalCluster

from ckpt.budgets.executors import DaskExecutor, default_jobs
from ckpt.budgets.ranges import parse_range
from ckpt.budgets.sweep import SweepOptions, run_sweep
from ckpt.budgets.table import terminal_table
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

SMOKE = {"range": "1.0:1.0", "time_limit": 10.0}   # on the tiny model: the baseline and one point


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _run(args, options: SweepOptions, label: str, tmp: Path):
    """One sweep with its own lowering cache (the workers inherit it) and folder; locally or on a LocalCluster."""
    if not args.warm_cache:
        os.environ["CKPT_CACHE_DIR"] = str(tmp / f"lowering-cache-{label}")
    outdir = Path(args.outdir) / label if args.outdir else tmp / f"sweep-{label}"
    if label == "local":
        return run_sweep(args.model, outdir, options, progress)
    with LocalCluster(n_workers=default_jobs(options.jobs), threads_per_worker=1, processes=True,
                      dashboard_address=None, scheduler_port=0) as cluster:
        executor = DaskExecutor(cluster.scheduler_address)
        try:
            return run_sweep(args.model, outdir, options, progress, executor=executor)
        finally:
            executor.close()


def _print_result(result, label: str, target: str) -> None:
    print(f"## {label}")
    print(terminal_table(result.rows, target))
    print()
    print("| point | solve s | replay (Deeploy) s | verify s | generated code s |")
    print("|---|---|---|---|---|")
    for point, stages in result.point_seconds.items():
        print(f"| {point} | {stages.get('solve', 0):.1f} | {stages.get('replay', 0):.1f} | "
              f"{stages.get('verify', 0):.1f} | {stages.get('code', 0):.1f} |")
    sums = result.stage_seconds
    print(f"lowering {sums['lowering']:.1f} s (once); summed over points: solve {sums['solve']:.1f} s, "
          f"replay/Deeploy {sums['replay']:.1f} s, verify {sums['verify']:.1f} s, "
          f"generated code (build and run) {sums['code']:.1f} s; "
          f"wall total {result.seconds:.1f} s ({len(result.ran)} run, {len(result.skipped)} skipped)")
    print()


def _untimed(rows) -> list:
    return [replace(row, seconds=None) for row in rows]


def main() -> int:
    parser = BenchParser()
    parser.add_argument("--model", type=existing, default=None, help=MODEL_HELP)
    parser.add_argument("--range", type=budget_range, default="0.6:0.9")
    parser.add_argument("--time-limit", type=seconds, default=40.0)
    parser.add_argument("--jobs", type=jobs, default=0)
    parser.add_argument("--outdir", default=None)
    parser.add_argument("--executor", choices=("local", "dask", "both"), default="local")
    parser.add_argument("--warm-cache", action="store_true",
                        help="use the user's lowering cache (default: a fresh one, so lowering is timed for real)")
    args = parse_args(parser, SMOKE)
    # batch 1: the batch at which the tiny model's generated code computes the goldens
    with model_folder(args.model, args.smoke, batch=1) as model:
        args.model = model
        return sweeps(args)


def sweeps(args) -> int:
    """Run and print the sweep(s); 1 if a point failed or the two executors' tables differ."""
    if not (Path(args.model) / "network.onnx").is_file():
        print(f"no model at {args.model} (set CKPT_BENCH_MODEL)", file=sys.stderr)
        return 1
    options = SweepOptions(fractions=tuple(parse_range(args.range)), target="siracusa", jobs=args.jobs,
                           solve=SolveOptions(backend=BackendOptions(time_limit=args.time_limit)))
    labels = ("local", "dask") if args.executor == "both" else (args.executor,)
    print(f"model {args.model}, target siracusa, budgets {args.range}, time limit {args.time_limit:.0f} s, "
          f"{default_jobs(options.jobs)} jobs (local processes or LocalCluster workers)")
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-sweep-") as tmp:
        results = {label: _run(args, options, label, Path(tmp)) for label in labels}
    for label, result in results.items():
        _print_result(result, label, options.target)
    failed = any(result.failed for result in results.values())
    if len(results) == 2:
        local, dask = results["local"], results["dask"]
        same = _untimed(local.rows) == _untimed(dask.rows)
        print("| executor | wall s | summed solve s | summed replay s |")
        print("|---|---|---|---|")
        for label, result in results.items():
            print(f"| {label} | {result.seconds:.1f} | {result.stage_seconds['solve']:.1f} | "
                  f"{result.stage_seconds['replay']:.1f} |")
        print(f"tables (without solver seconds) {'identical' if same else 'DIFFER'}; "
              f"Dask wall / local wall = {dask.seconds / local.seconds:.2f}")
        return 1 if failed or not same else 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
