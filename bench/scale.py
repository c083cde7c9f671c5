"""Scaling benchmark: solve time, variables, constraints and gap against node count for generated graphs.

Graphs come from ckpt.examples: CCT-like training steps (`--kind cct --blocks 1,2,4,8,13`) or plain chains
(`--kind mlp --layers 12,24,48,96,112`); the table gives each one's node count.
The budget is a fraction of the graph-order baseline peak (default 0.7). Each (graph, method, solver) point runs
in its own spawned worker process, so its peak RSS is its own and a crash or an out-of-memory kill costs one
row, not the run. Rows print (and flush) as they finish; at the end the growth exponents are fitted by least
squares on log(seconds) and log(variables) against log(nodes), per method and solver.
The solver stops within 1% of optimal unless told otherwise (`--gap`): on the largest graphs a proof of exact
optimality is out of reach, and "seconds" is the time to get within the tolerance.

Columns:
  variables    variables of the exact MILP (what solve() reports), with Checkmate's unpruned count in brackets;
               for skipped rows, the estimate that made them skip
  build s      PuLP model construction (focused seed model + exact model), summed
  solve s      time inside the solver (both models), summed
  total s      all of solve(): baselines, greedy, builds, warm starts, solves, replay
  status       optimal (within --gap) | feasible (time limit, with a solution) | heuristic (the MILP found none,
               the greedy schedule is returned) | skipped / error / killed with a one-line reason
  gap          relative gap to the better of the solver's bound and ckpt's relaxation bound; CBC reports no
               bound, so an optimal CBC row that only CBC proved shows "<=" the tolerance
  RSS MB       peak resident set of the worker (PuLP + in-process HiGHS); "+N cbc" is the CBC subprocess's
  load         1-minute load average when the row finished: the machine is shared, timings are under contention

Run: python bench/scale.py [--kind cct|mlp] [--blocks 1,2,4,8,13 | --layers ...] [--budget 0.7]
       [--solvers highs,cbc] [--methods milp,greedy] [--time-limit 600] [--gap 0.01] [--threads N]
       [--max-variables 2000000] [--build-only] [--quick] [--smoke]
  --quick       blocks 1,2 (layers 12,24 for mlp) and 60 s limits
  --smoke       one block (two layers for mlp) and 10 s limits: the smallest run
  --build-only  build both MILPs per size and report sizes, build time and memory, without solving
"""
from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import resource
import sys
import time
import traceback

from common import BenchParser, names_of, parse_args, run_bench, seconds

SMOKE = {"blocks": "1", "layers": "2", "time_limit": 10.0}   # the smallest graph of each kind
QUICK_SIZES = {"cct": "1,2", "mlp": "12,24"}
DEFAULT_SIZES = {"cct": "1,2,4,8,13", "mlp": "12,24,48,96,112"}
WATCHDOG_SLACK = 600.0  # seconds a worker may run past twice its solve's limit (making the graph, a slow model run)

HEADER = ("| graph | nodes | method | solver | variables (unpruned) | constraints | build s | solve s | total s "
          "| status | gap | peak B | budget B | cost | RSS MB | load |")


# --- graphs ---------------------------------------------------------------------------------------------
def make_model(kind: str, size: int, embed_dim: int, conv_channels: int):
    from ckpt import examples
    if kind == "cct":
        return examples.cct(blocks=size, embed_dim=embed_dim, conv_channels=conv_channels)
    if kind == "mlp":
        return examples.mlp(layers=size)
    raise SystemExit(f"unknown --kind {kind!r}: choose cct or mlp")


def graph_label(kind: str, size: int) -> str:
    return f"{kind} {'blocks' if kind == 'cct' else 'layers'}={size}"


def prepare(kind: str, size: int, embed_dim: int, conv_channels: int, budget_text: str):
    """(graph, staged graph in the MILP's stage order, budget in bytes): what solve() itself will use."""
    from ckpt.solver.budget import parse_budget
    from ckpt.solver.graph.baselines import baselines, reorder
    from ckpt.solver.graph.onnx_loader import load_graph
    graph = load_graph(make_model(kind, size, embed_dim, conv_channels))
    base = baselines(graph)
    staged = reorder(graph, list(base.min_memory_order))
    return graph, staged, parse_budget(budget_text).resolved(base.graph_order_peak).nbytes


