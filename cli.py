"""ckpt command line: parses, checks, calls, prints.

Every refusal is one line on stderr with the documented exit code (errors.ExitCode): 1 for bad input (usage
errors included), 2 for an infeasible budget, 3 for a time limit that ran out without a schedule, 130 for
Ctrl-C (and SIGTERM). Inputs and output paths are checked before any long work starts.

Each command imports what it runs when it runs (Deeploy alone takes a second to import), so `ckpt --help`
and the commands that need no Deeploy start at once.
"""
from __future__ import annotations

import signal
import sys
from dataclasses import replace
from importlib.metadata import version as package_version
from pathlib import Path

import click

from ckpt.cli_common import (
    CONTEXT,
    FLOWS,
    SECONDS,
    WEIGHTS,
    FiniteFloat,
    allocator_option,
    capped,
    check_allocator,
    check_gap9_gvsoc,
    check_home,
    check_park,
    deeploy_root_option,
    given,
    gvsoc_draws_option,
    gvsoc_options,
    gvsoc_options_unused,
    gvsoc_timeout_option,
    home_option,
    model_or_default,
    one_line_errors,
    optimizer_option,
    park_option,
    parked_of,
    persist_on_chip_option,
    progress,
    refuse_ignored,
    refuse_inputs_as_output,
    tiled_weights,
    weights_option,
)
from ckpt.deeploy_bridge.setup import (
    DEEPLOY_TARGETS,
    DEFAULT_SETUP,
    SIMULATED_TARGETS,
    SPLIT_HOME,
    TARGETS,
    Allocator,
    Flow,
    WeightUpdate,
)
from ckpt.errors import CkptError, ExitCode
from ckpt.solver.model.options import Backend, Clock, Method, Objective, Policy, StageOrder, Views, values
from ckpt.targets import TARGET_TABLE, uses_deeploy


@click.group(context_settings=CONTEXT)
@click.version_option(package_version("ckpt"), "-V", "--version", prog_name="ckpt")
@one_line_errors
def cli() -> None:
    """Solve and replay gradient-checkpointing schedules for Deeploy training graphs."""
    from ckpt.files import check_cache_root

    check_cache_root()


@cli.command("solve")
@click.argument("model", required=False)
@click.option("--budget", "-b", default=None,
              help="Fraction of the baseline activation peak (0.7) or a size (700KB, 1.2MB, 716800 B; KB=1024 B). "
                   "Held on the live peak (with --allocator heap and the non-tiled flow, on the first-fit heap its "
                   "code needs) [default: 0.7].")
@click.option("--budget-total", "budget_total", default=None, metavar="LEVEL=SIZE",
              help="Instead of --budget: what one memory level of the tiled deployment may hold in all, static "
                   "constants + arena (e.g. L3=2MB); needs a Deeploy target.")
@click.option("--target", type=click.Choice(TARGETS), default="none", show_default=True,
              help="Solve on Deeploy's lowered graph for this target, or on the ONNX as it is.")
@click.option("--flow", type=click.Choice(FLOWS), default=None,
              help="The deployment --budget is checked on, both on the live peak with the arena ckpt lays out "
                   "reported: non-tiled (one arena in L2) or tiled (arenas per memory level) [default: tiled for a "
                   "Deeploy target, non-tiled for none].")
@weights_option()
@allocator_option
@click.option("-o", "--output", default="seq.json", show_default=True, help="Schedule file to write (- for stdout).")
@click.option("--objective", type=click.Choice(values(Objective)), default=Objective.COST.value, show_default=True,
              help="cost: cheapest schedule under the budget; peak: lowest peak under --cost-cap.")
@click.option("--cost-cap", type=click.IntRange(min=0), default=None,
              help="With --objective peak: most recompute cycles to spend.")
@click.option("--method", type=click.Choice(values(Method)), default=Method.MILP.value, show_default=True)
@click.option("--solver", type=click.Choice(values(Backend)), default=Backend.HIGHS.value, show_default=True)
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True,
              help="Seconds for the whole solve (of --clock).")
@click.option("--clock", type=click.Choice(values(Clock)), default=Clock.WALL.value, show_default=True,
              help="What --time-limit counts: wall seconds, or the solve's CPU seconds (the same work, so the same "
                   "answer, however busy the machine is).")
@click.option("--gap", type=FiniteFloat(min=0, max=1, max_open=True), default=1e-4, show_default=True,
              help="Relative optimality gap to stop at.")
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Solver threads [default: 1, which makes the answer independent of the machine and its load].")
@click.option("--order", type=click.Choice(values(StageOrder)), default=StageOrder.MINMEM.value, show_default=True,
              help="Stage order: a memory-minimising topological order, the graph's own, or a local search from the "
                   "first whose every step is solved exactly (a proof then holds for the order it ends at).")
@click.option("--views", type=click.Choice(values(Views)), default=Views.REMADE.value, show_default=True,
              help="Views (Reshape-like, free) re-made where they are read, or made once: the larger space is the "
                   "default; a proof is relative to the space chosen.")
@home_option()
@persist_on_chip_option
@park_option
@click.option("--costs", "cost_file", default="auto", show_default=True, metavar="auto|estimate|gvsoc|FILE",
              help="Op costs: auto is the model's cycles measured on gvsoc (ckpt calibrate; measured once, cached) "
                   "where gvsoc is at hand and models the target, else the built-in estimate, as a sweep's; or the "
                   "built-in estimate, the measured cycles (gvsoc), or a cost file (a calibration, or per-op-type "
                   "coefficients).")
