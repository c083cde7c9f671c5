"""The shared-FPU lock of gvsoc's Siracusa cluster: why a forward MatMul layer takes one of a few cycle counts.

gvsoc's cluster shares four FPUs among its eight cores (core c with core c + 4; each FP operation holds its FPU for a
cycle, pulp_iss_wrapper.cpp). Deeploy's forward MatMul kernel (`PULP_MatMul_fp32_fp32_fp32_unroll1x7`, and the Gemm
without transposition) issues seven fmadd.s in a row per step of its inner loop; two cores of a pair that enter
that loop a few cycles apart collide on every step and, both stalling, stay in that phase to the end of the call,
while a pair that enters it far enough apart never collides. Which it is depends only on when each core starts,
which the state before the layer (its instruction caches, their replacement LFSRs, the DMA) decides.

This bench builds a small program with ckpt's toolchain and pulp-sdk runtime (bench/fpu_lock.c: eight cores run the
same 1x7 dot loop on L1 data, cores 4..7 started OFFSET cycles after cores 0..3) and runs it on gvsoc: per offset,
the slowest core's busy cycles, each pair's FPU stall cycles and whether a pair locked (stalls above
LOCK_SHARE of the loop's lock-free cycles). Same code, same data, same addresses: only the start offset differs.
Run: python bench/fpu_lock.py [--offsets 0-40] [--smoke]   (--smoke: offsets 0, 3 and 10). Skips, saying why,
without gvsoc.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from common import BenchParser, parse_args, run_bench

from ckpt.coderun.sources import NoSources, find_sources
from ckpt.gvsoc.kernels import OPTIMISE
from ckpt.gvsoc.kit import NoKit, find_kit
from ckpt.gvsoc.run import gvsoc_command
from ckpt.gvsoc.sdk import SdkBuildError, sdk_library
from ckpt.gvsoc.step import LINKER_SCRIPT

PROGRAM = Path(__file__).resolve().parent / "fpu_lock.c"
CORES, PAIRS = 8, 4
SLED = 64                   # the program's sled of no-ops: an offset must be below it
LOCK_SHARE = 0.03           # a pair whose FPU stalls exceed this share of the loop's lock-free cycles is locked
                            # (a pair that only meets again where the loop restarts stalls ~1.5%)
SMOKE = {"offsets": "0,3,10"}
_LINE = re.compile(r"^fpu-lock (\d+)((?: \d+ \d+){8})\s*$", re.MULTILINE)


@dataclass(frozen=True)
class OffsetRun:
    offset: int                          # cycles cores 4..7 start after cores 0..3
    busy: tuple[int, ...]                # per core: cycles the loop kept it busy
    stalls: tuple[int, ...]              # per core: cycles it stalled on its shared FPU

    def pair_stalls(self) -> tuple[int, ...]:
        """Per pair (core c and c + 4), the more stalled core's FPU stall cycles."""
        return tuple(max(self.stalls[c], self.stalls[c + PAIRS]) for c in range(PAIRS))


def offsets_of(text: str) -> list[int]:
    """`--offsets`: comma-separated offsets or LOW-HIGH ranges, each 0 <= offset < SLED."""
    values: list[int] = []
    for part in text.split(","):
        low, _, high = part.strip().partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            raise ValueError(f"{part!r} is not an offset or a LOW-HIGH range of them (e.g. 0-40 or 0,3,10)")
        values += range(int(low), int(high or low) + 1)
    wrong = next((v for v in values if v >= SLED), None)
    if not values or wrong is not None:
        raise ValueError(f"offsets must be 0..{SLED - 1} cycles (got {text!r})")
    return values


def parsed_runs(log: str) -> list[OffsetRun]:
    """The program's per-offset lines."""
    runs = []
    for offset, numbers in _LINE.findall(log):
        values = [int(v) for v in numbers.split()]
        runs.append(OffsetRun(int(offset), tuple(values[0::2]), tuple(values[1::2])))
    return runs


def fmadd_burst(disassembly: str) -> int:
    """The longest run of consecutive fmadd.s in the program's code (what makes a pair lock)."""
    longest = current = 0
    for line in disassembly.splitlines():
        current = current + 1 if re.search(r"\bfmadd\.s\b", line) else 0
        longest = max(longest, current)
    return longest


