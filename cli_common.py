"""What every ckpt command shares: option types and options, one-line errors, progress lines, the default
model, and the checks made before any work. Imports inside functions keep `ckpt --help` fast (as in cli.py)."""
from __future__ import annotations

import functools
import math
import os
import signal
import sys
from pathlib import Path

import click
from click.core import ParameterSource

from ckpt.deeploy_bridge.setup import (
    DEEPLOY_TARGETS,
    DEFAULT_SETUP,
    HOMES,
    Allocator,
    Flow,
    WeightUpdate,
)
from ckpt.errors import DISK_FULL, CkptError, unwritable
from ckpt.events import Event
from ckpt.gvsoc.draws import MAX_DRAWS
from ckpt.gvsoc.gap9 import find_gap9_gvsoc
from ckpt.paths import model_files
from ckpt.targets import SPLIT_HOME, simulation_gap

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 110}
ALLOCATORS = [a.value for a in Allocator]
ALLOCATOR_DEFAULT = DEFAULT_SETUP.allocator.value
FLOWS = [f.value for f in Flow]
WEIGHTS = [w.value for w in WeightUpdate]
WEIGHTS_HELP = ("How the tiled flow writes updated weights: in-place, into the weight every reader shares (one copy "
                "of each constant; every reader of a weight runs before its update), or out-of-place, Deeploy's own "
                "(a new buffer in the arena, every reader its own copy; each update copied back into the weights at "
                "the end of the step, as the non-tiled flow always does)")


class FiniteFloat(click.FloatRange):
    """A float in a range that is also a number (click's FloatRange lets NaN through)."""

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


SECONDS = FiniteFloat(min=0, min_open=True)


def one_line_errors(command):
    """Turn a CkptError into `error: ...` on stderr and its exit code, never a traceback; so too a write the
    filesystem refused (a full disk, a quota, a read-only mount) wherever it happened."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except CkptError as err:
            click.echo(f"error: {err}", err=True)
            sys.exit(int(err.exit_code))
        except OSError as exc:
            if exc.errno not in DISK_FULL:
                raise
            err = unwritable(exc.filename or "a file", exc)
            click.echo(f"error: {err}", err=True)
            sys.exit(int(err.exit_code))
    return wrapper


INTERRUPT_HOOK = "CKPT_TEST_INTERRUPT_AT"   # tests: a real SIGINT once a progress line starts with this text
INTERRUPT_SIGNAL = "CKPT_TEST_INTERRUPT_SIGNAL"   # ... or the signal named here (TERM)


def progress(message: str | Event) -> None:
    """One line on stderr per message or event."""
    text = str(message)
    click.echo(f"[ckpt] {text}", err=True)
    hook = os.environ.get(INTERRUPT_HOOK)
    if hook and text.startswith(hook):
        os.kill(os.getpid(), getattr(signal, "SIG" + os.environ.get(INTERRUPT_SIGNAL, "INT")))


def default_model() -> str:
    from ckpt.examples.default import DEFAULT_MODEL, default_model_dir

    progress(f"no MODEL given: using the {DEFAULT_MODEL}")
    return str(default_model_dir())


def capped(count: int, option: str) -> int:
    """A thread or process count no larger than this machine's cores (more only slows every one down)."""
    cores = os.cpu_count() or 1
    if count > cores:
        click.echo(f"note: {option} {count} is more than this machine's {cores} core(s): using {cores}", err=True)
    return min(count, cores)


def refuse_inputs_as_output(output: str, model: str, *others: str | Path | None, example: str = "seq.json") -> None:
    """Refuse an output path that is one of the command's inputs (the model, its step data, a file it reads)."""
    read = [*model_files(model), *(Path(o) for o in others if o)]
    target = Path(output)
    for path in read:
        if output != "-" and path.exists() and target.exists() and os.path.samefile(path, target):
            raise CkptError(f"output '{output}' is {path}, an input of this command",
                            f"write to a file of its own, e.g. -o {example}")


def given(name: str) -> bool:
    """Whether the current command's option `name` (its parameter name) was given, not left at its default."""
    ctx = click.get_current_context(silent=True)
    source = ctx.get_parameter_source(name) if ctx is not None else None
    return source is not None and source not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)


def refuse_ignored(*rules: tuple[bool, str, str, str]) -> None:
    """Refuse an option the command would ignore: each rule is (ignored?, the option as given, why it does
    nothing, the way out); the first that holds is the line."""
    for ignored, option, why, way_out in rules:
        if ignored:
            raise CkptError(f"{option} does nothing here: {why}", way_out)


