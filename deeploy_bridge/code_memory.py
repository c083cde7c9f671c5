"""The memory the generated C code really uses: replay the malloc/free/pointer-copy sequence of RunNetwork.

Deeploy's own figure (``worstCaseBufferSize``) is a counter kept beside code generation, not a reading of
the code, and in 0.2.1 it disagrees with the code in two ways (see ``deeploy_bridge/memory.py``):
Reshape-like layers emit ``out = in;`` but are counted as a new buffer, and a dying buffer that still has a
live alias is never subtracted although the code frees the shared block later. This module is the ground
truth for "what does the deployed code hold": it is the only place in ckpt that knows the code conventions
of Deeploy's PULP (non-tiled) templates:

* ``X = (T*) pi_l2_malloc(sizeof(T) * N);``   a new block of sizeof(T)*N bytes named X
* ``pi_l2_free(X, sizeof(T) * N);``            frees the block X points to
* ``X = Y;``                                   X points into Y's block (Reshape/Squeeze/Unsqueeze/Flatten)
* ``// _<node>_closure CLOSURE CALL`` and ``// <what> (Name: <node>, Op: <op>)`` mark layers.

``levels``/``peak_bytes`` count live bytes as the allocator is asked for them; ``heap_bytes`` adds PMSIS's
8-byte rounding and first-fit fragmentation. ``sizeof(void)`` is 1 as in GCC (Deeploy's PULP toolchain).
The tiled flow has no mallocs (static arena offsets); use ``MemoryFigures.arena`` / ``home_live`` there.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ckpt.solver.memory.heap import smallest_heap

PREFIX = "DeeployNetwork_"
TYPE_BYTES = {"void": 1, "char": 1, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2, "float16_t": 2,
              "bfloat16_t": 2, "int32_t": 4, "uint32_t": 4, "float32_t": 4, "float": 4, "int64_t": 8,
              "uint64_t": 8, "float64_t": 8, "double": 8}

_MALLOC = re.compile(r"^\s*(\w+)\s*=\s*\([^)]*\)\s*(\w*malloc)\(\s*sizeof\((\w+)\)\s*\*\s*(\d+)\s*\);")
_FREE = re.compile(r"^\s*(\w*free)\(\s*(\w+)\s*,")
_COPY = re.compile(r"^\s*(\w+)\s*=\s*(\w+)\s*;")
_CALL = re.compile(r"^\s*//\s*_(\w+?)_closure(?:_\w+)?\s+CLOSURE CALL")
_NAMED = re.compile(r"^\s*//.*\(Name:\s*(\S+),\s*Op:\s*(\w+)\)")


@dataclass(frozen=True)
class Block:
    """One malloc'ed block: the variable it was first assigned to, its bytes, and when it lived (layer indices)."""

    name: str
    nbytes: int
    allocated_in: int
    freed_in: int | None  # None: never freed inside RunNetwork


@dataclass(frozen=True)
class CodeMemory:
    """What RunNetwork holds, layer by layer. `levels[k]`: live bytes after layer k's mallocs (its peak)."""

    layers: tuple[str, ...]
    levels: tuple[int, ...]
    blocks: tuple[Block, ...]
    aliases: dict[str, str] = field(default_factory=dict)  # pointer-copied variable -> variable it copies
    double_frees: tuple[str, ...] = ()  # frees of a block that was already freed
    foreign_frees: tuple[str, ...] = ()  # frees of a pointer that is not into a RunNetwork block
    events: tuple[tuple[str, int], ...] = ()  # ("malloc" | "free", block index) in code order

    @property
    def peak_bytes(self) -> int:
        return max(self.levels, default=0)

    @property
    def peak_layer(self) -> str:
        return self.layers[self.levels.index(self.peak_bytes)] if self.levels else ""

    @property
    def leaked(self) -> tuple[Block, ...]:
        """Blocks RunNetwork allocates and never frees (graph outputs are globals, so these are real leaks)."""
        return tuple(b for b in self.blocks if b.freed_in is None)

    def live_at(self, k: int) -> list[Block]:
        """Blocks counted in levels[k], largest first."""
        live = [b for b in self.blocks if b.allocated_in <= k and (b.freed_in is None or b.freed_in >= k)]
        return sorted(live, key=lambda b: (-b.nbytes, b.name))

    def heap_bytes(self, granule: int = 8) -> int:
        """Smallest L2 heap the code runs in with PMSIS's allocator: the live peak plus fragmentation.

        The allocator model is ckpt.solver.memory.heap (PMSIS first-fit). Globals malloc'ed in InitNetwork are
        never freed and only shift the heap, so RunNetwork is replayed alone."""
        events = [(kind, self.blocks[b].nbytes, b) for kind, b in self.events]
        return smallest_heap(events, granule, lower=self.peak_bytes)