@click.option("--warm-start", "warm_start", multiple=True, metavar="SEQ_JSON",
              help="Earlier schedule files for this graph: the cheapest that fits is kept if nothing cheaper is "
                   "found (repeatable).")
@click.option("--record-time", is_flag=True, help="Write solver seconds into the file (it is then not reproducible).")
@click.option("--policy", type=click.Choice(values(Policy)), default=Policy.SOLVE.value, show_default=True,
              help="A baseline of Deeploy's training branch instead of ckpt's schedule: branch-rule (ckpt's recompute "
                   "set for the budget, ordered by the branch's rule) or top-k (--k forward nodes by bytes freed per "
                   "cycle, so ordered).")
@click.option("--k", "k", type=click.IntRange(min=1), default=None, help="top-k: how many forward nodes.")
@optimizer_option
@one_line_errors
def solve_command(model, budget, budget_total, target, flow, weights, allocator, output, objective, cost_cap, method,
                  solver, time_limit, clock, gap, threads, order, views, home, persist_on_chip, park, cost_file,
                  warm_start, record_time, policy, k, optimizer):
    """Write the cheapest recompute schedule for MODEL that fits the budget."""
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.files import check_output_file, write_output
    from ckpt.live import SolveProgress
    from ckpt.paths import optimizer_graph
    from ckpt.pipeline.calibrate import (
        COSTS_CHOICES,
        check_code_measurable,
        code_count_notice,
        measured_code_bytes,
        measured_tiler_tables,
        read_cost_file,
        resolve_costs,
        step_code_bytes,
    )
    from ckpt.pipeline.deployed_solve import SolveRequest, load_request, solve_and_document
    from ckpt.pipeline.level_total import level_capacity
    from ckpt.pipeline.on_chip import refuse_floor_before_code, unmeasured_note
    from ckpt.pipeline.solve_summary import solve_notes, written_line
    from ckpt.schedule_file import dumps, read_schedule
    from ckpt.solver.budget import parse_budget, parse_total
    from ckpt.solver.graph.onnx_loader import optimizer_path
    from ckpt.solver.model.backends import BackendOptions
    from ckpt.solver.model.records import SolveOptions

    check_output_file(output)
    check_policy(policy, k, budget, budget_total, objective)
    refuse_ignored(*_policy_ignores(policy, warm_start=warm_start, method=method, solver=solver,
                                    time_limit=time_limit, clock=clock, gap=gap, threads=threads, order=order,
                                    views=views))
    weights = tiled_weights(weights, target, flow)
    check_home(home, target)
    check_persist_on_chip(persist_on_chip, home)
    check_park(park, home, budget_total, policy, objective, persist_on_chip)
    if persist_on_chip == "auto" and (budget_total is not None or policy != "solve" or objective == "peak"):
        given_option = "--budget-total" if budget_total is not None else \
            "--objective peak" if objective == "peak" else f"--policy {policy}"
        raise CkptError(f"--persist-on-chip auto chooses what persists to bring on chip beside the schedule of a live "
                        f"budget; {given_option} solves for another figure", "give --budget, or drop --persist-on-chip")
    check_allocator(allocator, target)
    if allocator == Allocator.HEAP.value and (flow or Flow.default_for(target)) != Flow.NON_TILED.value:
        raise CkptError("--allocator heap holds the budget on the non-tiled code's first-fit heap; the budget is "
                        "held on the tiled flow here", "add --flow non-tiled, or drop --allocator")
    if budget is not None and budget_total is not None:
        raise CkptError("--budget and --budget-total both given", "give one: a live budget or a level's total")
    if cost_cap is not None and objective != "peak":
        raise CkptError("--cost-cap bounds the cycles of --objective peak", "add --objective peak, or drop --cost-cap")
    peak = "--objective peak finds the lowest live peak under --cost-cap, whatever the budget"
    greedy = "--method greedy runs no MILP"
    refuse_ignored(
        (objective == "peak" and budget is not None, f"--budget {budget}", peak, "drop --budget, or --objective peak"),
        (objective == "peak" and budget_total is not None, f"--budget-total {budget_total}", peak,
         "drop --budget-total, or --objective peak"),
        (method == "greedy" and given("solver"), f"--solver {solver}", greedy, "drop --solver, or use --method milp"),
        (method == "greedy" and given("gap"), f"--gap {gap:g}", greedy, "drop --gap, or use --method milp"),
        (method == "greedy" and given("threads"), f"--threads {threads}", greedy,
         "drop --threads, or use --method milp"))
    total = parse_total(budget_total) if budget_total else None
    if (total is not None or flow == Flow.TILED.value) and target not in DEEPLOY_TARGETS:
        named = f"--budget-total {budget_total}" if total is not None else "--flow tiled"   # only what was given
        raise CkptError(f"{named} holds a tiled Deeploy deployment; --target {target} has none",
                        "add --target siracusa (or gap9)")
    if total is not None and flow == Flow.NON_TILED.value:
        raise CkptError(f"--budget-total holds the tiled flow's {total.level} total (constants + arena); --flow "
                        "non-tiled deploys one L2 arena and no tiled flow",
                        "drop --flow non-tiled, or give --budget for the non-tiled flow")
    level = TARGET_TABLE[target].home_levels(home).default if target in DEEPLOY_TARGETS else home
    if total is not None and total.level != level:
        homes = TARGET_TABLE[target].level_homes
        raise CkptError(f"--budget-total {total.level}=... holds the tiled flow's home level, which is {level}",
                        f"give --budget-total {level}=SIZE" + (f", or add --home {total.level}" if total.level in homes
                                                               else f" (a home is one of {', '.join(homes)})"))
    capacity = level_capacity(target, total.level) if total is not None else None
    if capacity is not None and total.nbytes > capacity:
        raise CkptError(f"--budget-total {budget_total} is more than the {capacity:,} B {target}'s {total.level} "
                        "gives data", f"give at most {total.level}={capacity}")
    if total is not None and TARGET_TABLE[target].is_on_chip(level):
        check_code_measurable(target, level)
    if cost_file == "gvsoc" and target not in SIMULATED_TARGETS:
        raise CkptError(f"--costs gvsoc measures op costs on gvsoc's model of {', '.join(SIMULATED_TARGETS)}, not "
                        f"{target}", "solve with --costs estimate or a cost file, or with --target siracusa")
    parsed = None if objective == "peak" or total is not None else parse_budget("0.7" if budget is None else budget)
    if cost_file not in COSTS_CHOICES:
        read_cost_file(cost_file)                    # a bad file is refused before anything is lowered
    starts = [read_schedule(path) for path in warm_start]
    source = model_or_default(model)
    refuse_inputs_as_output(output, source, None if cost_file in COSTS_CHOICES else cost_file, *warm_start,
                            optimizer_graph(source, optimizer))
    optimizer_path(source, optimizer)                # a graph that is not this step's optimizer, before any work
    say_missing_optimizer(source, optimizer, "the schedule file's predicted figures (no predicted.optimizer) are "
                          "of")
    on_chip = policy == "solve" and parsed is not None and TARGET_TABLE[target].is_on_chip(level) \
        and (flow or "tiled") == "tiled"
    options = SolveOptions(objective=objective, cost_cap=cost_cap, order=order, method=method,
                           views=views,
                           backend=BackendOptions(solver, time_limit, gap, capped(threads or 1, "--threads"),
                                                  clock=Clock(clock)))
    request = SolveRequest(source, target, None if policy == "top-k" else parsed, total, options, None,
                           tuple(starts), record_time, Flow(flow) if flow else None, weights, home, optimizer, 0,
                           Policy(policy), k, Allocator(allocator), on_chip=on_chip)
    progress(f"loading {source} for target {target}")
    loaded = load_request(request)                   # once: the floor, the costs, the code and the solve read it
    if on_chip:                                      # no count of the code (a gvsoc run) can make it fit
        refuse_floor_before_code(loaded)
    setup = setup_for(target, home, weights=weights)
    counts_code = total is not None and total.level == level and TARGET_TABLE[target].is_on_chip(level)
    plus = persist_on_chip == "auto"
    notice = None
    if counts_code:
        notice = code_count_notice(cost_file, source, target, setup, loaded)
    elif plus or on_chip:                            # the room on chip is what is left beside the step's code
        notice = code_count_notice(
            cost_file, source, target, setup, loaded,
            why=f"--persist-on-chip auto fills {level} up to the step's own code" if plus else
            f"a live budget on {level} leaves room for the step's own code",
            skip="drop --persist-on-chip" if plus else None, counts_off_chip=plus)
    if notice:                                       # before the minutes it announces
        progress(notice)
    costs = resolve_costs(cost_file, source, target, setup, progress=progress, loaded=loaded)
    code = 0
    if counts_code:                                  # the program too
        code = step_code_bytes(source, target, setup, progress=progress, loaded=loaded)
    on_chip_code = measured_code_bytes(source, target, setup, progress, loaded) if on_chip else None
    plus_code = measured_code_bytes(source, target, setup, progress, loaded, safe_side=True) if plus else None
    plus_tables = measured_tiler_tables(source, target, setup, progress, loaded) if plus else None
    request = replace(request, costs=costs, code_bytes=code, on_chip_code=on_chip_code, loaded=loaded,
                      persist_on_chip=plus, split_plus_code=plus_code, split_plus_tables=plus_tables,
                      park=park == "auto")
    with SolveProgress.for_terminal(progress) as live:
        doc, result = solve_and_document(request, live)
    write_output(output, dumps(doc))
    held = (doc.predicted.levels or {}).get(level) if on_chip and on_chip_code is None else None
    for note in solve_notes(result, doc) + ([unmeasured_note(level, setup_for(target, home).size(level),
                                                             held["total"])] if held else []):
        click.echo(note, err=True)
    click.echo(written_line(doc, result, output), err=output == "-")