def estimate_variables(problem) -> int:
    """Exact variable count of milp.build(problem), without PuLP: R + S + F + U (U = one per active op)."""
    p = problem
    recompute = set()
    for i in range(p.n):
        recompute.update((t, i) for t in p.recompute_stages(i))
    retain = sum(len(p.retain_stages(x)) for x in p.buffers + p.pins)
    free = 0
    for e in p.buffers:
        points = p.free_points(e)
        for t in p.present_stages(e):
            free += sum(1 for k in points if k < t and (t, k) in recompute)
    return 2 * len(recompute) + retain + free + p.n


# --- one row, in a worker process -------------------------------------------------------------------------
def _instrument(events: list) -> None:
    """Time every milp.build and every solver run that solve() makes (patched in this worker only)."""
    from ckpt.solver.model import milp, model_run
    build, run = milp.build, model_run.run

    def timed_build(*args, **kwargs):
        start = time.perf_counter()
        model = build(*args, **kwargs)
        events.append(("build", time.perf_counter() - start, None))
        return model

    def timed_run(*args, **kwargs):
        start = time.perf_counter()
        outcome = run(*args, **kwargs)
        events.append(("solve", time.perf_counter() - start, outcome.status))
        return outcome

    milp.build, model_run.run = timed_build, timed_run


def _rss_mb() -> tuple[int, int]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    return own, children


def worker(conn, job: dict) -> None:
    os.setpgrp()  # own process group: the watchdog then stops a CBC subprocess too, which outlives its -sec
    try:
        conn.send(_work(job))
    except BaseException as exc:  # anything, so the parent prints a row instead of hanging
        conn.send({"status": f"error: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:100],
                   "trace": traceback.format_exc()})
    finally:
        conn.close()


def _work(job: dict) -> dict:
    from ckpt.errors import CkptError
    from ckpt.solver.model.backends import BackendOptions
    from ckpt.solver.model.records import SolveOptions
    from ckpt.solver.solve import solve
    events: list = []
    _instrument(events)
    start = time.perf_counter()
    try:
        graph, staged, budget = prepare(job["kind"], job["size"], job["embed_dim"], job["conv_channels"],
                                        job["budget"])
        if job["method"] == "build":
            return _build_only(staged, budget, start)
        options = SolveOptions(budget=budget, method=job["method"],
                               backend=BackendOptions(name=job["solver"], time_limit=job["time_limit"],
                                                     gap=job["gap"], threads=job["threads"]))
        r = solve(graph, options)
    except CkptError as err:
        return {"status": str(err).splitlines()[0][:100], "seconds": time.perf_counter() - start,
                **_timings(events), "rss": _rss_mb()}
    return {"status": r.status, "gap": r.gap, "variables": r.variables, "unpruned": r.variables_unpruned,
            "constraints": r.constraints, "seconds": r.seconds, "peak": r.peak_bytes, "budget": budget,
            "cost": r.recompute_cost, "cost_pct": r.cost_increase_pct, **_timings(events), "rss": _rss_mb(),
            "models": [status for kind, _, status in events if kind == "solve"]}


def _timings(events: list) -> dict:
    return {"build": sum(s for kind, s, _ in events if kind == "build"),
            "solve": sum(s for kind, s, _ in events if kind == "solve")}


def _build_only(staged, budget: int, start: float) -> dict:
    from ckpt.solver.model import milp
    from ckpt.solver.model.model_run import unpruned_variables
    from ckpt.solver.model.problem import Problem
    focused = milp.build(Problem(staged, focus=True), budget)
    del focused
    problem = Problem(staged)
    model = milp.build(problem, budget)
    return {"status": "built", "variables": len(model.lp.variables()), "constraints": len(model.lp.constraints),
            "unpruned": unpruned_variables(problem), "seconds": time.perf_counter() - start, "budget": budget,
            "build": time.perf_counter() - start, "rss": _rss_mb()}


def run_row(job: dict, watchdog: float) -> dict:
    ctx = mp.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=worker, args=(send, job), daemon=True)
    start = time.perf_counter()
    proc.start()
    send.close()
    result = None
    try:
        if receive.poll(watchdog):
            result = receive.recv()
    except EOFError:
        result = None
    if result is None:
        if proc.is_alive():
            _kill_group(proc)
            result = {"status": f"killed: no result after {watchdog:.0f} s (watchdog)"}
        else:
            proc.join()
            code = proc.exitcode
            killed = f"signal {-code}" + (" (out of memory?)" if code == -9 else "")
            why = killed if code and code < 0 else f"exit {code}"
            result = {"status": f"killed: worker died, {why}"}
        result["seconds"] = time.perf_counter() - start
    else:
        proc.join(30)
        if proc.is_alive():
            _kill_group(proc)
    return result