def build_and_run(offsets: list[int], out: Path) -> tuple[list[OffsetRun], int] | str:
    """The program built for `offsets` and run on gvsoc: its per-offset runs and the fmadd burst of its code, or
    why not."""
    kit, sources = find_kit(), find_sources()
    if isinstance(kit, NoKit) or isinstance(sources, NoSources):
        return (kit if isinstance(kit, NoKit) else sources).reason
    try:
        sdk = sdk_library(kit, sources)
    except SdkBuildError as exc:
        return f"pulp-sdk did not build: {exc}"
    cc = str(kit.compiler.cc)
    flags = [*sdk.compile_flags(kit), *OPTIMISE, f"-DFPU_LOCK_OFFSETS={','.join(map(str, offsets))}"]
    elf = out / "fpu_lock.elf"
    steps = [[cc, *flags, "-c", str(PROGRAM), "-o", str(out / "fpu_lock.o")],
             [cc, *sdk.compile_flags(kit), "-nostartfiles", "-nostdlib", "-Wl,--gc-sections", f"-L{sdk.link_dir}",
              f"-T{sdk.link_dir / LINKER_SCRIPT}", "-o", str(elf), str(out / "fpu_lock.o"), "-Wl,--whole-archive",
              str(sdk.archive), "-Wl,--no-whole-archive", "-lgcc", str(kit.compiler.libc), "-lgcc"]]
    for command in steps:
        done = subprocess.run(command, capture_output=True, text=True, errors="replace")
        if done.returncode != 0:
            return f"the program did not build: {(done.stderr.strip().splitlines() or ['?'])[0]}"
    objdump = kit.compiler.cc.with_name(kit.compiler.cc.name.replace("gcc", "objdump"))
    burst = fmadd_burst(subprocess.run([str(objdump), "-d", str(elf)], capture_output=True, text=True).stdout)
    env = kit.environment()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    done = subprocess.run([*gvsoc_command(kit, elf, out / "gvsoc"), "image", "flash", "run"], cwd=out, env=env,
                          capture_output=True, text=True, errors="replace", timeout=1800)
    runs = parsed_runs(done.stdout)
    if len(runs) != len(offsets):
        last = (done.stdout + done.stderr).strip().splitlines()
        return f"gvsoc did not print every offset (exit code {done.returncode}): {last[-1] if last else 'nothing'}"
    return runs, burst


def table(runs: list[OffsetRun], burst: int) -> None:
    free = min(max(r.busy) for r in runs)
    print(f"fmadd.s in a row in the loop: {burst}; lock-free: the least slowest-core cycles over the offsets, {free:,}")
    print("| start offset (cycles) | slowest core cycles | over lock-free | FPU stall cycles per pair (0+4, 1+5, 2+6, "
          "3+7) | pairs locked |")
    print("|---|---|---|---|---|")
    for run in runs:
        slowest = max(run.busy)
        locked = sum(1 for s in run.pair_stalls() if s > LOCK_SHARE * free)
        print(f"| {run.offset} | {slowest:,} | {100.0 * (slowest - free) / free:+.1f}% | "
              f"{', '.join(f'{s:,}' for s in run.pair_stalls())} | {locked} |")
    locking = [r.offset for r in runs if any(s > LOCK_SHARE * free for s in r.pair_stalls())]
    print(f"\n{len(locking)} of {len(runs)} offsets lock a pair"
          + (f" ({', '.join(map(str, locking))})" if locking else "")
          + "; the code, its data and their addresses are the same at every offset")


def main() -> int:
    parser = BenchParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offsets", default="0-40", help="start offsets of cores 4..7, in cycles (default 0-40)")
    args = parse_args(parser, SMOKE)
    try:
        offsets = offsets_of(args.offsets)
    except ValueError as exc:
        parser.error(str(exc))
    with tempfile.TemporaryDirectory(prefix="ckpt-fpu-lock-") as tmp:
        answer = build_and_run(offsets, Path(tmp))
    if isinstance(answer, str):
        print(f"skipped: {answer}")
        return 0
    table(*answer)
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
