"""Deeploy's tiler setup as ckpt patches it (deeploy_bridge.tiler_setup) builds the same constraints and matrices
as Deeploy's own code: the same tensors in the same dicts and order, the same levels, the same sharing."""
import copy

import numpy as np
import pytest
from Deeploy.DeeployTypes import ConstantBuffer, NetworkContext, StructBuffer, TransientBuffer, VariableBuffer
from Deeploy.TilingExtension.MemoryConstraints import (
    MemoryConstraint,
    NodeMemoryConstraint,
    TensorMemoryConstraint,
)
from Deeploy.TilingExtension.MemoryScheduler import MemoryScheduler
from hypothesis import given, settings
from hypothesis import strategies as st
from strength import property_examples

from ckpt.deeploy_bridge import tiler_setup

NAMES = [f"t{i}" for i in range(8)]
LEVELS = ["L1", "L2", "L3"]
IOS = ["input", "intermediate", "output"]


def _context() -> NetworkContext:
    ctxt = NetworkContext(variableBuffer=VariableBuffer, constantBuffer=ConstantBuffer, structBuffer=StructBuffer,
                          transientBuffer=TransientBuffer)
    for name in NAMES:
        ctxt.add(VariableBuffer(name, [4]), "local")
    return ctxt


class _Deeploys:
    """Deeploy's own methods in place of ckpt's, for the length of a with block."""

    def __enter__(self):
        NodeMemoryConstraint.addTensorConstraint = tiler_setup._original["addTensorConstraint"]
        NodeMemoryConstraint._amendTensorConstraint = tiler_setup._original["_amendTensorConstraint"]
        del TensorMemoryConstraint.__deepcopy__
        MemoryScheduler._buildAdjacencyMatrix = tiler_setup._original["_buildAdjacencyMatrix"]

    def __exit__(self, *exc):
        NodeMemoryConstraint.addTensorConstraint = tiler_setup._add_tensor_constraint
        NodeMemoryConstraint._amendTensorConstraint = tiler_setup._amend_tensor_constraint
        TensorMemoryConstraint.__deepcopy__ = tiler_setup._deepcopy_tensor_constraint
        MemoryScheduler._buildAdjacencyMatrix = tiler_setup._build_adjacency_matrix


def test_the_patch_is_applied_and_deeploy_had_no_deepcopy_of_its_own():
    assert NodeMemoryConstraint.addTensorConstraint is tiler_setup._add_tensor_constraint
    assert tiler_setup._original["__deepcopy__"] is None


# one add: (tensor, io, level, size); a node constraint is built from a list of adds
ADD = st.tuples(st.sampled_from(NAMES), st.sampled_from(IOS), st.sampled_from(LEVELS), st.integers(1, 3))


def _build(ctxt: NetworkContext, adds: list) -> NodeMemoryConstraint:
    node = NodeMemoryConstraint()
    for name, io, level, size in adds:
        try:
            node.addTensorConstraint(TensorMemoryConstraint(name, {level: MemoryConstraint(level, size)}, ctxt), io)
        except AssertionError:            # Deeploy refuses another size for a level a tensor has: so do both
            pass
    return node


def _shape(node: NodeMemoryConstraint) -> list:
    """Everything a node constraint holds, with each object's identity mapped to the order it is first met."""
    seen: dict[int, int] = {}

    def ident(obj) -> int:
        return seen.setdefault(id(obj), len(seen))

    return [[(name, ident(t), t.tensorName, [(k, ident(m), m.memoryLevel, m.size, m.multiBufferCoefficient, m.shape,
                                             m.addrSpace) for k, m in t.memoryConstraints.items()])
             for name, t in held.items()]
            for held in (node.inputTensorMemoryConstraints, node.intermediateTensorMemoryConstraints,
                         node.outputTensorMemoryConstraints)]


@settings(max_examples=property_examples(200), deadline=None)
@given(st.lists(ADD, max_size=12), st.lists(ADD, max_size=12))
def test_adding_node_constraints_builds_what_deeploys_own_code_builds(left, right):
    ctxt = _context()
    ours = _sum(ctxt, left, right)
    with _Deeploys():
        theirs = _sum(ctxt, left, right)
    assert ours == theirs


def _sum(ctxt: NetworkContext, left: list, right: list) -> list | str:
    try:
        return _shape(_build(ctxt, left) + _build(ctxt, right))
    except AssertionError:
        return "refused"


def test_a_deep_copy_keeps_what_is_shared_shared():
    ctxt = _context()
    level = MemoryConstraint("L2", 4)
    first = TensorMemoryConstraint("t0", {}, ctxt)
    second = TensorMemoryConstraint("t1", {}, ctxt)
    first.addMemoryConstraint(level)
    second.addMemoryConstraint(level)
    copied = copy.deepcopy({"t0": first, "t1": second, "again": first})
    assert copied["t0"] is not first and copied["t0"].memoryConstraints["L2"] is not level
    assert copied["t0"].memoryConstraints["L2"] is copied["t1"].memoryConstraints["L2"]
    assert copied["again"] is copied["t0"]
    assert type(copied["t0"].memoryConstraints) is type(first.memoryConstraints)


@settings(max_examples=property_examples(100), deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30), st.permutations(NAMES))
def test_the_adjacency_matrix_is_deeploys(edges, order):
    tensor_map = {name: None for name in order}
    graph = {name: sorted({NAMES[b] for a, b in edges if NAMES[a] == name}) for name in NAMES}
    ours = MemoryScheduler._buildAdjacencyMatrix(None, graph, tensor_map)
    with _Deeploys():
        theirs = MemoryScheduler._buildAdjacencyMatrix(None, graph, tensor_map)
    assert np.array_equal(ours, theirs) and ours.dtype == theirs.dtype


def test_a_name_missing_from_the_map_is_the_same_error():
    with pytest.raises(ValueError):
        MemoryScheduler._buildAdjacencyMatrix(None, {"a": ["b"]}, {"a": None})
    with _Deeploys(), pytest.raises(ValueError):
        MemoryScheduler._buildAdjacencyMatrix(None, {"a": ["b"]}, {"a": None})
