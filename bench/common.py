"""What the benchmarks share: the model they measure unless told, and `--smoke`, each bench's smallest run.
Not a bench itself: the scripts import it from beside them.

`--smoke` runs a bench's whole table on the smallest input that still takes every step (a tiny model, one budget,
short limits); tests/test_bench_smoke.py runs it for every bench, so a bench that no longer runs fails the tests.
Options given beside `--smoke` still win.

Bad arguments are refused as `ckpt` refuses them (`BenchParser`, the option types here, `run_bench`): one line on
stderr naming the problem and the way out, exit 1, before any work, and nothing left behind (`removed_on_error`).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ckpt.budgets.ranges import parse_range
from ckpt.errors import CkptError, ExitCode
from ckpt.examples import write_example
from ckpt.paths import shared_models
from ckpt.schedule_file import clone_of
from ckpt.solver.graph.onnx_loader import optimizer_path

SMOKE_HELP = "the smallest run (a tiny model or graph, one budget, short limits): what the test suite runs"
MODEL_HELP = "model folder (default: $CKPT_BENCH_MODEL, else the shared cct2_ft2; with --smoke a tiny MLP)"


def default_model() -> str:
    """The model a bench measures unless told: $CKPT_BENCH_MODEL, else the shared CCT2_FT2."""
    return os.environ.get("CKPT_BENCH_MODEL", str(shared_models() / "cct2_ft2"))


class BenchParser(argparse.ArgumentParser):
    """argparse refusing as ckpt does: a bad argument is one line on stderr and exit 1 (argparse prints its usage
    and exits 2)."""

    def error(self, message: str):
        sys.stderr.write(f"error: {message}: see `{self.prog} --help`\n")
        sys.exit(int(ExitCode.BAD_INPUT))


def seconds(text: str) -> float:
    """A time limit: a finite number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above zero (e.g. 60)")
    return value