def _kill_group(proc) -> None:
    """Kill the worker and whatever it started (CBC runs as a subprocess in the worker's process group)."""
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.join()


# --- table ------------------------------------------------------------------------------------------------
def fmt_row(job: dict, nodes: int, res: dict) -> str:
    num = lambda key, f="{:.1f}": "-" if res.get(key) is None or (key == "constraints" and not res[key]) \
        else f.format(res[key])
    variables = "-"
    if res.get("variables"):
        variables = f"{res['variables']:,}" + (f" ({res['unpruned']:,})" if res.get("unpruned") else "")
    elif res.get("estimate") is not None:
        variables = f"~{res['estimate']:,} est."
    gap = "-"
    if res.get("gap") is not None:
        if job["solver"] == "cbc" and res["status"] == "optimal" and res["gap"] == job["gap"]:
            gap = f"<={100 * job['gap']:.2g}%"
        else:
            gap = f"{100 * res['gap']:.2f}%"
    status = res["status"]
    models = res.get("models") or []
    if len(models) > 1:
        status += f" (seed {models[0]})"
    rss = "-"
    if res.get("rss"):
        own, child = res["rss"]
        rss = f"{own}" + (f" (+{child} cbc)" if job["solver"] == "cbc" and child else "")
    cost = "-" if res.get("cost") is None else f"{res['cost']} (+{res['cost_pct']:.1f}%)"
    solver = job["solver"] if job["method"] == "milp" else "-"
    cells = [graph_label(job["kind"], job["size"]), nodes, job["method"], solver, variables,
             num("constraints", "{:,}"), num("build"), num("solve"), num("seconds"), status.replace("|", "/"), gap,
             num("peak", "{}"), num("budget", "{}"), cost, rss, f"{os.getloadavg()[0]:.1f}"]
    return "| " + " | ".join(str(c) for c in cells) + " |"


