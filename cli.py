"""ckpt command line: parses, calls, prints. Errors are one line on stderr and a non-zero exit."""
from __future__ import annotations

import functools
import sys

import click

from ckpt.errors import CkptError

DEFAULT_MODEL = "built-in example (CCT-like, 2 blocks)"


def one_line_errors(command):
    """Turn a CkptError into `error: ...` on stderr and its exit code, never a traceback."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CkptError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(err.exit_code)
    return wrapper


def progress(message: str) -> None:
    click.echo(f"[ckpt] {message}", err=True)


@click.group()
def main() -> None:
    """Solve and replay gradient-checkpointing schedules for Deeploy training graphs."""


@main.command("solve")
@click.argument("model", required=False)
@click.option("--budget", "-b", default="0.7", show_default=True,
              help="Fraction of the baseline activation peak (0.7) or a size (700KB, 1.2MB, 716800 B; KB=1024 B).")
@click.option("--target", type=click.Choice(["none", "siracusa", "gap9"]), default="none", show_default=True,
              help="Solve on Deeploy's lowered graph for this target, or on the ONNX as it is.")
@click.option("-o", "--output", default="seq.json", show_default=True, help="Schedule file to write.")
@click.option("--objective", type=click.Choice(["cost", "peak"]), default="cost", show_default=True,
              help="cost: cheapest schedule under the budget; peak: lowest peak under --cost-cap.")
@click.option("--cost-cap", type=int, default=None, help="With --objective peak: most recompute cycles to spend.")
@click.option("--method", type=click.Choice(["milp", "greedy"]), default="milp", show_default=True)
@click.option("--solver", type=click.Choice(["highs", "cbc"]), default="highs", show_default=True)
@click.option("--time-limit", type=float, default=60.0, show_default=True, help="Seconds for the MILP.")
@click.option("--gap", type=float, default=1e-4, show_default=True, help="Relative optimality gap to stop at.")
@click.option("--threads", type=int, default=None, help="Solver threads (default: the solver's choice).")
@click.option("--order", type=click.Choice(["minmem", "graph"]), default="minmem", show_default=True,
              help="Stage order: a memory-minimising topological order, or the graph's own.")
@click.option("--costs", "cost_file", default=None, help="JSON of per-op-type cost coefficients.")
@click.option("--record-time", is_flag=True, help="Write solver seconds into the file (it is then not reproducible).")
@one_line_errors
def solve_command(model, budget, target, output, objective, cost_cap, method, solver, time_limit, gap, threads,
                  order, cost_file, record_time):
    """Write the cheapest recompute schedule for MODEL that fits the budget."""
    from ckpt.budgets.parse import parse_budget
    from ckpt.schedule_file import write_schedule
    from ckpt.solver.backends import SolverOptions
    from ckpt.solver.costs import CostModel
    from ckpt.solver.solve import SolveOptions
    from ckpt.workflow import schedule_document, solve_model

    parsed = None if objective == "peak" else parse_budget(budget)
    options = SolveOptions(budget=None, objective=objective, cost_cap=cost_cap, order=order, method=method,
                           backend=SolverOptions(solver, time_limit, gap, threads))
    source = model or _default_model()
    loaded, result, options = solve_model(source, parsed, target, options,
                                          CostModel.from_json(cost_file) if cost_file else None, progress)
    write_schedule(output, schedule_document(loaded, parsed, result, options, record_time))
    _print_solve_summary(result, output)


def _print_solve_summary(result, output: str) -> None:
    if result.status not in ("optimal",):
        gap = "unknown" if result.gap is None else f"{100 * result.gap:.2f}%"
        click.echo(f"warning: not proven optimal (status {result.status}, gap {gap})", err=True)
    base = result.baselines.graph_order_peak
    click.echo(f"wrote {output}: peak {result.peak_bytes} B ({100 * result.peak_bytes / base:.1f}% of baseline "
               f"{base} B), {result.recomputes} recomputes, +{result.cost_increase_pct:.2f}% cycles, "
               f"status {result.status}, {result.seconds:.1f} s")


@main.command("inspect")
@click.argument("model", required=False)
@click.option("--target", type=click.Choice(["none", "siracusa", "gap9"]), default="none", show_default=True)
@click.option("--top", default=8, show_default=True, help="How many of the largest live tensors to list.")
@one_line_errors
def inspect_command(model, target, top):
    """Sizes, baseline peaks and the floor for MODEL."""
    from ckpt.report import inspect_lines

    for line in inspect_lines(model or _default_model(), target, top, progress):
        click.echo(line)


@main.command("example")
@click.argument("kind", type=click.Choice(["cct", "mlp", "resnet"]))
@click.option("-o", "--output", required=True, help="Folder to write network.onnx, inputs.npz, outputs.npz into.")
@click.option("--blocks", type=int, help="cct: transformer blocks; resnet: residual blocks.")
@click.option("--embed-dim", type=int, help="cct: embedding width.")
@click.option("--heads", type=int, help="cct: attention heads.")
@click.option("--image-size", type=int, help="cct, resnet: input image side.")
@click.option("--train", help="cct: all | classifier | none | comma list of block indices, pool, fc, head.")
@click.option("--layers", type=int, help="mlp: hidden layers.")
@click.option("--width", type=int, help="mlp: hidden width.")
@click.option("--channels", type=int, help="resnet: channels.")
@click.option("--batch", type=int, help="batch size.")
@click.option("--seed", type=int, default=0, show_default=True)
@one_line_errors
def example_command(kind, output, **options):
    """Write a built-in training graph (forward, backward, SGD) with inputs and golden outputs."""
    from ckpt.examples.options import example_options
    from ckpt.examples.write import write_example

    written = write_example(kind, output, **example_options(kind, options))
    click.echo(f"wrote {written.directory}: network.onnx, inputs.npz, outputs.npz")


@main.command("replay")
@click.argument("schedule")
@click.option("--target", type=click.Choice(["siracusa", "gap9", "none"]), default=None,
              help="Graph to replay on [default: the target the schedule was solved for].")
@click.option("--model", default=None, help="Model folder or .onnx [default: the built-in example].")
@click.option("-o", "--outdir", default=None, help="Output folder [default: <schedule>_replay next to it].")
@click.option("--force", is_flag=True, help="Replay a schedule solved on another graph (the 90% name match still applies).")
@click.option("--no-verify", is_flag=True, help="Skip the host check of the replay.")
@click.option("--deeploy-root", type=click.Path(file_okay=False), default=None,
              help="Deeploy checkout with the training harness, toolchain and gvsoc: run the schedule in gvsoc.")
@click.option("--record-time", is_flag=True, help="Write seconds into report.json (it is then not reproducible).")
@one_line_errors
def replay_command(schedule, target, model, outdir, force, no_verify, deeploy_root, record_time):
    """Replay SCHEDULE: the rewired graph, its order, Deeploy's figures and code, and a check."""
    from pathlib import Path

    from ckpt.replay.workflow import ReplayOptions, replay_schedule, summary_lines

    options = ReplayOptions(target=target, force=force, verify=not no_verify, record_time=record_time,
                            deeploy_root=Path(deeploy_root) if deeploy_root else None)
    result = replay_schedule(schedule, model or _default_model(), outdir, options, progress)
    for line in summary_lines(result):
        click.echo(line)
    sys.exit(0 if result.ok else 1)


