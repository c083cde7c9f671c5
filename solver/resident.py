"""A graph whose graph inputs and outputs take memory as activations do: the model of a static arena.

Deeploy's tiled flow keeps graph I/O in the home level's arena, beside the activations: a graph input from the
start of the step to its last reader, a graph output from the op that writes it to the end of the step
(deeploy_bridge/arena.py). Counting them as activations makes the solver's live bytes equal the most bytes alive
at once among the arena's blocks, which ckpt's layout then reaches: a budget on this graph is a budget on the
arena itself. Two synthetic ops carry the rule: one writes every graph input first, one reads every graph output
last; neither is ever recomputed, and `real_sequence` takes them out of a schedule again. Per-op scratch is
dropped: in the tiled flow it lives in L1 tiles, not in the arena.
"""
from __future__ import annotations

from dataclasses import replace

from ckpt.solver.graph import Op, TrainGraph
from ckpt.solver.simulate import RunSequence

INPUTS_OP = "__ckpt_graph_inputs__"
OUTPUTS_OP = "__ckpt_graph_outputs__"
SYNTHETIC = frozenset({INPUTS_OP, OUTPUTS_OP})
SOURCE_TYPE = "CkptGraphInputs"       # op types the solver never recomputes (graph.NEVER_RECOMPUTE_OPS)
SINK_TYPE = "CkptGraphOutputs"


def arena_resident(graph: TrainGraph, inputs: frozenset[str], outputs: frozenset[str]) -> TrainGraph:
    """`graph` with its graph I/O (`inputs`, `outputs`: tensor names) counted as activations (see the doc)."""
    read = {t for op in graph.ops for t in op.inputs}
    fed = tuple(sorted(t for t in inputs if t in read))
    kept = tuple(sorted(t for t in outputs if t in graph.producer))
    ops = (Op(INPUTS_OP, SOURCE_TYPE, (), fed),) + graph.ops + (Op(OUTPUTS_OP, SINK_TYPE, kept, ()),)
    costs = {**graph.op_cost, INPUTS_OP: 0, OUTPUTS_OP: 0}
    return replace(graph, ops=ops, persistent=graph.persistent - set(fed) - set(kept), op_cost=costs, scratch={})


def real_sequence(seq: RunSequence) -> RunSequence:
    """A schedule of the resident graph as a schedule of the real one."""
    return [(name, flag) for name, flag in seq if name not in SYNTHETIC]


def resident_sequence(seq: RunSequence) -> RunSequence:
    """A schedule of the real graph as a schedule of the resident one."""
    return [(INPUTS_OP, 0), *seq, (OUTPUTS_OP, 0)]