def check_persist_on_chip(persist_on_chip: str, home: str | None) -> None:
    """split+ without a split home: one line, before any work."""
    if persist_on_chip == "auto" and home != SPLIT_HOME:
        raise CkptError(f"--persist-on-chip auto brings persistent tensors on chip beside a split home's activations, "
                        f"and the home is {home or DEFAULT_SETUP.default_mem_level}",
                        "add --home split, or drop --persist-on-chip")


def _policy_ignores(policy: str, **options: object) -> list[tuple[bool, str, str, str]]:
    """refuse_ignored's rules for the solve options --policy top-k does without: it picks its K nodes by a rule
    and runs no solve (branch-rule solves for its recompute set, so it uses them)."""
    why = "--policy top-k picks its K nodes by a rule: no solve runs"
    flags = {name: "--" + name.replace("_", "-") for name in options}
    return [(policy == Policy.TOP_K.value and given(name), flags[name] if name == "warm_start" else
             f"{flags[name]} {value}", why, f"drop {flags[name]}") for name, value in options.items()]


@cli.command("calibrate")
@click.argument("model", required=False)
@click.option("--target", type=click.Choice(SIMULATED_TARGETS), default="siracusa", show_default=True)
@weights_option()
@home_option()
@click.option("-o", "--output", default=None, help="Also write the calibration as a cost file (--costs FILE).")
@deeploy_root_option
@click.option("--gvsoc", "gvsoc", type=click.Path(file_okay=False), default=None,
              help="gvsoc's install folder [default: $GVSOC_INSTALL, else the one beside the shared models].")