@main.command("verify")
@click.argument("model_dir")
@click.option("--schedule", default=None, help="Also replay this schedule and compare it with the graph order.")
@click.option("--target", type=click.Choice(["none", "siracusa"]), default=None,
              help="Run the ONNX as is, or Deeploy's lowered graph [default: the schedule's target, else none].")
@click.option("--fix-bias-gelu", is_flag=True,
              help="Rewire GeluGrad nodes that read the pre-bias tensor (a known export defect) before comparing.")
@click.option("--force", is_flag=True, help="Replay a schedule solved on another graph (the 90% name match still applies).")
@one_line_errors
def verify_command(model_dir, schedule, target, fix_bias_gelu, force):
    """Run MODEL_DIR/network.onnx on inputs.npz and compare with outputs.npz (Errors: N out of M)."""
    from ckpt.replay.verification import verify_model
    from ckpt.schedule_file import read_schedule

    doc = read_schedule(schedule) if schedule else None
    target = target or ((doc or {}).get("graph") or {}).get("target") or "none"
    report = verify_model(model_dir, doc, target, fix_bias_gelu=fix_bias_gelu, force=force, progress=progress)
    for line in report.lines():
        click.echo(line)
    click.echo(f"({report.seconds:.1f} s)")
    sys.exit(0 if report.ok else 1)


