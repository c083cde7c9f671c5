"""The non-tiled flow's buffers at static offsets in one arena ckpt lays out, in place of Deeploy's L2 heap.

Deeploy's non-tiled code mallocs every local buffer (a layer's outputs and its transient scratch) before the layer
and frees it after its last reader, from PMSIS's first-fit L2 heap: what the code reserves then depends on how
that heap fragments (deeploy_bridge.code_memory, solver.memory.heap), a figure no solver can bound over all orders.
ckpt takes the allocation out of the heap, on a deployer after its back end and before any code is written
(`place_locals`):
1. the events: MemoryManagementGeneration put, around each layer, one code snippet per allocation (the template
   is the buffer class's `allocTemplate`) and per free (`deallocTemplate`). A free names a buffer or a view of
   it (a Reshape-like output whose pointer is its input's; the two are linked both ways in `aliases`) and
   releases the one block behind them;
2. the blocks: one per allocated buffer, alive from its layer to the layer that frees it; a layer's transient
   buffers share one block, side by side, as ckpt's model has one scratch figure per execution. A buffer the code
   never frees lives to the last layer, unless nobody reads it (an output of a layer whose other outputs are read,
   which Deeploy allocates and never frees): its bytes are free again after its layer, as ckpt's model has it;
3. the layout: solver.memory.layout.lay_out_anonymous, the rule ckpt predicts the arena of a schedule with
   (solver.memory.static_arena), so the code's arena is the predicted one when the code's blocks are the model's;
4. the code: each allocation snippet becomes a pointer into the arena at the block's offset, each free
   nothing; the arena is declared and allocated once in InitNetwork with the platform's own templates, beside
   the graph's inputs and outputs (`arena_code`).
With `Allocator.HEAP` the code is left as Deeploy writes it (deeploy_bridge.memory).
"""
from __future__ import annotations

from dataclasses import dataclass

from Deeploy.AbstractDataTypes import PointerClass, VoidType
from Deeploy.DeeployTypes import NodeTemplate, StructBuffer, TransientBuffer

from ckpt.solver.memory.layout import Block, Layout, aligned, lay_out_anonymous
from ckpt.solver.memory.static_arena import WORD

from .buffers import buffer_bytes

NON_TILED_LEVEL = "L2"     # where the non-tiled code keeps its buffers (PULP's templates of a buffer without level)
ARENA = "ckpt_arena"       # the arena's symbol, after the network's name (a split step links two networks)
OFFSET = "ckpt_offset"
NOTHING = NodeTemplate("")


@dataclass(frozen=True)
class ArenaPlan:
    """The arena of one non-tiled run: its blocks (named by the buffer allocated, a layer's scratch by
    `<layer>:scratch`) and where each lies."""

    blocks: tuple[Block, ...]
    layout: Layout
    symbol: str              # the arena's C symbol


def place_locals(deployer) -> ArenaPlan:
    """Steps 1-4 of the module doc on a non-tiled deployer after its back end."""
    ctxt = deployer.ctxt
    allocs = {id(ctxt.VariableBuffer.allocTemplate), id(ctxt.TransientBuffer.allocTemplate)}
    frees = {id(ctxt.VariableBuffer.deallocTemplate), id(ctxt.TransientBuffer.deallocTemplate)}
    layers = list(deployer.layerBinding.items())
    group = _alias_groups(ctxt)
    block_of: dict[str, str] = {}                        # alias group -> the block its allocated member made
    made: dict[str, tuple[int, int, str]] = {}           # buffer -> (its layer, bytes, the block it lies in)
    freed: dict[str, int] = {}                           # block -> the layer after which the code frees it
    rewritten = []                                       # (allocation snippet, its buffer)
    for step, (name, layer) in enumerate(layers):
        for snippet in layer.mapper.binder.executionBlock.codeSnippets:
            kind = id(snippet.template)
            if kind not in allocs and kind not in frees:
                continue
            buffer = snippet.operatorRepresentation["name"]
            if isinstance(ctxt.lookup(buffer), TransientBuffer):
                block = f"{name}:scratch"
            elif kind in allocs:
                block = block_of[group.get(buffer, buffer)] = buffer
            else:
                block = block_of.get(group.get(buffer, buffer))     # None: a view of a global, no block of ours
            if kind in allocs:
                made[buffer] = (step, aligned(_bytes(ctxt.lookup(buffer)), WORD), block)
                rewritten.append((snippet, buffer))
            else:
                if block is not None:
                    freed[block] = max(step, freed.get(block, step))
                snippet.template = NOTHING
    unread = {buffer for buffer in made if not getattr(ctxt.lookup(buffer), "_users", None)}
    blocks, inside = _blocks(made, freed, unread, len(layers))
    layout = lay_out_anonymous(blocks, WORD)
    symbol = ctxt._mangle(ARENA)
    pointer = NodeTemplate(f"${{name}} = (${{type.typeName}}) ((int8_t*) {symbol} + ${{{OFFSET}}});\n")
    for snippet, buffer in rewritten:
        snippet.template = pointer
        snippet.operatorRepresentation[OFFSET] = layout.offsets[made[buffer][2]] + inside[buffer]
    return ArenaPlan(tuple(blocks), layout, symbol)


def _bytes(buf) -> int:
    return int(buf.size) if isinstance(buf, TransientBuffer) else buffer_bytes(buf)


def _blocks(made: dict[str, tuple[int, int, str]], freed: dict[str, int], unread: set[str], layers: int
            ) -> tuple[list[Block], dict[str, int]]:
    """The blocks of the allocations `made` (a layer's scratch buffers side by side in one), and each buffer's
    offset inside its block; a block never freed lives to the last layer, or, `unread`, only through its own."""
    sizes: dict[str, int] = {}
    inside: dict[str, int] = {}
    first: dict[str, int] = {}
    for buffer, (step, nbytes, block) in made.items():
        inside[buffer] = sizes.get(block, 0)
        sizes[block] = inside[buffer] + nbytes
        first.setdefault(block, step)
    def last(block: str) -> int:
        return freed.get(block, first[block] if block in unread else layers - 1)

    return [Block(block, first[block], last(block), sizes[block]) for block in sizes], inside


def _alias_groups(ctxt) -> dict[str, str]:
    """Local buffer -> a name for its alias group (views share their input's block; `aliases` links both ways)."""
    local = {name for name, buf in ctxt.localObjects.items() if not isinstance(buf, StructBuffer)}
    groups: dict[str, str] = {}
    for name in sorted(local):
        if name in groups:
            continue
        members, queue = set(), [name]
        while queue:
            member = queue.pop()
            if member in members or member not in local:
                continue
            members.add(member)
            queue.extend(getattr(ctxt.lookup(member), "aliases", ()))
        groups.update(dict.fromkeys(members, name))
    return groups


def arena_code(ctxt, plan: ArenaPlan) -> tuple[str, str]:
    """(the arena's declaration, its allocation in InitNetwork), with the platform's templates of a scratch buffer."""
    if plan.layout.size == 0:
        return "", ""
    representation = {"type": PointerClass(VoidType), "name": plan.symbol, "size": plan.layout.size,
                      "_memoryLevel": None}
    head = f"// ckpt: every local buffer of RunNetwork at a static offset in one arena of {plan.layout.size} B\n"
    return (head + ctxt.TransientBuffer.initTemplate.generate(representation),
            ctxt.TransientBuffer.allocTemplate.generate(representation))
