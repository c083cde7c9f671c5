"""The non-tiled flow's arena: every buffer of a run sequence at a static offset in one block of memory.

A buffer (solver.simulate) is alive from the execution that writes it to its last reader, both included; an
execution's scratch for that execution alone. ckpt places these blocks itself, once (solver.layout), so the
arena's floor, its live maximum, is the sequence's live peak (sizes rounded up to the device's word), and the
arena is that floor plus whatever the layout could not avoid (its `excess`). deeploy_bridge.non_tiled_arena lays
out the blocks the generated code allocates by the same rule, so the code's arena is the one predicted here.
"""
from __future__ import annotations

from ckpt.solver.graph.graph import TrainGraph
from ckpt.solver.graph.simulate import MemoryTrace, RunSequence, memory_trace
from ckpt.solver.memory.layout import Block, Layout, lay_out_anonymous

WORD = 4       # bytes every offset is a multiple of: the device's word (Deeploy's MemoryScheduler.byteAlignment)


def arena_blocks(trace: MemoryTrace) -> list[Block]:
    """The blocks of a sequence's buffers and scratch, one step per execution."""
    blocks = [Block(f"{b.tensor}@{b.written_at}", b.written_at, b.last_read, b.nbytes) for b in trace.buffers]
    return blocks + [Block(f"scratch@{k}", k, k, nbytes) for k, nbytes in enumerate(trace.scratch) if nbytes]


def arena_layout(graph: TrainGraph, seq: RunSequence, trace: MemoryTrace | None = None) -> Layout:
    """The arena ckpt lays out for `seq`'s buffers on `graph`."""
    return lay_out_anonymous(arena_blocks(trace or memory_trace(graph, seq)), WORD)