@gvsoc_timeout_option
@gvsoc_draws_option
@one_line_errors
def calibrate_command(model, target, weights, home, output, deeploy_root, gvsoc, gvsoc_timeout, gvsoc_draws):
    """Measure MODEL's op costs: the graph order's generated step on gvsoc, each layer's cycles (cached)."""
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.files import check_output_file, write_output
    from ckpt.gvsoc.draws import spread_text
    from ckpt.pipeline.calibrate import calibrate

    if output is not None:
        check_output_file(output, example="costs.json")
    source = model_or_default(model)
    if output is not None:
        refuse_inputs_as_output(output, source, example="costs.json")
    found = calibrate(source, target, setup_for(target, home, weights=tiled_weights(weights, target, None)),
                      Path(gvsoc) if gvsoc else None, Path(deeploy_root) if deeploy_root else None, progress,
                      gvsoc_timeout, draws=gvsoc_draws)
    top = sorted(found.node_cycles.items(), key=lambda item: -item[1])[:5]
    worst = " (the worst draw's)" if found.draws else ""
    click.echo(f"graph-order step on gvsoc ({target}): {found.step_cycles:,} cycles{spread_text(found.draws)}, "
               f"Errors: {found.errors} out of {found.total}{worst}; {len(found.node_cycles)} layers measured, "
               f"{sum(found.node_cycles.values()):,} cycles in them")
    if found.optimizer_cycles:
        click.echo(f"optimizer network: {found.optimizer_cycles:,} cycles per update"
                   f"{spread_text(found.optimizer_draws)}")
    for name, cycles in top:
        click.echo(f"  {cycles:>12,}  {100 * cycles / found.step_cycles:5.1f}%  {name}")
    if output is not None:
        write_output(output, found.to_json())
        click.echo(f"wrote {output}: solve with --costs {output} (or --costs gvsoc)")


@cli.command("inspect")
@click.argument("model", required=False)
@click.option("--target", type=click.Choice(TARGETS), default="none", show_default=True)
@click.option("--top", type=click.IntRange(min=0), default=8, show_default=True,
              help="How many of the largest live tensors to list.")
@weights_option()
@home_option()
@optimizer_option
@one_line_errors
def inspect_command(model, target, top, weights, home, optimizer):
    """Sizes, baseline peaks, the floor and, for a Deeploy target, static + arena = total per memory level."""
    from ckpt.pipeline.inspect import inspect_lines
    from ckpt.solver.graph.onnx_loader import optimizer_path

    chosen = tiled_weights(weights, target, None)
    check_home(home, target)
    source = model_or_default(model)
    optimizer_path(source, optimizer)                # a graph that is not this step's optimizer, before any work
    say_missing_optimizer(source, optimizer, "the figures below are of")
    for line in inspect_lines(source, target, top, progress, chosen, optimizer, home):
        click.echo(line)


def check_policy(policy: str, k: int | None, budget: str | None, budget_total: str | None, objective: str) -> None:
    """A baseline policy with options it cannot honour: one line naming only the options the user gave."""
    if policy == "top-k" and k is None:
        raise CkptError("--policy top-k needs --k: how many forward nodes it recomputes", "add --k K")
    if policy != "top-k" and k is not None:
        raise CkptError(f"--k {k} does nothing without --policy top-k (it is how many nodes top-k recomputes)",
                        "add --policy top-k, or drop --k")
    if policy == "solve":
        return
    given_options = [o for o, on in ((f"--budget {budget}", policy == "top-k" and budget is not None),
                                     (f"--budget-total {budget_total}", budget_total is not None),
                                     ("--objective peak", objective == "peak")) if on]
    if given_options:
        why = "answers to no budget or objective" if policy == "top-k" else \
            "orders the recompute set ckpt chooses for --budget"
        raise CkptError(f"--policy {policy} {why}: {' and '.join(given_options)} would be ignored",
                        "drop " + " and ".join(o if o.endswith(" peak") else o.split()[0] for o in given_options)
                        + (", or use --policy branch-rule with --budget" if policy == "top-k" and budget is not None
                           and budget_total is None and objective != "peak" else ""))


def say_missing_optimizer(source: str, optimizer: str | None, what: str) -> None:
    """A split step whose optimizer graph is not found: said on stderr (solve and inspect need the train graph
    alone, so it is no refusal)."""
    from ckpt.files import printable
    from ckpt.replay.verification import missing_optimizer_note

    note = missing_optimizer_note(source, optimizer, what)
    if note:
        click.echo(printable(note), err=True)


@cli.command("example")
@click.argument("kind", type=click.Choice(["cct", "mlp", "resnet"]))
@click.option("-o", "--output", required=True, help="Folder to write network.onnx, inputs.npz, outputs.npz into.")
@click.option("--blocks", type=click.IntRange(min=0, max=64), help="cct: transformer blocks; resnet: residual blocks.")
@click.option("--embed-dim", type=click.IntRange(min=1, max=2048), help="cct: embedding width.")
@click.option("--heads", type=click.IntRange(min=1, max=64), help="cct: attention heads.")
@click.option("--image-size", type=click.IntRange(min=1, max=512), help="cct, resnet: input image side.")
@click.option("--conv-channels", type=click.IntRange(min=1, max=1024), help="cct: the conv tokenizer's channels.")
@click.option("--train", help="cct: all | classifier | none | comma list of block indices, pool, fc, head.")
@click.option("--layers", type=click.IntRange(min=1, max=256), help="mlp: hidden layers.")
@click.option("--width", type=click.IntRange(min=1, max=16384), help="mlp: hidden width.")
@click.option("--channels", type=click.IntRange(min=1, max=1024), help="resnet: channels.")
@click.option("--batch", type=click.IntRange(min=1, max=1024), help="batch size.")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--overwrite", is_flag=True, help="Replace another model's files in the folder.")
@one_line_errors
def example_command(kind, output, overwrite, **options):
    """Write a built-in training graph (forward, backward, SGD) with inputs and golden outputs."""
    from ckpt.examples.options import example_options
    from ckpt.examples.write import write_example
    from ckpt.files import check_output_dir

    check_output_dir(output)
    written = write_example(kind, output, overwrite=overwrite, **example_options(kind, options))
    click.echo(f"wrote {written.directory}: network.onnx, inputs.npz, outputs.npz")


