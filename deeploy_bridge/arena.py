"""The arenas of Deeploy's tiled flow, laid out by ckpt: inside Deeploy's tiler, and predicted without it.

In the tiled flow Deeploy gives every buffer of a memory level a static offset in one arena per level
(`Tiler._convertCtxtToStaticSchedule`: arena = highest end address). With `memoryAllocStrategy = "MiniMalloc"`
it first tiles, then asks `Tiler.minimalloc` for the offsets of one block list per level: the whole network's
at the home level, one per layer at the others (deeploy_bridge.tilers.CkptLayoutTiler answers in process,
through `place_blocks`). What Deeploy hands over, and what ckpt predicts from a schedule alone (`home_blocks`),
follows Deeploy 0.2.1's home-level rules (TilingExtension/MemoryScheduler.py `_calculateLifetimes`,
`_dealiasLifetimeMap`; checked block for block on CCT2_FT2, tests/test_arena_deeploy.py):

- the blocks are the non-constant buffers a layer reads or writes: locals and graph I/O alike; constants are
  static (outside the arena) and per-layer transients live in tiles;
- a local lives from its producer to its last reader (to the last layer if nobody reads it); graph I/O from
  the first to the last layer that touches it, a graph input from layer 0, a graph output to one past the last
  layer;
- a view (a Reshape-like output Deeploy aliases to its input, `_alias`) costs nothing: the code points it
  into its source's bytes, whose block stays alive as long as any view of it is read. Deeploy's MiniMalloc
  path hands views over with their full size although nothing is ever placed there; ckpt leaves them out, so
  the arena is not inflated by bytes no one uses. (Deeploy does not extend a graph input's block over its
  views' reads; ckpt does, so a view is never overwritten.) Below the home level the tile of a view of a
  global (whose bytes are not in the level) is a copy the code moves in like any other: it gets bytes of its own.
- sizes are prod(shape) * type width (below the home level: the tiler's tile, `deeploy_block_size`, or what the
  layer's tiling code moves into the block where that is more: deeploy_bridge.transfers); ckpt rounds them up to
  Deeploy's 4-byte word (`MemoryScheduler.byteAlignment`), so every offset stays word-aligned as Tetris's are.
The prediction names blocks as Deeploy does (`deeploy_tensor_name`), so both sides lay out the same list.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from Deeploy.DeeployTypes import TransientBuffer
from Deeploy.TilingExtension.MemoryScheduler import MemoryScheduler

from ckpt.schedule_file import clone_name, clone_of
from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.memory.layout import Block, Layout, aligned, lay_out

from .buffers import buffer_bytes, elements_bytes
from .errors import BridgeError
from .records import GrownBlock

ALIGNMENT = MemoryScheduler.byteAlignment


@dataclass
class LayoutLog:
    """What the tiler's allocator did in one Deeploy run: the calls made and, per level, the largest layout
    (every block list of a level shares the level's one arena; the home level has a single, whole-network list)."""

    calls: int = 0
    layouts: dict[str, Layout] | None = None
    blocks: dict[str, list[Block]] | None = None     # level -> the blocks behind its recorded layout
    grown: list[GrownBlock] = field(default_factory=list)   # every block laid out larger than the tiler counted
    home: dict[str, int] = field(default_factory=dict)      # split home: level -> its whole-network blocks' arena

    def record(self, level: str, layout: Layout, blocks: list[Block]) -> None:
        self.calls += 1
        known = (self.layouts or {}).get(level)
        if known is None or (layout.size, layout.live_max) > (known.size, known.live_max):
            self.layouts = {**(self.layouts or {}), level: layout}
            self.blocks = {**(self.blocks or {}), level: blocks}


def deeploy_block_size(buffer, constraint, level: str) -> int:
    """Bytes Deeploy's MiniMalloc path counts for one block (Tiler.minimalloc's rule)."""
    if constraint is None:
        if isinstance(buffer, TransientBuffer):
            return int(buffer.size)
        return buffer_bytes(buffer)
    tile = constraint.tensorMemoryConstraints[buffer.name].memoryConstraints[level]
    if isinstance(buffer, TransientBuffer):
        return int(tile.size)
    return elements_bytes(int(tile.size), buffer) * int(tile.multiBufferCoefficient)


@dataclass
class SizedBlocks:
    """One of Deeploy's block lists as ckpt lays it out: its blocks sized, views apart (they take their root's)."""

    kept: list                        # Deeploy's blocks that get bytes here (not another network's)
    blocks: list[Block]               # the blocks to lay out (views left out)
    roots: dict[str, str | None]      # view -> the block whose bytes it reads (None: a global's)
    grown: list[GrownBlock]           # blocks sized above the tiler's count: the code moves more into them


def size_blocks(memory_map: list, ctxt, constraint, level: str, outside: frozenset[str] = frozenset(),
                moved: Mapping[str, int] | None = None, layer: str | None = None) -> SizedBlocks:
    """The blocks of one of Deeploy's block lists with their lifetimes and sizes: Deeploy's (`deeploy_block_size`),
    or what the code of `layer` moves into a block (`moved`, deeploy_bridge.transfers) where that is more; a view
    costs nothing and its reads extend its root; one of a global not in the list, unless the code moves a tile into
    it (below the home level such a tile is a copy: it needs bytes of its own). `outside`: buffers whose bytes
    another network holds."""
    memory_map = [block for block in memory_map if block.name not in outside]
    names = {block.name for block in memory_map}
    spans = {block.name: (int(block.lifetime[0]), int(block.lifetime[1])) for block in memory_map}
    needed = dict(moved or {})
    roots: dict[str, str | None] = {}
    for block in memory_map:
        source = getattr(ctxt.lookup(block.name), "_alias", None)
        if isinstance(source, str) and (source in names or ctxt.is_global(source)):
            root = ctxt.dealiasBuffer(block.name)
            if root in names:
                roots[block.name] = root
            elif not needed.get(block.name):
                roots[block.name] = None    # its bytes are a global's; where the code moves a tile in, its own
    last = {name: span[1] for name, span in spans.items()}
    for view, root in roots.items():
        if root is not None:
            last[root] = max(last[root], spans[view][1])
    blocks, grown = [], []
    for block in memory_map:
        if block.name in roots:
            continue
        counted = deeploy_block_size(ctxt.lookup(block.name), constraint, level)
        size = max(counted, needed.get(block.name, 0))
        if size > counted:
            grown.append(GrownBlock(level, layer or "", block.name, counted, size))
        blocks.append(Block(block.name, spans[block.name][0], last[block.name], size))
    return SizedBlocks(memory_map, blocks, roots, grown)


def growth(grown: list[GrownBlock]) -> int:
    """Bytes (word-aligned, as laid out) the code moves into `grown` beyond what the tiler counted."""
    return sum(aligned(g.moved, ALIGNMENT) - aligned(g.counted, ALIGNMENT) for g in grown)


def arena_overflow(level: str, layout: Layout, capacity: int) -> BridgeError:
    """Why a level's whole-network arena (`layout`) does not fit the `capacity` bytes the tiler has free there: one
    definition, for Deeploy's tiler (place_blocks) and for a replay that sees it before Deeploy runs."""
    return BridgeError(f"the {level} arena needs {layout.size} B (live maximum {layout.live_max} B) but {level} has "
                       f"{capacity} B free: raise the level's size or tighten the schedule's budget")


def place_blocks(memory_map: list, ctxt, constraint, capacity: int, level: str, log: LayoutLog | None = None,
                 outside: frozenset[str] = frozenset(), moved: Mapping[str, int] | None = None,
                 layer: str | None = None, base: int = 0) -> Layout:
    """Give every block of one of Deeploy's block lists its address range (`_addrSpace`), a view its root's;
    refuse a layout that does not fit `capacity`. `outside`: buffers whose bytes another network holds (a split
    step's optimizer reads and writes the train network's): no room here, their pointers are set at Init.
    `moved`: bytes the code of `layer` (whose list this is) moves into a block; a block gets at least that.
    `base`: where in the level's arena the layout starts (a split home's tiles lie above its home blocks)."""
    for block in memory_map:
        if block.name in outside:
            block._addrSpace = (0, 0)
    sized = size_blocks(memory_map, ctxt, constraint, level, outside, moved, layer)
    layout = lay_out(sized.blocks, ALIGNMENT)
    if layout.size > capacity:
        if sized.grown:
            raise BridgeError(f"layer {layer} does not fit {level}: its tiling code moves {growth(sized.grown)} B "
                              f"more than Deeploy's tiler counted, so its blocks need {layout.size} B but {level} "
                              f"has {capacity} B free: raise the level's size")
        raise arena_overflow(level, layout, capacity)
    sizes = {b.name: aligned(b.size, ALIGNMENT) for b in sized.blocks}
    by_name = {block.name: block for block in sized.kept}
    for name, offset in layout.offsets.items():
        by_name[name]._addrSpace = (base + offset, base + offset + sizes[name])
    for view, root in sized.roots.items():
        by_name[view]._addrSpace = by_name[root]._addrSpace if root is not None else (0, 0)
    if log is not None:
        log.record(level, layout, sized.blocks)
        log.grown.extend(sized.grown)
    return layout


# --------------------------------------------------------------------------- the prediction


def deeploy_tensor_name(name: str) -> str:
    """The name Deeploy's front end gives a tensor of a graph it already lowered: `_tensor` appended unless
    present, graph I/O (input_i / output_i) kept. A replay's clone (`<tensor>__ck<k>`) is made on Deeploy's
    graph after that renaming, from the renamed tensor."""
    clone = clone_of(name)
    if clone:
        return clone_name(deeploy_tensor_name(clone[0]), clone[1])
    head, _, index = name.partition("_")
    if head in ("input", "output") and index.isdigit() or name.endswith("_tensor"):
        return name
    return f"{name}_tensor"


def home_blocks(order: list[tuple[str, tuple[str, ...], tuple[str, ...]]], graph: TrainGraph,
                graph_inputs: frozenset[str], graph_outputs: frozenset[str], inputs_persist: bool = False
                ) -> list[Block]:
    """Deeploy's home-level block list for layers run in `order` ((node, inputs, outputs) each), by the rules
    of the module doc; views are left out (they cost nothing) and their reads extend their root. `inputs_persist`:
    every graph input lives to the end (a split step's train network: deeploy_bridge.split_step)."""
    constants = {t for t in graph.tensor_bytes if t not in graph.producer and t not in graph_inputs}
    first: dict[str, int] = {}
    touched: dict[str, int] = {}
    read: set[str] = set()
    for step, (_, inputs, outputs) in enumerate(order):
        for tensor in (*inputs, *outputs):
            if tensor and tensor not in constants:
                first.setdefault(tensor, step)
                touched[tensor] = step
        read.update(t for t in inputs if t)
    end = len(order)
    span: dict[str, tuple[int, int]] = {}
    for tensor, start in first.items():
        stop = touched[tensor]
        if tensor in graph_outputs or (inputs_persist and tensor in graph_inputs):
            stop = end
        elif tensor not in graph_inputs and tensor not in read:
            stop = end - 1                 # a local nobody reads: Deeploy keeps it to the last layer
        span[tensor] = (0 if tensor in graph_inputs else start, stop)
    for tensor, (_, stop) in list(span.items()):
        root = graph.root(tensor)
        if root != tensor and root in span:
            span[root] = (span[root][0], max(span[root][1], stop))
    return [Block(deeploy_tensor_name(t), a, b, graph.tensor_bytes[t]) for t, (a, b) in span.items()
            if graph.root(t) == t]


def lay_out_home(blocks: list[Block]) -> Layout:
    """The home-level arena ckpt predicts for `home_blocks`: the same layout code Deeploy's tiler runs."""
    return lay_out(blocks, ALIGNMENT)