def gvsoc_options_unused(target: str, no_simulate: bool, no_verify: bool, **options: object
                         ) -> list[tuple[bool, str, str, str]]:
    """refuse_ignored's rules for the gvsoc options given (`options`: keyword = option name with dashes for
    underscores; None or False when not given): they do nothing without a gvsoc run."""
    why = ("--no-simulate skips gvsoc" if no_simulate else "--no-verify skips the code gvsoc would run" if no_verify
           else f"ckpt runs no {target} step on gvsoc: {simulation_gap(target)}")
    unused = no_simulate or no_verify or bool(simulation_gap(target))
    names = {key: "--" + key.replace("_", "-") for key in options}
    return [(unused and value is not None and value is not False, names[key], why, f"drop {names[key]}")
            for key, value in options.items()]


def check_gap9_gvsoc(target: str, gvsoc: str | None, no_simulate: bool, no_verify: bool) -> None:
    """--gvsoc DIR for gap9, checked before any work: DIR must be a gvsoc with GAP9's model and GreenWaves' SDK
    beside it (gvsoc.gap9; refused naming the piece missing). With both there, what is still missing is ckpt's
    build of a GAP9 step with that SDK: said as such, never run on another model."""
    if target != "gap9" or gvsoc is None or no_simulate or no_verify:
        return
    found = find_gap9_gvsoc(Path(gvsoc))
    raise CkptError(f"--gvsoc '{gvsoc}' has GAP9's model and GreenWaves' SDK is at '{found.sdk}', but ckpt does "
                    "not build a GAP9 step with that SDK yet (only the launch is written: gvsoc.gap9)",
                    "drop --gvsoc: the step is then checked on this host")


def check_home(home: str, target: str) -> None:
    """--home names where a Deeploy target's tiled flow keeps its tensors: refuse it where there is none."""
    if home != DEFAULT_SETUP.default_mem_level and target not in DEEPLOY_TARGETS:
        raise CkptError(f"--home {home} places a Deeploy target's tiled deployment; --target {target} has none",
                        "drop --home, or add --target siracusa")


def check_allocator(allocator: str, target: str) -> None:
    """--allocator tetris|minimalloc lay out a Deeploy target's tiled arena: refuse them where there is none (heap,
    the non-tiled code's first-fit heap, applies to every target)."""
    if allocator not in (ALLOCATOR_DEFAULT, Allocator.HEAP.value) and target not in DEEPLOY_TARGETS:
        raise CkptError(f"--allocator {allocator} lays out a Deeploy target's tiled arena; --target {target} has none",
                        "drop --allocator, or add --target siracusa")


def model_or_default(model: str | None) -> str:
    from ckpt.replay.verification import check_step_data
    from ckpt.solver.graph.onnx_loader import check_training_graph

    if model is None:
        return default_model()
    check_training_graph(model)     # a missing, non-ONNX or inference model is refused before anything runs
    check_step_data(model)          # and so is step data that does not fit it
    return model


allocator_option = click.option(
    "--allocator", type=click.Choice(ALLOCATORS), default=ALLOCATOR_DEFAULT, show_default=True,
    help="Where buffers go: ckpt's layout (in process; the tiled flow's arenas, and the non-tiled flow's buffers at "
         "static offsets in one arena), Deeploy's TetrisRandom or its MiniMalloc path ($MINIMALLOC_INSTALL_DIR/"
         "minimalloc) for the tiled arenas, or heap: the non-tiled code mallocs each buffer from the first-fit L2 "
         "heap, as Deeploy writes it.")


def weights_option(more: str = " [default: in-place]."):
    return click.option("--weights", type=click.Choice(WEIGHTS), default=None, help=WEIGHTS_HELP + more)


def tiled_weights(weights: str | None, target: str, flow: str | None) -> WeightUpdate:
    """--weights as given (in place when not given), refusing `in-place` for a deployment whose updates cannot
    be: the non-tiled flow, or no Deeploy target at all."""
    tiled = target in DEEPLOY_TARGETS and (flow or Flow.default_for(target)) == Flow.TILED
    if weights == WeightUpdate.IN_PLACE.value and not tiled:
        where, other = ("--target none", "--target siracusa") if target not in DEEPLOY_TARGETS else \
            ("the non-tiled flow", "--flow tiled")
        raise CkptError(f"--weights in-place deploys the tiled flow's updates in place; {where} writes them out "
                        "of place (the code copies them back at the end of the step)",
                        f"drop --weights, or solve for the tiled flow ({other})")
    return WeightUpdate(weights or WeightUpdate.IN_PLACE.value)


deeploy_root_option = click.option(
    "--deeploy-root", type=click.Path(file_okay=False), default=None,
    help="Deeploy checkout at the installed release whose kernels and Siracusa harness the generated code is built "
         "with [default: $CKPT_DEEPLOY_ROOT, else the one beside the shared models].")


def home_option(default: str | None = DEFAULT_SETUP.default_mem_level, more: str = ""):
    return click.option("--home", type=click.Choice(HOMES), default=default, show_default=default is not None,
                        help="Where the tiled flow keeps its constants and arena (Deeploy's default memory level): "
                             "L3, off-chip RAM, or L2, on chip (the tiler then gets the chip's L2), or split: what "
                             "persists (constants, a split step's weights and accumulators) in L3, activations and "
                             "transients in L2" + (more or "."))


