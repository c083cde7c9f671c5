"""Run Deeploy's own training harness on a schedule in gvsoc, and read what it measured.

The harness lives in a Deeploy checkout with the training runners (DeeployTest/deeployTrainingRunner*.py, which
drive testMVPTraining.py and take `--recomputeSchedule <json>`), a PULP toolchain and gvsoc. It prints
`Errors: N out of M` and `BENCH train_cycles=<n> opt_cycles=<n> ...`. When any piece is missing nothing is
run and the reason is recorded: a figure is only ever reported under a measured name if gvsoc printed it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ckpt.deeploy_bridge.setup import DEFAULT_SETUP, PLATFORM_NAMES, DeeploySetup
from ckpt.files import atomic_write
from ckpt.replay.report import NOT_SIMULATED, GvsocSection

RUNNERS = {"siracusa": ("deeployTrainingRunner_tiled_siracusa.py", "deeployTrainingRunner_siracusa.py"),
           "gap9": ("deeployTrainingRunner_tiled_gap9.py", "deeployTrainingRunner_gap9.py")}
_ERRORS = re.compile(r"Errors:\s*(\d+)\s+out of\s+(\d+)")
_BENCH = re.compile(r"^.*?\bBENCH\b(.*)$", re.MULTILINE)
_PAIR = re.compile(r"(\w+)=(\d+)")


@dataclass(frozen=True)
class HarnessSetup:
    """How the harness is run, beyond the memory configuration (a DeeploySetup, shared with code generation)."""

    toolchain: str = "LLVM"
    n_steps: int = 1
    n_accum: int = 1
    timeout: float = 4 * 3600.0
    python: str = "python3"       # the interpreter of the Deeploy checkout's environment, not ckpt's


def not_simulated(reason: str) -> GvsocSection:
    return GvsocSection(NOT_SIMULATED, reason)


def gvsoc_line(result: GvsocSection) -> str:
    if result.status == NOT_SIMULATED:
        return f"gvsoc: not simulated ({result.reason})"
    if result.status == "failed":
        return f"gvsoc: failed ({result.reason})"
    cycles = f", train_cycles={result.train_cycles}" if result.train_cycles else ""
    return f"gvsoc: Errors: {result.errors} out of {result.total}{cycles}"


def _measured(counts: tuple[int, int], bench: dict[str, int], command: list[str], returncode: int,
              log: str) -> GvsocSection:
    return GvsocSection("measured", None, counts[0], counts[1], bench.get("train_cycles"), bench.get("opt_cycles"),
                        bench.get("trainable_bytes", bench.get("weight_sram")), dict(sorted(bench.items())),
                        command, returncode, log)


def parse_harness_output(text: str) -> tuple[tuple[int, int] | None, dict[str, int]]:
    """(errors, total) from the last `Errors: N out of M` line, and the last BENCH line's integer fields.

    Harness versions print `train_cycles=` directly or a uint64 split as `train_cycles_hi=`/`_lo=`; a split
    value is joined back into `train_cycles`.
    """
    errors = _ERRORS.findall(text)
    counts = (int(errors[-1][0]), int(errors[-1][1])) if errors else None
    benches = _BENCH.findall(text)
    fields = {k: int(v) for k, v in _PAIR.findall(benches[-1])} if benches else {}
    for key in [k[:-3] for k in fields if k.endswith("_lo")]:
        fields[key] = (fields.pop(f"{key}_hi", 0) << 32) + fields.pop(f"{key}_lo")
    return counts, fields


def find_runner(deeploy_root: Path, target: str) -> Path | None:
    tests = deeploy_root / "DeeployTest"
    for name in RUNNERS.get(target, ()) + ("deeployTrainingRunner.py",):
        if (tests / name).is_file():
            return tests / name
    return None


def _takes_recompute_schedule(deeploy_root: Path) -> bool:
    tests = deeploy_root / "DeeployTest"
    for path in [tests / "testMVPTraining.py", *sorted((tests / "testUtils").glob("*.py"))]:
        if path.is_file() and "recomputeSchedule" in path.read_text(errors="replace"):
            return True
    return False


def _gvsoc_found() -> bool:
    install = os.environ.get("GVSOC_INSTALL_DIR")
    return bool(shutil.which("gvsoc") or (install and (Path(install) / "bin" / "gvsoc").is_file()))


def why_not(deeploy_root: Path | None, target: str) -> str | None:
    """The reason the harness cannot run here, or None when it can."""
    if target not in PLATFORM_NAMES:
        return f"target {target} has no Deeploy harness"
    if deeploy_root is None:
        return "no --deeploy-root given"
    root = Path(deeploy_root)
    if not (root / "DeeployTest").is_dir():
        return f"{root} is not a Deeploy checkout (no DeeployTest/)"
    if find_runner(root, target) is None:
        return f"{root}/DeeployTest has no training runner (deeployTrainingRunner*.py)"
    if not _takes_recompute_schedule(root):
        return f"the Deeploy at {root} has no --recomputeSchedule option (needs a training fork that has it)"
    if not _gvsoc_found():
        return "gvsoc not found on PATH or in $GVSOC_INSTALL_DIR/bin"
    if not (os.environ.get("LLVM_INSTALL_DIR") or shutil.which("clang")):
        return "no PULP toolchain: set LLVM_INSTALL_DIR"
    return None


def harness_command(runner: Path, model_dir: Path, schedule: Path, target: str, setup: HarnessSetup,
                    deeploy: DeeploySetup = DEFAULT_SETUP) -> list[str]:
    command = [setup.python, str(runner), "-t", str(model_dir), "-p", PLATFORM_NAMES[target], "-s", "gvsoc",
               "--toolchain", setup.toolchain, "--cores", str(deeploy.n_cores),
               "--n-steps", str(setup.n_steps), "--n-accum", str(setup.n_accum),
               f"--recomputeSchedule={schedule}"]
    if "tiled" in runner.name:
        command += ["--l1", str(deeploy.l1), "--l2", str(deeploy.l2), "--defaultMemLevel", deeploy.default_mem_level]
    return command


def run_harness(deeploy_root: Path | None, target: str, model_dir: Path, schedule: Path, log_path: Path,
                setup: HarnessSetup = HarnessSetup(), deeploy: DeeploySetup = DEFAULT_SETUP) -> GvsocSection:
    """Run the harness once (or say why not) and keep its output in `log_path`."""
    reason = why_not(deeploy_root, target)
    if reason:
        return not_simulated(reason)
    runner = find_runner(Path(deeploy_root), target)
    command = harness_command(runner, Path(model_dir).resolve(), Path(schedule).resolve(), target, setup, deeploy)
    try:
        done = subprocess.run(command, cwd=runner.parent, capture_output=True, text=True, timeout=setup.timeout)
    except subprocess.TimeoutExpired:
        return GvsocSection("failed", f"timed out after {setup.timeout:.0f} s", command=command)
    text = done.stdout + done.stderr
    atomic_write(log_path, text)
    counts, bench = parse_harness_output(text)
    if counts is None:
        return GvsocSection("failed", f"no 'Errors: N out of M' line (exit code {done.returncode})",
                            bench=dict(sorted(bench.items())), command=command, returncode=done.returncode,
                            log=log_path.name)
    return _measured(counts, bench, command, done.returncode, log_path.name)
