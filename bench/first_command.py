"""The README's first command, timed: `ckpt sweep` with no argument (the built-in example, lowered for Siracusa,
calibrated on gvsoc, solved, replayed, its code run on this host and its deployed step on gvsoc, tabulated and
plotted), run cold (an empty $CKPT_CACHE_DIR of its own) and then warm (the same command again: every point
resumes), each as a user runs it, in a process of its own.

The stages are read off the sweep's own progress lines as they arrive (piped, the sweep prints one line per
event): the example written, lowering, calibration on gvsoc, the solve phase, the replay phase (Deeploy's code,
the host check, the code on this host, gvsoc: their sums over the points, as the sweep reports them, beside the
phase's wall time), the table and plot, and the total. The machine's cores and load average are printed with
them: the targets (at most 5 minutes cold, 60 s warm) are for an idle 2-core machine.

Run: python bench/first_command.py [--keep DIR] [--args "..."]   (default args: none, the README's command)
     [--smoke]   (the smallest run: the baseline and one budget of a tiny MLP, without Deeploy)
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import BenchParser, parse_args, run_bench, tiny_model

SMOKE = {"args": "1.0:1.0 --model {tiny} --target none --no-verify", "smoke_model": True}
STAGE_SUMS = re.compile(r"lowering ([\d.]+) s, solve ([\d.]+) s, replay ([\d.]+) s, verify ([\d.]+) s, "
                        r"code ([\d.]+) s, gvsoc ([\d.]+) s; total ([\d.]+) s")


@dataclass
class Timed:
    """One run: when each of its progress lines arrived (seconds from the start), its output and exit code."""

    lines: list[tuple[float, str]] = field(default_factory=list)
    out: str = ""
    code: int = 0
    seconds: float = 0.0

    def first(self, *texts: str) -> float | None:
        return next((t for t, line in self.lines if any(text in line for text in texts)), None)

    def last(self, *texts: str) -> float | None:
        found = [t for t, line in self.lines if any(text in line for text in texts)]
        return found[-1] if found else None


def run_timed(args: list[str], env: dict[str, str], cwd: Path) -> Timed:
    """`ckpt ARGS`, stderr read line by line as it comes, each line stamped."""
    start = time.perf_counter()
    timed = Timed()
    process = subprocess.Popen([sys.executable, "-m", "ckpt", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, errors="replace")
    for line in process.stderr:
        timed.lines.append((time.perf_counter() - start, line.rstrip("\n")))
    timed.out = process.stdout.read()
    timed.code = process.wait()
    timed.seconds = time.perf_counter() - start
    return timed


def stages(run: Timed) -> list[tuple[str, float | None]]:
    """(stage, seconds) of one run, from its progress lines (None: the stage did not happen)."""
    def span(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else max(0.0, b - a)

    lowering = run.first("once for the whole sweep")
    calibrated = run.first("op costs from", "op costs: the built-in estimate")
    calibrating = run.first("calibrating:")
    described = run.first("nodes, baseline peak")
    tasks = run.first("running tasks on")
    solved = run.last(" solved")
    replayed = run.last(" finished (", "finished before, skipped")
    sums = STAGE_SUMS.search(run.out)
    found = [("start and the example", lowering),
             ("lowering", span(lowering, calibrating or calibrated or described)),
             ("calibration on gvsoc", span(calibrating, calibrated) if calibrating is not None else None),
             ("solve phase (wall)", span(tasks, solved)),
             ("replay phase (wall)", span(solved, replayed)),
             ("table and plot", span(replayed, run.seconds))]
    if sums:
        names = ("replay (Deeploy)", "verify (host check)", "code on this host", "gvsoc")
        found += [(f"  of the replays: {name}, summed", float(value)) for name, value in zip(names, sums.groups()[2:6])]
    return found + [("total", run.seconds)]


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} cores"


def main() -> int:
    parser = BenchParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", default=None, help="run in this folder (its cache/ and work/) and keep it")
    parser.add_argument("--args", default="", help="arguments of `ckpt sweep` (default: none, the README's)")
    parser.add_argument("--smoke-model", action="store_true", help=argparse.SUPPRESS)
    args = parse_args(parser, SMOKE)
    with tempfile.TemporaryDirectory(prefix="ckpt-first-") as tmp:
        root = Path(args.keep) if args.keep else Path(tmp)
        work, cache = root / "work", root / "cache"
        work.mkdir(parents=True, exist_ok=True)
        tiny = tiny_model(root / "tiny") if args.smoke_model else None
        sweep = ["sweep", *shlex.split(args.args.format(tiny=tiny))]
        env = {**os.environ, "CKPT_CACHE_DIR": str(cache)}
        before = load()
        runs = {}
        for label in ("cold", "warm"):
            print(f"[bench] {label}: ckpt {' '.join(sweep)} ({load()})", file=sys.stderr, flush=True)
            runs[label] = run_timed(sweep, env, work)
            if runs[label].code != 0:
                print(f"ckpt {' '.join(sweep)} ended with {runs[label].code}:\n{runs[label].out}\n"
                      + "\n".join(line for _, line in runs[label].lines[-20:]), file=sys.stderr)
                return 1
        after = load()
    cold, warm = stages(runs["cold"]), stages(runs["warm"])
    print(f"`ckpt {' '.join(sweep)}` with a private CKPT_CACHE_DIR; {before} at the start, {after} at the end\n")
    print("| stage | cold s | warm s |")
    print("|---|---|---|")
    for (name, a), (_, b) in zip(cold, warm):
        shown = [f"{v:.1f}" if v is not None else "-" for v in (a, b)]
        print(f"| {name} | {shown[0]} | {shown[1]} |")
    print(f"\ncold {runs['cold'].seconds:.0f} s (target 300 s), warm {runs['warm'].seconds:.0f} s (target 60 s)")
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