@main.command("sweep")
@click.argument("budget_range", default="0.6:0.9", metavar="[LOW:HIGH]")
@click.option("--step", type=float, default=None, help="Budget step (default 0.1).")
@click.option("--points", type=int, default=None, help="Number of budgets, evenly spaced (instead of --step).")
@click.option("--model", default=None, help="Model folder or .onnx [default: the built-in example].")
@click.option("--target", type=click.Choice(["siracusa", "gap9", "none"]), default="siracusa", show_default=True)
@click.option("-o", "--outdir", default="sweep", show_default=True, help="Sweep folder (reused to resume).")
@click.option("--jobs", type=int, default=0, help="Points run in parallel [default: the core count].")
@click.option("--time-limit", type=float, default=60.0, show_default=True, help="Solver seconds per point.")
@click.option("--method", type=click.Choice(["milp", "greedy"]), default="milp", show_default=True)
@click.option("--solver", type=click.Choice(["highs", "cbc"]), default="highs", show_default=True)
@click.option("--no-verify", is_flag=True, help="Skip the host check of each replay.")
@click.option("--deeploy-root", type=click.Path(file_okay=False), default=None,
              help="Deeploy checkout with the training harness, toolchain and gvsoc: simulate each point.")
@click.option("--emit-ci", "emit_ci", type=click.Path(file_okay=False), default=None,
              help="Also write Deeploy CI test-config entries for the best verified schedule into this folder.")
@click.option("--ci-test-name", default=None,
              help="The model's test path in DeeployTest/Tests [default: Models/Training/<model folder>].")
@one_line_errors
def sweep_command(budget_range, step, points, model, target, outdir, jobs, time_limit, method, solver, no_verify,
                  deeploy_root, emit_ci, ci_test_name):
    """Solve, replay and verify a schedule per budget in LOW:HIGH (fractions of the baseline peak)."""
    from pathlib import Path

    from ckpt.budgets.ranges import parse_range
    from ckpt.budgets.sweep import SweepOptions, run_sweep
    from ckpt.budgets.table import terminal_table
    from ckpt.replay.workflow import ReplayOptions
    from ckpt.solver.backends import SolverOptions
    from ckpt.solver.solve import SolveOptions

    fractions = parse_range(budget_range, step, points)
    if emit_ci:
        from ckpt.ci.emit import check_emit_target

        check_emit_target(target)
    if jobs < 0:
        raise CkptError(f"--jobs {jobs} is negative", "give a number of processes, or 0 for the core count")
    options = SweepOptions(
        fractions=tuple(fractions), target=target, jobs=jobs,
        solve=SolveOptions(budget=None, method=method, backend=SolverOptions(solver, time_limit)),
        replay=ReplayOptions(target=target, verify=not no_verify,
                             deeploy_root=Path(deeploy_root) if deeploy_root else None))
    source = model or _default_model()
    result = run_sweep(source, outdir, options, progress)
    click.echo(terminal_table(result.rows))
    stages = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in result.stage_seconds.items())
    click.echo(f"{len(result.ran)} point(s) run, {len(result.skipped)} skipped; {stages}; "
               f"total {result.seconds:.1f} s")
    click.echo(f"wrote {result.outdir}/: points/, " + ", ".join(p.name for p in result.files))
    if emit_ci:
        from ckpt.ci.emit import emit_ci_configs

        written = emit_ci_configs(result, source, target, Path(emit_ci), ci_test_name)
        click.echo(f"wrote {emit_ci}/: " + ", ".join(str(p.relative_to(emit_ci)) for p in written))
    sys.exit(1 if result.failed else 0)


@main.group("ci")
def ci_group() -> None:
    """The committed CCT2_FT2 schedule CI replays, and its baseline."""


@ci_group.command("check")
@click.option("--models", type=click.Path(file_okay=False), default=None,
              help="Shared models folder [default: $CKPT_SHARED_MODELS, else ../shared/models beside the repo].")
@click.option("--outdir", type=click.Path(file_okay=False), default=None, help="Keep the replay here.")
@one_line_errors
def ci_check_command(models, outdir):
    """Replay ci/cct2_ft2/seq.json through Deeploy and the host check; compare with ci/cct2_ft2/baseline.json."""
    from pathlib import Path

    from ckpt.ci.check import CiCase, check
    from ckpt.ci.figures import table

    case = CiCase()
    click.echo(f"ci: {case.model} recompute schedule {case.schedule.relative_to(case.schedule.parents[2])} "
               f"on {case.target}: Deeploy code generation (non-tiled, tiled) and host verification")
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
    from pathlib import Path

    from ckpt.ci.check import CiCase, update_baseline

    case = CiCase()
    figures = update_baseline(case, Path(models) if models else None, None, progress)
    click.echo(f"wrote {case.baseline}: replayed peak {figures.replayed_peak} B, Deeploy non-tiled "
               f"{figures.deeploy_nontiled} B, {figures.recomputes} recomputes, golden Errors "
               f"{figures.golden_errors}/{figures.golden_compared}")


def _default_model() -> str:
    from ckpt.examples.default import default_model_dir

    progress(f"no MODEL given: using the {DEFAULT_MODEL}")
    return str(default_model_dir())


if __name__ == "__main__":
    main()
