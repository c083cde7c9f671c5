"""Decisiveness benchmark: does every budget get a decisive answer, alone and under load?

For each graph (the shared models as they are and lowered for Siracusa; generated CCTs of 1, 2, 4 and 8 blocks,
an MLP and a residual CNN), every budget from the single-op floor to 1.0 of the graph-order peak in steps of
--step: the solver's answer on the live peak (`solve`, views re-made, one thread), with its status:
  optimal      a schedule proven optimal in the space
  infeasible   proven: no schedule of the space fits (below the floor, or the relaxation has no answer)
  other        anything else (a schedule not proven optimal, or no schedule and no proof)
Prints one table per graph (budget, status, cost, gap to the proven bound, seconds) and a summary: cells per
status, the largest gap left, the slowest cell.
--load N runs N more copies of this benchmark at once (their output discarded), so the timings are taken
under that load; the answers must not change (the costs are compared with the run alone when --compare
names its output).
--grid prints instead one table per target (`--targets none,siracusa`): graph x budget (`--fractions`), each cell
its status and seconds; `--graphs zoo` names the training zoo: the five shared models of Deeploy's training branch
and, from the branch's own tests (`--zoo-dir`, default the shared zoo-a0e1e531), MobileNetV1 and CCT. A graph a
target cannot lower (the release Deeploy maps no gradient op, or crashes lowering a model of the training
branch) says so in its row, and the grid goes on.
Each grid row is followed by each cell's CPU seconds (children included) and the load average after it, and --json
holds them: on a loaded machine those say what the wall-clock seconds cannot.
--draws N (with --grid): a cell not decided in its first draw is solved again N-1 times (on the CPU clock the same
code lands its deadlines at other points and its repairs branch otherwise): the cell shows its best draw, and beside
it how many of the N decided it and the worst draw; --compare reads the best draw, so a cell worse than the stored
one in its best of N is a regression, not the clock's spread.
--store PATH writes the grid's tables there (markdown, as printed; via a temp file and rename): the last grid is kept
as bench/decisive_grid.md. --compare PATH (a --store table or a --json output) prints every cell whose status or gap
got worse against it (decided -> a gap -> no schedule; a larger gap), and, for a --json output, every answer that
changed.
Run: python bench/decisive.py [--time-limit 20] [--clock wall|cpu] [--step 0.02] [--load 1] [--graphs cct2_ft2,...]
       [--order search] [--json OUT] [--compare OUT] [--smoke]   (the smallest run: two generated graphs, a few budgets)
     python bench/decisive.py --grid --graphs zoo --targets none,siracusa [--fractions 0.9,0.8,0.7,0.6,0.5,0.4]
       [--store bench/decisive_grid.md] [--compare bench/decisive_grid.md] [--draws 3]
"""
from __future__ import annotations

import functools
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from common import BenchParser, at_least_one, parse_args, run_bench
from common import fractions as fraction_list
from common import seconds as time_limit

from ckpt.errors import CkptError, InfeasibleBudget
from ckpt.examples import write_example
from ckpt.paths import shared_models
from ckpt.pipeline.load import load_for_target
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.options import Clock
from ckpt.solver.model.records import SolveOptions, Status
from ckpt.solver.solve import solve

SMOKE = {"graphs": "mlp,cct1", "step": 0.25, "time_limit": 5.0}   # generated graphs only, a few budgets each
GRAPHS = ["cct2_ft2", "cct2_ft2@siracusa", "cct2_lp", "cct2_lp@siracusa", "resnet8_train", "dscnn_train", "cct1",
          "cct2", "cct4", "cct8", "mlp", "resnet"]
ZOO = ["simplemlp_train", "autoencoder_train", "dscnn_train", "resnet8_train", "cct_lora_train", "mobilenetv1_train",
       "cct_train"]
