"""What running the generated code costs a sweep point: build and run seconds per flow, and their share.

For each point (the baseline, then each budget), the model is solved and replayed as a sweep point is, with the
generated code built and run on this host. Printed per point: the replay's stages (Deeploy's two runs with code
generation, the host check, the generated code), each flow's build and run seconds, and what the code run adds
to the point: the non-tiled flow's code generation (written only so it can run) plus both flows' build and run.
The graph order's reference code (one Deeploy run and build per flow) is made once per graph and cached; the
first point pays it, and it is shown on its own.

Run: python bench/coderun.py [--model DIR] [--budgets 0.9,0.8,0.7] [--time-limit S] [--smoke]
(default model: the built-in example; a fresh cache, so the kernel library and the reference are built for real;
--smoke: the smallest run, a tiny MLP, the baseline and one point).
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from common import BenchParser, existing, fractions, parse_args, run_bench, seconds, tiny_model

from ckpt.coderun.sources import NoSources, find_sources
from ckpt.examples.default import DEFAULT_KIND, DEFAULT_OPTIONS
from ckpt.examples.write import write_example
from ckpt.pipeline.deployed_solve import solve_model
from ckpt.pipeline.load import load_for_target
from ckpt.pipeline.point import baseline_schedule
from ckpt.replay.run import ReplayOptions, replay_schedule
from ckpt.schedule_file import Schedule, write_schedule
from ckpt.solver.budget import parse_budget
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

SMOKE = {"budgets": "1.0", "time_limit": 10.0}   # the baseline and one point


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def _point(model: Path, label: str, schedule: Schedule, work: Path) -> dict:
    path = work / f"seq_{label}.json"
    write_schedule(path, schedule)
    start = time.perf_counter()
    result = replay_schedule(path, model, work / f"replay_{label}", ReplayOptions(target="siracusa", record_time=True))
    total = time.perf_counter() - start
    runs = result.report.code_runs
    deeploy = result.report.deeploy
    row = {"point": label, "total": total, **result.seconds,
           "codegen_non_tiled": deeploy["non_tiled"].seconds.get("codegen", 0.0),
           "errors": ", ".join(run.verdict for run in runs.values())}
    for flow, run in runs.items():
        row[f"build_{flow}"] = (run.seconds or {}).get("build", 0.0)
        row[f"run_{flow}"] = (run.seconds or {}).get("run", 0.0)
    built_and_run = sum(row.get(f"{stage}_{flow}", 0.0) for stage in ("build", "run") for flow in runs)
    row["reference"] = max(0.0, row["code"] - built_and_run)
    row["added"] = row["codegen_non_tiled"] + built_and_run
    return row


def main() -> int:
    parser = BenchParser()
    parser.add_argument("--model", type=existing, default=None,
                        help="model folder (default: the built-in example; with --smoke a tiny MLP at batch 1)")
    parser.add_argument("--budgets", type=fractions, default="0.9,0.8,0.7")
    parser.add_argument("--time-limit", type=seconds, default=40.0)
    args = parse_args(parser, SMOKE)
    sources = find_sources()
    if isinstance(sources, NoSources):
        print(f"cannot run the generated code: {sources.reason}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-coderun-") as tmp:
        work = Path(tmp)
        os.environ["CKPT_CACHE_DIR"] = str(work / "cache")
        model = Path(args.model) if args.model else work / "example"
        if args.smoke and not args.model:
            tiny_model(model, batch=1)       # the batch at which its generated code computes the goldens
        elif not args.model:
            write_example(DEFAULT_KIND, model, **DEFAULT_OPTIONS)
        options = SolveOptions(backend=BackendOptions(time_limit=args.time_limit))
        schedules = {"baseline": baseline_schedule(load_for_target(model, "siracusa"), options)}
        for budget in args.budgets.split(","):
            schedules[budget] = solve_model(model, parse_budget(budget), "siracusa", options)[0]
        rows = [_point(model, label, schedule, work) for label, schedule in schedules.items()]
    shown = args.model or ("tiny MLP" if args.smoke else "built-in example")
    print(f"model {shown}, target siracusa, kernels {sources.root}; "
          f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at the end")
    print("| point | Errors (tiled/non-tiled) | Deeploy s | of which non-tiled codegen s | host check s | "
          "build tiled s | run tiled s | build non-tiled s | run non-tiled s | reference s | added s | point s | "
          "added % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['point']} | {r['errors']} | {r['deeploy']:.1f} | {r['codegen_non_tiled']:.1f} | "
              f"{r['verify']:.1f} | {r.get('build_tiled', 0):.2f} | {r.get('run_tiled', 0):.2f} | "
              f"{r.get('build_non_tiled', 0):.2f} | {r.get('run_non_tiled', 0):.2f} | {r['reference']:.1f} | "
              f"{r['added']:.1f} | {r['total']:.1f} | {100 * r['added'] / r['total']:.0f}% |")
    later = [r for r in rows[1:]]
    if later:
        print(f"added per point after the first: {sum(r['added'] for r in later) / len(later):.1f} s on average, "
              f"at most {max(r['added'] for r in later):.1f} s (target: at most 15 s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