gvsoc_timeout_option = click.option(
    "--gvsoc-timeout", "gvsoc_timeout", type=SECONDS, default=None, metavar="SECONDS",
    help="Seconds a step may run on gvsoc without printing before it is taken as hung [default: 120 plus its "
         "predicted cycles at the slowest rate gvsoc simulates, times the processes per core on a busy host].")


gvsoc_draws_option = click.option(
    "--gvsoc-draws", "gvsoc_draws", type=click.IntRange(1, MAX_DRAWS), default=1, show_default=True, metavar="N",
    help="Run each step on gvsoc from N starting states (the same code, a few no-ops at its init: the instruction "
         "caches start elsewhere) and report the median cycles, per step and per layer, with the least and most; "
         "Errors are the worst draw's. N times the gvsoc time; each draw is cached.")


def gvsoc_options(func):
    """--gvsoc DIR, --gvsoc-timeout S, --gvsoc-draws N, --simulate-non-tiled and --no-simulate: where gvsoc comes
    from, how long a run may take, from how many starting states, which flows run on it, or not to run it."""
    func = gvsoc_draws_option(func)
    func = gvsoc_timeout_option(func)
    func = click.option("--simulate-non-tiled", "simulate_non_tiled", is_flag=True,
                        help="Run the non-tiled flow's step on gvsoc too (by default only the tiled flow's, what "
                             "is deployed, is simulated; the non-tiled code still runs on this host).")(func)
    func = click.option("--no-simulate", is_flag=True,
                        help="Do not run the generated steps on gvsoc.")(func)
    return click.option("--gvsoc", "gvsoc", type=click.Path(file_okay=False), default=None,
                        help="gvsoc's install folder (bin/gvsoc) to run the generated steps on Siracusa's model "
                             "[default: $GVSOC_INSTALL, else the one beside the shared models].")(func)


optimizer_option = click.option(
    "--optimizer", default=None, metavar="GRAPH",
    help="The optimizer graph of a split training step (an .onnx or a folder holding network.onnx) [default: "
         "optimizer.onnx beside the model, else the sibling folder <name>_optimizer of a <name>_train folder].")


park_option = click.option(
    "--park", type=click.Choice(["none", "auto"]), default="none", show_default=True,
    help="With --home split and a live budget (solve's --budget, each point of a sweep): auto lets the exact model "
         "keep each activation on chip, park it off chip "
         "for the whole step (its home then L3, its layers' transfers at the target's level price) or recompute it, "
         "whichever costs the fewest cycles within the budget (POET's paging beside rematerialisation). The schedule "
         "file names what it parks (predicted.parked); ckpt replay homes them in L3.")


def check_park(park: str, home: str | None, budget_total: str | None, policy: str, objective: str,
               persist_on_chip: str) -> None:
    """--park auto is a split home's choice, made with the cheapest schedule under a live budget."""
    if park != "auto":
        return
    if home != SPLIT_HOME:
        raise CkptError(f"--park auto parks activations off chip beside a split home's, not under home {home or 'L2'}",
                        "add --home split, or drop --park")
    other = "--budget-total" if budget_total is not None else "--objective peak" if objective == "peak" else \
        f"--policy {policy}" if policy != "solve" else "--persist-on-chip auto" if persist_on_chip == "auto" else None
    if other is not None:
        raise CkptError(f"--park auto is solved with the cheapest schedule under a live budget; {other} is not that",
                        f"drop {other.split()[0]}, or drop --park")


def parked_of(schedule, path: str, home: str, persist_on_chip: str) -> tuple[str, ...]:
    """The activations a schedule parks off chip (`ckpt solve --park auto`: predicted.parked, Deeploy's names), which
    the replay homes in L3 under the split home it was solved for; refused before any work under another home or
    beside split+."""
    parked = schedule.predicted.parked_tensors if schedule.predicted is not None else ()
    if not parked:
        return ()
    if home != SPLIT_HOME or persist_on_chip == "auto":
        raise CkptError(f"{path} parks {len(parked)} activation(s) off chip (predicted.parked), which only the split "
                        f"home it was solved for deploys{' without split+' if home == SPLIT_HOME else ''}",
                        "replay it with --home split and without --persist-on-chip, or solve it again without --park")
    return parked


persist_on_chip_option = click.option(
    "--persist-on-chip", type=click.Choice(["none", "auto"]), default="none", show_default=True,
    help="With --home split: auto also brings on chip the persistent tensors (weights, accumulators, constants) whose "
         "off-chip transfers cost the most cycles (the target's level price), within the room L2 has left beside "
         "the schedule's activations and the step's code (split+); a solve's and a sweep's figures include them.")
