"""What a failed gvsoc run said, in one line: the first error gvsoc or the harness printed, and, for an address in
the HyperRAM (L3), which of the step's own L3 buffers holds it.

gvsoc prints a component's error as `<time>: <cycle>: [<colour>/<component path><colour>] <message>` (the RAM
model: `/ram/trace Received out-of-bound request (addr: 0x..., ram_size: 0x...)`), then `Platform returned an
error` as its last line; the harness and pulp-sdk print `ERROR: ...`. The last line says only that the run failed;
the first error says why.

The step's L3 buffers are those InitNetwork allocates with `cl_ram_malloc` (the arena, each constant), in the order
the generated code makes them. pulp-sdk's HyperRAM allocator (pmsis_bsp ram/alloc_extern.c, behind
`pi_cl_ram_alloc`) keeps one free block from address 8 (address 0 reserved, blocks 8-byte aligned) to the end of
the RAM and gives each request the top of the first free block that holds it, its size rounded up to 8 bytes:
with nothing freed, the buffers lie from the end of the RAM downwards, in allocation order. That is the layout an
address is looked up in.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ckpt.targets import TARGET_TABLE

RAM_SIZE = TARGET_TABLE["siracusa"].level("L3").size   # gvsoc's Siracusa HyperRAM, when the message does not say
RAM_ALIGN = 8                # alloc_extern.c's MIN_CHUNK_SIZE
ARENA_PREFIX = "DeeployNetwork_MEMORYARENA_"

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TRACE = re.compile(r"^\s*\d+:\s*\d+:\s*\[\s*(\S+)\s*\]\s*(.*)$")       # gvsoc's component trace line
_ERROR = re.compile(r"error|out-of-bound|invalid access|exception|abort", re.IGNORECASE)
_HARNESS_VERDICT = re.compile(r"Errors:\s*\d+\s+out of")
_ADDRESS = re.compile(r"addr(?:ess)?\s*[:=]\s*(0x[0-9a-fA-F]+)")
_RAM_SIZE = re.compile(r"ram_size\s*[:=]\s*(0x[0-9a-fA-F]+)")
_RAM_MALLOC = re.compile(r"^\s*(\w+)\s*=\s*(?:\([^)]*\)\s*)?cl_ram_malloc\(\s*(?:sizeof\(\w+\)\s*\*\s*)?(\d+)\s*\)\s*;",
                         re.MULTILINE)


def first_error(log: str) -> str | None:
    """The first line of a gvsoc log that reports an error, cleaned to one line (no colours, no timestamps), or
    None when no line does."""
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).strip()
        if not line or _HARNESS_VERDICT.search(line):
            continue
        trace = _TRACE.match(line)
        if trace:
            line = f"{trace.group(1)} {trace.group(2)}".strip()
        if _ERROR.search(line) and not line.startswith("Input error: Platform returned an error"):
            return line[:300]
    return None


@dataclass(frozen=True)
class RamBuffer:
    name: str            # the generated code's variable
    start: int           # its first address in the RAM
    size: int            # bytes it holds (as asked for)


def ram_layout(network_c: str, ram_size: int = RAM_SIZE) -> list[RamBuffer]:
    """The step's L3 buffers at the addresses pulp-sdk's allocator gives them (see the module doc), in allocation
    order."""
    top, placed = ram_size, []
    for name, size in _RAM_MALLOC.findall(network_c):
        nbytes = int(size)
        top -= -(-nbytes // RAM_ALIGN) * RAM_ALIGN
        placed.append(RamBuffer(name, top, nbytes))
    return placed


def ram_need(network_c: str) -> int:
    """Bytes of the HyperRAM the step's L3 buffers take as pulp-sdk's allocator gives them: each rounded up to its
    alignment, and the first aligned block, which it never gives (address 0), too."""
    return RAM_ALIGN + sum(-(-int(size) // RAM_ALIGN) * RAM_ALIGN for _, size in _RAM_MALLOC.findall(network_c))


def ram_overflow(network_c: str, ram_size: int = RAM_SIZE) -> str | None:
    """Why the step cannot run where its L3 buffers overflow the HyperRAM (None where they fit): Deeploy is given
    its CI's L3 size, far more than gvsoc's model has, so it never refuses such a step. On gvsoc pulp-sdk's allocator
    then gives the last buffers no memory (a null pointer, unchecked): they alias the start of the RAM, and the step
    runs to the end on constants it never loaded and reports zeros, or reads outside the chip's memory map."""
    need = ram_need(network_c)
    if need <= ram_size:
        return None
    return (f"the step's L3 buffers (its arena and constants) need {need:,} B of the HyperRAM, {need - ram_size:,} B "
            f"more than the {ram_size:,} B of gvsoc's Siracusa model")


def name_address(address: int, layout: list[RamBuffer], ram_size: int = RAM_SIZE) -> str:
    """Which of the step's L3 buffers holds `address`, in words."""
    if not layout:
        return "the step allocates nothing in L3"
    low = min(b.start for b in layout)
    for buf in layout:
        if buf.start <= address < buf.start + buf.size:
            offset = address - buf.start
            what = (f"the L3 arena ({buf.name})" if buf.name.startswith(ARENA_PREFIX) else buf.name)
            return f"{what} at offset {offset:,} of its {buf.size:,} B"
    if address >= ram_size:
        return (f"beyond the {ram_size // 1024:,} KiB RAM, in none of the step's L3 buffers (they lie at "
                f"{low:#x}-{ram_size:#x})")
    return f"in none of the step's L3 buffers (they lie at {low:#x}-{ram_size:#x})"


_EXIT = re.compile(r"Platform returned an error \(exitcode: (\d+)\)")
# what a step's exit code says where nothing before it did: the branch's dory_mem.c (TargetLibraries/PULPOpen)
# exits with -4 when pi_fs_open gives no file, after a printf without a newline that never reaches the log
_EXIT_CODES = {256 - 4: "pmsis_exit(-4): Deeploy's dory_mem.c could not open a data file on the flash (pi_fs_open "
                        "found no such file, or the L2 heap had no room left for the file's descriptor: every file "
                        "Init opens keeps 264 B of L2, as dory_mem.c never closes one)"}


def diagnosis(log: str, network_c: str | None) -> str | None:
    """One line: the first error of the log and, where it names an L3 address, the buffer that holds it; where no
    line says what went wrong, what the step's exit code means, where ckpt knows it."""
    error = first_error(log)
    if error is None:
        code = _EXIT.findall(log)
        said = _EXIT_CODES.get(int(code[-1])) if code else None
        return f"{_EXIT.search(log).group(0)}: {said}" if said else None
    address = _ADDRESS.search(error)
    if address is None or network_c is None or "/ram" not in error:
        return error
    size = _RAM_SIZE.search(error)
    ram_size = int(size.group(1), 16) if size else RAM_SIZE
    where = name_address(int(address.group(1), 16), ram_layout(network_c, ram_size), ram_size)
    return f"{error}: {where}"