def fit(points: list[tuple[float, float]]) -> tuple[float, float, float] | None:
    """Least squares y = a + k x on (log nodes, log value): (k, a, r^2), or None without two distinct sizes."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x > 0 and y and y > 0]
    if len({x for x, _ in pts}) < 2:
        return None
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    sxy = sum((x - mx) * (y - my) for x, y in pts)
    k = sxy / sxx
    a = my - k * mx
    ss = sum((y - my) ** 2 for _, y in pts)
    r2 = 1 - sum((y - a - k * x) ** 2 for x, y in pts) / ss if ss else 1.0
    return k, a, r2


def print_fits(rows: list[tuple[dict, int, dict]], target_nodes: int = 1000) -> None:
    print("\nGrowth exponents (least squares on log(value) vs log(nodes)):")
    groups: dict[tuple[str, str], list] = {}
    for job, nodes, res in rows:
        groups.setdefault((job["method"], job["solver"]), []).append((nodes, res))
    for (method, solver), entries in groups.items():
        solved = [(n, r) for n, r in entries
                  if r.get("seconds") and r["status"] in ("optimal", "feasible", "heuristic", "built")]
        capped = sum(1 for _, r in solved if r["status"] != "optimal" and method == "milp")
        for label, key in (("seconds", "seconds"), ("variables", "variables"), ("constraints", "constraints")):
            if method == "greedy" and key != "seconds":
                continue
            f = fit([(n, r.get(key)) for n, r in solved])
            if f is None:
                print(f"  {method}/{solver} {label}: too few sizes to fit")
                continue
            k, a, r2 = f
            at = math.exp(a + k * math.log(target_nodes))
            note = f"; {capped} of {len(solved)} points stopped at the time limit (a lower bound)" \
                if key == "seconds" and capped else ""
            print(f"  {method}/{solver} {label} ~ nodes^{k:.2f} (r^2 {r2:.3f}, {len(solved)} points; "
                  f"extrapolated to {target_nodes} nodes: {at:,.0f}){note}")


# --- main -------------------------------------------------------------------------------------------------
def main() -> int:
    parser = BenchParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", choices=("cct", "mlp"), default="cct")
    parser.add_argument("--blocks", help="CCT block counts, e.g. 1,2,4,8,13")
    parser.add_argument("--layers", help="MLP layer counts (with --kind mlp), e.g. 12,24,48,96,112")
    parser.add_argument("--embed-dim", type=int, default=128, help="CCT embedding width")
    parser.add_argument("--conv-channels", type=int, default=32,
                        help="CCT tokenizer channels (cct2_ft2's 64 make the first Relu alone need more than the "
                             "default budget of the smallest graphs)")
    parser.add_argument("--budget", default="0.7", help="fraction of the graph-order peak, or a size (700KB)")
    parser.add_argument("--solvers", type=names_of("highs", "cbc"), default="highs,cbc")
    parser.add_argument("--methods", type=names_of("milp", "greedy"), default="milp,greedy")
    parser.add_argument("--time-limit", type=seconds, default=600.0, help="seconds per solve (wall clock, all of it)")
    parser.add_argument("--gap", type=float, default=0.01, help="relative gap at which the solver stops")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--max-variables", type=int, default=2_000_000,
                        help="skip MILP sizes whose exact model would have more variables (memory guard)")
    parser.add_argument("--build-only", action="store_true", help="build the MILPs, report size/time/memory")
    parser.add_argument("--quick", action="store_true", help="small sizes and 60 s limits")
    args = parse_args(parser, SMOKE)

    from ckpt.errors import CkptError
    from ckpt.solver.budget import parse_budget
    from ckpt.solver.model.problem import Problem
    try:
        parse_budget(args.budget)
    except CkptError as err:
        parser.error(str(err))
    sizes_text = args.blocks if args.kind == "cct" else args.layers
    if args.quick:
        sizes_text = sizes_text or QUICK_SIZES[args.kind]
        args.time_limit = min(args.time_limit, 60.0)
    sizes = [int(s) for s in (sizes_text or DEFAULT_SIZES[args.kind]).split(",") if s.strip()]
    methods = ["build"] if args.build_only else [m.strip() for m in args.methods.split(",") if m.strip()]
    solvers = [s.strip() for s in args.solvers.split(",") if s.strip()]
    for m in methods:
        if m not in ("milp", "greedy", "build"):
            parser.error(f"unknown method {m!r}: choose milp and/or greedy")
    # solve() holds itself to the limit in wall-clock time (solver/model/time_plan.py) and kills a model run far past it
    # (solver/model/watchdog.py); the watchdog is for a worker stuck outside the solver.
    watchdog = 2 * args.time_limit + WATCHDOG_SLACK

    shape = f" (embed dim {args.embed_dim}, conv channels {args.conv_channels})" if args.kind == "cct" else ""
    print(f"scale benchmark: kind {args.kind}{shape}, budget {args.budget} of the graph-order peak, "
          f"time limit {args.time_limit:.0f} s per solve, gap tolerance {100 * args.gap:.2g}%, "
          f"threads {args.threads or 'solver default'}, max variables {args.max_variables:,}; "
          f"{os.cpu_count()} CPUs, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} "
          "(shared machine: timings are under contention)")
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    sys.stdout.flush()

    rows: list[tuple[dict, int, dict]] = []
    for size in sizes:
        try:
            graph, staged, budget = prepare(args.kind, size, args.embed_dim, args.conv_channels, args.budget)
        except CkptError as err:
            print(f"| {graph_label(args.kind, size)} | - | - | - | - | - | - | - | - | {str(err)[:100]} "
                  "| - | - | - | - | - | - |", flush=True)
            continue
        nodes = len(graph.ops)
        estimate = estimate_variables(Problem(staged))
        for method in methods:
            for solver in (solvers if method == "milp" else ["-"]):
                job = dict(kind=args.kind, size=size, embed_dim=args.embed_dim, conv_channels=args.conv_channels,
                           budget=args.budget, method=method,
                           solver=solver if solver != "-" else "highs", time_limit=args.time_limit, gap=args.gap,
                           threads=args.threads)
                if method != "greedy" and estimate > args.max_variables:
                    res = {"status": f"skipped: ~{estimate:,} variables > --max-variables {args.max_variables:,}",
                           "estimate": estimate, "budget": budget}
                else:
                    res = run_row(job, watchdog)
                if method != "milp":
                    job["solver"] = "-"
                rows.append((job, nodes, res))
                print(fmt_row(job, nodes, res), flush=True)
                if res.get("trace") and os.environ.get("CKPT_BENCH_DEBUG"):
                    print(res["trace"], file=sys.stderr)
    print_fits(rows)
    return 1 if any(res["status"].startswith("error") for _, _, res in rows) else 0   # a crashed row: the bench broke


if __name__ == "__main__":
    sys.exit(run_bench(main))
