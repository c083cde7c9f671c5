"""Draws of one gvsoc run: the same step started from other states, and the figures an honest report takes of them.

gvsoc is deterministic, yet a step's cycles depend on the state it starts from: what the cluster's shared
instruction cache holds, where its replacement LFSR stands, the clocks' phases. A few no-ops run once at the start
of the step's init function (before the harness starts its timer) change that state and nothing else: every layer
runs the same code at the same addresses. Draw 0 is the step as generated; draw k > 0 is the same code with
NOPS[k - 1] no-ops there. Over N draws a figure is their median (cycles per step, per layer, per update) and its
spread their least and most; the Errors are the worst draw's.
"""
from __future__ import annotations

import re
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from ckpt.files import atomic_write

NOPS = (1, 2, 3, 5, 8, 13, 21, 34)     # no-ops at init per draw after the first (draw k: NOPS[k - 1])
MAX_DRAWS = len(NOPS) + 1
_INIT = re.compile(r"^void Init\w*Network\(.*\)\s*\{$", re.M)


def draw_nops(draw: int) -> int:
    """The no-ops draw `draw` runs at its init (0 for draw 0, the step as generated)."""
    if not 0 <= draw < MAX_DRAWS:
        raise ValueError(f"draw {draw} is not one of 0..{MAX_DRAWS - 1}")
    return NOPS[draw - 1] if draw else 0


def history_moved(source: str, nops: int) -> str:
    """The generated network's C with `nops` no-ops run once at the start of its init function, which the harness
    calls before it starts its timer: what each layer runs and where its code and data sit stay as they are, only
    the state the step starts from changes. Uncompressed no-ops (4 B each). ValueError where the source has no
    init function."""
    found = _INIT.search(source)
    if found is None:
        raise ValueError("the generated network has no Init...Network function to run the no-ops in")
    nop = f'__asm__ volatile(".option push\\n.option norvc\\n.rept {nops}\\n nop\\n.endr\\n.option pop");'
    return f"{source[:found.end()]}\n{nop}{source[found.end():]}"


def drawn_code(code_dir: Path, network: str, draw: int, out: Path) -> Path:
    """A copy of the code folder `code_dir` (at `out`) whose `network` file runs draw `draw`'s no-ops at its init
    (draw 0: the code as it is)."""
    shutil.copytree(code_dir, out)
    if draw:
        atomic_write(out / network, history_moved((Path(code_dir) / network).read_text(), draw_nops(draw)))
    return out


def each_draw(code_dir: Path, network: str, draws: int, run_one: Callable[[Path, int], object], failed: type
               ) -> list:
    """`run_one(code, draw)` for draws 0..draws-1: draw 0 on `code_dir` itself, each other on a moved copy of it
    (`network` the source whose init moves). Stops at the first answer of type `failed` and returns the answers
    so far, that one last."""
    answers = []
    for draw in range(draws):
        if draw == 0:
            answers.append(run_one(code_dir, 0))
        else:
            with tempfile.TemporaryDirectory(prefix="ckpt_gvsoc_draw_") as moved:
                answers.append(run_one(drawn_code(code_dir, network, draw, Path(moved) / "code"), draw))
        if isinstance(answers[-1], failed):
            break
    return answers


def worst_draw(runs: Sequence) -> int:
    """The index of the first draw with the most Errors (whose log a combined run keeps)."""
    return max(range(len(runs)), key=lambda i: (runs[i].errors, -i))


def summed_seconds(runs: Sequence) -> dict[str, float]:
    """Each stage's seconds over all draws."""
    seconds: dict[str, float] = {}
    for run in runs:
        for stage, value in run.seconds.items():
            seconds[stage] = seconds.get(stage, 0.0) + value
    return seconds


def median_count(values: Sequence[int]) -> int:
    """The median of counts, as a count (an even number of them: the mean of the middle two, rounded half to
    even)."""
    if not values:
        raise ValueError("no draws")
    return int(round(statistics.median(values)))


def median_counts(draws: Sequence[Sequence[int]]) -> list[int]:
    """Position by position, the median of equally long lists of counts (one list per draw)."""
    lengths = {len(d) for d in draws}
    if len(lengths) != 1:
        raise ValueError(f"draws of different lengths {sorted(lengths)}")
    return [median_count(column) for column in zip(*draws)]


def median_layers(draws: Sequence[dict[str, int] | None]) -> dict[str, int] | None:
    """Layer by layer, the median of each draw's probed cycles (None where a draw has no probes); a layer some draw
    lacks takes the median of the draws that have it. The first draw's order."""
    if not draws or any(d is None for d in draws):
        return None
    names = list(dict.fromkeys(name for d in draws for name in d))
    return {name: median_count([d[name] for d in draws if name in d]) for name in names}


def spread_text(draws: Sequence[int]) -> str:
    """", median of N draws, LOW..HIGH" for a figure of several draws ("" for one)."""
    if len(draws) < 2:
        return ""
    return f" (median of {len(draws)} draws, {min(draws):,}..{max(draws):,})"