@cli.command("replay")
@click.argument("schedule")
@click.option("--target", type=click.Choice(TARGETS), default=None,
              help="Graph to replay on [default: the target the schedule was solved for].")
@click.option("--model", default=None, help="Model folder or .onnx [default: the built-in example].")
@click.option("-o", "--outdir", default=None, help="Output folder [default: <schedule>_replay next to it].")
@click.option("--overwrite", is_flag=True,
              help="Write into a non-empty folder ckpt did not write (only ckpt's own files are replaced).")
@allocator_option
@weights_option(" [default: as the schedule was solved, else in-place].")
@home_option(None, f" [default: as the schedule was solved, else {DEFAULT_SETUP.default_mem_level}].")
@persist_on_chip_option
@click.option("--steps", type=click.IntRange(min=1, max=100), default=1, show_default=True,
              help="Training steps the generated code runs back to back, each held to the host executor's same step "
                   "with the updated weights fed back.")
@click.option("--force", is_flag=True,
              help="Replay a schedule solved on another graph (the 90% name match still applies).")
@click.option("--no-verify", is_flag=True, help="Skip the host check of the replay and the run of its generated code.")
@deeploy_root_option
@gvsoc_options
@click.option("--record-time", is_flag=True, help="Write seconds into report.json (it is then not reproducible).")
@optimizer_option
@one_line_errors
def replay_command(schedule, target, model, outdir, overwrite, allocator, weights, home, persist_on_chip, steps, force,
                   no_verify, deeploy_root, gvsoc, no_simulate, gvsoc_timeout, gvsoc_draws, simulate_non_tiled,
                   record_time, optimizer):
    """Replay SCHEDULE: the rewired graph, its order, Deeploy's figures and code, and a check."""
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.files import refuse_input_folder
    from ckpt.gvsoc.kit import find_kit
    from ckpt.paths import model_files
    from ckpt.replay.folder import check_replay_folder, default_outdir, refuse_inputs_written
    from ckpt.replay.run import ReplayOptions, replay_schedule, schedule_target
    from ckpt.replay.summary import failure_line, summary_lines
    from ckpt.replay.verification import check_complete_step, check_split_step
    from ckpt.schedule_file import read_schedule
    from ckpt.solver.graph.onnx_loader import optimizer_path

    solved = read_schedule(schedule)
    folder = Path(outdir) if outdir is not None else default_outdir(Path(schedule))
    if model:
        refuse_input_folder(folder, model, optimizer)     # even with --overwrite
    check_replay_folder(folder, overwrite)
    refuse_inputs_written(folder, [Path(schedule), *(model_files(model) if model else []),
                                   *([Path(optimizer)] if optimizer else [])])
    replayed_on = schedule_target(solved, target)
    check_gap9_gvsoc(replayed_on, gvsoc, no_simulate, no_verify)
    no_code = None if uses_deeploy(replayed_on) else f"--target {replayed_on} generates no code"
    refuse_ignored(
        (steps > 1 and (no_verify or no_code), f"--steps {steps}", "the steps run the generated code, and "
         + (no_code or "--no-verify skips its run"), "drop --steps" + ("" if no_code else ", or --no-verify")),
        *gvsoc_options_unused(replayed_on, no_simulate, no_verify, gvsoc=gvsoc, gvsoc_timeout=gvsoc_timeout,
                              gvsoc_draws=gvsoc_draws if gvsoc_draws > 1 else None,
                              simulate_non_tiled=simulate_non_tiled),
        (deeploy_root is not None and (no_verify or no_code), "--deeploy-root",
         no_code or "--no-verify skips building the generated code", "drop --deeploy-root"),
        (optimizer is not None and no_verify, "--optimizer", "it completes the host check's step, which --no-verify "
         "skips", "drop --optimizer, or --no-verify"))
    if not no_simulate and not no_verify:
        find_kit(Path(gvsoc) if gvsoc else None)      # a gvsoc named that is not one is refused before any work
    if home is not None:
        check_home(home, replayed_on)
    check_allocator(allocator, replayed_on)
    layout = solved.graph.weights if solved.graph else None
    chosen = WeightUpdate(weights or (layout if layout in WEIGHTS else WeightUpdate.IN_PLACE.value))
    home = home or (solved.graph.home if solved.graph and solved.graph.home else DEFAULT_SETUP.default_mem_level)
    check_persist_on_chip(persist_on_chip, home)
    plus = persist_on_chip == "auto"
    parked = parked_of(solved, schedule, home, persist_on_chip)
    setup = setup_for(schedule_target(solved, target), home, allocator=Allocator(allocator), weights=chosen,
                      persist_on_chip=plus)
    setup = replace(setup, parked=parked) if parked else setup
    code, tables = None, None
    if plus and not no_simulate and not no_verify:
        from ckpt.pipeline.calibrate import measured_code_bytes, measured_tiler_tables
        measured = (model_or_default(model), schedule_target(solved, target), replace(setup, persist_on_chip=False))
        code = measured_code_bytes(*measured, progress, safe_side=True)
        tables = measured_tiler_tables(*measured, progress)
    options = ReplayOptions(target=target, force=force, verify=not no_verify, record_time=record_time,
                            overwrite=overwrite, deeploy_root=Path(deeploy_root) if deeploy_root else None,
                            gvsoc=Path(gvsoc) if gvsoc else None, simulate=not no_simulate,
                            deeploy=setup, steps=steps, optimizer=optimizer, on_chip_code=code, on_chip_tables=tables,
                            gvsoc_timeout=gvsoc_timeout, simulate_non_tiled=simulate_non_tiled,
                            gvsoc_draws=gvsoc_draws)
    model = model_or_default(model)
    optimizer_path(model, optimizer)                 # a graph that is not this step's optimizer, before any work
    if uses_deeploy(schedule_target(solved, target)):
        split = check_split_step(model, optimizer, schedule_target(solved, target))
        refuse_ignored((split is not None and steps > 1, f"--steps {steps}", "a split step runs the mini-batches "
                        "and updates its inputs.npz sets (meta_n_batches, meta_n_accum), not one step N times",
                        "drop --steps (set meta_n_batches in inputs.npz for a longer run)"))
    if not no_verify:
        check_complete_step(model, optimizer, ", or replay with --no-verify")
    result = replay_schedule(schedule, model, folder, options, progress)
    for line in summary_lines(result):
        click.echo(line)
    failed = failure_line(result)
    if failed:
        click.echo(failed, err=True)              # the reason last, not only mid-output
    sys.exit(0 if result.ok else 1)


