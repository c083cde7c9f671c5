"""The cluster DMA transfers a generated step makes, read from its code: none may reach 2^17 B.

GAP9's generated code (Deeploy's GAP9MchanDma) writes each transfer as a DORY `mchan_transfer_t` whose command
word holds the length in its low 17 bits:
    { mchan_transfer_t __mchan_tmp = { .cmd = C, .size = N, .loc = L, .ext = E }; mchan_transfer_push_1d(...); }
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
_TRANSFER = re.compile(r"mchan_transfer_t\s+\w+\s*=\s*\{\s*\.cmd\s*=\s*(\d+)\s*,\s*\.size\s*=\s*(\d+)\s*,"
                       r"\s*\.loc\s*=\s*([^,]+?)\s*,\s*\.ext\s*=\s*([^,}]+?)\s*[,}]")


@dataclass(frozen=True)
class Transfer:
    """One DMA transfer the code makes."""

    file: str
    line: int
    function: str          # the C function it is made in (a layer's closure names the layer)
    local: str
    external: str
    size: int              # bytes
    cmd: int

    def describe(self) -> str:
        return (f"{self.size:,} B between {self.local} and {self.external} in {self.function} "
                f"({self.file}:{self.line})")


def code_transfers(path: Path) -> list[Transfer]:
    """Every `mchan_transfer_t` transfer the C file at `path` makes, in order."""
    found, function = [], "?"
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        head = _FUNCTION.match(line)
        if head:
            function = head.group(1)
        for match in _TRANSFER.finditer(line):
            cmd, size, local, external = match.groups()
            found.append(Transfer(path.name, number, function, local, external, int(size), int(cmd)))
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
