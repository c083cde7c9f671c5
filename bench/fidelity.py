"""Fidelity benchmark: ckpt's predicted activation peak vs the memory Deeploy's code for the same
schedule uses, on CCT2_FT2 lowered for Siracusa.

Rows: the graph order, the min-memory order, and schedules solved at 0.9/0.8/0.7/0.6 of the graph-order peak.
Columns (bytes):
  predicted   ckpt's replay simulator (solver/graph/simulate.py) on the lowered graph
  code live   live bytes of the non-tiled RunNetwork as Deeploy writes it (--allocator heap; malloc/free replayed:
              deeploy_bridge/code_memory)
  code heap   smallest PMSIS first-fit L2 heap that code runs in (live bytes + fragmentation)
  pred heap   ckpt's own heap model (solver/memory/heap.py) on the replay's events: should equal code heap
  Deeploy nt  Deeploy's own non-tiled counter (worstCaseBufferSize), which over-counts (see memory.py)
  L3/L2/L1    the tiled flow's arena per level (TetrisRandom): static placement, graph I/O included
  L3 live     the tiler's own lifetimes at L3, activations only (no I/O, no packing loss): an allocator's floor
  pred/code   predicted / code live: the acceptance figure
  pred/nt     predicted / Deeploy nt
Solved schedules are first stripped of dead executions (`drop_dead`: ops run for nothing, which Deeploy's
front end deletes). Schedules with recomputes run on the graph with clones that `ckpt replay` builds
(replay.plan + replay.onnx_graph).
Run: python bench/fidelity.py [--model DIR] [--budgets 0.9,0.8,0.7,0.6] [--methods greedy,milp] [--time-limit S]
     [--no-tiled] [--smoke]   (the smallest run: a tiny MLP, one budget)
"""
from __future__ import annotations

import sys
import tempfile
import time
from dataclasses import dataclass, field, replace

import onnx
from common import MODEL_HELP, BenchParser, existing, fractions, model_folder, names_of, parse_args, run_bench, seconds

from ckpt import deeploy_bridge
from ckpt.deeploy_bridge.code_memory import code_memory
from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, Allocator, Flow
from ckpt.errors import CkptError
from ckpt.pipeline.deployed_solve import solve_model
from ckpt.pipeline.load import load_for_target
from ckpt.replay.onnx_graph import apply_to_model, view_of_model
from ckpt.replay.plan import plan_replay
from ckpt.solver.budget import parse_budget
from ckpt.solver.graph.baselines import baselines
from ckpt.solver.graph.simulate import RunSequence, drop_dead, memory_trace, plain_sequence
from ckpt.solver.memory.heap import heap_bytes
from ckpt.solver.model.backends import BackendOptions
from ckpt.solver.model.records import SolveOptions

TETRIS = replace(DEFAULT_SETUP, allocator=Allocator.TETRIS)   # this table's tiled columns: Deeploy's own packing
HEAP = replace(DEFAULT_SETUP, allocator=Allocator.HEAP)       # its code columns: Deeploy's own malloc/free code

TARGET = "siracusa"
SMOKE = {"budgets": "0.8", "time_limit": 10.0}   # on the tiny model, a budget met only by recomputes


@dataclass
class Row:
    label: str
    seq: RunSequence | None
    budget: int | None = None
    predicted: int | None = None
    predicted_heap: int | None = None
    code_live: int | None = None
    code_heap: int | None = None
    deeploy_nt: int | None = None
    tiled: dict[str, int] = field(default_factory=dict)
    tiled_live: int | None = None
    note: str = ""

    @property
    def recomputes(self) -> int | None:
        return None if self.seq is None else sum(flag for _, flag in self.seq)

    def cells(self) -> list[str]:
        ratio = lambda a, b: f"{a / b:.4f}" if a and b else "-"
        show = lambda v: "-" if v is None else str(v)
        tiled = [show(self.tiled.get(k)) for k in ("L3", "L2", "L1")]
        return [self.label, show(self.budget), show(self.recomputes), show(self.predicted), show(self.code_live),
                show(self.code_heap), show(self.predicted_heap), show(self.deeploy_nt), *tiled, show(self.tiled_live),
                ratio(self.predicted, self.code_live), ratio(self.predicted, self.deeploy_nt), self.note]


HEADER = ["schedule", "budget", "recomputes", "predicted", "code live", "code heap", "pred heap", "Deeploy nt",
          "tiled L3", "tiled L2", "tiled L1", "L3 live", "pred/code", "pred/nt", "note"]