@cli.command("verify")
@click.argument("model_dir")
@click.option("--schedule", default=None, help="Also replay this schedule and compare it with the graph order.")
@click.option("--target", type=click.Choice(TARGETS), default=None,
              help="Run the ONNX as is, or Deeploy's lowered graph [default: the schedule's target, else none].")
@click.option("--fix-bias-gelu", is_flag=True,
              help="Rewire GeluGrad nodes that read the pre-bias tensor (a known export defect) before comparing.")
@click.option("--force", is_flag=True,
              help="Replay a schedule solved on another graph (the 90% name match still applies).")
@optimizer_option
@one_line_errors
def verify_command(model_dir, schedule, target, fix_bias_gelu, force, optimizer):
    """Run MODEL_DIR/network.onnx on inputs.npz and compare with outputs.npz as Deeploy's harness does
    (`Errors: N out of M` over output elements, |diff| > 1e-4 or NaN; 1e-3 for a positional step of Deeploy's
    training branch, as its harness counts)."""
    from ckpt.replay.run import schedule_target
    from ckpt.replay.verification import verify_model
    from ckpt.schedule_file import read_schedule
    from ckpt.solver.graph.onnx_loader import optimizer_path

    refuse_ignored((force and schedule is None, "--force", "it lets --schedule replay a schedule of another graph, "
                    "and no --schedule is given", "drop --force"))
    solved = read_schedule(schedule) if schedule else None
    optimizer_path(model_dir, optimizer)             # a graph that is not this step's optimizer, before any work
    target = target or (schedule_target(solved, None) if solved else "none")
    report = verify_model(model_dir, solved, target, fix_bias_gelu=fix_bias_gelu, force=force, optimizer=optimizer,
                          progress=progress)
    for line in report.lines():
        click.echo(line)
    click.echo(f"({report.seconds:.1f} s)")
    sys.exit(0 if report.ok else 1)


@cli.command("sweep")
@click.argument("budget_range", default="0.6:0.9", metavar="[LOW:HIGH]")
@click.option("--step", type=FiniteFloat(min=0, min_open=True), default=None, help="Budget step (default 0.1).")
@click.option("--points", type=click.IntRange(min=1), default=None,
              help="Number of budgets, evenly spaced (instead of --step).")
@click.option("--model", "models", multiple=True,
              help="Model folder or .onnx, repeatable: one folder per model and a combined table "
                   "[default: the built-in example].")
@click.option("--target", type=click.Choice(TARGETS), default="siracusa", show_default=True)
@click.option("--flow", type=click.Choice(FLOWS), default=None,
              help="The deployment budgets are checked on [default: tiled for a Deeploy target, else non-tiled].")
@click.option("-o", "--outdir", default="sweep", show_default=True, help="Sweep folder (reused to resume).")
@click.option("--jobs", type=click.IntRange(min=0), default=0,
              help="Points run in parallel on this machine [default: the core count].")
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="Run the points on a Dask cluster through its scheduler (workers: ckpt installed, --nthreads 1, "
                   "the sweep folder on a shared filesystem).")
@click.option("--time-limit", type=SECONDS, default=60.0, show_default=True,
              help="Solver seconds per point (of --clock).")
@click.option("--clock", type=click.Choice(values(Clock)), default=Clock.WALL.value, show_default=True,
              help="What --time-limit counts: wall seconds, or each point's solve's CPU seconds (the same work, so "
                   "the same answer, however many points run at once or however busy the machine is).")
@click.option("--method", type=click.Choice(values(Method)), default=Method.MILP.value, show_default=True)
@click.option("--solver", type=click.Choice(values(Backend)), default=Backend.HIGHS.value, show_default=True)
@allocator_option
@weights_option()
@home_option()
@persist_on_chip_option
@park_option
@click.option("--no-carry", is_flag=True,
              help="Keep each point's own schedule even where a tighter point's is cheaper.")
