"""The cluster DMA transfers a generated step makes, read from its code: none may reach 2^17 B.

GAP9's generated code (Deeploy's GAP9MchanDma) writes each transfer as a DORY `mchan_transfer_t` whose command
word holds the length in its low 17 bits:
    { mchan_transfer_t __mchan_tmp = { .cmd = C, .size = N, .loc = L, .ext = E }; mchan_transfer_push_1d(...); }
N is a number, or, where a layer's tiles move different amounts, one entry of a per-tile array the code defines
(`.size = <name>_size[TILING_I]`, with `static PI_L1 uint32_t <name>_size[3] = {…};`): such a transfer is read as
the largest of its tiles. A length written otherwise (an expression) is left to the host runtime's DMA, which checks
every transfer it makes.
On the training branch a transfer above 2^17 B makes Deeploy's code generation assert, and one of exactly 2^17 B
passes it and carries into the direction bit: the device would move nothing, the other way (fixed upstream only in
Deeploy's pull request 183). ckpt reads every transfer in the code before it builds it, and a step with one of
2^17 B or more is not built: the run fails naming the transfer (its function, local and external buffers and
size). ckpt's tiling keeps GAP9's transfers below it: every transfer into L1 is one tile, and GAP9's L1 (targets.py)
is smaller than 2^17 B; the host runtime's DMA (runtime/DeeployMchan.h) refuses one all the same.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

MCHAN_LIMIT = 1 << 17          # bytes: the first length mchan's 17-bit length field cannot hold

_FUNCTION = re.compile(r"^(?:static\s+)?(?:inline\s+)?void\s+(\w+)\s*\(")
_LENGTH = r"(\d+|\w+\s*\[\s*\w+\s*\])"           # a number, or one entry of an array the code defines
_TRANSFER = re.compile(r"mchan_transfer_t\s+\w+\s*=\s*\{\s*\.cmd\s*=\s*" + _LENGTH + r"\s*,\s*\.size\s*=\s*"
                       + _LENGTH + r"\s*,\s*\.loc\s*=\s*([^,]+?)\s*,\s*\.ext\s*=\s*([^,}]+?)\s*[,}]")
_ARRAY = re.compile(r"\b(\w+)\s*\[\s*\d*\s*\]\s*=\s*\{([\d\s,]*)\}")   # an array of numbers: name[n] = {a, b}


@dataclass(frozen=True)
class Transfer:
    """One DMA transfer the code makes."""

    file: str
    line: int
    function: str          # the C function it is made in (a layer's closure names the layer)
    local: str
    external: str
    size: int              # bytes (per-tile lengths: the largest tile's)
    cmd: int               # the command word of that transfer
    tiles: int = 1         # the lengths it was read from: 1, or the layer's tiles

    def describe(self) -> str:
        tiles = f" (the largest of {self.tiles} tiles)" if self.tiles > 1 else ""
        return (f"{self.size:,} B{tiles} between {self.local} and {self.external} in {self.function} "
                f"({self.file}:{self.line})")


def _lengths(text: str, arrays: dict[str, list[int]]) -> list[int] | None:
    """The values a length field takes: a number, or the entries of the array it indexes (None: not read)."""
    if text.isdigit():
        return [int(text)]
    return arrays.get(text.split("[")[0].strip()) or None


def code_transfers(path: Path) -> list[Transfer]:
    """Every `mchan_transfer_t` transfer the C file at `path` makes whose length is read (see the module), in
    order."""
    text = path.read_text(errors="replace")
    arrays = {m.group(1): [int(v) for v in m.group(2).replace(",", " ").split()] for m in _ARRAY.finditer(text)}
    found, function = [], "?"
    for number, line in enumerate(text.splitlines(), start=1):
        head = _FUNCTION.match(line)
        if head:
            function = head.group(1)
        for match in _TRANSFER.finditer(line):
            cmd, size, local, external = match.groups()
            sizes, cmds = _lengths(size, arrays), _lengths(cmd, arrays)
            if sizes is None or cmds is None:
                continue
            largest = max(range(len(sizes)), key=sizes.__getitem__)
            found.append(Transfer(path.name, number, function, local, external, sizes[largest],
                                  cmds[min(largest, len(cmds) - 1)], len(sizes)))
    return found


def oversized_transfers(code_dir: Path) -> list[Transfer]:
    """The transfers of the step's C files in `code_dir` that reach MCHAN_LIMIT."""
    files = sorted(Path(code_dir).glob("*.c"))
    return [t for path in files for t in code_transfers(path) if t.size >= MCHAN_LIMIT]


def oversized_reason(code_dir: Path) -> str | None:
    """Why the step in `code_dir` must not be built (its first transfer of 2^17 B or more), or None."""
    found = oversized_transfers(code_dir)
    if not found:
        return None
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return (f"the code makes a cluster DMA transfer of {found[0].describe()}{more}: mchan's length field holds "
            f"less than {MCHAN_LIMIT:,} B, so the device would misdirect it; deploy with a smaller L1 so its tiles "
            "are smaller")
