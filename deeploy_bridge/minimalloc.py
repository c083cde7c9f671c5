"""`minimalloc`: ckpt's layout behind the command-line contract of Google's MiniMalloc, for Deeploy's own runners.

Deeploy's tiler, with `memoryAllocStrategy = "MiniMalloc"`, runs `$MINIMALLOC_INSTALL_DIR/minimalloc
--capacity=N --input=IN.csv --output=OUT.csv` once per layer and memory level: input rows `id,lower,upper,size`
(upper exclusive), output rows `id,lower,upper,size,offset` (Deeploy reads the offset from the last column, the
size from the one before). `pip install ckpt` puts this program on the venv's PATH, so
`MINIMALLOC_INSTALL_DIR=$(dirname $(which minimalloc))` lets Deeploy's runners use ckpt's layout
(solver.memory.layout). The CSV does not say which blocks are views, so they keep their own space here; ckpt's own
tiled runs lay out in process and leave views out (deeploy_bridge.arena). Exit codes: 0 laid out, 1 bad input,
2 the layout does not fit the capacity.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import sys
from pathlib import Path

from ckpt.errors import CkptError
from ckpt.files import atomic_write, check_input_file, check_output_file
from ckpt.solver.memory.layout import Block, aligned, lay_out

MAX_STEP = 2 ** 31 - 1      # a lifetime bound: a layer's step, far below any count a tiler reaches
MAX_SIZE = 2 ** 40          # a block's bytes: a TiB, far above any memory level


def _whole(text: str, limit: int, number: int, name: str, what: str) -> int:
    """A whole number in [0, limit] as the CSV spells it (Deeploy may write a size as 1024.0); ValueError naming
    the row, the block and the field otherwise: a fraction is never rounded, a huge number never reaches the
    layout."""
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"row {number} ({name}): {what} '{text.strip()}' is not a number") from None
    if not value.is_integer() or not 0 <= value <= limit:
        kind = "a fraction" if value == value and abs(value) != float("inf") and not value.is_integer() else \
            "negative" if value < 0 else "not a number" if value != value else f"above {limit}"
        raise ValueError(f"row {number} ({name}): {what} '{text.strip()}' is {kind}: give a whole number of "
                         f"{'bytes' if what == 'size' else 'steps'} from 0 to {limit}")
    return int(text) if text.strip().isdigit() else int(value)


def read_blocks(text: str) -> list[Block]:
    rows = list(csv.reader(io.StringIO(text)))
    if not rows or [c.strip() for c in rows[0][:4]] != ["id", "lower", "upper", "size"]:
        raise ValueError("the input must start with the header id,lower,upper,size")
    blocks, seen = [], {}
    for number, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if len(row) < 4:
            raise ValueError(f"row {number} is not id,lower,upper,size: {','.join(row)}")
        name = row[0]
        lower, upper = (_whole(row[i], MAX_STEP, number, name, what) for i, what in ((1, "lower"), (2, "upper")))
        size = _whole(row[3], MAX_SIZE, number, name, "size")
        if upper <= lower:
            raise ValueError(f"row {number} ({name}) has an empty lifetime (upper {upper} <= lower {lower})")
        if name in seen:
            raise ValueError(f"row {number} names the block '{name}' again (first in row {seen[name]})")
        seen[name] = number
        blocks.append(Block(name, lower, upper - 1, size))
    return blocks


def write_offsets(blocks: list[Block], offsets: dict[str, int], alignment: int) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["id", "lower", "upper", "size", "offset"])
    for b in blocks:
        writer.writerow([b.name, b.first, b.last + 1, aligned(b.size, alignment) if b.size else 0,
                         offsets.get(b.name, 0)])
    return out.getvalue()


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 1 (bad input), as every other refusal here: 2 means the layout does not fit."""

    def error(self, message: str):
        self.exit(1, f"{self.prog}: {message} (see --help)\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="minimalloc", description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, required=True, help="bytes the memory level has free")
    parser.add_argument("--input", required=True, help="CSV of id,lower,upper,size")
    parser.add_argument("--output", required=True, help="CSV to write, id,lower,upper,size,offset")
    parser.add_argument("--alignment", type=int, default=4, help="offset and size granule (Deeploy's word: 4)")
    args = parser.parse_args(argv)
    try:
        if args.capacity < 0:
            raise CkptError(f"--capacity {args.capacity} is negative", "give the bytes the level has free")
        if args.alignment < 1:
            raise CkptError(f"--alignment {args.alignment} is no granule", "give 1 byte or more (Deeploy's word: 4)")
        check_input_file(args.input, "--input")
        check_output_file(args.output, allow_stdout=False, example="out.csv")
        if Path(args.output).exists() and Path(args.input).exists() and os.path.samefile(args.input, args.output):
            raise CkptError(f"--output {args.output} is the input", "write the offsets to a file of their own")
        blocks = read_blocks(Path(args.input).read_text())
    except (OSError, ValueError) as err:
        print(f"minimalloc: {args.input}: {err}", file=sys.stderr)
        return 1
    except CkptError as err:
        print(f"minimalloc: {err}", file=sys.stderr)
        return 1
    layout = lay_out(blocks, args.alignment)
    if layout.size > args.capacity:
        print(f"minimalloc: the layout needs {layout.size} B (live maximum {layout.live_max} B), more than the "
              f"capacity {args.capacity} B", file=sys.stderr)
        return 2
    try:
        atomic_write(args.output, write_offsets(blocks, layout.offsets, args.alignment))
    except OSError as err:
        print(f"minimalloc: cannot write {args.output}: {err.strerror or err}", file=sys.stderr)
        return 1
    except CkptError as err:
        print(f"minimalloc: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