def jobs(text: str) -> int:
    """A process count: 0 (the core count) or more."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count of processes (0 for the core count, or more)")
    return int(text)


def at_least_one(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return int(text)


def budget_range(text: str) -> str:
    """LOW:HIGH as `ckpt sweep` takes it (0 < LOW <= HIGH <= 1), checked here, kept as given."""
    try:
        parse_range(text)
    except CkptError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def fractions(text: str) -> str:
    """Comma-separated budget fractions, each above 0 and at most 1 (e.g. 0.9,0.8), checked here, kept as given."""
    parts = text.split(",")
    for part in parts:
        try:
            value = float(part)
        except ValueError:
            value = math.nan
        if not 0 < value <= 1:
            raise argparse.ArgumentTypeError(f"{part!r} in {text!r} is not a budget fraction above 0 and at most 1 "
                                             "(write e.g. 0.9,0.8,0.7)")
    return text


def names_of(*allowed: str) -> Callable[[str], str]:
    """An option type: comma-separated names, each one of `allowed`."""
    def check(text: str) -> str:
        wrong = next((part for part in text.split(",") if part.strip() not in allowed), None)
        if wrong is not None:
            raise argparse.ArgumentTypeError(f"{wrong!r} in {text!r} is not one of {', '.join(allowed)}")
        return text
    return check


def existing(text: str) -> str:
    """A model (a folder or an .onnx) that exists."""
    if not text or not Path(text).exists():
        raise argparse.ArgumentTypeError(f"no model at {text!r} (give a model folder or an .onnx)")
    return text


def run_bench(main: Callable[[], int]) -> int:
    """`main()`, with a CkptError (bad input met once the arguments parsed) as one line and its exit code, and
    Ctrl-C as exit 130, never a traceback."""
    try:
        return main()
    except CkptError as err:
        print(f"error: {err}", file=sys.stderr)
        return int(err.exit_code)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)


@contextmanager
def removed_on_error(*paths: Path) -> Iterator[None]:
    """Remove those of `paths` that did not exist before, if the block ends in an error: a bench that stops
    leaves nothing half-made (a folder that was there is the user's, and stays)."""
    new = [p for p in paths if not p.exists() and not p.is_symlink()]
    try:
        yield
    except BaseException:
        for path in new:
            shutil.rmtree(path, ignore_errors=True)
        raise


def split_step(model: Path) -> None:
    """Refuse, before any work, a model that is no split step of the training branch (its policies are that
    branch's, and each point runs both of its networks): it needs its optimizer graph beside it. A default model that
    is not there at all (no shared models) is said as such, not as a model of the wrong kind."""
    if not model.exists():
        raise CkptError(f"no model at '{model}'", "put Deeploy's training-branch models in ../shared/models beside "
                        "the repository, set CKPT_SHARED_MODELS, or give --model")
    if optimizer_path(model) is None:
        raise CkptError(f"'{model}' is no split step of Deeploy's training branch (no optimizer graph beside it: "
                        f"{model.name.replace('_train', '')}_optimizer/ or optimizer.onnx)",
                        "give a <name>_train folder with its <name>_optimizer sibling, e.g. "
                        "--model ../shared/models/dscnn_train")


def parse_args(parser: argparse.ArgumentParser, smoke: dict[str, object]) -> argparse.Namespace:
    """The command line; with --smoke, the values in `smoke` replace the defaults of the options they name."""
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    args = parser.parse_args()
    return parser.parse_args(namespace=argparse.Namespace(**smoke)) if args.smoke else args


@contextmanager
def model_folder(given: str | None, smoke: bool, batch: int = 4) -> Iterator[str]:
    """The model folder a bench measures: the one given, else with --smoke a tiny one written for this run
    (`tiny_model`), else the default."""
    if given or not smoke:
        yield given or default_model()
        return
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-smoke-") as tmp:
        yield str(tiny_model(Path(tmp) / "tiny-mlp", batch))


def tiny_model(folder: Path, batch: int = 4) -> Path:
    """A two-layer MLP training step with goldens, about the smallest graph Deeploy lowers for Siracusa. At
    batch 4 some of its budgets need recomputes; its generated code computes the goldens only at batch 1 (Deeploy
    0.2.1's SoftmaxCrossEntropyLossGrad divides by the batch twice)."""
    write_example("mlp", folder, layers=2, width=16, in_dim=8, batch=batch)
    return folder


def print_needs_branch(models: list[Path], columns: int, blank_before: int = 0) -> None:
    """One table row per model saying the bench needs the training branch (split steps exist only there), its
    other `columns` cells `-`, `blank_before` of them before the words."""
    for model in models:
        print(f"| {model.name} |" + " - |" * blank_before
              + " needs Deeploy's training branch (pip install ../shared/deeploy-train) |"
              + " - |" * (columns - 2 - blank_before))


TOLERANCE_RELATIVE, TOLERANCE_POINTS = 0.10, 0.1     # a prediction holds within max(10% of the measured, 0.1 pt)


def within(predicted_pct: float | None, measured_pct: float | None, band_pct: float | None = None) -> str:
    """"yes" where the predicted overhead is within max(10% of the measured one, 0.1 points) of it; else "in band"
    where it is within `band_pct` of it (a measured noise band: how far the graph order's own step moves when its
    code moves, `bench/gvsoc.py --noise`, or how far the overhead strays over the draws, `draws_band`), else "no";
    "-" where either is unknown."""
    if predicted_pct is None or measured_pct is None:
        return "-"
    allowed = max(TOLERANCE_RELATIVE * abs(measured_pct), TOLERANCE_POINTS)
    if abs(predicted_pct - measured_pct) <= allowed + 1e-9:
        return "yes"
    return "in band" if band_pct is not None and abs(predicted_pct - measured_pct) <= band_pct + 1e-9 else "no"


def draws_band(point_draws: Sequence[int], base_draws: Sequence[int], measured_pct: float | None) -> float | None:
    """The draws' noise band of a point's measured overhead `measured_pct` (its median draw over the graph order's):
    the farthest the overhead of any one of its draws over any one of the graph order's strays from it, in points.
    None with fewer than two draws on either side (one run measures no spread)."""
    if measured_pct is None or len(point_draws) < 2 or len(base_draws) < 2 or not all(base_draws):
        return None
    return max(abs(100.0 * (p - b) / b - measured_pct) for p in point_draws for b in base_draws)


# Why a point can miss the rule though its schedule is priced right: what gvsoc was traced doing to layers the
# schedule does not change (README, "Several draws"). Printed under the tables that say "no" or "in band".
DEVICE_SPREAD = (
    "the layers a point runs as the graph order does (no recompute; a recompute's readers read its clone instead) do "
    "the same work there, yet move. Traced on gvsoc: a large forward MatMul (or Gemm reading its second operand "
    "untransposed) takes one of a few cycle counts by how the two cores sharing an FPU fall into step "
    "(bench/fpu_lock.py); a small layer whose time is mostly its control code (SimpleMLP's) moves by up to a few "
    "hundred cycles with the instruction-cache state the layer before it leaves and where the network's code sits. "
    "That part of a miss is the device's own spread, no cost of the schedule, unless the layer that moved most reads "
    "a clone")


@dataclass(frozen=True)
class MissSplit:
    """Where a point's measured step cycles part from the graph order's, by probed layer (gvsoc's layer cycles)."""

    recomputes: int                  # its recompute clones' cycles
    clones: int                      # ... over their originals' at the graph order
    unchanged: int                   # the change of the layers it runs as the graph order does (same node)
    largest: tuple[str, int] | None  # the unchanged layer that moved most, and by how much (None: no such layer)
    outside: int                     # the change of the step's cycles outside the probed layers


def miss_split(base_layers: dict[str, int], base_cycles: int, layers: dict[str, int], cycles: int,
               step: Sequence[str] | None = None) -> MissSplit:
    """A point's step (`cycles`, its probed `layers`) against the graph order's (`base_cycles`, `base_layers`):
    `cycles - base_cycles` = its recomputes + the change of the layers both run + the change outside the probes.
    `step`: the layers the step's cycles cover (a split step's train network; its optimizer's layers are probed
    beside them), else every probed layer."""
    kept = None if step is None else set(step)

    def of_step(found: dict[str, int]) -> dict[str, int]:
        return found if kept is None else {name: c for name, c in found.items() if name in kept}

    base, point = of_step(base_layers), of_step(layers)
    recomputes = sum(c for name, c in point.items() if clone_of(name))
    clones = sum(c - base.get(clone_of(name)[0], c) for name, c in point.items() if clone_of(name))
    moved = {name: c - base[name] for name, c in point.items() if name in base and not clone_of(name)}
    outside = (cycles - sum(point.values())) - (base_cycles - sum(base.values()))
    largest = max(moved.items(), key=lambda kv: (abs(kv[1]), kv[0]), default=None)
    return MissSplit(recomputes, clones, sum(moved.values()), largest, outside)


def replayed_order(replay: Path) -> list[str] | None:
    """The nodes a replay's step runs, clones included, in its order (its order.json; None where it has none): the
    layers its step cycles cover, a split step's optimizer layers not among them."""
    path = Path(replay) / "order.json"
    return list(json.loads(path.read_text())["order"]) if path.is_file() else None