ZOO_DIR = "zoo-a0e1e531"      # beside the shared models: the training branch's own test models at that commit
FRACTIONS = "0.9,0.8,0.7,0.6,0.5,0.4"
GAP_SLACK = 1e-4      # a gap this much larger is not worse: the same answer, another load
CELL = re.compile(r"^(optimal|infeasible|no schedule|gap (?P<gap>[0-9.]+%|-))"
                  r"(?: \((?P<decided>\d+)/(?P<draws>\d+) decided, worst [^)]*\))? (?P<seconds>[0-9.]+) s$")


def model_path(name: str, zoo_dir: Path) -> Path | None:
    """The folder of a shared model, or of a model of the training branch's tests; None for a generated one."""
    for folder in (shared_models() / name, *sorted(zoo_dir.glob(f"*/{name}"))):
        if (folder / "network.onnx").is_file():
            return folder
    return None


def graph_of(name: str, scratch: Path, zoo_dir: Path | None = None):
    """The TrainGraph a name stands for (shared model, lowered or not; or a generated example)."""
    model, _, target = name.partition("@")
    found = model_path(model, zoo_dir or shared_models().parent / ZOO_DIR)
    if found is not None:
        return load_for_target(found, target or "none").graph
    folder = scratch / model
    if not (folder / "network.onnx").is_file():
        kind, options = ("cct", {"blocks": int(model[3:]), "conv_channels": 32}) if model.startswith("cct") \
            else (model, {})
        write_example(kind, folder, golden=False, **options)
    return load_for_target(folder, target or "none").graph


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (the solver's watched HiGHS runs fork): on a
    loaded machine the wall clock says more about the load than about the solve."""
    used = os.times()
    return used.user + used.system + used.children_user + used.children_system


def cell(graph, budget: int, limit: float, order: str = "minmem", cpu: list[float] | None = None,
         clock: str = "wall") -> tuple[str, int | None, float | None, float]:
    """Status, cost (None: no schedule), gap to the proven bound (None: no bound), seconds; the CPU seconds
    are appended to `cpu` if given."""
    start, used = time.perf_counter(), cpu_seconds()
    try:
        result = solve(graph, SolveOptions(budget=budget, order=order,
                                           backend=BackendOptions(time_limit=limit, clock=Clock(clock))))
        status, cost, gap = ("optimal" if result.status is Status.OPTIMAL else "other"), result.recompute_cost, \
            result.gap
    except InfeasibleBudget as err:
        status, cost, gap = ("infeasible" if err.proven else "other"), None, None
    if cpu is not None:
        cpu.append(cpu_seconds() - used)
    return status, cost, gap, time.perf_counter() - start


def gap_text(gap: float | None) -> str:
    return "-" if gap is None else f"{100 * gap:.2f}%"


def status_text(c: dict) -> str:
    """A cell's status: decided, or a schedule not proven optimal with its gap, or none."""
    return c["status"] if c["status"] != "other" else \
        (f"gap {gap_text(c['gap'])}" if c.get("schedule", c["cost"] is not None) else "no schedule")


def cell_text(c: dict) -> str:
    """A grid cell: the status and the seconds (of several draws: the best's, with how many decided and the worst)."""
    draws = c.get("draws", [])
    spread = f" ({c['decided']}/{len(draws)} decided, worst {status_text(worst_draw(draws))})" if len(draws) > 1 else ""
    return f"{status_text(c)}{spread} {c['seconds']:.1f} s"


def one_draw(graph, budget: int, args) -> dict:
    """One solve of a grid cell: its status, cost, gap, wall and CPU seconds."""
    cpu: list[float] = []
    status, cost, gap, seconds = cell(graph, budget, args.time_limit, args.order, cpu, args.clock)
    return {"status": status, "cost": cost, "gap": gap, "seconds": round(seconds, 2), "cpu": round(cpu[0], 2)}


def drawn(solve_once: Callable[[], dict], draws: int) -> dict:
    """A cell solved once, and, if that draw did not decide it, `draws` - 1 times more: its best draw (the one a
    comparison reads), with every draw under "draws", how many decided it, and the CPU seconds of them all."""
    found = [solve_once()]
    while len(found) < draws and found[0]["status"] == "other":
        found.append(solve_once())
    best = min(found, key=lambda d: (verdict(d), d["cpu"]))
    return {**best, "draws": found, "decided": sum(1 for d in found if verdict(d)[0] == 0),
            "cpu": round(sum(d["cpu"] for d in found), 2)}


def worst_draw(draws: list[dict]) -> dict:
    return max(draws, key=lambda d: (verdict(d), d["cpu"]))


def grid(args, scratch: Path) -> tuple[list[dict], list[str]]:
    """One table per target: graph x budget, each cell's status and seconds (see the module doc); the cells and
    the tables' lines."""
    cells, lines, fractions = [], [], [float(f) for f in args.fractions.split(",")]
    names = ZOO if args.graphs == "zoo" else args.graphs.split(",")

    def say(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    for target in args.targets.split(","):
        say(f"\n### target {target}: status and seconds per budget (limit {args.time_limit:g} s "
            f"{'CPU' if args.clock == 'cpu' else 'wall'}, one thread, load {args.load})")
        say("| graph | ops | " + " | ".join(f"{f:g}" for f in fractions) + " |")
        say("|---|---|" + "---|" * len(fractions))
        for name in names:
            try:
                graph = graph_of(f"{name}@{target}", scratch, Path(args.zoo_dir) if args.zoo_dir else None)
            except Exception as err:    # noqa: BLE001  a Deeploy that crashes lowering one model is that row's answer
                say(f"| {name} | - | not lowered: {not_lowered(err)} |" + " |" * (len(fractions) - 1))
                continue
            peak, row = baselines(graph).graph_order_peak, []
            for fraction in fractions:
                solve_once = functools.partial(one_draw, graph, int(fraction * peak), args)
                row.append({"graph": name, "target": target, "fraction": fraction, **drawn(solve_once, args.draws),
                            "load": round(os.getloadavg()[0], 1)})
            cells += row
            say(f"| {name} | {len(graph.ops)} | " + " | ".join(cell_text(c) for c in row) + " |")
            cpus = ", ".join("/".join(f"{d['cpu']:.1f}" for d in c["draws"]) for c in row)
            loads = ", ".join(f"{c['load']:g}" for c in row)
            print(f"  CPU s: {cpus}; load: {loads}", flush=True)
    return cells, lines


def not_lowered(err: Exception) -> str:
    """Why a graph has no row of cells, on one table line: ckpt's refusal as it is, any other error (a Deeploy
    release that crashes lowering a model of the training branch) with its type, since its text alone may say
    nothing (an IndexError's "list index out of range")."""
    why = str(err) if isinstance(err, CkptError) else f"{type(err).__name__} while lowering: {err}"
    return " ".join(why.replace("|", "/").split())[:160]


def stored_cells(text: str) -> list[dict]:
    """The cells of a grid's tables as --store wrote them (a cost is not in the table: None)."""
    cells, target, fractions = [], None, []
    for line in text.splitlines():
        if line.startswith("### target "):
            target = line.split()[2].rstrip(":")
        elif line.startswith("| graph | ops |"):
            fractions = [float(f) for f in line.strip("| ").split(" | ")[2:]]
        elif line.startswith("| ") and target is not None and not line.startswith("|---"):
            graph, _, *texts = [t.strip() for t in line.strip().strip("|").split("|")]
            for fraction, text_ in zip(fractions, texts):
                found = CELL.match(text_)
                if found is None:       # a graph the target did not lower
                    continue
                status = found.group(1) if found.group(1) in ("optimal", "infeasible") else "other"
                gap = found.group("gap")
                cells.append({"graph": graph, "target": target, "fraction": fraction, "status": status,
                              "cost": None, "gap": float(gap[:-1]) / 100 if gap and gap != "-" else None,
                              "seconds": float(found.group("seconds")),
                              "schedule": status != "other" or gap is not None})
    return cells


def verdict(c: dict) -> tuple[int, float]:
    """How decided a cell is, smaller is better: (0 decided / 1 a schedule with a gap / 2 no schedule, the gap)."""
    if c["status"] in ("optimal", "infeasible"):
        return 0, 0.0
    has_schedule = c.get("schedule", c["cost"] is not None)
    return (1, c["gap"] if c["gap"] is not None else math.inf) if has_schedule else (2, 0.0)


def worse_cells(cells: list[dict], earlier: list[dict]) -> list[tuple[dict, dict]]:
    """(before, now) for every cell whose status or gap got worse than in `earlier`, or whose decision changed
    (optimal <-> infeasible: one of them is wrong)."""
    key = lambda c: (c["graph"], c.get("target"), c["fraction"])  # noqa: E731
    before = {key(c): c for c in earlier}
    found = []
    for c in cells:
        old = before.get(key(c))
        if old is None:
            continue
        (was, was_gap), (now, now_gap) = verdict(old), verdict(c)
        flipped = was == now == 0 and old["status"] != c["status"]
        if now > was or (now == was == 1 and now_gap > was_gap + GAP_SLACK) or flipped:
            found.append((old, c))
    return found


def write_atomically(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False) as out:
        out.write(text)
    os.replace(out.name, path)


def main() -> int:
    parser = BenchParser(description=__doc__.splitlines()[0])
    parser.add_argument("--time-limit", type=time_limit, default=20.0)
    parser.add_argument("--clock", choices=[c.value for c in Clock], default=Clock.WALL.value,
                        help="what --time-limit counts: wall seconds, or each solve's CPU seconds (the same work "
                             "under any load: for paired runs on a busy machine)")
    parser.add_argument("--step", type=float, default=0.02)
    parser.add_argument("--graphs", default=",".join(GRAPHS))
    parser.add_argument("--grid", action="store_true", help="graph x budget tables, one per --targets")
    parser.add_argument("--targets", default="none,siracusa", help="with --grid: the targets, one table each")
    parser.add_argument("--fractions", type=fraction_list, default=FRACTIONS, help="with --grid: the budgets")
    parser.add_argument("--zoo-dir", default=None, help="the training branch's test models (default: the shared "
                        f"{ZOO_DIR})")
    parser.add_argument("--draws", type=at_least_one, default=1, help="with --grid: solve a cell not decided in "
                        "its first draw this many times in all (the best draw is shown and compared)")
    parser.add_argument("--load", type=int, default=0, help="copies of this benchmark to run at the same time")
    parser.add_argument("--order", default="minmem", help="stage order (--order search: a proof holds for the "
                        "order the search ends at)")
    parser.add_argument("--json", default=None, help="write the cells here")
    parser.add_argument("--compare", default=None, help="a --store table or --json output: print the cells whose "
                        "status or gap got worse (and, for --json, whose answer changed)")
    parser.add_argument("--store", default=None, help="with --grid: write its tables to this file")
    args = parse_args(parser, SMOKE)
    if args.draws > 1 and not args.grid:
        parser.error("--draws is for the grid's cells: add --grid, or drop --draws")
    # read now: with --store to the same file, the grid would be compared with itself (every cell "no worse");
    # a file this run writes first (--json) is read at the end
    earlier = Path(args.compare).read_text() if args.compare and Path(args.compare).is_file() else None
    copy = [sys.executable, __file__, "--time-limit", str(args.time_limit), "--step", str(args.step), "--graphs",
            args.graphs, "--order", args.order, "--clock", args.clock]
    copy += ["--grid", "--targets", args.targets, "--fractions", args.fractions] if args.grid else []
    others = [subprocess.Popen(copy, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(args.load)]
    cells, lines, started = [], [], time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ckpt-decisive-") as scratch:
        if args.grid:
            cells, lines = grid(args, Path(scratch))
        for name in args.graphs.split(",") if not args.grid else ():
            graph = graph_of(name, Path(scratch))
            base = baselines(graph)
            first = math.ceil(base.lower_bound / base.graph_order_peak / args.step - 1e-9)
            fractions = [round(k * args.step, 4) for k in range(max(first - 1, 0), int(round(1 / args.step)) + 1)]
            print(f"\n### {name}: {len(graph.ops)} ops, graph-order peak {base.graph_order_peak} B, floor "
                  f"{base.lower_bound} B ({base.lower_bound / base.graph_order_peak:.3f}), load {args.load}")
            print("| budget | bytes | status | cost | gap | s |\n|---|---|---|---|---|---|", flush=True)
            for fraction in fractions:
                budget = int(fraction * base.graph_order_peak)
                status, cost, gap, seconds = cell(graph, budget, args.time_limit, args.order, clock=args.clock)
                cells.append({"graph": name, "fraction": fraction, "status": status, "cost": cost, "gap": gap,
                              "seconds": round(seconds, 2)})
                print(f"| {fraction:.2f} | {budget} | {status} | {'-' if cost is None else cost} | {gap_text(gap)} "
                      f"| {seconds:.1f} |", flush=True)
    for process in others:
        process.kill()
    counts = {s: sum(1 for c in cells if c["status"] == s) for s in ("optimal", "infeasible", "other")}
    if not cells:
        print("\nno cells: no graph was lowered")
        return 0
    slowest = max(cells, key=lambda c: c["seconds"])
    late = sum(1 for c in cells if c["status"] != "other" and c["seconds"] > args.time_limit)
    others = [c for c in cells if c["status"] == "other" and c["cost"] is not None]
    worst = max((c["gap"] for c in others if c["gap"] is not None), default=None)
    print(f"\n{len(cells)} cells: {counts['optimal']} optimal, {counts['infeasible']} proven infeasible, "
          f"{counts['other']} other ({len(others)} with a schedule, largest gap {gap_text(worst)}); "
          f"slowest {slowest['graph']} at {slowest['fraction']:.2f}: "
          f"{slowest['seconds']:.1f} s ({late} decided past the limit); wall {time.perf_counter() - started:.0f} s "
          f"with {args.load} other cop(ies)" + (f"; CPU {sum(c['cpu'] for c in cells):.0f} s in all, load average "
                                                 f"{os.getloadavg()[0]:.1f}" if args.grid else ""))
    if args.json:
        Path(args.json).write_text(json.dumps(cells, indent=1) + "\n")
    if args.store and lines:
        write_atomically(Path(args.store), "\n".join(lines).lstrip("\n") + "\n")
    if args.compare:
        compare(cells, Path(args.compare), earlier)
    return 0


def compare(cells: list[dict], path: Path, text: str | None = None) -> None:
    """Print the cells that got worse against `path` (a --store table or a --json output; `text`: its text as
    read before this run, else read now), and for a --json output the answers that changed."""
    text = path.read_text() if text is None else text
    earlier = json.loads(text) if text.lstrip().startswith("[") else stored_cells(text)
    where = lambda c: f"{c['graph']}{'@' + c['target'] if c.get('target') else ''} {c['fraction']:.2f}"  # noqa: E731
    worse = worse_cells(cells, earlier)
    print(f"cells worse than in {path}: {len(worse)}" + "".join(
        f"\n  {where(now)}: {cell_text(old)} -> {cell_text(now)}" for old, now in worse))
    if text.lstrip().startswith("["):
        key = lambda c: (c["graph"], c.get("target"), c["fraction"])  # noqa: E731
        before = {key(c): (c["status"], c["cost"]) for c in earlier}
        changed = [c for c in cells if before.get(key(c)) not in (None, (c["status"], c["cost"]))]
        print(f"answers changed against {path}: {len(changed)}" + "".join(
            f"\n  {where(c)}: {before[key(c)]} -> {(c['status'], c['cost'])}" for c in changed))


if __name__ == "__main__":
    sys.exit(run_bench(main))