@click.option("--costs", default="auto", show_default=True, metavar="auto|estimate|gvsoc|FILE",
              help="Op costs the points are solved with: auto is the model's cycles measured on gvsoc (calibrated "
                   "once, cached) where gvsoc is at hand, else the built-in estimate.")
@click.option("--no-verify", is_flag=True, help="Skip the host check of each replay.")
@deeploy_root_option
@gvsoc_options
@click.option("--overwrite", is_flag=True,
              help="Write into a folder holding files of a sweep's names (sweep.md, ...) that no ckpt sweep wrote.")
@click.option("--emit-ci", "emit_ci", type=click.Path(file_okay=False), default=None,
              help="Also write Deeploy CI test-config entries for the best verified schedule into this folder.")
@click.option("--ci-test-name", default=None,
              help="The model's test path in DeeployTest/Tests [default: Models/Training/<model folder>].")
@one_line_errors
def sweep_command(budget_range, step, points, models, target, flow, outdir, jobs, scheduler, time_limit, clock, method,
                  solver, allocator, weights, home, persist_on_chip, park, no_carry, costs, no_verify, deeploy_root,
                  gvsoc, no_simulate, gvsoc_timeout, gvsoc_draws, simulate_non_tiled, overwrite, emit_ci, ci_test_name):
    """Solve, replay and verify a schedule per budget in LOW:HIGH (fractions of the baseline peak)."""

    from ckpt.budgets.executors import DaskExecutor
    from ckpt.budgets.ranges import parse_range
    from ckpt.budgets.sweep import SweepOptions, run_sweep
    from ckpt.budgets.table import terminal_table
    from ckpt.ci.emit import check_emit_folder, check_emit_target, emit_ci_configs
    from ckpt.deeploy_bridge.setup import setup_for
    from ckpt.files import check_output_dir
    from ckpt.gvsoc.kit import find_kit
    from ckpt.pipeline.calibrate import COSTS_CHOICES, read_cost_file
    from ckpt.replay.run import ReplayOptions
    from ckpt.replay.verification import check_complete_step, check_split_step
    from ckpt.solver.graph.onnx_loader import optimizer_path
    from ckpt.solver.model.backends import BackendOptions
    from ckpt.solver.model.records import SolveOptions

    fractions = parse_range(budget_range, step, points)
    weights = tiled_weights(weights, target, flow)
    check_home(home, target)
    check_persist_on_chip(persist_on_chip, home)
    check_park(park, home, None, "solve", "cost", persist_on_chip)
    check_allocator(allocator, target)
    check_output_dir(outdir)
    no_code = None if uses_deeploy(target) else f"--target {target} generates no code"
    check_gap9_gvsoc(target, gvsoc, no_simulate, no_verify)
    refuse_ignored(
        (scheduler is not None and given("jobs"), f"--jobs {jobs}", "the Dask cluster's workers run the points",
         "drop --jobs (start as many workers as points should run at once)"),
        (ci_test_name is not None and not emit_ci, "--ci-test-name", "it names the test --emit-ci writes",
         "add --emit-ci DIR, or drop --ci-test-name"),
        (ci_test_name is not None and len(models) > 1, "--ci-test-name", "it names one model's test, and "
         f"{len(models)} models are swept", "drop --ci-test-name (each model gets Models/Training/<folder>)"),
        *gvsoc_options_unused(target, no_simulate, no_verify, gvsoc=gvsoc, gvsoc_timeout=gvsoc_timeout,
                              gvsoc_draws=gvsoc_draws if gvsoc_draws > 1 else None,
                              simulate_non_tiled=simulate_non_tiled),
        (deeploy_root is not None and (no_verify or no_code), "--deeploy-root",
         no_code or "--no-verify skips building the generated code", "drop --deeploy-root"),
        (method == "greedy" and given("solver"), f"--solver {solver}", "--method greedy runs no MILP",
         "drop --solver, or use --method milp"))
    if costs == "gvsoc" and target not in SIMULATED_TARGETS:
        raise CkptError(f"--costs gvsoc measures op costs on gvsoc's model of {', '.join(SIMULATED_TARGETS)}, not "
                        f"{target}", "sweep with --costs auto, estimate or a cost file, or with --target siracusa")
    if costs not in COSTS_CHOICES:
        read_cost_file(costs)                        # a bad file is refused before anything is lowered
    if not no_simulate and not no_verify:
        find_kit(Path(gvsoc) if gvsoc else None)      # a gvsoc named that is not one is refused before any work
    executor = DaskExecutor(scheduler) if scheduler else None      # its address is checked here, before any work
    if emit_ci:
        check_emit_target(target)
        check_output_dir(emit_ci)
        check_emit_folder(Path(emit_ci), target)
    options = SweepOptions(
        fractions=tuple(fractions), target=target, jobs=capped(jobs, "--jobs") if jobs else 0, carry=not no_carry,
        costs=costs, overwrite=overwrite, park=park == "auto",
        flow=Flow(flow) if flow else None,
        solve=SolveOptions(method=method, backend=BackendOptions(solver, time_limit, clock=Clock(clock))),
        replay=ReplayOptions(target=target, verify=not no_verify,
                             deeploy_root=Path(deeploy_root) if deeploy_root else None,
                             gvsoc=Path(gvsoc) if gvsoc else None, simulate=not no_simulate,
                             deeploy=setup_for(target, home, allocator=Allocator(allocator), weights=weights,
                                               persist_on_chip=persist_on_chip == "auto"),
                             gvsoc_timeout=gvsoc_timeout, gvsoc_draws=gvsoc_draws,
                             simulate_non_tiled=simulate_non_tiled))
    sources = [model_or_default(m) for m in models] if models else [model_or_default(None)]
    for source in sources:
        optimizer_path(source)          # a sibling optimizer graph that is not this step's, before any work
        if uses_deeploy(target):
            check_split_step(source, None, target)  # the branch's step: its Deeploy, optimizer graph, harness order
        elif not no_verify:
            check_complete_step(source, None, ", or sweep with --no-verify", option=False)
    for source in sources if costs not in COSTS_CHOICES else ():
        read_cost_file(costs, source, target)       # a calibration of another model or target is refused
    result = run_sweep(sources, outdir, options, progress, executor)
    click.echo(terminal_table(result.rows, target, result.notes))
    stages = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.stage_seconds.items())
    click.echo(f"{len(result.ran)} point(s) run, {len(result.skipped)} skipped; {stages}; "
               f"total {result.seconds:.1f} s")
    click.echo(f"wrote {result.outdir}/: points/, " + ", ".join(p.name for p in result.files))
    if emit_ci:
        for source, part in zip(sources, result.models.values() if result.models else [result]):
            written = emit_ci_configs(part, source, target, Path(emit_ci), ci_test_name if len(sources) == 1 else None)
            click.echo(f"wrote {emit_ci}/: " + ", ".join(str(p.relative_to(emit_ci)) for p in written))
    if result.failed:                       # as a replay that fails its check: one line, exit 1
        labels = ", ".join(r.label for r in result.failed)
        click.echo(f"error: {len(result.failed)} point(s) failed their check ({labels}): each point's line above "
                   f"and {result.outdir}/sweep.md say why", err=True)
    sys.exit(1 if result.failed else 0)


