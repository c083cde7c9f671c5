"""A graph whose graph inputs and outputs take memory as activations do: the model of a static arena.

Deeploy's tiled flow keeps graph I/O in the home level's arena, beside the activations: a graph input from the
start of the step to its last reader, a graph output from the op that writes it to the end of the step
(deeploy_bridge/arena.py). Counting them as activations makes the solver's live bytes equal the most bytes alive
at once among the arena's blocks, which ckpt's layout then reaches: a budget on this graph is a budget on the
arena itself. Two synthetic ops carry the rule: one writes every graph input first, one reads every graph output
last; neither is ever recomputed, and `real_sequence` takes them out of a schedule again. Per-op scratch is
dropped: in the tiled flow it lives in L1 tiles, not in the arena. Sizes are rounded up to the arena's alignment,
as its layout rounds its blocks (a one-byte label takes a word).

Only what takes arena bytes becomes an activation. A graph output that lives in a constant's bytes (a weight
updated in place: an alias of the weight) has no block of its own, so it stays persistent: counted as an
activation, its update would make a view, which the min-memory order runs only right before its one reader, the
sink at the end, holding every weight gradient to the end of the step. A graph output's producer runs once, as
it does on the real graph (what it writes is the version the step ends with), so both graphs have the same
recomputes; and the model is solved in the real graph's stage order (`resident_order`), so its schedule space
holds every schedule of the real one, and a bound on it bounds them too.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ckpt.solver.graph.graph import Op, TrainGraph
from ckpt.solver.graph.simulate import RunSequence
from ckpt.solver.memory.layout import aligned

INPUTS_OP = "__ckpt_graph_inputs__"
OUTPUTS_OP = "__ckpt_graph_outputs__"
SYNTHETIC = frozenset({INPUTS_OP, OUTPUTS_OP})
SOURCE_TYPE = "CkptGraphInputs"       # op types the solver never recomputes (graph.NEVER_RECOMPUTE_OPS)
SINK_TYPE = "CkptGraphOutputs"


def arena_resident(graph: TrainGraph, inputs: frozenset[str], outputs: frozenset[str], alignment: int = 1
                   ) -> TrainGraph:
    """`graph` with its graph I/O (`inputs`, `outputs`: tensor names) that takes arena bytes counted as
    activations (see the module doc), every size rounded up to the arena's `alignment` as its layout does."""
    read = {t for op in graph.ops for t in op.inputs}
    fed = tuple(sorted(t for t in inputs if t in read))
    held = set(fed) | {t for t in graph.tensor_bytes if graph.is_activation(t)}
    kept = tuple(sorted(t for t in outputs if t in graph.producer and (t == graph.root(t) or graph.root(t) in held)))
    ops = (Op(INPUTS_OP, SOURCE_TYPE, (), fed),) + graph.ops + (Op(OUTPUTS_OP, SINK_TYPE, kept, ()),)
    costs = {**graph.op_cost, INPUTS_OP: 0, OUTPUTS_OP: 0}
    once = graph.run_once | {graph.ops[graph.producer[t]].name for t in kept}
    sizes = {t: aligned(n, alignment) for t, n in graph.tensor_bytes.items()}
    return replace(graph, ops=ops, tensor_bytes=sizes, persistent=graph.persistent - set(fed) - set(kept),
                   op_cost=costs, scratch={}, run_once=frozenset(once))


def resident_order(order: Sequence[str]) -> list[str]:
    """The resident graph's stage order for a stage order of the real graph: the same, between the synthetic
    ops."""
    return [INPUTS_OP, *order, OUTPUTS_OP]


def real_sequence(seq: RunSequence) -> RunSequence:
    """A schedule of the resident graph as a schedule of the real one."""
    return [(name, flag) for name, flag in seq if name not in SYNTHETIC]


def resident_sequence(seq: RunSequence) -> RunSequence:
    """A schedule of the real graph as a schedule of the resident one."""
    return [(INPUTS_OP, 0), *seq, (OUTPUTS_OP, 0)]