def apply_schedule(model: onnx.ModelProto, seq: RunSequence) -> tuple[onnx.ModelProto, list[str]]:
    """The lowered graph with one node per execution of `seq` (clones for recomputes), and its run order."""
    plan = plan_replay(view_of_model(model), seq)
    return apply_to_model(model, plan), plan.order


def measure(row: Row, lowered, tiled: bool) -> None:
    """Fill the Deeploy columns of `row`: one non-tiled run with code, one tiled run."""
    if row.recomputes:
        model, order = apply_schedule(lowered.model, row.seq)
    else:
        model, order = lowered.model, [name for name, _ in row.seq]
    with tempfile.TemporaryDirectory(prefix="ckpt_fidelity_") as code_dir:
        figures = deeploy_bridge.generate_code(model, order, code_dir, TARGET, tiled=False, already_lowered=True,
                                               setup=HEAP)
        code = code_memory(code_dir)
    row.deeploy_nt = sum(figures.worst_case.values())
    row.code_live, row.code_heap = code.peak_bytes, code.heap_bytes()
    if code.leaked or code.double_frees or code.foreign_frees:
        row.note += f" code: {len(code.leaked)} leaked, {len(code.double_frees)} double-freed blocks"
    if tiled:
        tiled_figures = deeploy_bridge.deeploy_memory(model, order, TARGET, tiled=True, setup=TETRIS,
                                                      already_lowered=True)
        row.tiled, row.tiled_live = tiled_figures.arena, tiled_figures.home_live.get("local")


def solved_rows(model: str, fractions: list[float], methods: list[str], time_limit: float, graph) -> list[Row]:
    """One row per budget: the first method in `methods` that finds a schedule (greedy is fast, the MILP not)."""
    rows = []
    for fraction in fractions:
        errors = []
        for method in methods:
            options = SolveOptions(method=method, backend=BackendOptions(time_limit=time_limit))
            try:
                schedule, result = solve_model(model, parse_budget(str(fraction)), TARGET, options)
            except CkptError as err:
                errors.append(f"{method}: {str(err).splitlines()[0][:70]}")
                continue
            seq = drop_dead(graph, list(result.seq))
            dropped = len(result.seq) - len(seq)
            note = result.status + (f", {dropped} dead executions dropped (peak before "
                                    f"{result.peak_bytes})" if dropped else "")
            rows.append(Row(f"solved {fraction:g} ({method})", seq, budget=schedule.predicted.live_budget_bytes,
                            predicted=memory_trace(graph, seq).peak_bytes, note=note))
            break
        else:
            rows.append(Row(f"solved {fraction:g}", None, note="; ".join(errors)))
    return rows


def main() -> int:
    parser = BenchParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=existing, default=None, help=MODEL_HELP)
    parser.add_argument("--budgets", type=fractions, default="0.9,0.8,0.7,0.6")
    parser.add_argument("--methods", type=names_of("greedy", "milp"), default="greedy,milp",
                        help="tried in order per budget")
    parser.add_argument("--time-limit", type=seconds, default=60.0)
    parser.add_argument("--no-tiled", action="store_true", help="skip the tiled runs")
    args = parse_args(parser, SMOKE)
    with model_folder(args.model, args.smoke) as model:
        return table(args, model)


def table(args, model: str) -> int:
    """Print the table; 1 if a Deeploy run failed (its row says why)."""
    start = time.perf_counter()
    loaded = load_for_target(model, TARGET, flow=Flow.NON_TILED)   # the code measured is the non-tiled flow's
    graph = loaded.graph
    base = baselines(graph)
    rows = [Row("graph order", plain_sequence(graph)),
            Row("min-memory order", plain_sequence(graph, list(base.min_memory_order)))]
    for row in rows:
        row.predicted = memory_trace(graph, row.seq).peak_bytes
    fractions = [float(f) for f in args.budgets.split(",")]
    rows += solved_rows(model, fractions, args.methods.split(","), args.time_limit, graph)
    print(f"model {model}, target {TARGET}: {len(graph.ops)} ops, graph-order peak {base.graph_order_peak} B, "
          f"scratch {sum(graph.scratch.values())} B on {len(graph.scratch)} ops")
    print("| " + " | ".join(HEADER) + " |")
    print("|" + "---|" * len(HEADER))
    failed = False
    for row in rows:
        if row.seq is not None:
            row.predicted_heap = heap_bytes(graph, row.seq)
            try:
                measure(row, loaded.lowered, not args.no_tiled)
            except Exception as err:  # one failing Deeploy run should not hide the other rows
                row.note += f" Deeploy failed: {type(err).__name__}: {str(err)[:80]}"
                failed = True
        print("| " + " | ".join(row.cells()) + " |", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