@cli.group("ci", context_settings=CONTEXT)
def ci_group() -> None:
    """The committed CCT2_FT2 schedule CI replays, and its baseline."""


@ci_group.command("check")
@click.option("--models", type=click.Path(file_okay=False), default=None,
              help="Shared models folder [default: $CKPT_SHARED_MODELS, else ../shared/models beside the repo].")
@click.option("--outdir", type=click.Path(file_okay=False), default=None, help="Keep the replay here.")
@one_line_errors
def ci_check_command(models, outdir):
    """Replay ci/cct2_ft2/seq.json through Deeploy and the host check; compare with ci/cct2_ft2/baseline.json."""
    from ckpt.ci.check import CiCase, check
    from ckpt.ci.figures import table
    from ckpt.replay.folder import check_replay_folder

    if outdir is not None:
        try:
            check_replay_folder(Path(outdir), overwrite=False)      # bad input, not a failed check
        except CkptError as err:
            raise CkptError(err.problem, "give --outdir a new or empty folder, or one a replay wrote") from None
    case = CiCase()
    click.echo(f"ci: {case.model} recompute schedule {case.schedule.relative_to(case.schedule.parents[2])} "
               f"on {case.target}: Deeploy code generation (non-tiled, tiled), host verification, the generated code "
               "built and run")
    result = check(case, Path(models) if models else None, Path(outdir) if outdir else None, progress)
    if result.status == "skipped":
        click.echo(f"ci: skipped: {result.reason} (set CKPT_SHARED_MODELS or put the models there)")
        return
    if result.rows:
        click.echo(table(result.rows))
    verdict = "PASS" if result.ok else f"FAIL ({result.reason})"
    click.echo(f"ci: {verdict} in {result.seconds:.1f} s")
    sys.exit(0 if result.ok else 1)


@ci_group.command("update-baseline")
@click.option("--models", type=click.Path(file_okay=False), default=None,
              help="Shared models folder [default: $CKPT_SHARED_MODELS, else ../shared/models beside the repo].")
@one_line_errors
def ci_update_baseline_command(models):
    """Replay the committed schedule and write its figures as the new baseline (the only way it changes)."""
    from ckpt.ci.check import CiCase, update_baseline

    case = CiCase()
    figures = update_baseline(case, Path(models) if models else None, None, progress)
    click.echo(f"wrote {case.baseline}: replayed peak {figures.replayed_peak} B, Deeploy non-tiled "
               f"{figures.deeploy_nontiled} B, {figures.recomputes} recomputes, golden Errors "
               f"{figures.golden_errors}/{figures.golden_compared}")


def _terminated(signum, frame) -> None:
    """SIGTERM (a job scheduler's, `kill`'s) stops ckpt as Ctrl-C does: what runs is cleaned up, not cut off."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> None:
    """The console script: click's parsing, with ckpt's exit codes for usage errors, Ctrl-C and SIGTERM."""
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        _main(argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(argv: list[str] | None) -> None:
    try:
        cli.main(args=argv, prog_name="ckpt", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as err:      # `ckpt` alone: help, as click prints it
        click.echo(err.ctx.get_help())
        sys.exit(int(ExitCode.OK))
    except click.UsageError as err:
        command = err.ctx.command_path if err.ctx is not None else "ckpt"
        click.echo(f"error: {err.format_message()}: see `{command} --help`", err=True)
        sys.exit(int(ExitCode.BAD_INPUT))
    except click.ClickException as err:                    # a bad file argument and the like
        click.echo(f"error: {err.format_message()}", err=True)
        sys.exit(int(ExitCode.BAD_INPUT))
    except (click.exceptions.Abort, KeyboardInterrupt):
        click.echo("error: interrupted: nothing half-written was left behind", err=True)
        sys.exit(int(ExitCode.INTERRUPTED))
    except click.exceptions.Exit as done:                  # --help, --version
        sys.exit(done.exit_code)


if __name__ == "__main__":
    main()