def run_network_body(source: str) -> list[str]:
    """The lines of RunNetwork's body (allocations in InitNetwork are the static globals, not counted)."""
    lines = source.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("void RunNetwork(")), None)
    if start is None:
        raise ValueError("no RunNetwork function in the generated code")
    depth, body = 0, []
    for line in lines[start:]:
        depth += line.count("{") - line.count("}")
        body.append(line)
        if depth <= 0 and len(body) > 1:
            break
    return body[1:-1]


def parse_network_c(source: str) -> CodeMemory:
    """Replay RunNetwork's allocation sequence. Layers are delimited by their call/name comments; a
    layer's mallocs come before its marker and its frees after it, as Deeploy emits them."""
    tracker = _Tracker()
    for line in run_network_body(source):
        if m := _MALLOC.match(line):
            var, _, ctype, count = m.groups()
            tracker.malloc(_strip(var), _type_bytes(ctype) * int(count))
        elif m := _FREE.match(line):
            tracker.free(_strip(m.group(2)))
        elif m := _CALL.match(line):
            tracker.mark_call(m.group(1))
        elif m := _NAMED.match(line):
            tracker.mark_named(m.group(1))
        elif (m := _COPY.match(line)) and m.group(2).startswith(PREFIX):
            tracker.copy(_strip(m.group(1)), _strip(m.group(2)))
    return tracker.result()


def code_memory(code_dir: str | Path) -> CodeMemory:
    """``parse_network_c`` of ``code_dir/Network.c`` (as written by ``generate_code``)."""
    return parse_network_c((Path(code_dir) / "Network.c").read_text())


def _strip(var: str) -> str:
    return var[len(PREFIX):] if var.startswith(PREFIX) else var


def _type_bytes(ctype: str) -> int:
    try:
        return TYPE_BYTES[ctype]
    except KeyError:
        raise ValueError(f"unknown C type '{ctype}' in a malloc of the generated code") from None


class _Tracker:
    """Live-block bookkeeping while walking the code, one layer per call/name marker."""

    def __init__(self) -> None:
        self.layers: list[str] = []
        self.levels: list[int] = []
        self.blocks: list[list] = []  # [name, bytes, allocated_in, freed_in]
        self.points_to: dict[str, int] = {}  # variable -> block id
        self.aliases: dict[str, str] = {}
        self.double_frees: list[str] = []
        self.foreign_frees: list[str] = []
        self.events: list[tuple[str, int]] = []
        self.level = 0
        self.kind: str | None = "call"  # current layer: None (open), "call" (closed), "named" (passthrough)

    def _open(self, name: str = "", kind: str | None = None) -> int:
        self.layers.append(name)
        self.levels.append(self.level)
        self.kind = kind
        return len(self.layers) - 1

    def malloc(self, var: str, nbytes: int) -> None:
        k = self._open() if self.kind is not None else len(self.layers) - 1
        self.blocks.append([var, nbytes, k, None])
        self.points_to[var] = len(self.blocks) - 1
        self.events.append(("malloc", len(self.blocks) - 1))
        self.level += nbytes
        self.levels[k] = max(self.levels[k], self.level)

    def copy(self, dst: str, src: str) -> None:
        if self.kind == "call":
            self._open()
        self.aliases[dst] = src
        if src in self.points_to:
            self.points_to[dst] = self.points_to[src]

    def free(self, var: str) -> None:
        k = len(self.layers) - 1
        block = self.points_to.get(var)
        if block is None:
            self.foreign_frees.append(var)
        elif self.blocks[block][3] is not None:
            self.double_frees.append(var)
        else:
            self.blocks[block][3] = k
            self.events.append(("free", block))
            self.level -= self.blocks[block][1]

    def mark_call(self, node: str) -> None:
        """A kernel call: it closes the layer its mallocs opened."""
        if self.kind is not None:
            self._open()
        self.layers[-1], self.kind = node, "call"

    def mark_named(self, node: str) -> None:
        """A passthrough layer's header comment: the pointer copy follows it."""
        self._open(node, "named")

    def result(self) -> CodeMemory:
        return CodeMemory(layers=tuple(self.layers), levels=tuple(self.levels),
                          blocks=tuple(Block(n, b, a, f) for n, b, a, f in self.blocks),
                          aliases=dict(self.aliases), double_frees=tuple(self.double_frees),
                          foreign_frees=tuple(self.foreign_frees), events=tuple(self.events))
